"""Shared fixtures: the committed model fixtures, imported and partitioned once per session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm

import npu_byoc

MODELS = Path(__file__).parent / "fixtures" / "models"
TFLITE_MODELS = ["tiny_cnn_int8.tflite", "mobilenet_v2_int8.tflite"]
ONNX_MODELS = ["tiny_cnn_qdq.onnx"]
ALL_MODELS = TFLITE_MODELS + ONNX_MODELS


def op_expected(plan, k: int, tensor_of):
    """The reference runtime's value of ``plan.ops[k]``'s output (``tensor_of(name, hwc)``
    looks a tensor up by name); for an interleave, the partition input; for a deinterleave, its
    producer's; for a concatenation's copy, its channel slice of the concatenation (read whole
    by the ops after it, so some op input names it)."""
    op = plan.ops[k]
    if k in dict(plan.interleaves):  # an NCHW input laid out NHWC: the input itself
        return tensor_of(plan.inputs[dict(plan.interleaves)[k]].ref.name, op.ofm.shape)
    if k in dict(plan.deinterleaves):  # an NCHW output written as planes: its producer's output
        return op_expected(plan, k - 1, tensor_of)
    if k not in dict(plan.copy_ops):
        return tensor_of(op.name, op.ofm.shape)
    whole = next(r for o in plan.ops for r in o.inputs if r.name == plan.layers[k] and not r.pitch)
    if whole.layout == "NHWC" and op.ofm.box_strides is not None:  # a box of rows or columns (a class token)
        flat = np.ascontiguousarray(tensor_of(whole.name, whole.shape)).ravel()[op.ofm.offset - whole.offset:]
        return np.lib.stride_tricks.as_strided(flat, op.ofm.shape, op.ofm.strides)
    c0 = (op.ofm.offset - whole.offset) // op.ofm.strides[2]
    return tensor_of(whole.name, whole.shape)[..., c0 : c0 + op.ofm.shape[2]]


def model_path(name: str) -> Path:
    return MODELS / name


def reference(name: str) -> dict:
    """The reference runtime's inputs and outputs recorded by tools/make_models.py, one
    model-shaped array per sample: {"inputs": [[x0], [x1], ...], "outputs": [[y0], ...]}."""
    data = np.load(MODELS / (Path(name).stem + ".npz"))
    n = data["input_0"].shape[0]
    def numbered(prefix: str) -> list[str]:  # input_2 before input_10
        return sorted((k for k in data.files if k.startswith(prefix)), key=lambda k: int(k[len(prefix):]))

    ins, outs = numbered("input_"), numbered("output_")
    return {
        "inputs": [[data[k][i : i + 1] for k in ins] for i in range(n)],
        "outputs": [[data[k][i : i + 1] for k in outs] for i in range(n)],
        "reference": str(data["reference"]),
    }


def run_phases(op, x: np.ndarray) -> np.ndarray:
    """A phased op (npu_ops.Phased, its input in region IO and its output in IO + 1) run phase
    by phase by the golden model, each phase through its strided boxes; the output bytes never
    written stay 0x55, so a gap between the phases shows."""
    from npu_byoc.arch.isa import Region
    from npu_byoc.runtime import golden

    regions = {int(Region.IO): np.asarray(x, np.int8).view(np.uint8).ravel().copy(),
               int(Region.IO) + 1: np.full(op.ofm.nbytes, 0x55, np.uint8)}  # fmt: skip
    for phase in op.phases:
        golden.run_op(phase, regions)
    return golden.read_tensor(regions, op.ofm)


_BUILT: dict = {}


def built(name: str, backend: str):
    """The committed model ``name`` imported and built for ``backend``, once per session."""
    if (name, backend) not in _BUILT:
        _BUILT[name, backend] = npu_byoc.build(npu_byoc.load_model(model_path(name)), backend)
    return _BUILT[name, backend]


def assert_equals_reference(name: str, backend: str) -> None:
    """Every recorded sample of ``name`` run on ``backend`` gives the reference runtime's
    outputs exactly, every output."""
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = built(name, backend).run(inputs)
        assert len(got) == len(outputs)
        for g, want in zip(got, outputs):
            np.testing.assert_array_equal(g, np.asarray(want).reshape(g.shape))


def onnx_tensor_lookup(mod, name: str):
    """``tensor_of(layer, hwc)``: onnxruntime's recorded quantized tensor (NAME.tensors.npz)
    of an NPU layer (named after its ONNX node, whose QuantizeLinear output it is) or of a
    partition input, in the NPU's H x W x C view."""
    import onnx

    from npu_byoc.frontends.load import model_info

    graph = onnx.load(MODELS / name).graph
    t = np.load(MODELS / (Path(name).stem + ".tensors.npz"))
    consumers: dict = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    nodes = {n.name: n for n in graph.node}

    def quantized_output(node):
        out = node.output[0]
        while node.op_type != "QuantizeLinear":
            node = next((c for c in consumers[out] if c.op_type == "QuantizeLinear"), consumers[out][0])
            out = node.output[0]
        return out

    source = {v: o.name for o in model_info(mod).ops for v in o.vars}

    def tensor_of(ref_name, hwc):
        x = t[quantized_output(nodes[source.get(ref_name, ref_name)])]
        return x[0].transpose(1, 2, 0) if x.ndim == 4 else x.reshape(hwc)

    return tensor_of


