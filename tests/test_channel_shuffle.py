"""Channel shuffle on the NPU (npu.channel_shuffle, npu_byoc.ops.channel_shuffle): the rank-5
reshape -> transpose -> reshape canonicalised to one take along the channel axis, run as one
identity copy between strided boxes per group, no opcode of its own.

* the permutation of the chain, hand-derived, in ONNX's NCHW and TFLite's NHWC forms;
* channel_shuffle_qdq.onnx (ShuffleNetV2's unit) runs as one NPU partition, every operator on
  the NPU (its numerics and the RTL: tests/test_transformer_fixtures.py, check_onnx_fixture);
* channel_shuffle_int8.tflite (Keras, NHWC, 3 groups) runs whole on the NPU, LiteRT's outputs
  exactly on golden, C model and RTL (slow), and LiteRT's tensor at every layer;
* Relax modules: the int8 NHWC chain and the QDQ NCHW chain, 2 to 8 groups, against TVM's CPU
  build (exactly: the bytes are copied) and numpy's definition of the shuffle;
* a shuffle of more groups than the copies the NPU runs stays on the CPU with its reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax
from tvm.relax import op as R

import npu_byoc
from npu_byoc.ops.channel_shuffle import shuffle_index
from npu_byoc.partition.pipeline import partition_log

from .conftest import assert_equals_reference, model_path, npu_layers_against_litert

_built: dict = {}


def _build(key, make, backend: str):
    if (key, backend) not in _built:
        _built[key, backend] = npu_byoc.build(make(), backend)
    return _built[key, backend]


def test_shuffle_permutation_hand_derived():
    # ONNX: [1, 6, 2, 2] -> [1, 2, 3, 2, 2] -> (0, 2, 1, 3, 4): out channel b*2 + a reads a*3 + b
    axis, index = shuffle_index((1, 6, 2, 2), (1, 2, 3, 2, 2), (0, 2, 1, 3, 4), (1, 6, 2, 2))
    assert axis == 1 and list(index) == [0, 3, 1, 4, 2, 5]
    # TFLite: [1, 2, 2, 6] -> [1, 2, 2, 3, 2] -> (0, 1, 2, 4, 3): out channel b*3 + a reads a*2 + b
    axis, index = shuffle_index((1, 2, 2, 6), (1, 2, 2, 3, 2), (0, 1, 2, 4, 3), (1, 2, 2, 6))
    assert axis == 3 and list(index) == [0, 2, 4, 1, 3, 5]
    # a rank-5 transpose that moves H and W together is no permutation of one axis
    assert shuffle_index((1, 4, 2, 2), (1, 4, 2, 2, 1), (0, 1, 3, 2, 4), (1, 4, 2, 2)) is None



def test_a_model_file_s_huge_shape_is_not_materialised():
    """Shapes are the model file's: a 2^42-element "shuffle" is declined, not allocated (it
    raised MemoryError: 32 TiB)."""
    assert shuffle_index((1, 2**20, 2**20, 4), (1, 2**20, 2**20, 2, 2), (0, 1, 2, 4, 3), (1, 2**20, 2**20, 4)) is None

def test_onnx_channel_shuffle_fixture_is_one_npu_partition():
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path("channel_shuffle_qdq.onnx")))
    assert all(o.offloaded for o in report.ops), [(o.name, o.reason) for o in report.ops if not o.offloaded]
    assert report.summary["partitions"] == 1
    shuffle = [o.pattern for o in report.ops if o.op in ("Reshape", "Transpose")]
    assert shuffle == ["npu.channel_shuffle"] * 3


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
def test_tflite_channel_shuffle_is_litert_exactly(backend):
    """channel_shuffle_int8.tflite (Keras: reshape to [N, H, W, 3, 8], Permute, reshape) runs
    whole on the NPU and gives LiteRT's reference kernels' outputs exactly."""
    name = "channel_shuffle_int8.tflite"
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(name)))
    assert all(o.offloaded for o in report.ops) and report.summary["partitions"] == 1
    assert [o.pattern for o in report.ops if o.op in ("RESHAPE", "TRANSPOSE")] == ["npu.channel_shuffle"] * 3
    assert_equals_reference(name, backend)


def test_tflite_channel_shuffle_layers_are_litert_exactly():
    """Each NPU layer, fed LiteRT's own input tensor, gives LiteRT's output tensor."""
    layers = npu_layers_against_litert("channel_shuffle_int8.tflite")
    for op, got, want in layers:
        np.testing.assert_array_equal(got, want, err_msg=op.name)
    assert "channel_shuffle" in [op.kind for op, _, _ in layers]


def _shuffle(shape, groups: int, layout: str, qdq: bool, mid_scale: float = 0.04):
    """x int8 ``shape`` -> (QDQ or int8) reshape to rank 5 -> swap the group axes -> reshape
    (the QDQ form's transpose quantized with ``mid_scale``)."""
    if layout == "NHWC":
        n, h, w, c = shape
        mid, axes = (n, h, w, groups, c // groups), (0, 1, 2, 4, 3)
    else:
        n, c, h, w = shape
        mid, axes = (n, groups, c // groups, h, w), (0, 2, 1, 3, 4)
    scale, zp = relax.const(0.04, "float32"), relax.const(-5, "int8")
    x = relax.Var("x", relax.TensorType(list(shape), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            mids = (scale, relax.const(mid_scale, "float32"), scale)  # each op's output scale
            for make, s_in, s_out in zip((lambda t: R.reshape(t, mid), lambda t: R.permute_dims(t, list(axes)),
                                          lambda t: R.reshape(t, shape)), (scale, *mids[:2]), mids):  # fmt: skip
                if qdq:  # as ONNX QDQ writes it: each op between a dequantize and a quantize
                    d = bb.emit(R.dequantize(y, s_in, zp, axis=1))
                    y = bb.emit(R.quantize(bb.emit(make(d)), s_out, zp, axis=1, out_dtype="int8"))
                else:
                    y = bb.emit(make(y))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    return bb.get()


def _numpy_shuffle(x, groups: int, layout: str):
    if layout == "NHWC":
        n, h, w, c = x.shape
        return x.reshape(n, h, w, groups, c // groups).transpose(0, 1, 2, 4, 3).reshape(x.shape)
    n, c, h, w = x.shape
    return x.reshape(n, groups, c // groups, h, w).transpose(0, 2, 1, 3, 4).reshape(x.shape)


CASES = [((1, 5, 3, 12), 2, "NHWC", False), ((2, 4, 4, 24), 8, "NHWC", False), ((1, 12, 3, 5), 3, "NCHW", True),
         ((1, 16, 4, 2), 4, "NCHW", False)]  # fmt: skip


@pytest.mark.parametrize("backend", ["golden", "functional"])
@pytest.mark.parametrize("shape,groups,layout,qdq", CASES,
                         ids=[f"{c[2]}-g{c[1]}-{'qdq' if c[3] else 'int8'}" for c in CASES])  # fmt: skip
def test_channel_shuffle_is_tvm_cpu_exactly(shape, groups, layout, qdq, backend):
    key = (shape, groups, layout, qdq)
    make = lambda: _shuffle(shape, groups, layout, qdq)  # noqa: E731
    log = partition_log(npu_byoc.partition_for_npu(make()))
    shuffles = [d.accepted for d in log if d.pattern == "npu.channel_shuffle"]
    assert shuffles == [True], [(d.pattern, d.reason) for d in log]
    x = np.random.default_rng(groups).integers(-128, 128, shape).astype("int8")
    model = _build(key, make, backend)
    assert model.plans, "the shuffle is offloaded"
    got = model.run([x])[0]
    np.testing.assert_array_equal(got, _build(key, make, "cpu").run([x])[0])
    np.testing.assert_array_equal(got, _numpy_shuffle(x, groups, layout))


def test_shuffle_of_more_groups_than_copies_stays_on_the_cpu_with_its_reason():
    # 32 groups of 1 channel... of 2: the permutation has period 32, more than the copies searched
    log = partition_log(npu_byoc.partition_for_npu(_shuffle((1, 2, 2, 64), 32, "NHWC", False)))
    (d,) = [d for d in log if d.pattern == "npu.channel_shuffle"]
    assert not d.accepted and "arithmetic runs" in d.reason


def test_a_requantizing_chain_is_not_a_shuffle():
    """A chain whose transpose requantizes (another scale in the middle) rounds the values:
    not a copy, so not rewritten into one (the rank-5 ops stay on the CPU)."""
    log = partition_log(npu_byoc.partition_for_npu(_shuffle((1, 12, 3, 5), 3, "NCHW", True, mid_scale=0.1)))
    assert not [d for d in log if d.pattern == "npu.channel_shuffle"]
    assert any(not d.accepted and "rank 5" in d.reason for d in log if d.pattern == "npu.transpose")
