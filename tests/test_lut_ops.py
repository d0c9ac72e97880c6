"""int8 -> int8 elementwise functions on the NPU's LUT unit (npu_byoc/ops/lut.py).

TFLite: one single-op fixture per function made by TensorFlow's converter
(tools/make_models.py; the op on the int8 input and after a quantized conv; sample 0 feeds
each of the 256 int8 values once), against LiteRT's reference kernels (BUILTIN_REF) at 0 LSB.
ONNX: hand-written QDQ branches (lut_ops_qdq.onnx), against onnxruntime and against the float
formula written out here in numpy.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import npu_byoc
from npu_byoc.ops import lut as lut_ops
from npu_byoc.ops.lut_tables import hard_swish_params
from npu_byoc.ops.records import numerics_for
from npu_byoc.ops.table import PATTERNS_BY_NAME
from npu_byoc.ops.composites import composite_functions, extract_composite, npu_functions
from npu_byoc.ops.records import QLut, QTensor

from .conftest import MODELS, model_path, reference

# fixture op -> (TFLite operator, NPU composite)
TFLITE = {
    "logistic": ("LOGISTIC", "npu.sigmoid"),
    "tanh": ("TANH", "npu.tanh"),
    "exp": ("EXP", "npu.exp"),
    "hard_swish": ("HARD_SWISH", "npu.hard_swish"),
    "leaky_relu": ("LEAKY_RELU", "npu.leaky_relu"),
    "elu": ("ELU", "npu.elu"),
    "neg": ("NEG", "npu.neg"),
    "sin": ("SIN", "npu.sin"),
    "square": ("SQUARE", "npu.square"),
    "add_scalar": ("ADD", "npu.add_scalar"),
    "sub_scalar": ("SUB", "npu.sub_scalar"),
    "mul_scalar": ("MUL", "npu.mul_scalar"),
    "sqrt": ("SQRT", "npu.sqrt"),
    "log": ("LOG", "npu.log"),
    "abs": ("ABS", "npu.abs"),
    "relu": ("RELU", "npu.relu"),
    "relu6": ("RELU6", "npu.relu"),
    "relu_n1_to_1": ("RELU_N1_TO_1", "npu.relu"),
    "quantize": ("QUANTIZE", "npu.requantize"),
    "gelu": ("GELU", "npu.gelu"),  # TVM refuses it quantized: npu_byoc.frontends.tflite_ops imports it
    "gelu_tanh": ("GELU", "npu.gelu"),
}
RTL = ["hard_swish", "leaky_relu"]

_loaded: dict = {}
_built: dict = {}


def _name(op: str) -> str:
    return f"op_{op}_int8.tflite"


def _load(name: str):
    if name not in _loaded:
        _loaded[name] = npu_byoc.load_model(model_path(name))
    return _loaded[name]


def _build(name: str, backend: str):
    if (name, backend) not in _built:
        _built[name, backend] = npu_byoc.build(_load(name), backend)
    return _built[name, backend]


def _assert_litert_exact(name: str, backend: str):
    """0 LSB on every output. LiteRT's reference resolver has no ELU: that fixture's references
    come from LiteRT's optimized kernels, whose conv is not the reference one, so only its
    direct outputs (the op on the model input, one kernel in both resolvers) are compared."""
    model = _build(name, backend)
    assert model.plans, "nothing was offloaded"
    ref = reference(name)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)
        assert len(got) == len(outputs)
        if not ref["reference"].endswith("BUILTIN_REF"):
            got, outputs = got[: len(got) // 2], outputs[: len(outputs) // 2]
        for g, w in zip(got, outputs, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


# ------------------------------------------------------------------------------- TFLite
@pytest.mark.parametrize("op", TFLITE)
def test_fixture_sweeps_every_int8_input(op):
    """Sample 0 is the whole table's worth of inputs: 0 LSB on it is 0 LSB on every input of
    the op applied to the model input. (The converter folds a RELU / RELU6 / RELU_N1_TO_1 of
    the model input into the input's quantization: those fixtures keep only the one after
    the conv.)"""
    x = reference(_name(op))["inputs"][0][0]
    assert sorted(np.unique(x).tolist()) == list(range(-128, 128))


@pytest.mark.parametrize("op", TFLITE)
def test_tflite_op_is_offloaded_with_its_name(op):
    kind, pattern = TFLITE[op]
    report = npu_byoc.coverage_report(_load(_name(op)))
    ops = [o for o in report.ops if o.op == kind]
    assert ops, f"{kind} is in the model"
    assert all(o.offloaded and o.pattern == pattern for o in ops), [(o.op, o.reason) for o in ops]


@pytest.mark.parametrize("op", TFLITE)
def test_tflite_golden_is_litert_exactly(op):
    _assert_litert_exact(_name(op), "golden")


@pytest.mark.parametrize("op", TFLITE)
def test_tflite_functional_is_litert_exactly(op):
    _assert_litert_exact(_name(op), "functional")


@pytest.mark.slow
@pytest.mark.parametrize("op", RTL)
def test_tflite_rtl_is_litert_exactly(op):
    _assert_litert_exact(_name(op), "verilator")


def test_requantize_table_is_the_quantize_kernel():
    """QUANTIZE int8 -> int8 hand-derived: s_in 0.5, s_out 0.25 (exact multiplier 2): v - zp_in
    doubled, + zp_out, saturated."""
    op = QLut("requantize", QTensor((1, 4), "int8", 0.5, 3), QTensor((1, 4), "int8", 0.25, -5), -128, 127)
    expect = np.clip(2 * (np.arange(-128, 128) - 3) - 5, -128, 127)
    np.testing.assert_array_equal(lut_ops.table(op), expect)


def test_hard_swish_refused_when_litert_refuses():
    """LiteRT's HardSwishPrepare needs s_in / (128 s_out) < 1: the op stays on the CPU, and the
    reason names the operator."""
    op = QLut("hard_swish", QTensor((1, 4), "int8", 1.0, 0), QTensor((1, 4), "int8", 0.004, 0), -128, 127)
    assert lut_ops.hard_swish_exponent(op, None) is not None
    entry = PATTERNS_BY_NAME["npu.hard_swish"]
    assert entry.subject("tflite") == "HARD_SWISH" and entry.subject("onnx") == "HardSwish"


# ------------------------------------------------------------------------------- ONNX QDQ
QDQ = "lut_ops_qdq.onnx"


def _f32(x):
    return np.asarray(x, np.float32)


# The float formulas of the ONNX operators (onnx.ai operator docs), float32.
FORMULAS = {
    "Sigmoid": lambda x, a: _f32(1 / (1 + np.exp(-x.astype(np.float64)))),
    "Tanh": lambda x, a: _f32(np.tanh(x.astype(np.float64))),
    "HardSwish": lambda x, a: _f32(x * np.maximum(0, np.minimum(1, x * _f32(1 / 6) + _f32(0.5)))),
    "LeakyRelu": lambda x, a: np.where(x >= 0, x, x * _f32(a["alpha"])),
    "Abs": lambda x, a: np.abs(x),
    "Exp": lambda x, a: _f32(np.exp(x.astype(np.float64))),
    "Relu": lambda x, a: np.maximum(x, 0),
    "Clip": lambda x, a: np.clip(x, a["min"], a["max"]),
    "Elu": lambda x, a: np.where(x >= 0, x, _f32(a["alpha"]) * (_f32(np.exp(x.astype(np.float64))) - 1)),
    "Identity": lambda x, a: x,
    "HardSigmoid": lambda x, a: np.clip(_f32(a["alpha"]) * x + _f32(a["beta"]), _f32(0), _f32(1)),
}
NPU_OF = {"Sigmoid": "npu.sigmoid", "Tanh": "npu.tanh", "HardSwish": "npu.hard_swish",
          "LeakyRelu": "npu.leaky_relu", "Abs": "npu.abs", "Exp": "npu.exp", "Relu": "npu.relu",
          "Clip": "npu.relu", "Elu": "npu.elu", "Identity": "npu.requantize", "HardSigmoid": "npu.hard_sigmoid"}
# TVM's ONNX frontend writes Clip (opset >= 11) as call_tir maximum/minimum kernels; the import
# makes it a Relax clip (npu_byoc.frontends.onnx_converters), so it runs as a standalone RELU6.


def _qdq_meta():
    return json.loads(str(np.load(MODELS / "lut_ops_qdq.npz")["meta"]))


def _formula_lsb(x: np.ndarray) -> list[np.ndarray]:
    """QuantizeLinear -> DequantizeLinear -> f -> QuantizeLinear (round half to even,
    saturate), as int8 levels per output."""
    meta = _qdq_meta()
    s_in, zp_in = np.float32(meta["input"]["scale"]), meta["input"]["zero_point"]
    q = np.clip(np.rint(x / s_in) + zp_in, -128, 127)
    xf = _f32((q - zp_in).astype(np.float32) * s_in)
    out = []
    for o in meta["outputs"]:
        y = _f32(FORMULAS[o["op"]](xf, o["attrs"]))
        out.append(np.clip(np.rint(_f32(y / _f32(o["scale"]))) + o["zero_point"], -128, 127))
    return out


def _lsb(values: np.ndarray, k: int) -> np.ndarray:
    o = _qdq_meta()["outputs"][k]
    return np.rint(values / np.float32(o["scale"])) + o["zero_point"]


def test_qdq_every_branch_is_offloaded():
    mod = npu_byoc.partition_for_npu(_load(QDQ))
    names = sorted(n for f in npu_functions(mod).values() for n, _ in composite_functions(f))
    assert names == sorted(NPU_OF.values())
    for f in npu_functions(mod).values():
        for _, c in composite_functions(f):
            assert extract_composite(c).numerics == "onnx"


def test_qdq_onnxruntime_agrees_with_the_formula():
    """The two references agree with each other (on the 256-value sweep and the random samples)."""
    ref = reference(QDQ)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        want = _formula_lsb(inputs[0])
        for k, o in enumerate(outputs):
            np.testing.assert_array_equal(_lsb(o, k), want[k], err_msg=_qdq_meta()["outputs"][k]["op"])


@pytest.mark.parametrize("backend", ["golden", "functional"])
def test_qdq_npu_is_the_float_formula_exactly(backend):
    model = _build(QDQ, backend)
    ref = reference(QDQ)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)
        want = _formula_lsb(inputs[0])
        for k in range(len(outputs)):
            np.testing.assert_array_equal(_lsb(got[k], k), want[k], err_msg=_qdq_meta()["outputs"][k]["op"])


# ------------------------------------------------------------------------------- reasons
def _relax_hard_swish(s_in: float, s_out: float, offset: float = 3.0):
    """TVM's TFLite HARD_SWISH form, hand-written: one dequantize used twice."""
    from tvm import relax
    from tvm.script import relax as R

    from .relax_builders import _build, _requantize_tail, _scale_const, _tensor, _zp_const

    x = _tensor("x", (1, 8, 8, 4), "int8")

    def body(bb):
        xd = bb.emit(R.dequantize(x, _scale_const(s_in), _zp_const(0), axis=-1))
        r = bb.emit(R.clip(R.add(xd, relax.const(offset, "float32")), 0.0, 6.0))
        y = bb.emit(R.divide(R.multiply(xd, r), relax.const(6.0, "float32")))
        return _requantize_tail(bb, y, s_out, 0, "int8")

    return _build([x], body)


