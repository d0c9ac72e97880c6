"""The quantized TFLite data-movement operators TVM's frontend refuses (npu_byoc/frontends/tflite_ops.py),
batch-None models (input_shapes) and declared output shapes, against LiteRT's reference
kernels (fixtures made by tools/make_models.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

import npu_byoc
from npu_byoc.cli import main
from npu_byoc.errors import ModelLoadError, UnsupportedModelError
from npu_byoc.frontends.load import TensorInfo, declare_output_shapes
from npu_byoc.frontends.tflite_ops import nearest_indices

from .conftest import model_path, reference

OPS = ["pad", "padv2", "strided_slice", "split", "split_v", "transpose", "squeeze",
       "resize_nearest_neighbor", "pack", "tile", "gather", "shape"]
TFLITE_OPS = {"strided_slice": "STRIDED_SLICE", "split_v": "SPLIT_V", "padv2": "PADV2",
              "resize_nearest_neighbor": "RESIZE_NEAREST_NEIGHBOR"}
# the squeeze fixture leaves batch and width open: its width is given by name
INPUT_SHAPES = {"squeeze": {"x": (1, 1, 8, 4)}}
NETWORKS = ["resnet_small_int8.tflite", "densenet_small_int8.tflite",
            "mobilenet_v1_batch_none_int8.tflite"]

_loaded: dict = {}
_built: dict = {}


def _name(op: str) -> str:
    return f"op_{op}_int8.tflite"


def _load(name: str, **kw):
    key = (name, repr(kw))
    if key not in _loaded:
        _loaded[key] = npu_byoc.load_model(model_path(name), **kw)
    return _loaded[key]


def _build(name: str, backend: str, **kw):
    key = (name, backend, repr(kw))
    if key not in _built:
        _built[key] = npu_byoc.build(_load(name, **kw), backend)
    return _built[key]


def _op_kwargs(op: str) -> dict:
    return {"input_shapes": INPUT_SHAPES[op]} if op in INPUT_SHAPES else {}


@pytest.mark.parametrize("op", OPS)
def test_op_imports_and_is_in_the_model(op):
    mod = _load(_name(op), **_op_kwargs(op))
    kinds = {o.op for o in npu_byoc.model_info(mod).ops}
    assert TFLITE_OPS.get(op, op.upper()) in kinds


@pytest.mark.parametrize("op", OPS)
def test_op_on_tvm_cpu_is_litert_exactly(op):
    """Each fixture returns the op applied to the int8 model input (first half of its outputs,
    exact on TVM's CPU: no float rounding is involved) and to a quantized conv's output."""
    model = _build(_name(op), "cpu", **_op_kwargs(op))
    ref = reference(_name(op))
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)
        direct = len(outputs) // 2
        assert len(got) == len(outputs)
        for g, w in zip(got[:direct], outputs[:direct]):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_op_after_npu_conv_is_litert_exactly(op):
    """Functional backend: the conv runs on the NPU (bit-exact), the op on the CPU, or on the
    NPU too where npu.gather copies it (RESIZE_NEAREST_NEIGHBOR, STRIDED_SLICE, SPLIT, GATHER).

    LiteRT's reference resolver has no int8 TILE (v3): that fixture's references come from
    LiteRT's optimized kernels, whose conv is not the reference one, so only its direct
    outputs (TILE alone, one kernel in both resolvers) are compared."""
    model = _build(_name(op), "functional", **_op_kwargs(op))
    assert model.plans, "the conv is offloaded"
    ref = reference(_name(op))
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)
        assert len(got) == len(outputs)
        if not ref["reference"].endswith("BUILTIN_REF"):
            got, outputs = got[: len(got) // 2], outputs[: len(outputs) // 2]
        for g, w in zip(got, outputs, strict=True):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def test_nearest_indices_follow_tflite_reference():
    # hand-derived from TFLite's GetNearestNeighbor: 4 -> 7
    assert nearest_indices(4, 7, False, False).tolist() == [0, 0, 1, 1, 2, 2, 3]  # floor(i*4/7)
    assert nearest_indices(4, 7, True, False).tolist() == [0, 1, 1, 2, 2, 3, 3]  # round(i*3/6)
    assert nearest_indices(4, 7, False, True).tolist() == [0, 0, 1, 2, 2, 3, 3]  # floor((i+.5)*4/7)
    assert nearest_indices(5, 2, True, False).tolist() == [0, 4]


def test_shape_chain_folds_at_import():
    """SHAPE -> STRIDED_SLICE -> PACK of a batch-None model become constants: no shape_of."""
    mod = _load(_name("shape"))
    assert "shape_of" not in mod["main"].script()
    info = npu_byoc.model_info(mod)
    assert info.inputs[0].shape == (1, 8, 8, 4)


# ------------------------------------------------------------------------------- networks
@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS)
def test_network_offloads_and_matches_litert(name):
    mod = _load(name)
    s = npu_byoc.coverage_report(mod).summary
    assert s["macs_offloaded"] / s["macs_total"] >= 0.999
    model = _build(name, "functional")
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)
        assert got[0].shape == outputs[0].shape
        np.testing.assert_array_equal(got[0], outputs[0])


def test_resnet_pads_fill_with_the_zero_point():
    """ZeroPadding2D pads with the int8 zero of its input, the form nn.pad takes in Relax."""
    mod = _load("resnet_small_int8.tflite")
    text = mod["main"].script()
    info = npu_byoc.model_info(mod)
    assert info.inputs[0].zero_point is not None
    assert f"pad_value={float(info.inputs[0].zero_point)}" in text


@pytest.mark.slow
def test_batch_two_equals_two_batch_one_runs():
    """input_shapes=2 fixes the open batch at 2; the SHAPE chain folds to batch 2."""
    name = "mobilenet_v1_batch_none_int8.tflite"
    two = _build(name, "cpu", input_shapes=2)
    one = _build(name, "cpu")
    x = np.concatenate([i[0] for i in reference(name)["inputs"][:2]])
    got = two.run([x])[0]
    assert got.shape == (2, 10)
    want = np.concatenate([one.run([x[k : k + 1]])[0] for k in range(2)])
    np.testing.assert_array_equal(got, want)


def test_open_dimension_needs_input_shapes():
    with pytest.raises(ModelLoadError, match=r"input 'x' has an open dimension 2 .*--input-shape x="):
        npu_byoc.load_model(model_path(_name("squeeze")))


@pytest.mark.parametrize(
    "shapes, message",
    [
        ({"nope": (1, 8, 8, 4)}, "names no input 'nope'"),
        ({"x": (1, 8, 4)}, "does not fit the declared shape"),
        ({"x": (1, 2, 8, 4)}, "does not fit the declared shape"),
        ({"x": "abc"}, "is not a list of integers"),
        (0, "batch size 0"),
        ("2", "must be a dict name -> shape or a batch size"),
    ],
)
def test_bad_input_shapes_are_one_line(shapes, message):
    with pytest.raises(ModelLoadError, match=message) as err:
        npu_byoc.load_model(model_path(_name("squeeze")), input_shapes=shapes)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------ declared shapes
def test_ds_cnn_returns_its_declared_output_shape():
    name = "ds_cnn_int8.tflite"
    mod = _load(name)
    assert npu_byoc.model_info(mod).outputs[0].shape == (1, 12)
    assert [int(d) for d in mod["main"].ret_ty.shape.values] == [1, 12]
    out = _build(name, "cpu").run(reference(name)["inputs"][0])[0]
    assert out.shape == (1, 12)


@pytest.mark.slow
def test_ds_cnn_declared_shape_through_the_npu_and_the_cli(tmp_path):
    name = "ds_cnn_int8.tflite"
    assert _build(name, "functional").run(reference(name)["inputs"][0])[0].shape == (1, 12)
    x = tmp_path / "x.npy"
    np.save(x, reference(name)["inputs"][0][0])
    assert main(["run", str(model_path(name)), "--input", str(x), "--output", str(tmp_path / "y.npy")]) == 0
    assert np.load(tmp_path / "y.npy").shape == (1, 12)


@pytest.mark.slow
def test_ds_cnn_runs_as_one_npu_partition_exact_with_litert():
    """DS-CNN (MLPerf Tiny KWS): its 25x5 global AVERAGE_POOL_2D (stride = window) runs on the
    NPU with the convolutions, the FC and the SOFTMAX — one partition, every operator — and
    the model output equals LiteRT's reference kernels on every recorded sample."""
    name = "ds_cnn_int8.tflite"
    report = npu_byoc.coverage_report(npu_byoc.partition_for_npu(_load(name)))
    assert report.summary["partitions"] == 1
    assert [o.op for o in report.ops if not o.offloaded] == []
    ref = reference(name)
    for backend in ("golden", "functional"):
        model = _build(name, backend)
        for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
            np.testing.assert_array_equal(model.run(inputs)[0], outputs[0].reshape(1, 12), err_msg=backend)


def test_declare_output_shapes_reshapes_a_relax_main():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 12), "int8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.reshape(x, (1, 1, 1, 12)))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    mod = declare_output_shapes(bb.get(), [TensorInfo("y", (1, 12), "int8")])
    assert [int(d) for d in mod["main"].ret_ty.shape.values] == [1, 12]
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    data = np.arange(12, dtype=np.int8).reshape(1, 12)
    np.testing.assert_array_equal(vm["main"](tvm.runtime.tensor(data)).numpy(), data)
    # a different element count is left alone
    same = declare_output_shapes(bb.get(), [TensorInfo("y", (1, 10), "int8")])
    assert [int(d) for d in same["main"].ret_ty.shape.values] == [1, 1, 1, 12]


