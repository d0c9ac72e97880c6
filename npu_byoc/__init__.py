"""npu_byoc: run quantized int8 models on an int8 NPU through Apache TVM's BYOC flow.

    mod = npu_byoc.load_model("model.tflite")   # Relax IRModule via TVM's own frontends
    mod = npu_byoc.partition_for_npu(mod)        # Composite="npu.<op>" inside Codegen="npu"
    print(npu_byoc.coverage_report(mod).to_text())
    model = npu_byoc.build(mod, backend="functional")   # generated C + the NPU's C model
    outputs = model.run([x])
"""

# The API is loaded on first use (PEP 562), not at ``import npu_byoc``: importing TVM takes
# seconds, and commands that do not need it (``npu-byoc hw``, a fully cached ``npu-byoc
# sweep``) should not pay for it. The first access to any name below loads them all.
# TVM's BYOC flow still finds the NPU after a bare ``import npu_byoc``: the hook relax.ext.npu
# and the "npu" pattern table are registered with TVM now if TVM is loaded, else once it is.
_EXPORTS = {
    "NpuByocError": ".errors", "ModelLoadError": ".errors", "UnsupportedModelError": ".errors",
    "LoweringError": ".errors", "ModelInfo": ".frontends.load", "SourceOp": ".frontends.load", "TensorInfo": ".frontends.load",
    "annotate_provenance": ".frontends.load", "load_model": ".frontends.load", "model_info": ".frontends.load",
    "PATTERN_TABLE": ".ops.table", "partition_for_npu": ".partition.pipeline", "CoverageReport": ".partition.coverage",
    "coverage_report": ".partition.coverage", "BACKENDS": ".runtime.build", "CompiledModel": ".runtime.build",
    "build": ".runtime.build", "run": ".runtime.build",
}  # fmt: skip


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'npu_byoc' has no attribute '{name}'")
    import importlib

    for attr, module in _EXPORTS.items():
        globals()[attr] = getattr(importlib.import_module(module, __name__), attr)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


from .tvm_register import register_on_import as _register_on_import  # noqa: E402

_register_on_import()

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
