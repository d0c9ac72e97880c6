"""Errors npu_byoc raises. Every message names the file, op or parameter at fault."""


def tvm_message(err: BaseException) -> str:
    """The message of an exception without the C++ backtrace TVM puts around it."""
    text = str(err).strip()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(("Traceback", "  File"))]
    return lines[-1][:500] if lines else type(err).__name__


class NpuByocError(Exception):
    """Base class of every error npu_byoc raises on purpose."""


class ModelLoadError(NpuByocError):
    """A model file is missing, is not a model, or TVM's frontend cannot import it."""


class UnsupportedModelError(ModelLoadError):
    """The model is valid but uses an operator or feature TVM cannot import."""


class LoweringError(NpuByocError):
    """An NPU partition cannot be lowered to NPU operations.

    ``layer``: the layer at fault when one is (its partition goes back to the CPU without it);
    ``reason``: the message without the partition and layer names, for the coverage log."""

    def __init__(self, message: str, *, layer: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.layer = layer
        self.reason = reason or message


class NpuStreamError(NpuByocError):
    """An NPU partition's command stream stopped with an error status on its backend (the C
    model or the RTL): ``status`` is the isa.Status name; OUT_OF_MEMORY reads "out of memory: ..."."""

    def __init__(self, message: str, *, status: str) -> None:
        super().__init__(message)
        self.status = status