# ------------------------------------------------------------------------------------- CLI
def test_cli_run_with_input_shape(tmp_path, capsys):
    name = _name("squeeze")
    ref = reference(name)
    x = tmp_path / "x.npy"
    np.save(x, ref["inputs"][0][0])
    out = tmp_path / "y.npz"
    rc = main(["run", str(model_path(name)), "--input", str(x), "--backend", "cpu",
               "--input-shape", "x=1,1,8,4", "--output", str(out)])
    assert rc == 0
    got = np.load(out)
    np.testing.assert_array_equal(got["output_0"], ref["outputs"][0][0])


def test_cli_input_shape_errors_are_one_line(capsys):
    rc = main(["coverage", str(model_path(_name("squeeze"))), "--input-shape", "x=1,1,8"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert "does not fit the declared shape" in err and "\n" not in err


@pytest.mark.parametrize("backend", ["cpu", "functional"])
def test_uint8_ops_are_litert_exactly(backend):
    """uint8 PAD, PADV2, TRANSPOSE, STRIDED_SLICE, RESIZE_NEAREST_NEIGHBOR, GATHER, PACK (a
    TFLite 1.x-style uint8 model): the same integer copies, zero point 128."""
    name = "ops_uint8.tflite"
    model = _build(name, backend)
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        for g, w in zip(model.run(inputs), outputs, strict=True):
            assert g.dtype == np.uint8 and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def _with_output_scale_doubled(path, op_index: int) -> bytes:
    """The model bytes with op ``op_index``'s output scale doubled (patched in place)."""
    import tflite

    data = bytearray(path.read_bytes())
    model = tflite.Model.GetRootAsModel(data, 0)
    sg = model.Subgraphs(0)
    q = sg.Tensors(int(sg.Operators(op_index).Outputs(0))).Quantization()
    pos = q._tab.Vector(q._tab.Offset(8))  # QuantizationParameters.scale: field 2 (vtable 8)
    scale = np.frombuffer(bytes(data[pos : pos + 4]), "<f4")[0]
    data[pos : pos + 4] = np.float32(scale * 2).astype("<f4").tobytes()
    return bytes(data)


def test_differing_quantization_is_refused_in_one_line(tmp_path):
    """LiteRT's TRANSPOSE copies integers: with another output scale the real values would
    change, so the import stops with the reason, naming the operator."""
    src = model_path(_name("transpose"))
    ops = [npu_byoc.model_info(_load(_name("transpose"))).ops[k].op for k in range(3)]
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(_with_output_scale_doubled(src, ops.index("TRANSPOSE")))
    with pytest.raises(UnsupportedModelError, match=r"TFLite TRANSPOSE: input and output quantization") as err:
        npu_byoc.load_model(bad)
    assert "\n" not in str(err.value)


def test_onnx_open_batch_and_declared_output(tmp_path):
    """ONNX: a symbolic batch is fixed (1 by default); the output takes its declared shape."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 1, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    mod = npu_byoc.load_model(path, input_shapes=3)
    info = npu_byoc.model_info(mod)
    assert info.inputs[0].shape == (3, 1, 1, 12) and info.outputs[0].shape == (3, 12)
    x = np.linspace(-1, 1, 36, dtype=np.float32).reshape(3, 1, 1, 12)
    (y,) = npu_byoc.build(mod, "cpu").run([x])
    np.testing.assert_array_equal(y, np.maximum(x, 0).reshape(3, 12))


def _slice(x, begin, end, strides, **masks):
    from npu_byoc.frontends.tflite_ops import _strided_slice

    opts = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0,
            "shrink_axis_mask": 0, "offset": False, **masks}
    return _strided_slice(opts, x, np.array(begin), np.array(end), np.array(strides))[0]


def test_strided_slice_masks_the_converter_never_emits():
    """TensorFlow's converter rewrites ellipsis / new-axis masks away (the fixture holds
    begin/end/shrink masks and negative strides); these are checked against slices written
    out by hand from TFLite's StridedSliceOptions definition."""
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    # shrink 0, ellipsis 1 (covers axes 1, 2), then 2:4 on the last axis
    got = _slice(x, [1, 0, 2], [2, 0, 4], [1, 1, 1], ellipsis_mask=0b010, shrink_axis_mask=0b001)
    np.testing.assert_array_equal(got, x[1, :, :, 2:4])
    # a new axis in front, then 1:2 of axis 0; the rest untouched
    got = _slice(x, [0, 1], [0, 2], [1, 1], new_axis_mask=0b01)
    np.testing.assert_array_equal(got, x.reshape(1, 2, 3, 4, 5)[:, 1:2])
    # offset: end is relative to begin
    got = _slice(x, [0, 1], [1, 2], [1, 1], offset=True)
    np.testing.assert_array_equal(got, x[0:1, 1:3])
    # a negative stride: an end mask runs to the front, a begin mask starts at the back
    got = _slice(x, [0, 0, 2], [0, 0, 0], [1, 1, -1], begin_mask=0b011, end_mask=0b111)
    np.testing.assert_array_equal(got, x[:, :, [2, 1, 0]])
    got = _slice(x, [0, 0, 2], [0, 0, 0], [1, 1, -1], begin_mask=0b111, end_mask=0b011)
    np.testing.assert_array_equal(got, x[:, :, [3, 2, 1]])
    with pytest.raises(ValueError, match="stride is 0"):
        _slice(x, [0], [1], [0])


def test_coverage_lists_the_folded_shape_chain():
    report = npu_byoc.coverage_report(_load("mobilenet_v1_batch_none_int8.tflite"))
    folded = {o.op: o.reason for o in report.ops if o.op in ("SHAPE", "STRIDED_SLICE", "PACK")}
    assert set(folded) == {"SHAPE", "STRIDED_SLICE", "PACK"}
    assert all(r == "constant: computed at import, no run-time work" for r in folded.values())


def test_huge_outputs_are_refused_before_any_array_is_made():
    from npu_byoc.frontends.tflite_ops import _pad, _tile

    x = np.zeros((1, 8, 8, 4), np.int8)
    with pytest.raises(ValueError, match="larger than"):
        _pad({"fill": 0}, x, np.array([[0, 0], [0, 10**9], [0, 0], [0, 0]]))
    with pytest.raises(ValueError, match="larger than"):
        _tile({}, x, np.array([1, 10**6, 10**6, 1]))


@pytest.mark.parametrize(
    "fn, opts, args, message",
    [
        ("_squeeze", {"squeeze_dims": [5]}, [np.zeros((1, 2))], "out of range"),
        ("_squeeze", {"squeeze_dims": [1]}, [np.zeros((1, 2))], "cannot squeeze"),
        ("_split", {"num_splits": 3}, [np.array([1]), np.zeros((1, 4))], "equal parts"),
        ("_split_v", {}, [np.zeros((1, 4)), np.array([1, 1]), np.array([1])], "do not add up"),
        ("_gather", {"axis": 1, "batch_dims": 0}, [np.zeros((1, 4)), np.array([4])], "outside"),
        ("_pad", {"fill": 0}, [np.zeros((1, 4)), np.array([[0, 0]])], "do not fit"),
        ("_resize_nearest", {"align_corners": False, "half_pixel_centers": False},
         [np.zeros((1, 2, 2, 1)), np.array([0, 3])], "positive size"),
    ],
)
def test_bad_attributes_are_value_errors(fn, opts, args, message):
    """The converter turns these into one-line import errors naming the op."""
    import npu_byoc.frontends.tflite_ops as T

    with pytest.raises(ValueError, match=message):
        getattr(T, fn)(opts, *args)


# ------------------------------------------------------------------------ sequences (Conv1D)
def test_space_to_batch_and_back_by_hand():
    """SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND as TensorFlow defines them, worked by hand on a
    4-step sequence: block 2 sends the even steps to batch 0 and the odd ones to batch 1; the
    padding is the zero point (here 9); BATCH_TO_SPACE_ND with the same crops undoes it."""
    from npu_byoc.frontends.tflite_ops import _batch_to_space, _space_to_batch

    x = np.arange(4).reshape(1, 4, 1)
    (y,) = _space_to_batch({"fill": 9}, x, [2], [[0, 0]])
    assert y[..., 0].tolist() == [[0, 2], [1, 3]]
    (y,) = _space_to_batch({"fill": 9}, x, [2], [[1, 1]])
    assert y[..., 0].tolist() == [[9, 1, 3], [0, 2, 9]]
    (back,) = _batch_to_space({}, y, [2], [[1, 1]])
    assert np.array_equal(back, x)
    img = np.arange(2 * 6 * 4 * 3).reshape(2, 6, 4, 3)  # 2-D blocks, batch 2, channels
    (s,) = _space_to_batch({"fill": -1}, img, [3, 2], [[0, 0], [1, 1]])
    assert s.shape == (12, 2, 3, 3)
    (t,) = _batch_to_space({}, s, [3, 2], [[0, 0], [1, 1]])
    assert np.array_equal(t, img)


def test_conv1d_model_runs_and_matches_litert():
    """conv1d_cnn_int8 (batch None): TensorFlow's converter writes each Conv1D as EXPAND_DIMS ->
    CONV_2D -> RESHAPE and the dilated one inside SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND, which
    TVM's import refused, so the model did not load. Now every conv, the pool, the mean over
    the sequence, the dense layer and the softmax run on the NPU ([1, L, C] is one row of L
    pixels); the block rearrangements stay on the CPU with their reason (batch 2 inside). The
    model output equals LiteRT's reference kernels exactly, on golden and the C model."""
    name = "conv1d_cnn_int8.tflite"
    report = npu_byoc.coverage_report(_load(name))
    compute = ("CONV_2D", "MAX_POOL_2D", "ADD", "MEAN", "FULLY_CONNECTED", "SOFTMAX")
    assert all(o.offloaded for o in report.ops if o.op in compute)
    cpu = [o for o in report.ops if not o.offloaded]
    assert "SPACE_TO_BATCH_ND" in {o.op for o in cpu}
    assert {o.op for o in cpu} <= {"SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "EXPAND_DIMS", "RESHAPE"}
    assert all("batches [1, 2]" in o.reason for o in cpu)  # the dilated conv's batch of 2, inside
    assert report.summary["macs_offloaded"] == report.summary["macs_total"]
    ref = reference(name)
    for backend in ("golden", "functional"):
        for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
            np.testing.assert_array_equal(_build(name, backend).run(inputs)[0], outputs[0])


def test_dense_on_a_sequence_loads_and_matches_litert():
    """dense_seq_int8 (batch None): a Dense on a 3-D tensor is Tensordot, whose shape arithmetic
    (SHAPE -> GATHER -> REDUCE_PROD -> PACK / CONCATENATION) made TVM's import fail with a
    KeyError; REDUCE_PROD and CONCATENATION of constants now fold at import. The conv, the
    Dense (a fully connected layer over the 4 rows), its bias ADD and the TRANSPOSE (npu.transpose)
    run on the NPU; the output equals LiteRT's reference kernels."""
    name = "dense_seq_int8.tflite"
    report = npu_byoc.coverage_report(_load(name))
    where = {o.op: (o.offloaded, o.reason) for o in report.ops if o.op not in ("SHAPE", "GATHER", "PACK", "STRIDED_SLICE",
                                                                               "REDUCE_PROD", "CONCATENATION")}
    assert where["FULLY_CONNECTED"][0] and where["CONV_2D"][0] and where["ADD"][0] and where["TRANSPOSE"][0]
    assert all(o.reason.startswith("constant") for o in report.ops if o.op in ("GATHER", "REDUCE_PROD"))
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        np.testing.assert_array_equal(_build(name, "golden").run(inputs)[0], outputs[0])
