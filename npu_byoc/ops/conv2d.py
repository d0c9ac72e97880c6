"""CONV_2D and DEPTHWISE_CONV_2D: 2-D convolution with per-channel requantize, and its
depthwise form (groups == channels), one MAC-array operation: the conventions TVM's frontends
write it in, its extraction into a :class:`QConv2D`, its checks and its lowering to
:class:`Conv2D` / :class:`DepthwiseConv2D`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import checks as C
from ._qdq import (
    _INT_ACTIVATIONS, _Tail, _activation, _add_padding, _bias, _int32_operands, _int32_requant, _int32_weighted,
    _qdq_weighted, _split_bias, _unpad, _weights, _zp_weighted,
)  # fmt: skip
from ..arch.config import HwConfig
from ..arch import numerics as nx
from .entry import NpuPattern
from .npu_ops import Conv2D, DepthwiseConv2D, NpuOp, TensorRef
from .npu_op_spec import NpuOpSpec, mac_channels_reason, what
from .records import QConv2D, Reject
from .requant import weighted_requant
from ..util.relax_utils import dtype_of, int_list, op_name, resolve, shape_of


# ---------------------------------------------------------------------------------------------
# Conventions and extraction


_CONV_CONVENTIONS = tuple(_qdq_weighted("relax.nn.conv2d", padded=True)
                          + _qdq_weighted("relax.nn.conv2d") + _zp_weighted("relax.nn.conv2d")
                          + _int32_weighted("relax.nn.conv2d"))


def _extract_conv2d(root, bindings) -> QConv2D:
    tail = _Tail(root, bindings)
    body = tail.body
    int32_form = op_name(body) == "relax.dequantize"
    if int32_form:  # requantize written as dequantize(acc, s_x*s_w[c]) -> quantize
        requant = body
        body = resolve(body.args[0], bindings)
    conv, bias_expr = _split_bias(body, "relax.nn.conv2d", bindings)
    attrs = conv.attrs
    layout = str(attrs.data_layout)
    if layout not in ("NHWC", "NCHW") or str(attrs.out_layout) != layout:
        raise Reject(f"conv2d layout {layout}->{attrs.out_layout}: NPU supports NHWC and NCHW")
    kernel_layout = str(attrs.kernel_layout)
    if int32_form:
        x, x_zp, w, convention = _int32_operands(conv, bindings)
        if dtype_of(x) not in _INT_ACTIVATIONS or dtype_of(conv) != "int32":
            raise Reject(f"integer conv2d of {dtype_of(x)} into {dtype_of(conv)}: NPU accumulates int8 into int32")
        perm = [kernel_layout.index(c) for c in "OHWI"]
        w = np.ascontiguousarray(np.transpose(w, perm))
        inp, w_scale, w_zp = _int32_requant(requant, bindings, x, w.shape[0], layout.index("C"), 4, x_zp)
    else:
        x_deq = resolve(conv.args[0], bindings)
        x = x_deq.args[0]
        inp = _activation(x_deq, bindings, "input", x)
        x, folded_pad = _unpad(x, bindings, layout, inp.zero_point, "conv2d")
        inp = replace(inp, shape=shape_of(x))
        w, w_scale, w_zp, per_tensor = _weights(conv.args[1], bindings, kernel_layout)
        convention = "qdq"
    oc = w.shape[0]
    acc_scale_vec = inp.scale * w_scale
    bias = (
        np.zeros(oc, np.int32)
        if bias_expr is None
        else _bias(bias_expr, bindings, oc, None if int32_form else acc_scale_vec)
    )
    out = tail.output(bindings)
    act_min, act_max = tail.clamp(out, bindings)
    per_tensor = False if int32_form else per_tensor
    return QConv2D(
        layout=layout,
        input=inp,
        output=out,
        weight=w,
        weight_scale=w_scale,
        weight_zero_point=w_zp,
        bias=bias,
        strides=int_list(attrs.strides),
        padding=_add_padding(int_list(attrs.padding), None if int32_form else folded_pad),
        dilation=int_list(attrs.dilation),
        groups=int(attrs.groups),
        act_min=act_min,
        act_max=act_max,
        convention=convention,
        operands=(x,),
        weight_per_tensor=per_tensor,
        folded_pad=None if int32_form else folded_pad,
    )


# ---------------------------------------------------------------------------------------------
# Checks


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
    """Groups is 1 (standard) or equal to the channel count with multiplier 1 (depthwise); 1 < groups < channels is npu.grouped_conv2d."""
    if op.groups == 1:
        return None
    if op.groups == op.in_channels and op.out_channels != op.in_channels:
        m = op.out_channels // op.in_channels
        return f"depthwise conv2d with channel multiplier {m}: NPU supports multiplier 1"
    return None


def conv_channels(op: QConv2D, hw: HwConfig) -> str | None:
    """Input and output channel counts are at most max_channels."""
    if op.in_channels > hw.max_channels or op.out_channels > hw.max_channels:
        return (
            f"conv2d channels {op.in_channels}->{op.out_channels}: NPU supports up to "
            f"{hw.max_channels} channels"
        )
    return None


# ---------------------------------------------------------------------------------------------
# Lowering


def dilate_kernel(weight: np.ndarray, dilation) -> np.ndarray:
    """OHWI weights with d - 1 zeros between taps: the dilated conv as an undilated one
    (exact: a zero weight adds nothing to the accumulator)."""
    dh, dw = (int(d) for d in dilation)
    if (dh, dw) == (1, 1):
        return weight
    o, kh, kw, i = weight.shape
    out = np.zeros((o, (kh - 1) * dh + 1, (kw - 1) * dw + 1, i), weight.dtype)
    out[:, ::dh, ::dw, :] = weight
    return out


def _lower_conv(name: str, op: QConv2D, ifms: list[TensorRef], ofm: TensorRef) -> NpuOp:
    mult, shift = weighted_requant(op)
    weight = dilate_kernel(op.weight, op.dilation)
    common = dict(
        name=name,
        ifm=ifms[0],
        ofm=ofm,
        bias=op.bias.astype(np.int32),
        multiplier=mult,
        shift=shift,
        ifm_zero_point=op.input.zero_point,
        ofm_zero_point=op.output.zero_point,
        stride=tuple(op.strides),
        padding=tuple(op.padding),
        act_min=op.act_min,
        act_max=op.act_max,
        dilation=tuple(int(d) for d in op.dilation),
    )
    if op.depthwise:
        return DepthwiseConv2D(weights=np.ascontiguousarray(weight[:, :, :, 0]), **common)
    return Conv2D(weights=np.ascontiguousarray(weight), **common)


# ---------------------------------------------------------------------------------------------
# Table entry (npu.depthwise_conv2d, which shares all of the above: npu_byoc.ops.depthwise)


def _is_grouped(op: QConv2D) -> bool:
    """1 < groups < channels: npu.grouped_conv2d's (npu_byoc.ops.grouped_conv)."""
    return 1 < op.groups < op.in_channels