def test_rejected_hard_swish_reason_names_the_operator():
    mod = npu_byoc.partition_for_npu(_relax_hard_swish(1.0, 0.004))
    from npu_byoc.partition.pipeline import partition_log

    (d,) = [d for d in partition_log(mod) if d.pattern == "npu.hard_swish"]
    assert not d.accepted and d.reason.startswith("HARD_SWISH: output scale 0.004")
    assert not npu_functions(mod)


def test_hard_swish_form_with_other_constants_is_not_hard_swish():
    mod = npu_byoc.partition_for_npu(_relax_hard_swish(0.05, 0.05, offset=2.0))
    from npu_byoc.partition.pipeline import partition_log

    (d,) = [d for d in partition_log(mod) if d.pattern == "npu.hard_swish"]
    assert d.reason == "HARD_SWISH: not a hard_swish: hard_swish offset is 2.0, not 3.0"


def test_hand_written_relax_takes_tflite_numerics():
    """A Relax module has no source runtime: its tables follow LiteRT (the HARD_SWISH fixture
    pins that table); a TFLite model records "tflite", an ONNX model "onnx"."""
    mod = npu_byoc.partition_for_npu(_relax_hard_swish(0.05, 0.05))
    (c,) = [c for f in npu_functions(mod).values() for _, c in composite_functions(f)]
    op = extract_composite(c)
    assert op.function == "hard_swish" and op.numerics == "tflite"
    assert numerics_for("onnx") == "onnx" and numerics_for("tflite") == "tflite"


