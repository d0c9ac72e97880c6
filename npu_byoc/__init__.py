"""npu_byoc: run quantized int8 models on an int8 NPU through Apache TVM's BYOC flow.

    mod = npu_byoc.load_model("model.tflite")   # Relax IRModule via TVM's own frontends
    mod = npu_byoc.partition_for_npu(mod)        # Composite="npu.<op>" inside Codegen="npu"
    print(npu_byoc.coverage_report(mod).to_text())
"""

from .coverage import CoverageReport, coverage_report
from .errors import LoweringError, ModelLoadError, NpuByocError, UnsupportedModelError
from .frontend import ModelInfo, SourceOp, TensorInfo, annotate_provenance, load_model, model_info
from .patterns import PATTERN_TABLE, partition_for_npu

__all__ = [
    "NpuByocError",
    "ModelLoadError",
    "UnsupportedModelError",
    "LoweringError",
    "ModelInfo",
    "SourceOp",
    "TensorInfo",
    "annotate_provenance",
    "load_model",
    "model_info",
    "PATTERN_TABLE",
    "partition_for_npu",
    "CoverageReport",
    "coverage_report",
]
