"""Errors npu_byoc raises. Every message names the file, op or parameter at fault."""


class NpuByocError(Exception):
    """Base class of every error npu_byoc raises on purpose."""


class ModelLoadError(NpuByocError):
    """A model file is missing, is not a model, or TVM's frontend cannot import it."""


class UnsupportedModelError(ModelLoadError):
    """The model is valid but uses an operator or feature TVM cannot import."""


class LoweringError(NpuByocError):
    """An NPU partition cannot be lowered to NPU operations."""
