"""Patchify convolutions (kernel == stride, above the strides the MAC array takes: ViT's patch
embedding, ConvNeXt's 4x4/4 stem; a kernel smaller than the stride alike) as space-to-depth
and a 1x1 convolution, on existing ops.

A k x k / k convolution over non-overlapping patches reads, for output pixel (i, j), the input
pixels (k·i + a, k·j + b), a, b < k. Gathered as channels, ``y[i, j, (a·k + b)·C + c] =
x[k·i + a, k·j + b, c]``, it is a 1x1 convolution of y whose weights are the kernel's (O, a, b,
C) taps flattened in that order: the same products summed, so the same int32 accumulator and
requantize. In NHWC the columns b and channels c of one row a are already one contiguous run
(a view of x as [N, H, W/k, k·C]), so y is k strided slices of that view (every k-th row from
row a: npu.gather's strided copies) concatenated along channels (npu.concat, written in place);
in NCHW every (a, b) is its own strided slice, concatenated by rows and the rows after. The
canonical form rewrites the Relax module into those ops; nothing here lowers or runs by itself."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from .canonical import CanonicalForm, record_absorbed
from .concat import MAX_CONCAT_INPUTS
from .gather_canonical import _ReplaceCalls
from ..util.relax_utils import Constant, constant_value, int_list, op_name, shape_of

# Strides the default NPU (max_stride 3) takes itself: a patchify conv above them is rewritten.
MIN_PATCH = 4


def _patch(conv) -> tuple[int, int, int] | None:
    """(stride, kh, kw) when ``conv`` reads whole patches: a kh x kw kernel no larger than its
    stride s >= MIN_PATCH (no padding, no dilation, groups 1), the form the rewrite handles."""
    a = conv.attrs
    layout, kernel_layout = str(a.data_layout), str(a.kernel_layout)
    if layout not in ("NHWC", "NCHW") or str(a.out_layout) != layout or int(a.groups) != 1:
        return None
    w_shape = shape_of(conv.args[1])
    if w_shape is None or len(w_shape) != 4 or sorted(kernel_layout) != sorted("OIHW"):
        return None
    kh, kw = w_shape[kernel_layout.index("H")], w_shape[kernel_layout.index("W")]
    (sh, sw), padding, dilation = int_list(a.strides), int_list(a.padding), int_list(a.dilation)
    if not (sh == sw >= MIN_PATCH and kh <= sh and kw <= sw) or any(padding) or tuple(dilation) != (1, 1):
        return None
    x_shape = shape_of(conv.args[0])
    if layout == "NHWC" and x_shape[2] % sw:  # the view [N, H, W/s, s·C] needs whole patches per row
        return None
    if layout == "NCHW" and max(kh, kw) > MAX_CONCAT_INPUTS:
        return None  # a concatenation of kw slices per row, then of the kh rows: at most what one takes
    return sh, kh, kw


def patch_weights(w: np.ndarray, kernel_layout: str) -> tuple[np.ndarray, str]:
    """The kh x kw kernel as a 1x1 one over the space-to-depth channels ((a·kw + b)·C + c), in
    ``kernel_layout``'s own axis order."""
    ohwi = np.transpose(w, [kernel_layout.index(c) for c in "OHWI"])
    o = ohwi.shape[0]
    flat = ohwi.reshape(o, 1, 1, -1)  # (O, 1, 1, kh·kw·C): a-major, then b, then c
    return np.transpose(flat, ["OHWI".index(c) for c in kernel_layout]), kernel_layout


def _concat(parts: list, axis: int):
    return parts[0] if len(parts) == 1 else relax.op.concat(parts, axis=axis)


