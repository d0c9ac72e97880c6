"""The golden model: typed NPU ops executed on whole tensors, integer only.

This is the executable specification of what each NPU operation computes (docs/numerics.md
states the formulas; npu_byoc.arch.numerics implements them). The command-stream machine
(npu_byoc.runtime.machine), the C functional model and the RTL must equal it bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..arch import numerics as nx
from ..ops import softmax_kernel as sm
from ..ops import resize_passes as rz
from ..ops import transpose_conv_phases as tc
from ..codegen.lower import PartitionPlan
from ..ops.npu_ops import (
    Add, Conv2D, DepthwiseConv2D, FullyConnected, Lut, Mean, Mul, NpuOp, Pool, Softmax, TensorRef, Gather,
    ResizeBilinear, TransposeConv2D,
)  # fmt: skip
from ..arch.isa import Region
from ..ops.uint8 import to_model, to_npu

Regions = dict[int, np.ndarray]  # region id -> uint8 buffer


def _strided(regions: Regions, ref: TensorRef) -> np.ndarray:
    """The (H, W, C) bytes of ``ref`` in its region, a writable view (a channel slice is strided)."""
    h, w, c = ref.shape
    strides = ref.strides
    span = (h - 1) * strides[0] + (w - 1) * strides[1] + (c - 1) * strides[2] + 1
    raw = regions[ref.region][ref.offset : ref.offset + span].view(np.int8)
    return np.lib.stride_tricks.as_strided(raw, (h, w, c), strides)


def read_tensor(regions: Regions, ref: TensorRef) -> np.ndarray:
    """The (H, W, C) int8 feature map of ``ref``, whatever its layout in the region."""
    return _strided(regions, ref).copy()


def write_tensor(regions: Regions, ref: TensorRef, value: np.ndarray) -> None:
    h, w, c = ref.shape
    _strided(regions, ref)[...] = np.asarray(value, np.int8).reshape(h, w, c)


def _padded_windows(x: np.ndarray, kernel, stride, padding, fill: int) -> np.ndarray:
    """(OH, OW, KH, KW, C) windows of an (H, W, C) map padded with ``fill``."""
    t, l, b, r = padding
    xp = np.pad(x.astype(np.int32), ((t, b), (l, r), (0, 0)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, kernel, axis=(0, 1))  # (OH', OW', C, KH, KW)
    return win[:: stride[0], :: stride[1]].transpose(0, 1, 3, 4, 2)


def conv2d(op: Conv2D, x: np.ndarray) -> np.ndarray:
    win = _padded_windows(x, op.kernel, op.stride, op.padding, op.ifm_zero_point)
    acc = np.einsum("hwklc,oklc->hwo", win - op.ifm_zero_point, op.weights.astype(np.int32), dtype=np.int64)
    return nx.requantize(acc, op.bias, op.multiplier, op.shift, op.ofm_zero_point, op.act_min, op.act_max)


def transpose_conv2d(op: TransposeConv2D, x: np.ndarray) -> np.ndarray:
    """TFLite's scatter form, not the phases the NPU runs: an independent specification."""
    acc = tc.scatter_accumulate(x, op.weights, op.ifm_zero_point, op.stride, op.pad_before, op.ofm.shape[:2])
    return nx.requantize(acc, op.bias, op.multiplier, op.shift, op.ofm_zero_point, op.act_min, op.act_max)


def depthwise_conv2d(op: DepthwiseConv2D, x: np.ndarray) -> np.ndarray:
    win = _padded_windows(x, op.kernel, op.stride, op.padding, op.ifm_zero_point)
    w = op.weights.astype(np.int32).transpose(1, 2, 0)  # (KH, KW, C)
    acc = np.einsum("hwklc,klc->hwc", win - op.ifm_zero_point, w, dtype=np.int64)
    return nx.requantize(acc, op.bias, op.multiplier, op.shift, op.ofm_zero_point, op.act_min, op.act_max)


def fully_connected(op: FullyConnected, x: np.ndarray) -> np.ndarray:
    rows = x.reshape(-1, x.shape[-1]).astype(np.int64) - op.ifm_zero_point
    acc = rows @ op.weights.astype(np.int64).T
    out = nx.fc_requantize(acc, op.bias, op.mantissa, op.exponent, op.ofm_zero_point, op.act_min, op.act_max)
    return out.reshape(op.ofm.shape)


def pool(op: Pool, x: np.ndarray) -> np.ndarray:
    kernel = nx.avg_pool2d if op.pool == "avg" else nx.max_pool2d
    return kernel(x[None], op.kernel, op.stride, tuple(op.padding), op.act_min, op.act_max)[0]


def mean(op: Mean, x: np.ndarray) -> np.ndarray:
    out = nx.mean(x, (0, 1), True, op.ifm_zero_point, op.ofm_zero_point, op.multiplier, op.shift)
    return np.clip(out, op.act_min, op.act_max).astype(np.int8)


def lut(op: Lut, x: np.ndarray) -> np.ndarray:
    return nx.lut_lookup(x, op.table)


def softmax(op: Softmax, x: np.ndarray) -> np.ndarray:
    return sm.run(x.reshape(-1, x.shape[-1]), op.table).reshape(x.shape)


