"""The canonical QNN pattern table and partition_for_npu(), under the name users know.

The table lives in npu_byoc.ops.table (one entry per NPU operation), the pass that applies it
in npu_byoc.partition.pipeline; this module is the front door to both.
"""

from .ops.composites import composite_functions, extract_composite, npu_functions
from .ops.table import *  # noqa: F401,F403
from .ops.table import LAYER_ATTR, NUMERICS_ATTR, PARTITION_LOG_ATTR, PATTERN_TABLE, PATTERNS_BY_NAME, NpuPattern, Reject
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
