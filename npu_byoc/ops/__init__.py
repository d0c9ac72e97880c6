"""One module per NPU operation, each owning what Python knows about it: its Relax conventions
(patterns), the extraction of a match into its quantized-op record, its checks with their
reasons and its lowering to a typed NPU op (conv2d, depthwise, transpose_conv,
fully_connected, pool, mean, add, mul, lut, softmax, gather, resize, reshape, concat, transpose).

``REGISTRY`` (npu_byoc.ops.registry) lists them in the pattern table's order; the table
(ops.table), the lowering dispatch (registry.LOWERINGS), the golden model's and the tiler's
dispatch (registry.NPU_OPS), the canonical forms, docs/patterns.md and the coverage report
derive from it. Shared pieces: entry (NpuPattern, Convention), npu_op_spec (NpuOpSpec),
canonical (CanonicalForm), _qdq (pattern builders, extraction helpers), checks (the
constraints several ops share), lowering (shared lowering helpers), records (QOp), npu_ops
(NpuOp), requant, uint8. Below the typed NPU ops, TVM-free: the geometry they
compute (transpose_conv_phases, resize_passes, gather_copies), lut_tables and softmax_kernel.
Loaded on first use (PEP 562): importing a module of this package does not load every op.
"""


def __getattr__(name: str):
    if name in ("REGISTRY", "LOWERINGS", "NPU_OPS"):
        from . import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'npu_byoc.ops' has no attribute '{name}'")
