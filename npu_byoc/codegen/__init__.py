"""Lowering of NPU partitions to typed NPU ops, command streams and C source."""
