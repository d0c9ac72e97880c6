"""The canonical QNN pattern table, assembled from the op modules (npu_byoc.ops.registry; the
partition pass that applies it: npu_byoc.partition.pipeline).

TVM's frontends write the same quantized operator in several *conventions*: the QDQ form of
TFLite and ONNX (dequantize -> float op -> quantize), TFLite's cast-wrapped integer pooling
(astype(int32) -> avg_pool2d -> astype(int8)), and the int32-accumulate form of hand-written
modules (conv2d(int8, int8, out_dtype=int32) -> requantize written as dequantize -> quantize),
also with explicit zero-point subtraction (astype(x, int32) - z_x, as QNN canonicalization and
TVM's ONNX MatMulInteger import write it).
Each :class:`~npu_byoc.ops.entry.NpuPattern` lists the conventions of one NPU operation; a match
is *extracted* into one quantized-op record (:mod:`npu_byoc.ops.records`) whatever the
convention was, and the op's checks accept it or give the reason it stays on the CPU.
"""

from __future__ import annotations

from .entry import NpuPattern
from .registry import REGISTRY

PARTITION_LOG_ATTR = "npu_byoc.partition_log"
LAYER_ATTR = "npu_byoc.layer"  # on each composite: the source operator it offloads
NUMERICS_ATTR = "npu_byoc.numerics"  # on each composite: whose arithmetic it replicates (records.NUMERICS)
LEFT_SHIFT_ATTR = "npu_byoc.left_shift_overflow"  # on each composite: the model's requant.LEFT_SHIFT_OVERFLOW
CODEGEN_NAME = "npu"

# Order matters: earlier entries win a contested binding (the registry's order).
PATTERN_TABLE: tuple[NpuPattern, ...] = tuple(entry for module in REGISTRY for entry in module.ENTRIES)
PATTERNS_BY_NAME = {p.name: p for p in PATTERN_TABLE}
VIEW_PATTERNS = frozenset(p.name for p in PATTERN_TABLE if p.view)  # composites with no NPU op

__all__ = [
    "PARTITION_LOG_ATTR", "LAYER_ATTR", "NUMERICS_ATTR", "LEFT_SHIFT_ATTR", "CODEGEN_NAME", "PATTERN_TABLE",
    "PATTERNS_BY_NAME", "VIEW_PATTERNS",
]  # fmt: skip