# ------------------------------------------------------------------------------- scales
# LiteRT single-op vectors at several input ranges (tools/make_op_vectors.py; each case feeds
# the 256 int8 values): every branch of the integer kernels (HARD_SWISH's left- and
# right-shifted reluish multiplier, LEAKY_RELU's alpha above and below 1, ABS with and without
# a rescale) and the float tables.
VECTOR_OPS = {"logistic": "sigmoid", "tanh": "tanh", "hard_swish": "hard_swish",
              "leaky_relu": "leaky_relu", "abs": "abs", "exp": "exp", "log": "log", "sqrt": "sqrt"}


def _vector_cases():
    from .test_numerics import load_cases

    return [pytest.param(op, c, id=f"{op}{i}") for op in VECTOR_OPS for i, c in enumerate(load_cases(op))]


@pytest.mark.parametrize("op,case", _vector_cases())
def test_table_is_litert_at_every_scale(op, case):
    x = case["input"]
    params = (("alpha", float(case["alpha"])),) if "alpha" in case else ()
    qlut = QLut(VECTOR_OPS[op], QTensor(x.shape, "int8", float(case["input_scale"]), int(case["input_zero_point"])),
                QTensor(x.shape, "int8", float(case["output_scale"]), int(case["output_zero_point"])),
                -128, 127, params=params)
    np.testing.assert_array_equal(lut_ops.lut_lookup(x, qlut), case["output"])