_imported: dict = {}
_partitioned: dict = {}


@pytest.fixture(scope="session")
def imported():
    def get(name: str):
        if name not in _imported:
            _imported[name] = npu_byoc.load_model(model_path(name))
        return _imported[name]

    return get


_plans: dict = {}


@pytest.fixture(scope="session")
def plans(partitioned, imported):
    """The lowered PartitionPlans of a fixture model, by partition name."""
    from npu_byoc.codegen.lower import lower_module

    def get(name: str, exclude: tuple[str, ...] = ()):
        """``exclude``: NPU operations kept on the CPU (partition_for_npu's), e.g. SPLIT_TINY."""
        key = (name, tuple(exclude))
        if key not in _plans:
            mod = partitioned(name) if not exclude else npu_byoc.partition_for_npu(imported(name), exclude=exclude)
            _plans[key] = lower_module(mod)
        return _plans[key]

    return get


# tiny_cnn with its concatenation on the CPU: two partitions, the body and a small head
# (avg pool, mean, fully connected) -- the short streams the ISA / RTL error tests mutate
SPLIT_TINY = ("npu.concat",)


@pytest.fixture(scope="session")
def partitioned(imported):
    def get(name: str):
        if name not in _partitioned:
            _partitioned[name] = npu_byoc.partition_for_npu(imported(name))
        return _partitioned[name]

    return get


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the golden-text files (generated C) instead of comparing with them",
    )


@pytest.fixture
def update_golden(request) -> bool:
    return bool(request.config.getoption("--update-golden"))


def check_onnx_fixture(name: str, *, lsb: int, cpu_exact: bool = False, layer_lsb: int | None = 1):
    """An onnxruntime fixture on the NPU, against the outputs tools/make_models.py recorded:
    golden == the C model, within ``lsb`` LSB of onnxruntime (TVM's CPU build exactly equal to
    it when ``cpu_exact``); the whole partition on the RTL equal to golden with the cycle model
    exact, and every layer within ``layer_lsb`` of TVM's CPU build fed the same input."""
    import json

    import npu_byoc
    from npu_byoc.runtime.cosim import cosim

    mod = npu_byoc.load_model(model_path(name))
    ref = reference(name)
    scale = json.loads(str(np.load(model_path(name).with_suffix(".npz"))["meta"]))["outputs"][0]["scale"]
    golden, functional = npu_byoc.build(mod, "golden"), npu_byoc.build(mod, "functional")
    cpu = npu_byoc.build(mod, "cpu") if cpu_exact else None
    for x, y in zip(ref["inputs"], ref["outputs"]):
        got = golden.run(x)[0]
        assert np.array_equal(got, functional.run(x)[0])
        assert np.abs(got.astype(np.float64) - y[0]).max() / scale <= lsb + 1e-5
        if cpu is not None:
            assert np.abs(cpu.run(x)[0].astype(np.float64) - y[0]).max() / scale <= 1e-5
    rep = cosim(model_path(name), ref["inputs"][0], ref["outputs"][0])
    assert rep.summary["max_diff_golden"] == 0 and rep.summary["cycle_model_exact"]
    if layer_lsb is not None:  # (in the model's order: compare and cosim reorder reordered features)
        assert all(layer.max_diff_tvm is not None and layer.max_diff_tvm <= layer_lsb for layer in rep.layers)
    return mod


