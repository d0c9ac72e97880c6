"""STRIDED_SLICE of any rank on the NPU (npu.gather): npu_byoc's TFLite import writes every
STRIDED_SLICE as ``reshape(take(reshape(x, [N]), constant indices), shape)`` with the index map
numpy's basic indexing gives (begin/end masks, strides, shrink_axis: the frontend's
``_strided_slice``). A tensor that is not 4-D is the H x W x C map the NPU stores it as: a
transformer's class token ``x[:, 0, :]`` of [1, T, C] is one pixel of a T-pixel row.

Each form below, built as that Relax module, runs on the NPU as one gather partition and gives
TVM's CPU build of the same module exactly; the coverage report says so, and a take the NPU
cannot copy stays on the CPU and is counted there with its reason.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

import npu_byoc
from npu_byoc.frontends.tflite_ops import _strided_slice
from npu_byoc.ops.gather_copies import decompose


def _slice_opts(**masks) -> dict:
    return {"offset": False, "begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0,
            "shrink_axis_mask": 0, **masks}  # fmt: skip


# (input shape, begin, end, strides, masks): STRIDED_SLICE forms TensorFlow's converter writes
FORMS = {
    "class_token": ((1, 50, 32), [0, 0, 0], [1, 1, 32], [1, 1, 1], dict(begin_mask=5, end_mask=5, shrink_axis_mask=2)),
    "last_token": ((1, 12, 16), [0, -1, 0], [1, 0, 16], [1, 1, 1], dict(begin_mask=5, end_mask=5, shrink_axis_mask=2)),
    "token_stride": ((1, 12, 16), [0, 2, 0], [1, 10, 16], [1, 2, 1], dict(begin_mask=5, end_mask=5)),
    "feature_run": ((1, 8, 32), [0, 0, 8], [1, 8, 24], [1, 1, 1], dict(begin_mask=3, end_mask=3)),
    "row_of_map": ((1, 6, 5, 8), [0, 2, 0, 0], [1, 3, 5, 8], [1, 1, 1, 1], dict(begin_mask=13, end_mask=13, shrink_axis_mask=2)),
    "features_2d": ((1, 64), [0, 16], [1, 48], [1, 1], dict(begin_mask=1, end_mask=1)),
    "vector": ((64,), [8], [40], [1], {}),
    "ellipsis": ((1, 6, 16), [0, 4], [0, 12], [1, 1], dict(ellipsis_mask=1)),
    "new_axis": ((1, 8, 16), [0, 3, 0, 0], [1, 4, 0, 16], [1, 1, 1, 1], dict(begin_mask=9, end_mask=9, new_axis_mask=4, shrink_axis_mask=2)),
}


def _gather_module(in_shape, index: np.ndarray) -> tvm.IRModule:
    """The import's form: reshape(take(reshape(int8 x, [N]), indices), index.shape)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(in_shape, "int8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            flat = bb.emit(relax.op.reshape(x, [int(np.prod(in_shape))]))
            taken = bb.emit(relax.op.take(flat, relax.const(index.ravel().astype("int32")), 0, "clip"))
            y = bb.emit_output(relax.op.reshape(taken, index.shape))
        bb.emit_func_output(y)
    return bb.get()


def _index(form: str) -> tuple[tuple[int, ...], np.ndarray]:
    shape, begin, end, strides, masks = FORMS[form]
    return shape, _strided_slice(_slice_opts(**masks), np.arange(int(np.prod(shape))).reshape(shape), begin, end, strides)[0]


def _cpu(mod: tvm.IRModule, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.parametrize("form", list(FORMS))
def test_strided_slice_runs_on_the_npu_as_tvms_cpu_build(form):
    shape, index = _index(form)
    mod = _gather_module(shape, index)
    part = npu_byoc.partition_for_npu(mod)
    report = npu_byoc.coverage_report(part)
    assert report.summary["partitions"] == 1 and report.summary["ops_offloaded"] == report.summary["ops_total"]
    assert {o.pattern for o in report.ops} == {"npu.gather"}
    x = np.random.default_rng(len(form)).integers(-128, 128, shape, dtype=np.int8)
    got = npu_byoc.build(part, "functional").run([x])[0]
    want = _cpu(mod, x)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_class_token_is_one_pixel_of_the_token_row():
    """x[:, 0, :] of [1, 50, 32] (NHWC: 50 pixels of 32 channels) is pixel 0, one copy; read as
    an NCHW sequence (32 channels of 50 pixels stored channel-last) it is channel 0 of every
    pixel, not a copy of whole pixels: refused, and the reason says so."""
    shape, index = _index("class_token")
    g = decompose(index, shape, "NHWC")
    assert (g.rows, g.cols, g.c0) == ((0,), (0,), 0)
    with pytest.raises(ValueError, match="not a copy of whole pixels"):
        decompose(index, shape, "NCHW")
    with pytest.raises(ValueError, match="batch"):
        decompose(np.arange(2 * 3 * 4).reshape(2, 3, 4)[:, 0, :], (2, 3, 4), "NHWC")