def test_vectors_reach_both_hard_swish_shift_branches():
    from .test_numerics import load_cases

    exponents = set()
    for c in load_cases("hard_swish"):
        t = QTensor((1, 256), "int8", float(c["input_scale"]), 0)
        exponents.add(np.sign(hard_swish_params(QLut("hard_swish", t, t, -128, 127))[3]))
    assert {-1, 1} <= exponents


# ------------------------------------------------------------------------------- MobileNetV3
MNV3 = "mobilenet_v3_small_int8.tflite"


def test_mobilenet_v3_hard_swish_glue_is_offloaded(partitioned):
    """keras MobileNetV3Small (tools/make_models.py): all 19 HARD_SWISH on the NPU, the 9
    MULs by 1/6 of the squeeze-excite hard sigmoid (scalar constant), and the 9 squeeze-excite
    gating MULs ([1, H, W, C] × [1, 1, 1, C], npu.mul with IFM2_BROADCAST), the head's RESHAPE
    (a view) and SOFTMAX: every operator in one NPU partition. Before the LUT registry the same
    model had 70/109 ops on the NPU in 29 partitions, 59 transitions; before npu.mul 98/109 in
    10, 29; before npu.softmax 108/109 in 1, 2."""
    report = npu_byoc.coverage_report(partitioned(MNV3))
    hs = [o for o in report.ops if o.op == "HARD_SWISH"]
    assert len(hs) == 19 and all(o.offloaded and o.pattern == "npu.hard_swish" for o in hs)
    assert {o.op for o in report.ops if not o.offloaded} == set()
    s = report.summary
    assert sum(o.pattern == "npu.mul_scalar" for o in report.ops) == 9
    assert sum(o.pattern == "npu.mul" for o in report.ops) == 9
    assert (s["ops_offloaded"], s["ops_total"], s["partitions"], s["transitions"]) == (109, 109, 1, 1)


