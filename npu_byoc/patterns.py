"""The canonical QNN pattern table and partition_for_npu(), under the name users know.

The table is assembled in npu_byoc.ops.table from the op modules (npu_byoc.ops.<op>, one per
NPU operation, listed in npu_byoc.ops.registry), the pass that applies it is
npu_byoc.partition.pipeline; this module is the front door to both.
"""

from .ops.composites import composite_functions, extract_composite, npu_functions
from .ops.concat import MAX_CONCAT_INPUTS
from .ops.entry import Convention, NpuPattern
from .ops._qdq import ZP_SUBTRACT
from .ops.records import (
    QAdd, QConcat, QConv2D, QFullyConnected, QGather, QLut, QMean, QMul, QOp, QPool2D, QReshape, QResizeBilinear,
    QSoftmax, QTensor, QTransposeConv2D, Reject,
)  # fmt: skip
from .ops.table import (
    CODEGEN_NAME, LAYER_ATTR, LEFT_SHIFT_ATTR, NUMERICS_ATTR, PARTITION_LOG_ATTR, PATTERN_TABLE, PATTERNS_BY_NAME,
    VIEW_PATTERNS,
)  # fmt: skip
from .partition.pipeline import (
    Decision, absorbed, canonicalise, compose_gathers, floor_max_pool_pads, fusion_patterns, partition_for_npu,
    partition_log, split_shared_dequantize, split_to_slices, unpartition,
)  # fmt: skip

__all__ = [
    "PATTERN_TABLE", "PATTERNS_BY_NAME", "NpuPattern", "Reject", "LAYER_ATTR", "NUMERICS_ATTR", "PARTITION_LOG_ATTR",
    "partition_for_npu", "partition_log", "unpartition", "canonicalise", "fusion_patterns", "Decision", "absorbed",
    "compose_gathers", "floor_max_pool_pads", "split_shared_dequantize", "split_to_slices", "npu_functions",
    "composite_functions", "extract_composite",
]  # fmt: skip
