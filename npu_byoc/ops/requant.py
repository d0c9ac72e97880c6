"""The requantize (multiplier, shift) of a weighted op, computed once for the partition check
and the lowering, so that what the partition accepts is exactly what the encoder emits."""

from __future__ import annotations

import numpy as np

from ..arch import numerics as nx
from .records import QConvolution, QFullyConnected, QTensor

# What each source format's reference does when MultiplyByQuantizedMultiplier's x · 2^left
# overflows int32 (docs/numerics.md §3): TFLite's C++ wraps, as the NPU does; onnxruntime and
# TVM's CPU build (a Relax module's own meaning) requantize in float and saturate. Ops of a
# saturating model whose worst case can overflow stay on the CPU (checks.requant_left_shift_fits).
LEFT_SHIFT_OVERFLOW = {"tflite": "wrap", "onnx": "saturate", "relax": "saturate"}


def left_shift_overflow_for(model_format: str | None) -> str:
    """"wrap" or "saturate" for a model's source format (a module built in Python, no format:
    a Relax module, whose reference is TVM's CPU build)."""
    return LEFT_SHIFT_OVERFLOW.get(model_format or "relax", "saturate")


def _from_acc_scale(acc_scale: np.ndarray, out: QTensor) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, shift) for effective scale acc_scale[c] / s_out, where
    acc_scale[c] = s_x * s_w[c] (TFLite computes it in double from the float32 scales)."""
    m, s = nx.quantize_multiplier_array(np.asarray(acc_scale, np.float64) / float(np.float32(out.scale)))
    return m.astype(np.int32), s.astype(np.int32)


def weighted_requant(op: QConvolution | QFullyConnected) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel int32 (multiplier, shift) of a conv / depthwise / fully connected op.
    Memoized on the scales: the partition checks, the lowering and its dry run all ask."""
    w = np.ascontiguousarray(op.weight_scale, np.float64)
    n = op.out_features if isinstance(op, QFullyConnected) else op.out_channels
    # everything _compute reads
    key = (type(op).__name__, op.convention, bool(getattr(op, "weight_per_tensor", False)),
           getattr(op.input, "source_dtype", None), n, op.input.scale, op.output.scale, w.tobytes())  # fmt: skip
    mult, shift = _memo(key, op)
    return mult.copy(), shift.copy()


_MEMO: dict = {}


def _memo(key, op) -> tuple[np.ndarray, np.ndarray]:
    if key not in _MEMO:
        if len(_MEMO) > 4096:
            _MEMO.clear()
        _MEMO[key] = _compute(op)
    return _MEMO[key]


def _compute(op: QConvolution | QFullyConnected) -> tuple[np.ndarray, np.ndarray]:
    if op.convention.startswith("int32-accumulate"):  # the requantize scale s_x*s_w[c] is given whole
        return _from_acc_scale(op.weight_scale, op.output)
    if isinstance(op, QConvolution) and op.weight_per_tensor and op.input.source_dtype == "uint8":
        # TFLite's uint8 conv / depthwise / transpose-conv kernels read the legacy per-tensor multiplier
        # (GetQuantizedConvolutionMultipler: s_in * s_w in float32); int8 conv takes the
        # per-channel formula even for one scale.
        return _broadcast(nx.fc_requant_params(op.input.scale, op.weight_scale[:1], op.output.scale), op.out_channels)
    if isinstance(op, QFullyConnected):
        # One weight scale in the model: TFLite's per-tensor formula (float32 s_in * s_w).
        scales = op.weight_scale[:1] if op.weight_per_tensor else op.weight_scale
        m, s = nx.fc_requant_params(op.input.scale, scales, op.output.scale)
        n = op.out_features
        return np.broadcast_to(m, (n,)).astype(np.int32), np.broadcast_to(s, (n,)).astype(np.int32)
    m, s = nx.conv_requant_params(op.input.scale, op.weight_scale, op.output.scale)
    return m.astype(np.int32), s.astype(np.int32)


def _broadcast(params: tuple[np.ndarray, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    m, s = params
    return np.broadcast_to(m, (n,)).astype(np.int32), np.broadcast_to(s, (n,)).astype(np.int32)


def fc_scale(op: QFullyConnected) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-feature (mantissa int64, exponent int32) of a fully connected op: the double
    output scale LiteRT's reference FULLY_CONNECTED multiplies by (numerics.fc_scale_params).
    Raises ValueError for a scale of 1 or more."""
    if op.convention.startswith("int32-accumulate"):  # s_x*s_w[c] is given whole: s_in = 1
        m, e = nx.fc_scale_params(1.0, op.weight_scale, op.output.scale)
    else:
        scales = op.weight_scale[:1] if op.weight_per_tensor else op.weight_scale
        m, e = nx.fc_scale_params(op.input.scale, scales, op.output.scale)
    n = op.out_features
    return np.broadcast_to(m, (n,)).astype(np.int64), np.broadcast_to(e, (n,)).astype(np.int32)
