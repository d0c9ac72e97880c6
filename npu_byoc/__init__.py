"""npu_byoc: run quantized int8 models on an int8 NPU through Apache TVM's BYOC flow.

    mod = npu_byoc.load_model("model.tflite")   # Relax IRModule via TVM's own frontends
    mod = npu_byoc.partition_for_npu(mod)        # Composite="npu.<op>" inside Codegen="npu"
    print(npu_byoc.coverage_report(mod).to_text())
    model = npu_byoc.build(mod, backend="functional")   # generated C + the NPU's C model
    outputs = model.run([x])
"""

from .codegen import c_codegen as _c_codegen  # noqa: F401  (registers relax.ext.npu)
from .coverage import CoverageReport, coverage_report
from .errors import LoweringError, ModelLoadError, NpuByocError, UnsupportedModelError
from .frontend import ModelInfo, SourceOp, TensorInfo, annotate_provenance, load_model, model_info
from .patterns import PATTERN_TABLE, partition_for_npu
from .runtime.build import BACKENDS, CompiledModel, build, run

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
    "BACKENDS",
    "CompiledModel",
    "build",
    "run",
]