LARGE_STRIDE = 4  # above the default max_stride: npu.strided_conv2d's (npu_byoc.ops.strided_conv)


def _is_strided(op: QConv2D) -> bool:
    """groups 1 and a stride of LARGE_STRIDE or more: npu.strided_conv2d's."""
    return op.groups == 1 and max(op.strides) >= LARGE_STRIDE


_CONV_CHECKS = (*C.COMMON, *C.WEIGHTED, C.requant_left_shift_fits(_lower_conv), conv_groups, conv_kernel, conv_stride,
                conv_dilation, conv_padding, conv_channels)


ENTRY = NpuPattern(
    name="npu.conv2d",
    summary="2-D convolution with per-channel requantize (bias, fused ReLU/ReLU6 clamp)",
    anchor_ops=("relax.nn.conv2d",),
    conventions=_CONV_CONVENTIONS,
    extract=_extract_conv2d,
    checks=_CONV_CHECKS,
    applies=lambda op: not op.depthwise and not _is_grouped(op) and not _is_strided(op),
)


ENTRIES = (ENTRY,)
LOWERINGS = {QConv2D: _lower_conv}


# ---------------------------------------------------------------------------------------------
# Golden semantics, tiling and unit limits (the typed ops' specs: npu_byoc.ops.npu_op_spec)


def padded_windows(x: np.ndarray, kernel, stride, padding, fill: int) -> np.ndarray:
    """(OH, OW, KH, KW, C) windows of an (H, W, C) map padded with ``fill``."""
    t, l, b, r = padding
    xp = np.pad(x.astype(np.int32), ((t, b), (l, r), (0, 0)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, kernel, axis=(0, 1))  # (OH', OW', C, KH, KW)
    return win[:: stride[0], :: stride[1]].transpose(0, 1, 3, 4, 2)


def golden_conv2d(op: Conv2D, x: np.ndarray) -> np.ndarray:
    win = padded_windows(x, op.kernel, op.stride, op.padding, op.ifm_zero_point)
    acc = np.einsum("hwklc,oklc->hwo", win - op.ifm_zero_point, op.weights.astype(np.int32), dtype=np.int64)
    return nx.requantize(acc, op.bias, op.multiplier, op.shift, op.ofm_zero_point, op.act_min, op.act_max)


def conv_unit_reason(npu_op, hw: HwConfig) -> str | None:
    """The MAC unit's channels, then the kernel and stride a convolution kick takes."""
    if reason := mac_channels_reason(npu_op, hw):
        return reason
    (kh, kw), (sh, sw) = npu_op.kernel, npu_op.stride
    if max(kh, kw) > hw.max_kernel:
        return f"{what(npu_op)} runs a {kh}x{kw} kernel: the NPU takes up to max_kernel={hw.max_kernel}"
    if max(sh, sw) > hw.max_stride:
        return f"{what(npu_op)} runs stride {sh}x{sw}: the NPU takes up to max_stride={hw.max_stride}"
    return None


NPU_OPS = {Conv2D: NpuOpSpec(golden_conv2d, "spatial", unit_reason=conv_unit_reason)}
