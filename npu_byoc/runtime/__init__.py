"""Executing NPU partitions: golden model, driver backends, comparisons."""
