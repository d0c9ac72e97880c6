"""The golden model: typed NPU ops executed on whole tensors, integer only.

This is the executable specification of what each NPU operation computes (docs/numerics.md
states the formulas; npu_byoc.arch.numerics implements them; each op's kernel is its module's,
npu_byoc.ops.<op>.golden_<op>, dispatched through the registry's NPU_OPS). The command-stream machine
(npu_byoc.runtime.machine), the C functional model and the RTL must equal it bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..codegen.lower import PartitionPlan
from ..ops.npu_ops import NpuOp, TensorRef
from ..ops.registry import NPU_OPS
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


# Each typed op's semantics live with its op (npu_byoc.ops.<op>: golden_<op>), found through the
# registry. A dict, so a test can swap one kernel (a fault injected into the golden model).
KERNELS: dict[type, Callable[..., np.ndarray]] = {t: spec.golden for t, spec in NPU_OPS.items()}


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
