"""What the NPU supports: one small function per constraint.

Each check takes the extracted quantized op and the hardware configuration and returns None
(supported) or the reason, in words a user understands, that the op stays on the CPU. Its
docstring is the constraint as the supported-operators page states it (docs/patterns.md is
generated from them).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..arch import limits
from . import softmax
from ..arch.config import HwConfig
from ..arch.isa import SHIFT_MAX, SHIFT_MIN, SOFTMAX_MAX_CHANNELS
from .records import QAdd, QConv2D, QConvolution, QFullyConnected, QMean, QOp, QPool2D, QTensor
from .requant import fc_scale, weighted_requant

Check = Callable[[QOp, HwConfig], "str | None"]

ACTIVATION_DTYPES = ("int8",)


def _tensors(op: QOp) -> list[tuple[str, QTensor]]:
    if hasattr(op, "inputs"):  # QConcat
        return [*((f"input {k}", t) for k, t in enumerate(op.inputs)), ("output", op.output)]
    if hasattr(op, "input_b"):  # QAdd, QMul
        return [("input a", op.input_a), ("input b", op.input_b), ("output", op.output)]
    return [("input", op.input), ("output", op.output)]


def activations_int8(op: QOp, hw: HwConfig) -> str | None:
    """Activations (inputs and outputs) are int8, or uint8 run as their int8 equivalent."""
    for role, t in _tensors(op):
        if t.dtype not in ACTIVATION_DTYPES:
            return f"{role} dtype {t.dtype}: NPU activations are int8 or uint8"
    return None


def scales_valid(op: QOp, hw: HwConfig) -> str | None:
    """Every quantization scale is finite and > 0."""
    for role, t in _tensors(op):
        if t.scale is not None and not (math.isfinite(t.scale) and t.scale > 0):
            return f"{role} scale {t.scale}: scales must be finite and > 0"
    w = getattr(op, "weight_scale", None)
    if w is not None:
        bad = ~(np.isfinite(w) & (w > 0))
        if bad.any():
            c = int(np.argmax(bad))
            return f"weight scale {w[c]} (channel {c}): scales must be finite and > 0"
    return None


def zero_points_in_range(op: QOp, hw: HwConfig) -> str | None:
    """Activation zero points lie in the int8 range [-128, 127]."""
    for role, t in _tensors(op):
        if not -128 <= t.zero_point <= 127:
            return f"{role} zero point {t.zero_point}: must lie in [-128, 127] for int8"
    return None


def _per_tensor(op: QOp, reason_of: Callable[[QTensor], "str | None"]) -> str | None:
    """The first tensor's reason, prefixed with its role."""
    for role, t in _tensors(op):
        reason = reason_of(t)
        if reason:
            return f"{role}: {reason}"
    return None


def tensor_ranks(op: QOp, hw: HwConfig) -> str | None:
    """Tensors are of rank 1 to 4: the NPU sees each as an H×W×C feature map (a rank-3 sequence [N, L, C] as one row of L pixels)."""
    return _per_tensor(op, lambda t: limits.rank_reason(t.shape))


def _batch(op: QOp) -> int:
    return limits.batch_of(t.shape for _, t in _tensors(op))


def batch_splits(op: QOp, hw: HwConfig) -> str | None:
    """A batch above 1 splits into whole images: the NPU runs the partition once per image, so every 4-D tensor has the batch N as its first dimension and every 2-D one a multiple of N rows (fully connected rows are independent)."""
    try:
        n = _batch(op)
    except limits.ShapeError as err:
        return str(err)

    def split(t: QTensor) -> str | None:
        try:
            limits.per_image(t.shape, n)
        except limits.ShapeError as err:
            return str(err)
        return None

    return _per_tensor(op, split)


def tensors_addressable(op: QOp, hw: HwConfig) -> str | None:
    """Every dimension of an image fits the 32-bit shape registers and every tensor the 32-bit DMA address range (4 GiB)."""
    layout = getattr(op, "layout", "NHWC")
    n = _batch(op)
    return _per_tensor(op, lambda t: limits.register_reason(limits.hwc(limits.per_image(t.shape, n), layout)))