def gather(op: Gather, x: np.ndarray) -> np.ndarray:
    """Pixels by their row and column maps: the definition, not the copies the NPU runs."""
    c = op.ofm.shape[2]
    return x[np.asarray(op.rows)][:, np.asarray(op.cols)][:, :, op.c0 : op.c0 + c]


def resize_bilinear(op: ResizeBilinear, x: np.ndarray) -> np.ndarray:
    """LiteRT's integer kernel on the whole map, not the depthwise passes the NPU runs."""
    return rz.reference(x, op.ofm.shape[:2], op.align_corners, op.half_pixel)


def add(op: Add, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    params = nx.AddParams(
        op.left_shift,
        op.ifm_multiplier,
        op.ifm_shift,
        op.ifm2_multiplier,
        op.ifm2_shift,
        op.ofm_multiplier,
        op.ofm_shift,
    )
    return nx.add(x, y, op.ifm_zero_point, op.ifm2_zero_point, op.ofm_zero_point, params, op.act_min, op.act_max)


def mul(op: Mul, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # a broadcast ifm2 is (1, 1, C): numpy broadcasting repeats it over H and W
    return nx.mul(x, y, op.ifm_zero_point, op.ifm2_zero_point, op.ofm_zero_point, op.multiplier, op.shift,
                  op.act_min, op.act_max)


KERNELS: dict[type, Callable[..., np.ndarray]] = {
    Conv2D: conv2d,
    TransposeConv2D: transpose_conv2d,
    DepthwiseConv2D: depthwise_conv2d,
    FullyConnected: fully_connected,
    Pool: pool,
    Mean: mean,
    Lut: lut,
    Softmax: softmax,
    Gather: gather,
    ResizeBilinear: resize_bilinear,
    Add: add,
    Mul: mul,
}


def run_op(op: NpuOp, regions: Regions) -> np.ndarray:
    """Execute one op: read its inputs from ``regions``, write and return its output."""
    out = KERNELS[type(op)](op, *(read_tensor(regions, r) for r in op.inputs))
    write_tensor(regions, op.ofm, out)
    return out


def allocate_regions(plan: PartitionPlan, inputs: Sequence[np.ndarray]) -> Regions:
    """Scratch and IO regions of a partition, inputs copied in (in the caller's layout; uint8
    inputs flipped to int8, as the generated C++ entry does: npu_byoc.ops.uint8)."""
    if len(inputs) != len(plan.inputs):
        raise ValueError(f"{plan.name}: expected {len(plan.inputs)} inputs, got {len(inputs)}")
    regions: Regions = {int(Region.SCRATCH): np.zeros(max(plan.scratch_bytes, 1), np.uint8),
                        int(Region.CONST): np.frombuffer(plan.constants, np.uint8)}  # constant operands
    for io, x in zip(plan.inputs, inputs):
        x = np.ascontiguousarray(x)
        if tuple(x.shape) != tuple(io.shape) or str(x.dtype) != io.dtype:
            raise ValueError(f"{plan.name}: input '{io.name}' must be {io.dtype} {io.shape}, got {x.dtype} {x.shape}")
        regions[io.ref.region] = to_npu(x).reshape(-1).view(np.uint8).copy()
    for io in plan.outputs:
        regions[io.ref.region] = np.zeros(io.ref.nbytes * plan.batch, np.uint8)
    return regions


def image_regions(plan: PartitionPlan, regions: Regions, n: int) -> Regions:
    """Image ``n`` of a batch: each IO region narrowed (a view) to that image's bytes."""
    out = dict(regions)
    for io in [*plan.inputs, *plan.outputs]:
        size = io.ref.nbytes
        out[io.ref.region] = regions[io.ref.region][n * size : (n + 1) * size]
    return out


def run_plan(plan: PartitionPlan, inputs: Sequence[np.ndarray], on_op=None) -> list[np.ndarray]:
    """Execute a whole partition, once per image of its batch; returns its outputs in their
    model shapes.

    ``on_op(op, output)`` is called after each op (per-layer comparisons use it)."""
    regions = allocate_regions(plan, inputs)
    for n in range(plan.batch):
        image = image_regions(plan, regions, n)
        for op in plan.ops:
            out = run_op(op, image)
            if on_op is not None:
                on_op(op, out)
    return read_outputs(plan, regions)


def run_stream(npu, plan: PartitionPlan, words, constants: bytes, inputs: Sequence[np.ndarray], **run_options):
    """The partition's command stream run by ``npu`` (stream machine, C model or RTL) once per
    image of its batch, as the generated entry point does; returns (regions, per-image statuses)
    and stops at the first image that fails. ``run_options`` go to ``npu.run`` (max_cycles)."""
    regions = allocate_regions(plan, inputs)
    regions[int(Region.CONST)] = np.frombuffer(constants, np.uint8).copy()
    statuses = []
    for n in range(plan.batch):
        statuses.append(npu.run(words, image_regions(plan, regions, n), **run_options))
        if not statuses[-1].ok:
            break
    return regions, statuses


def read_outputs(plan: PartitionPlan, regions: Regions) -> list[np.ndarray]:
    """The partition's outputs in their model shapes and dtypes (uint8 flipped back)."""
    return [to_model(regions[io.ref.region].view(np.int8).reshape(io.shape), io.dtype).copy() for io in plan.outputs]
