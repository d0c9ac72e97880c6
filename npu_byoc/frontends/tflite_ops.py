"""TFLite data-movement operators that TVM's Relax TFLite frontend refuses when quantized.

TVM 0.27 lists the quantized TFLite operators it converts (``_SUPPORTED_QUANTIZED_OPS``) and
refuses a model holding any other: PAD, PADV2, STRIDED_SLICE, SPLIT, SPLIT_V, TRANSPOSE,
SQUEEZE, EXPAND_DIMS, RESIZE_NEAREST_NEIGHBOR, PACK, TILE, GATHER, SHAPE, SPACE_TO_BATCH_ND and
BATCH_TO_SPACE_ND among them (the last three are what TensorFlow's converter makes of a Conv1D,
a dilated one in particular). They only move
integers around, so their int8 (and uint8) form is exact on the integers themselves, as
TFLite's reference kernels run them: no dequantize/quantize around them, the same
int8-tensor edges TVM's frontend gives MAX_POOL_2D or RESHAPE (the pattern table's
neighbours see the form they know). Quantization is checked, not converted: LiteRT copies
the integers unchanged, so input and output must share scale and zero point (TFLite's
converter guarantees it); otherwise the import stops with one line naming the operator.

Each operator is defined once, in numpy (:data:`LOWERINGS`), on arrays. That one definition
serves twice:

* constant folding: an operator whose inputs are all constants (after SHAPE of a tensor with
  a static shape - the ``SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE`` chain of a batch-None
  keras model) is evaluated at import and vanishes, its result a constant for its readers;
* lowering: applied to the *index map* ``arange(N).reshape(shape)`` of its data input, it
  tells which input element each output element copies, and the Relax form is
  ``take(reshape(x, [N]), indices)``. PAD/PADV2, TRANSPOSE, SQUEEZE, EXPAND_DIMS and PACK have
  a direct Relax form (``nn.pad``, ``permute_dims``, ``reshape``, ``concat``) and use it;
  SPACE_TO_BATCH_ND is ``nn.pad`` with the zero point, then the gather of the padded map.

Float operators go to TVM's own converters unchanged.

Elementwise functions TVM refuses when quantized (:data:`FUNCTIONS`: GELU) are imported the
way TVM imports LOGISTIC: dequantize, the float function, quantize. The pattern table's LUT
entries (:mod:`npu_byoc.ops.lut`) match that form and evaluate LiteRT's kernel on the 256
int8 inputs. SOFTMAX is imported the same way with its ``beta``, which TVM's own converter
drops (the NPU's SOFTMAX, npu_byoc.ops.softmax, folds beta into its exp table).

Quantized BATCH_MATMUL (attention's two-activation products) is imported in integer Relax ops
by :mod:`npu_byoc.frontends.tflite_batch_matmul`, LiteRT's arithmetic exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend.tflite import tflite_frontend

from ..arch import numerics as nx


# A model's attributes are untrusted: an output larger than this is refused before any
# array is made (a PAD of 10^9 or a TILE of 10^6 x 10^6 would exhaust memory, not fail).
MAX_ELEMENTS = 1 << 26


def _bits(mask: int, i: int) -> bool:
    return bool((int(mask) >> i) & 1)


def _check_size(shape) -> None:
    n = math.prod(int(d) for d in shape)
    if n > MAX_ELEMENTS:
        raise ValueError(f"an output of shape {list(shape)} ({n:,} elements) is larger than {MAX_ELEMENTS:,}")


# --------------------------------------------------------------------------------------------
# The operators, in numpy. Each takes the op's options (a dict) and its input arrays, returns
# the list of output arrays. ``fill`` is PAD's value (the quantized zero or PADV2's constant).


def _pad(opts, x, paddings, *_constant_values):  # the fill value is opts["fill"]
    p = np.asarray(paddings, np.int64).reshape(-1, 2)
    if (p < 0).any() or len(p) != x.ndim:
        raise ValueError(f"paddings {p.tolist()} do not fit shape {list(x.shape)}")
    _check_size([n + a + b for n, (a, b) in zip(x.shape, p.tolist())])
    return [np.pad(x, p.tolist(), constant_values=opts["fill"])]


def _strided_slice(opts, x, begin, end, strides):
    """TFLite STRIDED_SLICE: numpy basic indexing is TensorFlow's definition of it."""
    begin, end, strides = (np.asarray(a, np.int64).ravel() for a in (begin, end, strides))
    if (strides == 0).any():
        raise ValueError("a stride is 0")
    if opts["offset"]:
        end = begin + end
    index = []
    for i in range(len(begin)):
        if _bits(opts["ellipsis_mask"], i):
            index.append(Ellipsis)
        elif _bits(opts["new_axis_mask"], i):
            index.append(np.newaxis)
        elif _bits(opts["shrink_axis_mask"], i):
            index.append(int(begin[i]))
        else:
            b = None if _bits(opts["begin_mask"], i) else int(begin[i])
            e = None if _bits(opts["end_mask"], i) else int(end[i])
            index.append(slice(b, e, int(strides[i])))
    return [np.asarray(x[tuple(index)])]