def _space_to_depth(x, s: int, kh: int, kw: int, layout: str):
    """y[i, j, (a·kw + b)·C + c] = x[s·i + a, s·j + b, c] (a < kh, b < kw) as views, strided
    slices and concatenations."""
    n, *dims = shape_of(x)
    if layout == "NHWC":
        h, w, c = dims
        oh = (h - kh) // s + 1
        rows = relax.op.reshape(x, [n, h, w // s, s * c])  # pixel (i, j)'s columns b < s: one run
        parts = [relax.op.strided_slice(rows, [1, 3], [a, 0], [a + (oh - 1) * s + 1, kw * c], [s, 1])
                 for a in range(kh)]  # fmt: skip
        return _concat(parts, 3)
    c, h, w = dims
    oh, ow = (h - kh) // s + 1, (w - kw) // s + 1
    rows = [_concat([relax.op.strided_slice(x, [2, 3], [a, b], [a + (oh - 1) * s + 1, b + (ow - 1) * s + 1], [s, s])
                     for b in range(kw)], 1) for a in range(kh)]  # fmt: skip
    return _concat(rows, 1)


def _rewrite(conv, values):
    """The 1x1 convolution over the space-to-depth of the conv's quantized input, or None."""
    patch = _patch(conv)
    deq_x = values.get(conv.args[0]) if isinstance(conv.args[0], relax.Var) else None
    deq_w = values.get(conv.args[1]) if isinstance(conv.args[1], relax.Var) else None
    if patch is None or op_name(deq_x) != "relax.dequantize" or op_name(deq_w) != "relax.dequantize":
        return None
    if not isinstance(deq_w.args[0], Constant) or len(shape_of(deq_x.args[0]) or ()) != 4:
        return None
    a = conv.attrs
    layout, kernel_layout = str(a.data_layout), str(a.kernel_layout)
    y = _space_to_depth(deq_x.args[0], *patch, layout)
    w, _ = patch_weights(constant_value(deq_w.args[0]), kernel_layout)
    x_deq = relax.op.dequantize(y, *deq_x.args[1:3], axis=int(deq_x.attrs.axis), out_dtype=str(deq_x.attrs.out_dtype))
    w_deq = relax.op.dequantize(relax.const(w), *deq_w.args[1:3], axis=int(deq_w.attrs.axis),
                                out_dtype=str(deq_w.attrs.out_dtype))  # fmt: skip
    out_dtype = str(a.out_dtype) if a.out_dtype is not None and str(a.out_dtype) not in ("", "void") else None
    return relax.op.nn.conv2d(x_deq, w_deq, strides=1, padding=0, dilation=1, groups=1, data_layout=layout,
                              kernel_layout=kernel_layout, out_layout=layout, out_dtype=out_dtype)  # fmt: skip


def patchify_to_space_to_depth(mod: tvm.IRModule) -> tvm.IRModule:
    """Canonicalise: each patchify convolution above the NPU's strides as space-to-depth (views,
    strided slices, a concatenation along channels) and a 1x1 convolution; the bindings it adds
    are recorded as the convolution's for coverage."""
    main = mod["main"]
    values = {b.var: b.value for block in main.body.blocks for b in block.bindings}
    new, convs = {}, set()
    for var, value in values.items():
        if op_name(value) == "relax.nn.conv2d" and (call := _rewrite(value, values)) is not None:
            new[value] = call
            convs.add(var.name)
    if not new:
        return mod
    before = {v.name for v in values}
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = _ReplaceCalls(new, mod).visit_expr(main)
    out = relax.transform.DeadCodeElimination(["main"])(out)
    names, pending = {}, []  # each added binding is the next rewritten convolution's
    for b in (b for block in out["main"].body.blocks for b in block.bindings):
        if b.var.name not in before:
            pending.append(b.var.name)
        elif b.var.name in convs:
            names.update({name: b.var.name for name in pending})
            pending = []
    return record_absorbed(out, names)


ENTRIES = ()  # no op of its own: a rewrite into npu.reshape, npu.gather, npu.concat and npu.conv2d
# before the gathers compose (order 1): the slices it writes are theirs to run
CANONICAL_FORMS = (CanonicalForm(0, patchify_to_space_to_depth),)