def weights_int8(op: QOp, hw: HwConfig) -> str | None:
    """Weights are int8 (uint8 weights with zero point 128 run as int8 weights with zero point 0)."""
    if op.weight.dtype == np.uint8:
        zp = np.asarray(op.weight_zero_point)
        c = int(np.argmax(zp != 128))
        return (f"uint8 weight zero point {int(zp.flat[c])} on channel {c}: NPU weights are symmetric int8 "
                "(uint8 weights need zero point 128)")
    if op.weight.dtype != np.int8:
        return f"weight dtype {op.weight.dtype}: NPU weights are int8"
    return None


def weights_symmetric(op: QOp, hw: HwConfig) -> str | None:
    """Weights are quantized symmetrically (zero point 0 on every channel)."""
    zp = np.asarray(op.weight_zero_point)
    if np.any(zp != 0):
        c = int(np.argmax(zp != 0))
        return f"weight zero point {int(zp.flat[c])} on channel {c}: NPU weights need zero point 0"
    return None


def accumulator_fits(op: QOp, hw: HwConfig) -> str | None:
    """The worst-case accumulation fits int32: sum over the kernel of |w| * max|x - zp| + |bias| < 2^31."""
    zp = op.input.zero_point
    max_x = max(127 - zp, zp + 128)
    w = np.abs(op.weight.astype(np.int64)).reshape(op.weight.shape[0], -1).sum(axis=1)
    worst = w * max_x + np.abs(op.bias.astype(np.int64))
    limit = 1 << (hw.accumulator_bits - 1)
    if worst.max() >= limit:
        c = int(np.argmax(worst))
        return f"worst-case accumulator {int(worst[c])} on channel {c} overflows int32"
    return None


def conv_dilation(op: QConv2D, hw: HwConfig) -> str | None:
    """A dilated kernel runs as the kernel with zeros inserted: its window (k - 1) * d + 1 is at most max_kernel (it costs that window's MACs)."""
    if min(op.dilation) < 1:
        return f"conv2d dilation {op.dilation}: dilations are at least 1"
    (dh, dw), (kh, kw) = op.dilated_kernel, op.kernel
    if op.dilation != (1, 1) and max(dh, dw) > hw.max_kernel:
        return (f"conv2d kernel {kh}x{kw} with dilation {op.dilation} covers {dh}x{dw}: NPU runs dilated kernels "
                f"zero-inserted, up to {hw.max_kernel}x{hw.max_kernel}")
    return None


def conv_kernel(op: QConv2D, hw: HwConfig) -> str | None:
    """Kernel height and width are at most max_kernel."""
    kh, kw = op.kernel
    if kh > hw.max_kernel or kw > hw.max_kernel:
        return f"conv2d kernel {kh}x{kw}: NPU supports kernels up to {hw.max_kernel}x{hw.max_kernel}"
    return None


def conv_stride(op: QConv2D, hw: HwConfig) -> str | None:
    """Strides are between 1 and max_stride."""
    if max(op.strides) > hw.max_stride or min(op.strides) < 1:
        return f"conv2d stride {op.strides}: NPU supports strides 1..{hw.max_stride}"
    return None


def conv_padding(op: QConv2D, hw: HwConfig) -> str | None:
    """Padding on each side is smaller than the kernel (its dilated window) on that axis."""
    kh, kw = op.dilated_kernel
    t, l, b, r = op.padding
    if max(t, b) >= kh or max(l, r) >= kw:
        folded = getattr(op, "folded_pad", None)
        why = f" (with the PAD {folded} folded in: the PAD stays on the CPU)" if folded else ""
        return f"conv2d padding {op.padding} with a {kh}x{kw} kernel{why}: NPU pads less than the kernel size"
    return None


def conv_groups(op: QConv2D, hw: HwConfig) -> str | None:
    """Groups is 1 (standard) or equal to the channel count with multiplier 1 (depthwise)."""
    if op.groups == 1:
        return None
    if op.groups == op.in_channels and op.out_channels != op.in_channels:
        m = op.out_channels // op.in_channels
        return f"depthwise conv2d with channel multiplier {m}: NPU supports multiplier 1"
    if op.groups != op.in_channels:
        return f"grouped conv2d (groups={op.groups}): NPU supports groups 1 or depthwise"
    return None


