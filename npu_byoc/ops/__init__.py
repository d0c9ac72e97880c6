"""What npu_byoc knows about each NPU operation: the quantized-op records (records), their
Relax conventions and extraction (table), the checks with their reasons (checks), the typed
NPU ops (npu_ops) and each op lowered alone (lowering, kick_limits), and the per-operation
modules (lut, softmax, resize, gather, transpose_conv, requant, uint8). ``composites`` walks a
partitioned module back to records."""