def _split(opts, axis, x):
    axis = int(np.asarray(axis).ravel()[0])
    n = opts["num_splits"]
    if n <= 0 or x.shape[axis] % n:
        raise ValueError(f"cannot split {x.shape[axis]} elements into {n} equal parts")
    return np.split(x, n, axis=axis)


def _split_v(opts, x, size_splits, axis):
    axis = int(np.asarray(axis).ravel()[0])
    sizes = [int(s) for s in np.asarray(size_splits).ravel()]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    if sum(sizes) != x.shape[axis] or min(sizes) < 0:
        raise ValueError(f"size_splits {sizes} do not add up to {x.shape[axis]}")
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _expand_dims(opts, x, axis):
    axis = int(np.asarray(axis).ravel()[0])
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise ValueError(f"axis {axis} out of range for rank {x.ndim}")
    return [np.expand_dims(x, axis)]


def _blocks(x, block_shape, pairs, what: str):
    """The block shape (M values) and the M (before, after) pairs of SPACE_TO_BATCH_ND's
    paddings or BATCH_TO_SPACE_ND's crops, checked against ``x``."""
    b = [int(v) for v in np.asarray(block_shape).ravel()]
    p = np.asarray(pairs, np.int64).reshape(-1, 2)
    if not b or min(b) < 1 or len(p) != len(b) or x.ndim < len(b) + 1 or (p < 0).any():
        raise ValueError(f"block_shape {b} and {what} {p.tolist()} do not fit shape {list(x.shape)}")
    return b, p


