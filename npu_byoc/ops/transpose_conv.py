"""TRANSPOSE_CONV: transposed 2-D convolution with per-channel requantize, run as one stride-1
conv per output phase: its conventions, extraction into a :class:`QTransposeConv2D`, checks and
lowering to :class:`TransposeConv2D`. The phase geometry (and the scatter form the golden model
uses) is :mod:`npu_byoc.ops.transpose_conv_phases`, below the typed NPU ops that compute it."""

from __future__ import annotations

import numpy as np

from . import checks as C
from ._qdq import _Tail, _activation, _bias, _qdq_weighted, _split_bias, _weights
from ..arch.config import HwConfig
from ..arch import numerics as nx
from .entry import NpuPattern
from .lowering import with_phases
from .npu_ops import NpuOp, TensorRef, TransposeConv2D
from .npu_op_spec import NpuOpSpec, shape_text
from .transpose_conv_phases import scatter_accumulate
from .records import QTransposeConv2D, Reject
from .requant import weighted_requant
from ..util.relax_utils import int_list, resolve


# ---------------------------------------------------------------------------------------------
# Extraction


def _extract_transpose_conv(root, bindings) -> QTransposeConv2D:
    """dequantize(x), dequantize(W, axis=O) -> conv2d_transpose [-> add(bias)] -> quantize: how
    TVM imports TFLite's TRANSPOSE_CONV and ONNX QDQ ConvTranspose."""
    tail = _Tail(root, bindings)
    conv, bias_expr = _split_bias(tail.body, "relax.nn.conv2d_transpose", bindings)
    attrs = conv.attrs
    layout = str(attrs.data_layout)
    if layout not in ("NHWC", "NCHW") or str(attrs.out_layout) != layout:
        raise Reject(f"conv2d_transpose layout {layout}->{attrs.out_layout}: NPU supports NHWC and NCHW")
    x_deq = resolve(conv.args[0], bindings)
    x = x_deq.args[0]
    inp = _activation(x_deq, bindings, "input", x)
    w, w_scale, w_zp, per_tensor = _weights(conv.args[1], bindings, str(attrs.kernel_layout))
    oc = w.shape[0]
    bias = np.zeros(oc, np.int32) if bias_expr is None else _bias(bias_expr, bindings, oc, inp.scale * w_scale)
    out = tail.output(bindings)
    act_min, act_max = tail.clamp(out, bindings)
    return QTransposeConv2D(
        layout=layout, input=inp, output=out, weight=w, weight_scale=w_scale, weight_zero_point=w_zp, bias=bias,
        strides=int_list(attrs.strides), padding=int_list(attrs.padding),
        dilation=int_list(attrs.dilation), groups=int(attrs.groups),
        act_min=act_min, act_max=act_max, convention="qdq", operands=(x,), weight_per_tensor=per_tensor,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Checks


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


# ---------------------------------------------------------------------------------------------
# Lowering


def _lower_transpose_conv(name: str, op: QTransposeConv2D, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    mult, shift = weighted_requant(op)
    out = TransposeConv2D(
        name=name, ifm=ifms[0], ofm=ofm, weights=np.ascontiguousarray(op.weight), bias=op.bias.astype(np.int32),
        multiplier=mult, shift=shift, ifm_zero_point=op.input.zero_point, ofm_zero_point=op.output.zero_point,
        stride=tuple(op.strides), pad_before=tuple(op.padding[:2]), act_min=op.act_min, act_max=op.act_max,
    )  # fmt: skip
    return with_phases(out, "conv2d_transpose: ")


# ---------------------------------------------------------------------------------------------
# Table entry


ENTRY = NpuPattern(
    name="npu.transpose_conv2d",
    summary="transposed 2-D convolution (TRANSPOSE_CONV) with per-channel requantize, run as one stride-1 conv per output phase",
    anchor_ops=("relax.nn.conv2d_transpose",),
    conventions=tuple(_qdq_weighted("relax.nn.conv2d_transpose")),
    extract=_extract_transpose_conv,
    checks=(*C.COMMON, *C.WEIGHTED, C.requant_left_shift_fits(_lower_transpose_conv), transpose_conv_form, transpose_conv_stride, transpose_conv_kernel,
            transpose_conv_channels),
)


ENTRIES = (ENTRY,)
LOWERINGS = {QTransposeConv2D: _lower_transpose_conv}


# ---------------------------------------------------------------------------------------------
# Golden semantics, tiling (the typed op's spec: npu_byoc.ops.npu_op_spec)


def golden_transpose_conv2d(op: TransposeConv2D, x: np.ndarray) -> np.ndarray:
    """TFLite's scatter form, not the phases the NPU runs: an independent specification."""
    acc = scatter_accumulate(x, op.weights, op.ifm_zero_point, op.stride, op.pad_before, op.ofm.shape[:2])
    return nx.requantize(acc, op.bias, op.multiplier, op.shift, op.ofm_zero_point, op.act_min, op.act_max)


def _describe(op: TransposeConv2D) -> str:
    kh, kw = op.kernel
    return (f"{op.kind} {shape_text(op)}, kernel {kh}x{kw}, stride {op.stride[0]}x{op.stride[1]} "
            f"({len(op.phases)} phases)")  # fmt: skip


NPU_OPS = {TransposeConv2D: NpuOpSpec(golden_transpose_conv2d, "phased", describe=_describe)}