def conv_channels(op: QConv2D, hw: HwConfig) -> str | None:
    """Input and output channel counts are at most max_channels."""
    if op.in_channels > hw.max_channels or op.out_channels > hw.max_channels:
        return (
            f"conv2d channels {op.in_channels}->{op.out_channels}: NPU supports up to "
            f"{hw.max_channels} channels"
        )
    return None


def transpose_conv_form(op, hw: HwConfig) -> str | None:
    """A transposed convolution has groups 1 and dilation 1."""
    if op.groups != 1:
        return f"grouped conv2d_transpose (groups={op.groups}): NPU supports groups 1"
    if tuple(op.dilation) != (1, 1):
        return f"conv2d_transpose dilation {tuple(op.dilation)}: NPU supports dilation 1"
    return None


def transpose_conv_stride(op, hw: HwConfig) -> str | None:
    """Strides are at least 1 and at most the kernel on each axis (a larger stride leaves outputs that no input reaches)."""
    (sh, sw), (kh, kw) = op.strides, op.kernel
    if min(sh, sw) < 1 or sh > kh or sw > kw:
        return f"conv2d_transpose stride {tuple(op.strides)} with a {kh}x{kw} kernel: NPU supports strides 1..kernel"
    return None


def transpose_conv_kernel(op, hw: HwConfig) -> str | None:
    """Each phase's sub-kernel, ceil(kernel / stride) taps per axis, is at most max_kernel."""
    (kh, kw), (sh, sw) = op.kernel, op.strides
    ph, pw = -(-kh // sh), -(-kw // sw)
    if max(ph, pw) > hw.max_kernel:
        return (f"conv2d_transpose kernel {kh}x{kw} at stride {tuple(op.strides)} runs {ph}x{pw} phase kernels: "
                f"NPU supports kernels up to {hw.max_kernel}x{hw.max_kernel}")
    return None


def transpose_conv_channels(op, hw: HwConfig) -> str | None:
    """Input and output channel counts are at most max_channels."""
    if max(op.in_channels, op.out_channels) > hw.max_channels:
        return (f"conv2d_transpose channels {op.in_channels}->{op.out_channels}: NPU supports up to "
                f"{hw.max_channels} channels")
    return None


def gather_copies(op, hw: HwConfig) -> str | None:
    """The gather copies whole pixels of a 4-D NHWC tensor of batch 1 (rows, columns and a run of channels), and each axis is at most MAX_PERIOD arithmetic runs, at most MAX_COPIES strided copies in all (npu_byoc.ops.gather)."""
    from .gather import decompose

    # A strided slice does not say its layout: the partition's decides at lowering, so either will do here
    layouts = (op.layout,) if op.layout else ("NHWC", "NCHW")
    reasons = [_reason(lambda lay=lay: decompose(op.index, op.input.shape, lay)) for lay in layouts]
    return None if None in reasons else reasons[0]


def resize_same_quantization(op, hw: HwConfig) -> str | None:
    """Input and output share scale and zero point: LiteRT's int8 RESIZE_BILINEAR interpolates the integers and does not rescale."""
    if not same_quantization(op.input, op.output):
        return (f"RESIZE_BILINEAR input (scale {op.input.scale:.6g} zp {op.input.zero_point}) quantized unlike its output "
                f"(scale {op.output.scale:.6g} zp {op.output.zero_point}): LiteRT's int8 kernel does not rescale")
    return None


def resize_passes(op, hw: HwConfig) -> str | None:
    """The resize is by an integer factor per axis and its weights fit int8 depthwise passes with a power-of-two requantize, at most MAX_SEGMENTS of them (npu_byoc.ops.resize): 2x and 4x with half-pixel centres or neither always are. Each pass is a depthwise kick over all the channels with 1 or 2 taps per axis, so max_channels and max_kernel bind it."""
    from .resize import passes

    if op.layout != "NHWC":
        return f"RESIZE_BILINEAR in {op.layout}: the NPU runs LiteRT's NHWC int8 kernel"
    (_, h, w, _), (_, oh, ow, _) = op.input.shape, op.output.shape
    return _reason(lambda: passes((h, w), (oh, ow), op.align_corners, op.half_pixel))


def _reason(build: Callable[[], object]) -> str | None:
    """The ValueError message of ``build()``, the geometry an op's own module computes (None: it runs)."""
    try:
        build()
    except ValueError as err:
        return str(err)
    return None


def fc_features(op: QFullyConnected, hw: HwConfig) -> str | None:
    """Input and output feature counts are at most min(max_fc_features, max_channels)."""
    if max(op.in_features, op.out_features) > hw.fc_feature_limit:
        return f"fully connected {op.in_features}->{op.out_features}: NPU supports up to {hw.fc_feature_limit} features"
    return None


def requant_in_range(op: QOp, hw: HwConfig) -> str | None:
    """The requantize scale s_in * s_w / s_out gives a shift the NPU accepts ([-31, 30]); a fully
    connected scale (a double, as LiteRT's reference FULLY_CONNECTED) is below 1."""
    if isinstance(op, QFullyConnected):
        try:
            fc_scale(op)
        except ValueError:
            return "fully connected requantize scale s_in * s_w / s_out is 1 or more: NPU FC scales lie below 1"
        return None
    mult, shift = weighted_requant(op)
    bad = (shift < SHIFT_MIN) | (shift > SHIFT_MAX)
    if bad.any():
        c = int(np.argmax(bad))
        return (
            f"requantize shift {int(shift[c])} (channel {c}): NPU shifts lie in [{SHIFT_MIN}, {SHIFT_MAX}] "
            "(output scale too small or too large for the input and weight scales)"
        )
    return None


def requant_left_shift_fits(op: QOp, hw: HwConfig) -> str | None:
    """In an ONNX or Relax model, a requantize left shift (effective scale of 1 or more) runs when no input can overflow int32 in it: worst-case accumulator * 2^shift < 2^31, the accumulator being sum |w| * max|x - zp| + |bias| (a transposed conv: per output phase; a MEAN: n * max|x - zp|). The NPU wraps there as TFLite's reference does, which TFLite models keep; onnxruntime and TVM saturate (docs/numerics.md §3)."""
    if getattr(op, "left_shift_overflow", "wrap") == "wrap":
        return None
    if isinstance(op, QConvolution) and weighted_requant(op)[1].max() <= 0:
        return None  # right shifts only: nothing to overflow
    from ..errors import LoweringError
    from . import kick_limits
    from .records import Reject

    try:
        npu_op = kick_limits.lower_alone(op, hw)
    except (limits.ShapeError, Reject, LoweringError, ValueError):
        return None  # lowers_and_fits says why it cannot be lowered
    where = None if limits.shift_reason(npu_op) else kick_limits.left_shift_wrap(npu_op)  # else: out of range, said so
    if where is None:
        return None
    return (f"{where}: the NPU wraps there as TFLite's reference kernel does, this model's runtime "
            "(onnxruntime, TVM) saturates; results would differ by up to 255 LSB")


def pool_window(op: QPool2D, hw: HwConfig) -> str | None:
    """Pool window at most max_pool_window, stride at most max_pool_stride, dilation 1."""
    if max(op.pool_size) > hw.max_pool_window:
        return f"{op.kind}_pool2d window {op.pool_size}: NPU supports windows up to {hw.max_pool_window}"
    if max(op.strides) > hw.max_pool_stride:
        return f"{op.kind}_pool2d stride {op.strides}: NPU supports strides up to {hw.max_pool_stride}"
    if op.dilation != (1, 1):
        return f"{op.kind}_pool2d dilation {op.dilation}: NPU supports dilation 1"
    return None


def pool_padding_semantics(op: QPool2D, hw: HwConfig) -> str | None:
    """No ceil mode; average pooling divides by the count of valid (non-padded) elements."""
    if op.ceil_mode:
        return f"{op.kind}_pool2d with ceil_mode: NPU supports floor mode only"
    if op.kind == "avg" and op.count_include_pad and any(op.padding):
        return "avg_pool2d counting padded elements: NPU divides by the valid elements (TFLite semantics)"
    ph, pw = op.pool_size
    t, l, b, r = op.padding
    if max(t, b) >= ph or max(l, r) >= pw:
        return f"{op.kind}_pool2d padding {op.padding} with a {ph}x{pw} window: NPU pads less than the window"
    return None


def pool_same_quantization(op: QPool2D, hw: HwConfig) -> str | None:
    """Pooling keeps the quantization: input and output share scale and zero point."""
    if not same_quantization(op.input, op.output):
        return (
            f"{op.kind}_pool2d rescales (input scale {op.input.scale:.6g} zp {op.input.zero_point}, "
            f"output scale {op.output.scale:.6g} zp {op.output.zero_point}): NPU pooling keeps the quantization"
        )
    return None


def pool_uint8_rounding(op: QPool2D, hw: HwConfig) -> str | None:
    """Integer average pooling of uint8 tensors (TFLite) runs when every window holds an odd
    number of elements: TFLite rounds a uint8 average half up, the NPU (int8, the uint8 bytes
    flipped) half away from zero, and the two differ at exact ties, which need an even count."""
    if op.kind != "avg" or op.convention == "qdq" or op.input.source_dtype != "uint8":
        return None
    spatial = (1, 2) if op.layout == "NHWC" else (2, 3)
    t, l, b, r = op.padding
    for axis, k, s, lo, hi in zip(spatial, op.pool_size, op.strides, (t, l), (b, r)):
        n = op.input.shape[axis]
        for start in range(-lo, n + hi - k + 1, s):
            count = min(start + k, n) - max(start, 0)
            if count % 2 == 0:
                return (f"avg_pool2d of uint8 over windows of {count} valid elements along an axis: TFLite "
                        "rounds uint8 averages half up, the NPU's int8 average half away from zero "
                        "(they differ at ties; odd window counts only)")
    return None


def mean_spatial(op: QMean, hw: HwConfig) -> str | None:
    """Mean reduces the two spatial axes of a 4-D tensor, or the length of a 3-D sequence (GlobalAveragePooling1D)."""
    rank = len(op.input.shape)
    spatial = {(4, "NHWC"): (1, 2), (4, "NCHW"): (2, 3), (3, "NHWC"): (1,), (3, "NCHW"): (2,)}.get((rank, op.layout))
    if spatial is None or tuple(sorted(op.axes)) != spatial:
        return (f"mean over axes {list(op.axes)} of a {rank}-D tensor: NPU reduces the spatial axes of 4-D tensors "
                "(or the length of 3-D ones)")  # fmt: skip
    n = math.prod(op.input.shape[a] for a in spatial)
    if n > hw.max_mean_elements:
        return f"mean over {n} elements: NPU reduces up to {hw.max_mean_elements}"
    return None


def reshape_same_quantization(op, hw: HwConfig) -> str | None:
    """A reshape keeps the quantization (input and output share scale and zero point): it only renames the bytes."""
    if not same_quantization(op.input, op.output):
        return (f"reshape rescales (input scale {op.input.scale:.6g} zp {op.input.zero_point}, output scale "
                f"{op.output.scale:.6g} zp {op.output.zero_point}): an NPU reshape is a view of the same bytes")
    return None


def concat_axis(op, hw: HwConfig) -> str | None:
    """A concatenation joins channels, rows or columns of 4-D tensors (each input's producer writes its slice of the output in place), or the features (axis 1) of 2-D ones."""
    rank = len(op.output.shape)
    if (rank == 4 and op.axis in (1, 2, 3)) or (rank == 2 and op.axis == 1):
        return None
    return (f"CONCATENATION along axis {op.axis} of a {rank}-D tensor: the NPU concatenates the H, W or C axis "
            "of a 4-D tensor or the features of a 2-D one")


def concat_same_quantization(op, hw: HwConfig) -> str | None:
    """In a TFLite model every input of a concatenation has the output's scale and zero point (LiteRT's int8 CONCATENATION copies bytes, it does not rescale; the converter inserts a QUANTIZE where they differ). ONNX's Concat / QLinearConcat rescale each input; the NPU does that with a requantize LUT as it copies the input into its slice."""
    if op.numerics != "tflite":
        return None
    for k, t in enumerate(op.inputs):
        if not same_quantization(t, op.output):
            return (f"CONCATENATION input {k} (scale {t.scale:.6g} zp {t.zero_point}) is quantized unlike its output "
                    f"(scale {op.output.scale:.6g} zp {op.output.zero_point}): LiteRT's int8 concatenation copies "
                    "bytes without rescaling, TVM's import rescales; no single answer to match")
    return None


def binary_broadcast(op: QOp, hw: HwConfig) -> str | None:
    """Both operands have the output's shape, or one is a channel vector broadcast over the other (either order; squeeze-excite): [1, 1, 1, C] over [1, H, W, C] in an NHWC model, [1, C, 1, 1] over [1, C, H, W] in an NCHW one."""
    word = "add" if isinstance(op, QAdd) else "mul"
    a, b, out = op.input_a.shape, op.input_b.shape, op.output.shape
    if a == b == out or limits.channel_broadcast(a, b, out) or limits.channel_broadcast(b, a, out):
        return None
    return (f"{word} with broadcasting {a} × {b}: NPU {word} broadcasts only a channel vector "
            "([1, 1, 1, C] over [1, H, W, C], NCHW: [1, C, 1, 1] over [1, C, H, W])")


def same_quantization(a: QTensor, b: QTensor) -> bool:
    """Equal scale (to float32 precision) and zero point, or both carried through (integer form)."""
    if a.scale is None or b.scale is None:  # integer form: quantization carried through
        return a.scale is None and b.scale is None
    return a.zero_point == b.zero_point and math.isclose(a.scale, b.scale, rel_tol=1e-6)


def softmax_numerics(op, hw: HwConfig) -> str | None:
    """SOFTMAX runs TFLite's integer reference kernel, so it is offloaded from TFLite models (and hand-written Relax); onnxruntime computes Softmax in float, which no integer table reproduces."""
    if op.numerics != "tflite":
        return ("onnxruntime computes Softmax in float; the NPU's SOFTMAX is TFLite's integer kernel, "
                "so the ONNX model's results would change")
    return None


def softmax_axis(op, hw: HwConfig) -> str | None:
    """The softmax is over the last axis (TFLite's only one), of at most 4,095 elements (the int32 row sum)."""
    rank = len(op.input.shape)
    if op.axis != rank - 1:
        return f"softmax over axis {op.axis} of a rank-{rank} tensor: the NPU's SOFTMAX is over the last axis"
    if op.input.shape[-1] > SOFTMAX_MAX_CHANNELS:
        return f"softmax over {op.input.shape[-1]} elements: at most {SOFTMAX_MAX_CHANNELS} (the int32 row sum)"
    return None


def softmax_quantization(op, hw: HwConfig) -> str | None:
    """The output is quantized as TFLite's int8 softmax writes it (scale 1/256, zero point −128; uint8: 1/256, 0) with no clamp after it, and input scale × beta is at least 2^-26 (the kernel's input multiplier shifts left)."""
    out = op.output
    if out.dtype != "int8" or out.zero_point != softmax.OUTPUT_ZERO_POINT or out.scale != softmax.OUTPUT_SCALE:
        return (f"output quantized (scale {out.scale:g}, zero point {out.zero_point}): TFLite's int8 softmax "
                f"writes scale 1/256, zero point {softmax.OUTPUT_ZERO_POINT}")
    if (op.act_min, op.act_max) != (-128, 127):
        return f"a clamp [{op.act_min}, {op.act_max}] after the softmax"
    try:
        softmax.input_beta_params(op.input.scale, op.beta)
    except ValueError as err:
        return str(err)
    return None


SOFTMAX: tuple[Check, ...] = (softmax_numerics, softmax_axis, softmax_quantization)

COMMON: tuple[Check, ...] = (
    activations_int8, scales_valid, zero_points_in_range, tensor_ranks, batch_splits, tensors_addressable,
)  # fmt: skip
WEIGHTED: tuple[Check, ...] = (weights_int8, weights_symmetric, accumulator_fits, requant_in_range)