def test_mobilenet_v3_every_npu_layer_is_litert_exactly(imported, partitioned):
    """Each NPU layer run by the golden model on LiteRT's own input tensors (BUILTIN_REF,
    sample 0): 0 LSB, the 19 HARD_SWISH and 9 scalar MUL tables and the 9 broadcast
    squeeze-excite MULs included."""
    from tvm import relax

    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.frontends.load import model_info
    from npu_byoc.runtime import golden

    from .test_golden import _tflite_tensors

    tensors = _tflite_tensors(MNV3)
    info = model_info(imported(MNV3))
    name_of = {v: o.name for o in info.ops for v in o.vars}  # Relax binding -> LiteRT tensor
    name_of.update({t.name.replace(":", "_"): t.name for t in info.inputs})
    mod = partitioned(MNV3)
    plans = lower_module(mod)
    calls, diffs = {}, []
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.TupleGetItem) and v.tuple_value in calls:  # an NPU result
                name_of[b.var.name] = calls[v.tuple_value].outputs[v.index].ref.name
            if not (isinstance(v, relax.Call) and getattr(v.op, "name_hint", None) in plans):
                continue
            plan = calls[b.var] = plans[v.op.name_hint]
            name_of[b.var.name] = plan.outputs[0].ref.name
            # partition parameters (named locally) -> the caller's tensors
            local = {io.ref.name: name_of.get(a.name, a.name) for io, a in zip(plan.inputs, v.args)}
            regions = golden.allocate_regions(plan, [np.zeros(io.shape, np.int8) for io in plan.inputs])
            for op in plan.ops:
                for ref in op.inputs:
                    key = local.get(ref.name, name_of.get(ref.name, ref.name))
                    golden.write_tensor(regions, ref, tensors[key].reshape(ref.shape))
                out = golden.run_op(op, regions)
                want = tensors[name_of.get(op.name, op.name)].reshape(op.ofm.shape)
                diffs.append((getattr(op, "function", op.kind), op.name, int(np.abs(out.astype(int) - want.astype(int)).max())))
    assert sum(1 for d in diffs if d[0] == "hard_swish") == 19 and len(diffs) == 108  # every offloaded operator
    assert [d[0] for d in diffs].count("softmax") == 1
    assert sum(1 for d in diffs if d[0] == "mul") == 9
    assert [d for d in diffs if d[2] != 0] == []


def test_a_scale_the_kernel_cannot_hold_stays_on_the_cpu_with_a_reason():
    """A model's scales are untrusted (found by `npu-byoc fuzz --mode files`): a MUL by a
    scalar whose output scale is 1e-45: LiteRT's float32 s_in·s_c/s_out (mul.cc Prepare)
    overflows to inf, which no multiplier holds. The entry refuses it with a reason instead
    of raising."""
    t = QTensor((1, 8, 8, 4), "int8", 0.05, 0)
    params = (("constant", 90), ("constant_scale", 0.01), ("constant_zero_point", 0))
    ok = QLut("mul_scalar", t, QTensor((1, 8, 8, 4), "int8", 0.02, 3), -128, 127, params=params)
    assert lut_ops.table_computable(ok, None) is None
    bad = QLut("mul_scalar", t, QTensor((1, 8, 8, 4), "int8", 1e-45, 3), -128, 127, params=params)
    reason = lut_ops.table_computable(bad, None)
    assert reason == "the tflite table cannot be computed at these scales: quantize_multiplier: scale inf is not finite"