def npu_layers_against_litert(name: str):
    """Every NPU op of the TFLite fixture ``name`` run on the golden model, fed LiteRT's own
    input tensors where LiteRT recorded them (NAME.tensors.npz) and the NPU's own outputs
    elsewhere (copies the compiler adds): (op, its output, LiteRT's value or None)."""
    from npu_byoc.arch.isa import Region
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.frontends.load import model_info
    from npu_byoc.runtime import golden

    mod = npu_byoc.load_model(model_path(name))
    recorded = np.load(model_path(name).with_name(name.replace(".tflite", ".tensors.npz")))
    tensors = {k.split(";")[0]: recorded[k] for k in recorded.files if k != "__index__"}
    info = model_info(mod)
    source = {v: o.name for o in info.ops for v in o.vars}
    source.update({t.name.replace(":", "_"): t.name for t in info.inputs})

    layout = "NHWC"  # how the partition reads its tensors' axes (an NCHW one: [N, C, L], [N, C, H, W])

    def tensor_of(ref_name, hwc, strides=None):
        t = tensors[source.get(ref_name, ref_name)]
        if layout == "NCHW" and t.ndim in (3, 4):
            t = np.moveaxis(t, 1, -1)
        if strides is None:
            return t.reshape(hwc)
        if 0 not in strides:  # a strided view of the whole tensor (a MEAN over channels reads it transposed)
            flat = np.ascontiguousarray(t).ravel()
            return np.lib.stride_tricks.as_strided(flat, hwc, tuple(s * flat.itemsize for s in strides))
        # a broadcast operand: a stride-0 view of its smaller tensor (ops.lowering.broadcast_view)
        return np.broadcast_to(t.reshape(tuple(1 if s == 0 else d for d, s in zip(hwc, strides))), hwc)

    out = []
    part = npu_byoc.partition_for_npu(mod)
    plans = lower_module(part)
    for name_, plan in plans.items():
        layout = "NCHW" if "NCHW" in [t.ref.layout for t in (*plan.inputs, *plan.outputs)] else "NHWC"
        regions = golden.allocate_regions(plan, [np.zeros(io.shape, np.int8) for io in plan.inputs])
        # a partition input another partition produced: that partition's output layer, by region
        # (parameters' names repeat: "lv")
        produced = _inputs_from_partitions(part, plans, name_)
        params = {io.ref.name for io in plan.inputs}
        for k, op in enumerate(plan.ops):
            fed = True
            for r in op.inputs:
                if r.region == Region.CONST:
                    continue
                key = produced.get(r.region, r.name) if r.name in params else r.name
                if source.get(key, key) in tensors:
                    golden.write_tensor(regions, r, tensor_of(key, r.shape, r.box_strides))
                elif r.name in params:  # a partition input named after its parameter: no value here
                    fed = False
            got = golden.run_op(op, regions)
            try:
                want = op_expected(plan, k, tensor_of) if fed else None
            except KeyError:  # a copy the compiler added: LiteRT has no such tensor
                want = None
            out.append((op, got, want))
    return out


def _inputs_from_partitions(part, plans: dict, name: str) -> dict:
    """{input region of partition ``name``: the layer (LiteRT tensor) of the other partition's
    output it receives}, through the main function's calls and tuple items."""
    from tvm import relax

    produced, calls, args = {}, {}, None
    for block in part["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar) and v.op.name_hint in plans:
                calls[b.var] = plans[v.op.name_hint]
                if len(calls[b.var].outputs) == 1:
                    produced[b.var] = calls[b.var].outputs[0].ref.name
                if v.op.name_hint == name:
                    args = list(v.args)
            elif isinstance(v, relax.TupleGetItem) and v.tuple_value in calls:
                produced[b.var] = calls[v.tuple_value].outputs[v.index].ref.name
    if args is None:
        return {}
    return {io.ref.region: produced[a] for io, a in zip(plans[name].inputs, args) if a in produced}