def _space_to_batch(opts, x, block_shape, paddings):
    """SPACE_TO_BATCH_ND (TensorFlow's definition): pad the M spatial axes (quantized: with the
    zero point), cut each into blocks, and move the block offsets into the batch."""
    b, p = _blocks(x, block_shape, paddings, "paddings")
    m, rest = len(b), list(x.shape[1 + len(b):])
    padded = [n + lo + hi for n, (lo, hi) in zip(x.shape[1 : 1 + m], p.tolist())]
    if any(n % k for n, k in zip(padded, b)):
        raise ValueError(f"padded spatial shape {padded} is not a multiple of block_shape {b}")
    _check_size([x.shape[0] * math.prod(b), *[n // k for n, k in zip(padded, b)], *rest])
    y = np.pad(x, [(0, 0), *p.tolist(), *[(0, 0)] * len(rest)], constant_values=opts.get("fill", 0))
    y = y.reshape([x.shape[0], *[v for n, k in zip(padded, b) for v in (n // k, k)], *rest])
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(1 + 2 * m, y.ndim))
    return [y.transpose(perm).reshape([x.shape[0] * math.prod(b), *[n // k for n, k in zip(padded, b)], *rest])]


def _batch_to_space(opts, x, block_shape, crops):
    """BATCH_TO_SPACE_ND: the inverse, block offsets back from the batch, then the crops."""
    b, c = _blocks(x, block_shape, crops, "crops")
    m, rest = len(b), list(x.shape[1 + len(b):])
    if x.shape[0] % math.prod(b):
        raise ValueError(f"batch {x.shape[0]} is not a multiple of the block size {math.prod(b)}")
    n, spatial = x.shape[0] // math.prod(b), list(x.shape[1 : 1 + m])
    y = x.reshape([*b, n, *spatial, *rest])
    perm = [m] + [v for i in range(m) for v in (m + 1 + i, i)] + list(range(2 * m + 1, y.ndim))
    y = y.transpose(perm).reshape([n, *[s * k for s, k in zip(spatial, b)], *rest])
    full = [s * k for s, k in zip(spatial, b)]
    if any(lo + hi > f for f, (lo, hi) in zip(full, c.tolist())):
        raise ValueError(f"crops {c.tolist()} exceed the spatial shape {full}")
    return [y[(slice(None), *[slice(lo, f - hi) for f, (lo, hi) in zip(full, c.tolist())])]]


def _transpose(opts, x, perm):
    return [np.transpose(x, [int(p) for p in np.asarray(perm).ravel()])]


def _squeeze(opts, x):
    dims = opts["squeeze_dims"]
    if any(not -x.ndim <= d < x.ndim for d in dims):
        raise ValueError(f"squeeze_dims {dims} out of range for rank {x.ndim}")
    axes = tuple(d % x.ndim for d in dims) if dims else tuple(k for k, n in enumerate(x.shape) if n == 1)
    if any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"cannot squeeze axes {list(axes)} of shape {list(x.shape)}")
    return [np.squeeze(x, axis=axes)]


def nearest_indices(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool):
    """TFLite's reference GetNearestNeighbor, in its float32 arithmetic."""
    f32 = np.float32
    if align_corners and out_size > 1:
        scale = f32(in_size - 1) / f32(out_size - 1)
    else:
        scale = f32(in_size) / f32(out_size)
    v = (np.arange(out_size, dtype=f32) + f32(0.5 if half_pixel_centers else 0.0)) * scale
    if align_corners:  # TfLiteRound: half away from zero (v >= 0)
        fl = np.floor(v)
        idx = fl + (v - fl >= f32(0.5))
    else:
        idx = np.floor(v)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half_pixel_centers else idx


def _resize_nearest(opts, x, size):
    oh, ow = (int(s) for s in np.asarray(size).ravel())
    if x.ndim != 4 or oh <= 0 or ow <= 0:
        raise ValueError(f"needs a 4-D input and a positive size, got {list(x.shape)} -> {[oh, ow]}")
    _check_size([x.shape[0], oh, ow, x.shape[3]])
    ac, hp = opts["align_corners"], opts["half_pixel_centers"]
    y = np.take(x, nearest_indices(x.shape[1], oh, ac, hp), axis=1)
    return [np.take(y, nearest_indices(x.shape[2], ow, ac, hp), axis=2)]


def _pack(opts, *xs):
    return [np.stack(xs, axis=opts["axis"])]


def _tile(opts, x, multiples):
    m = [int(v) for v in np.asarray(multiples).ravel()]
    if len(m) != x.ndim or min(m) < 0:
        raise ValueError(f"multiples {m} do not fit shape {list(x.shape)}")
    _check_size([n * k for n, k in zip(x.shape, m)])
    return [np.tile(x, m)]


def _gather(opts, x, indices):
    axis, batch_dims = opts["axis"], opts["batch_dims"]
    if batch_dims != 0:
        raise ValueError(f"batch_dims {batch_dims} (only 0 is supported)")
    indices = np.asarray(indices, np.int64)
    _check_size([*x.shape[:axis], *indices.shape, *x.shape[axis + 1 :]])
    n = x.shape[axis]
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        raise ValueError(f"an index is outside [0, {n})")
    return [np.take(x, indices, axis=axis)]


def _shape(opts, x):
    return [np.asarray(x.shape, opts["out_type"])]


# --------------------------------------------------------------------------------------------
# The registry: per operator, its numpy definition, how to read its options, which inputs carry
# data (the rest must be constants), and its direct Relax form if it has one.


@dataclass(frozen=True)
class Lowering:
    fn: Callable  # fn(opts, *inputs) -> [outputs]
    options: Callable  # options(op) -> dict
    data: tuple[int, ...] = (0,)  # input positions holding (quantized) data; the rest constant
    relax: Callable | None = None  # relax(conv, opts, data_exprs, consts, out_shapes) -> [exprs]


def _opts(cls_name: str, **fields):
    """Read fields of a TFLite *Options table (default: the field's own default)."""

    def read(op):
        import importlib

        cls = getattr(importlib.import_module(f"tflite.{cls_name}"), cls_name)
        o = op.BuiltinOptions()
        out = {}
        if o is not None:
            opts = cls()
            opts.Init(o.Bytes, o.Pos)
            for key, getter in fields.items():
                out[key] = getter(opts)
        else:
            out = {key: getter(None) for key, getter in fields.items()}
        return out

    return read


def _none(op):
    return {}


def _field(name, default=0, cast=int):
    return lambda o: default if o is None else cast(getattr(o, name)())


def _relax_pad(conv, opts, xs, consts, out_shapes):
    widths = np.asarray(consts[0], np.int64).reshape(-1, 2)
    return [relax.op.nn.pad(xs[0], [int(v) for v in widths.ravel()], "constant", float(opts["fill"]))]


def _relax_transpose(conv, opts, xs, consts, out_shapes):
    return [relax.op.permute_dims(xs[0], [int(p) for p in np.asarray(consts[0]).ravel()])]


def _relax_reshape(conv, opts, xs, consts, out_shapes):
    return [relax.op.reshape(xs[0], out_shapes[0])]


def _relax_space_to_batch(conv, opts, xs, consts, out_shapes):
    """The zero-point pad as nn.pad, then the block rearrangement as a gather of the padded map."""
    block, paddings = consts
    x, shape = xs[0], list(_static_shape(conv.bb.normalize(xs[0])))
    m = len(np.asarray(block).ravel())
    widths = [(0, 0), *np.asarray(paddings, np.int64).reshape(-1, 2).tolist(), *[(0, 0)] * (len(shape) - 1 - m)]
    if any(lo or hi for lo, hi in widths):
        x = relax.op.nn.pad(x, [int(v) for pair in widths for v in pair], "constant", float(opts["fill"]))
        shape = [n + lo + hi for n, (lo, hi) in zip(shape, widths)]
    n = math.prod(shape)
    (index,) = _space_to_batch({}, np.arange(n, dtype=np.int64).reshape(shape), block, np.zeros((m, 2), np.int64))
    return [_gather_expr(x, n, index)]


def _gather_expr(x, n: int, index: np.ndarray):
    """``take(reshape(x, [n]), index)`` in the index map's shape: the form npu.gather matches
    (the indices are in range by construction; "clip" only spares TVM's warning)."""
    flat = relax.op.take(relax.op.reshape(x, [n]), relax.const(index.ravel().astype("int32")), 0, "clip")
    return relax.op.reshape(flat, index.shape)


def _relax_pack(conv, opts, xs, consts, out_shapes):
    axis = opts["axis"] % len(out_shapes[0])
    return [relax.op.concat([relax.op.expand_dims(x, axis) for x in xs], axis=axis)]


def _squeeze_dims(o) -> list[int]:
    return [int(d) for d in o.SqueezeDimsAsNumpy()] if o is not None and o.SqueezeDimsLength() else []


_STRIDED = _opts(
    "StridedSliceOptions",
    begin_mask=_field("BeginMask"),
    end_mask=_field("EndMask"),
    ellipsis_mask=_field("EllipsisMask"),
    new_axis_mask=_field("NewAxisMask"),
    shrink_axis_mask=_field("ShrinkAxisMask"),
    offset=lambda o: bool(o is not None and hasattr(o, "Offset") and o.Offset()),
)
_RESIZE = _opts(
    "ResizeNearestNeighborOptions",
    align_corners=_field("AlignCorners", False, bool),
    half_pixel_centers=_field("HalfPixelCenters", False, bool),
)


def _shape_options(op):
    from tflite.TensorType import TensorType

    read = _opts("ShapeOptions", out_type=_field("OutType", TensorType.INT32))(op)
    return {"out_type": np.int64 if read["out_type"] == TensorType.INT64 else np.int32}


LOWERINGS: dict[str, Lowering] = {
    "PAD": Lowering(_pad, _none, relax=_relax_pad),
    "PADV2": Lowering(_pad, _none, relax=_relax_pad),
    "STRIDED_SLICE": Lowering(_strided_slice, _STRIDED),
    "SPLIT": Lowering(_split, _opts("SplitOptions", num_splits=_field("NumSplits")), data=(1,)),
    "SPLIT_V": Lowering(_split_v, _opts("SplitVOptions", num_splits=_field("NumSplits"))),
    "TRANSPOSE": Lowering(_transpose, _none, relax=_relax_transpose),
    "SQUEEZE": Lowering(_squeeze, _opts("SqueezeOptions", squeeze_dims=_squeeze_dims), relax=_relax_reshape),
    "RESIZE_NEAREST_NEIGHBOR": Lowering(_resize_nearest, _RESIZE),
    "PACK": Lowering(_pack, _opts("PackOptions", axis=_field("Axis")), data=None, relax=_relax_pack),
    "TILE": Lowering(_tile, _none),
    "GATHER": Lowering(_gather, _opts("GatherOptions", axis=_field("Axis"), batch_dims=_field("BatchDims"))),
    "SHAPE": Lowering(_shape, _shape_options),
    "EXPAND_DIMS": Lowering(_expand_dims, _none, relax=_relax_reshape),
    "SPACE_TO_BATCH_ND": Lowering(_space_to_batch, _none, relax=_relax_space_to_batch),
    "BATCH_TO_SPACE_ND": Lowering(_batch_to_space, _none),
}


def _concatenation(opts, *xs):
    return [np.concatenate([np.atleast_1d(x) for x in xs], axis=opts["axis"])]


def _reduce_prod(opts, x, axes):
    axes = tuple(int(a) for a in np.asarray(axes).ravel())
    return [np.prod(x, axis=axes, keepdims=opts["keep_dims"]).astype(x.dtype)]


# Shape arithmetic TVM converts itself but cannot take a folded constant into: computed at import
# when every input is a constant (Keras 3's run-time RESHAPE targets: SHAPE -> STRIDED_SLICE ->
# CONCATENATION; a Dense on a 3-D tensor: Tensordot's SHAPE -> GATHER -> REDUCE_PROD), else TVM's.
FOLDS: dict[str, Lowering] = {
    "CONCATENATION": Lowering(_concatenation, _opts("ConcatenationOptions", axis=_field("Axis"))),
    "REDUCE_PROD": Lowering(_reduce_prod, _opts("ReducerOptions", keep_dims=_field("KeepDims", False, bool))),
}

# Operators that pad (with the output's zero point when quantized, as LiteRT's kernels do)
_PADDED = frozenset({"PAD", "PADV2", "SPACE_TO_BATCH_ND"})


# --------------------------------------------------------------------------------------------
# The converter


class ImportRefused(tvm.error.OpNotImplemented):
    """A quantized data-movement operator this module cannot lower exactly."""


def _static_shape(expr) -> tuple[int, ...] | None:
    ty = getattr(expr, "ty", None)
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    dims = []
    for d in ty.shape.values:
        if not isinstance(d, tvm.ir.prim.expr.IntImm):
            return None
        dims.append(int(d))
    return tuple(dims)


def _gelu(op, x):
    """GELU: exact (erf) or, with GeluOptions.approximate, the tanh approximation."""
    from tflite.GeluOptions import GeluOptions

    table, approximate = op.BuiltinOptions(), False
    if table is not None:
        o = GeluOptions()
        o.Init(table.Bytes, table.Pos)
        approximate = bool(o.Approximate())
    return (relax.op.nn.gelu_tanh if approximate else relax.op.nn.gelu)(x)


def _softmax(op, x):
    """SOFTMAX of a quantized tensor over its last axis, ``beta`` included: TVM's own import drops
    SoftmaxOptions.beta, which LiteRT's kernel multiplies the input by."""
    from tflite.SoftmaxOptions import SoftmaxOptions

    table, beta = op.BuiltinOptions(), 1.0
    if table is not None:
        o = SoftmaxOptions()
        o.Init(table.Bytes, table.Pos)
        beta = float(o.Beta())
    if beta != 1.0:
        x = relax.op.multiply(x, relax.const(np.float32(beta)))
    return relax.op.nn.softmax(x, axis=-1)


# Quantized functions: TFLite operator -> (op, dequantized input) -> float result.
FUNCTIONS: dict[str, Callable] = {"GELU": _gelu, "SOFTMAX": _softmax}


class DataMovementConverter(tflite_frontend.OperatorConverter):
    """TVM's TFLite converter with the operators of :data:`LOWERINGS` accepted when quantized
    and constant-folded when their inputs are constants, and the quantized :data:`FUNCTIONS`."""

    _SUPPORTED_QUANTIZED_OPS = tflite_frontend.OperatorConverter._SUPPORTED_QUANTIZED_OPS | frozenset(
        LOWERINGS
    ) | frozenset(FUNCTIONS) | {"BATCH_MATMUL"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._tvm_converters = {name: self.convert_map.get(name) for name in (*LOWERINGS, *FUNCTIONS, *FOLDS)}
        for name in LOWERINGS:
            self.convert_map[name] = lambda op, _name=name: self._convert(_name, op)
        for name in FUNCTIONS:
            self.convert_map[name] = lambda op, _name=name: self._convert_function(_name, op)
        for name in FOLDS:
            self.convert_map[name] = lambda op, _name=name: self._fold_constants(_name, op)

    def convert_transpose_conv(self, op):
        """TVM's TRANSPOSE_CONV, with the fused activation it drops (TransposeConvOptions carries
        one since TFLite 2.13: keras' Conv2DTranspose(activation="relu6") converts to it)."""
        from tflite.TransposeConvOptions import TransposeConvOptions

        out = super().convert_transpose_conv(op)
        table, fused = op.BuiltinOptions(), 0
        if table is not None:
            o = TransposeConvOptions()
            o.Init(table.Bytes, table.Pos)
            fused = int(o.FusedActivationFunction())
        (y,) = self.get_output_tensors(op)
        if y.qnn_params is None:
            return self.convert_fused_activation_function(out, fused)
        dtype = self.get_tensor_type_str(y.tensor.Type())
        scale, zero_point = (tflite_frontend.get_scalar_from_constant(y.qnn_params[k]) for k in ("scale", "zero_point"))
        return self.convert_qnn_fused_activation_function(out, fused, scale, zero_point, dtype)

    def convert_qnn_fused_activation_function(self, expr, fused_activation_fn, scale, zero_point, dtype):
        """A quantized fused activation as an integer clip with LiteRT's bounds
        (``CalculateActivationRangeQuantized``: the float32 quotient ``f / s_out`` rounded half
        away from zero, :func:`npu_byoc.arch.numerics.activation_range`). TVM's converter
        rounds the double quotient half to even, 1 off at a tie (RELU6 with s_out = float32(6/253.5)
        and zero point −128 clamps at 125 where LiteRT clamps at 126)."""
        from tflite.ActivationFunctionType import ActivationFunctionType as A

        names = {A.RELU: "RELU", A.RELU6: "RELU6", A.RELU_N1_TO_1: "RELU_N1_TO_1"}
        if fused_activation_fn not in names:  # NONE, or one TVM refuses with its own message
            return super().convert_qnn_fused_activation_function(expr, fused_activation_fn, scale, zero_point, dtype)
        info = np.iinfo(dtype)
        lo, hi = nx.activation_range(names[fused_activation_fn], scale, zero_point, int(info.min), int(info.max))
        return relax.op.clip(expr, min=float(lo), max=float(hi))

    def convert_batch_matmul(self, op):
        """Quantized BATCH_MATMUL as LiteRT's int8 kernel (npu_byoc.frontends.tflite_batch_matmul);
        float BATCH_MATMUL through TVM."""
        from tflite.BatchMatMulOptions import BatchMatMulOptions

        from .tflite_batch_matmul import batch_matmul

        ins, (y,) = self.get_input_tensors(op), self.get_output_tensors(op)
        if all(t.qnn_params is None for t in (*ins, y)):
            return super().convert_batch_matmul(op)
        types = [self.get_tensor_type_str(t.tensor.Type()) for t in (*ins, y)]
        if types != ["int8"] * 3 or any(t.qnn_params is None for t in (*ins, y)):
            raise ImportRefused(f"TFLite BATCH_MATMUL: operand and output types {types} (only int8 with int8 is supported)")
        params = [[np.asarray(t.qnn_params[k].value.numpy()).ravel() for k in ("scale", "zero_point")] for t in (*ins, y)]
        if any(s.size != 1 or z.size != 1 for s, z in params):
            raise ImportRefused("TFLite BATCH_MATMUL: per-channel quantization (LiteRT's kernel is per-tensor)")
        adj_x = adj_y = False
        table = op.BuiltinOptions()
        if table is not None:
            o = BatchMatMulOptions()
            o.Init(table.Bytes, table.Pos)
            adj_x, adj_y = bool(o.AdjX()), bool(o.AdjY())
        xs = [self.get_tensor_expr(t) for t in ins]
        shapes = [_static_shape(self.bb.normalize(x)) for x in xs]
        if any(s is None for s in shapes):
            raise ImportRefused("TFLite BATCH_MATMUL: an operand's shape is not static (fix it with input_shapes)")
        try:
            return batch_matmul(*xs, *shapes, adj_x, adj_y, [int(z[0]) for _, z in params],
                                [float(s[0]) for s, _ in params])
        except ValueError as err:
            raise ImportRefused(f"TFLite BATCH_MATMUL: {err}") from None

    def _fold_constants(self, name: str, op):
        """A :data:`FOLDS` operator: computed at import when its inputs are all unquantized
        constants, else TVM's own converter."""
        ins, outs = self.get_input_tensors(op), self.get_output_tensors(op)
        consts = [self._constant(t) for t in ins]
        if not consts or any(c is None for c in consts) or any(t.qnn_params is not None for t in ins):
            return self._tvm_converters[name](op)
        low = FOLDS[name]
        try:
            return self._fold(outs, low.fn(low.options(op), *consts))
        except (ValueError, np.exceptions.AxisError) as err:
            raise ImportRefused(f"TFLite {name}: {err}") from None

    def _convert_function(self, name: str, op):
        (x,), (y,) = self.get_input_tensors(op), self.get_output_tensors(op)
        if x.qnn_params is None or y.qnn_params is None:
            if self._tvm_converters[name] is None:
                raise ImportRefused(f"TFLite {name}: only its quantized (int8 / uint8) form is supported")
            return self._tvm_converters[name](op)
        out = FUNCTIONS[name](op, self.dequantize(self.get_expr(x.tensor_idx), x))
        return self.quantize(out, y)

    # A folded tensor reads like a constant from every converter, TVM's included (RESHAPE
    # takes its target shape from get_tensor_value).
    def get_tensor_value(self, tensor_wrapper, is_sparse=False):
        idx = tensor_wrapper.tensor_idx
        if idx >= 0 and self.is_prefetched(idx):
            return self.get_prefetched_node(idx)
        return super().get_tensor_value(tensor_wrapper, is_sparse)

    def _constant(self, t):
        if t.tensor_idx < 0 or self.has_expr(t.tensor_idx):
            return None
        if self.is_prefetched(t.tensor_idx):
            return np.asarray(self.get_prefetched_node(t.tensor_idx))
        if t.buffer.DataLength() == 0:
            return None
        return np.array(super().get_tensor_value(t))

    def _convert(self, name: str, op):
        low = LOWERINGS[name]
        ins = self.get_input_tensors(op)
        outs = self.get_output_tensors(op)
        consts = [self._constant(t) for t in ins]
        opts = low.options(op)
        try:
            if name == "SHAPE":  # needs only the static shape of its input
                shape = _static_shape(self.bb.normalize(self.get_tensor_expr(ins[0])))
                if shape is None:
                    raise ValueError("the input's shape is not static (fix it with input_shapes)")
                return self._fold(outs, low.fn(opts, np.broadcast_to(np.int8(0), shape)))  # a view: no data
            if all(c is not None for c in consts):
                if name in _PADDED:
                    opts["fill"] = self._pad_fill(name, ins, outs, consts)
                return self._fold(outs, low.fn(opts, *consts))
            quantized = any(t.qnn_params is not None for t in (*ins, *outs))
            if not quantized and self._tvm_converters[name] is not None:
                return self._tvm_converters[name](op)
            return self._lower(name, low, opts, ins, outs, consts)
        except (ValueError, IndexError) as err:
            raise ImportRefused(f"TFLite {name}: {err}") from None

    def _fold(self, outs, values):
        for t, v in zip(outs, values):
            self.set_prefetched_node(t.tensor_idx, np.array(v))  # keeps 0-d arrays 0-d
        return None

    def _pad_fill(self, name, ins, outs, consts):
        """PAD fills with the output's zero point (0 if float); PADV2 with its constant."""
        if name == "PADV2" and len(ins) > 2:
            if consts[2] is None:
                raise ValueError("the pad value is not a constant")
            if ins[2].qnn_params is not None and not self.has_same_qnn_params(ins[2], outs[0]):
                raise ValueError("the pad value's quantization differs from the output's")
            return consts[2].ravel()[0].item()
        q = outs[0].qnn_params
        return int(q["zero_point"].value.numpy()) if q is not None else 0

    def _lower(self, name, low, opts, ins, outs, consts):
        data = range(len(ins)) if low.data is None else low.data
        for k, t in enumerate(ins):
            if k not in data and consts[k] is None and not (name == "GATHER" and k == 1):
                raise ValueError(f"input {k} is not a constant")
        for k in data:
            for o in outs:
                if (ins[k].qnn_params is None) != (o.qnn_params is None) or (
                    o.qnn_params is not None and not self.has_same_qnn_params(ins[k], o)
                ):
                    raise ValueError(
                        "input and output quantization (scale, zero point) differ; LiteRT copies "
                        "the integers unchanged, so the real values would change"
                    )
        xs = [self.get_tensor_expr(ins[k]) for k in data]
        shapes = [_static_shape(self.bb.normalize(x)) for x in xs]
        if any(s is None for s in shapes):
            raise ValueError("the input's shape is not static (fix it with input_shapes)")
        if name in _PADDED:
            opts["fill"] = self._pad_fill(name, ins, outs, consts)
        if name == "GATHER" and consts[1] is None:  # run-time indices: take
            if opts["batch_dims"] != 0:
                raise ValueError(f"batch_dims {opts['batch_dims']} with run-time indices")
            # LiteRT fails on an index out of range; "clip" at least never reads outside x
            return relax.op.take(xs[0], self.get_tensor_expr(ins[1]), opts["axis"], "clip")
        # the index map: which input element each output element copies
        const_args = [c for k, c in enumerate(consts) if k not in data]
        probes = [np.zeros(s, np.int64) for s in shapes]  # holds any fill value
        out_shapes = [o.shape for o in low.fn(opts, *self._args(low, ins, probes, consts))]
        if low.relax is not None:
            exprs = low.relax(self, opts, xs, const_args, out_shapes)
        else:
            n = math.prod(shapes[0])
            index = np.arange(n, dtype=np.int64).reshape(shapes[0])
            maps = low.fn(opts, *self._args(low, ins, [index], consts))
            # one flat view per output: each output's gather is then its own NPU composite
            # (a shared one would fuse a SPLIT's outputs into one composite with a tuple result)
            # one flat view per output: each output's gather is then its own NPU composite
            exprs = [_gather_expr(xs[0], n, m) for m in maps]
        return exprs[0] if len(exprs) == 1 else relax.Tuple(exprs)

    @staticmethod
    def _args(low, ins, data_arrays, consts):
        """The numpy arguments in the op's input order: data arrays where data flows."""
        data = range(len(ins)) if low.data is None else low.data
        it = iter(data_arrays)
        return [next(it) if k in data else consts[k] for k in range(len(ins))]
