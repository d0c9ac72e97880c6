"""MATMUL of two int8 activations on the NPU (npu.matmul, npu_byoc.ops.matmul): one CONV kick
per head whose weights the DMA reads from the second operand, the zero-point cross term folded
by reading each input row twice (three times for a zero point of -128).

* a hand-derived 2x3 @ 3x2 with nonzero zero points, on the golden model and the stream machine;
* Relax modules in TFLite's integer form (tflite_batch_matmul.batch_matmul: LiteRT's arithmetic,
  so TVM's CPU build is the reference, exactly): adj_x / adj_y, a broadcast head axis, the
  three folds (zb = 0, zb in range, zb = -128), on golden and the C model;
* a QDQ Relax module (dequantize, dequantize -> matmul -> quantize) within 1 LSB of TVM's CPU build,
  and the ONNX fixture attention_qdq.onnx through check_onnx_fixture (golden == C model == RTL);
* every attention product of the ViT and keyword-transformer fixtures on the NPU, LiteRT's
  output tensor exactly, layer by layer;
* refused shapes stay on the CPU with their reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax
from tvm.relax import op as R

import npu_byoc
from npu_byoc.arch.isa import Region
from npu_byoc.codegen.lower import IoTensor, PartitionPlan
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.frontends.tflite_batch_matmul import batch_matmul, multiplier
from npu_byoc.ops.matmul import MatMul, fold_of
from npu_byoc.ops.npu_ops import TensorRef
from npu_byoc.partition.pipeline import partition_log
from npu_byoc.runtime import golden
from npu_byoc.runtime.machine import Machine

from .conftest import npu_layers_against_litert

_built: dict = {}


def _build(key, make, backend: str):
    if (key, backend) not in _built:
        _built[key, backend] = npu_byoc.build(make(), backend)
    return _built[key, backend]


def test_fold_blocks_sum_to_minus_the_zero_point():
    assert fold_of(0) == (0, 0)
    assert fold_of(7) == (1, -7) and fold_of(-127) == (1, 127)
    assert fold_of(-128) == (2, 64)  # 128 is no int8 weight: two blocks of 64


def test_the_head_runs_transposed_where_only_the_first_zero_point_is_zero():
    a = TensorRef("a", int(Region.IO), 0, (2, 6, 10))
    b = TensorRef("b", int(Region.IO) + 1, 0, (2, 10, 9))
    c = TensorRef("c", int(Region.IO) + 2, 0, (2, 6, 9))
    for (za, zb), transposed, fold in [((0, 9), True, 0), ((4, 9), False, 1), ((4, 0), False, 0), ((0, -128), True, 0)]:
        op = MatMul("mm", a, b, c, (0, 1, 2), (0, 1, 2), (0, 1, 2), za, zb, 0, 1 << 30, 0, -128, 127)
        head = op.phases[1]
        assert (op.transposed, head.fold) == (transposed, fold)
        # rows of the head's input: 6 rows of a (stride 10), or 9 columns of b (stride 1); K = 10
        assert head.ifm.shape == ((9, 1, 10) if transposed else (6, 1 + fold, 10))
        assert head.ifm.offset == (a.nbytes // 2 if not transposed else b.nbytes // 2)
        assert head.ofm.box_strides == ((1, 0, 9) if transposed else (9, 0, 1))
        assert op.macs == 2 * 6 * 9 * 10


def _hand_plan(za: int, zb: int) -> PartitionPlan:
    """A [1, 2, 3] @ [1, 3, 2] matmul alone: a in region IO, b in IO + 1, out in IO + 2."""
    a = TensorRef("a", int(Region.IO), 0, (1, 2, 3))
    b = TensorRef("b", int(Region.IO) + 1, 0, (1, 3, 2))
    c = TensorRef("c", int(Region.IO) + 2, 0, (1, 2, 2))
    mult, shift = 1 << 30, -1  # 0.5 * 2^-1: the accumulator / 4, rounded half away from zero
    op = MatMul("mm", a, b, c, (0, 1, 2), (0, 1, 2), (0, 1, 2), za, zb, 3, mult, shift, -128, 127)
    ios = [IoTensor(r.name, r.shape, "int8", r) for r in (a, b, c)]
    return PartitionPlan("hand", ios[:2], ios[2:], [op], 0, ["mm"])


@pytest.mark.parametrize("zb", [5, 0, -100])
def test_hand_derived_two_by_three_times_three_by_two(zb):
    a = np.array([[1, -2, 3], [4, 0, -6]], np.int8)
    b = np.array([[7, -1], [2, 3], [-5, 8]], np.int8) + zb
    za = -3
    # by hand: (a - za) = [[4, 1, 6], [7, 3, -3]], (b - zb) = [[7, -1], [2, 3], [-5, 8]]
    # acc = [[28 + 2 - 30, -4 + 3 + 48], [49 + 6 + 15, -7 + 9 - 24]] = [[0, 47], [70, -22]]
    # out = round_half_away(acc / 4) + 3 = [[0, 12], [18, -6]] + 3  (47/4 = 11.75, -22/4 = -5.5)
    want = np.array([[3, 15], [21, -3]], np.int8)
    plan = _hand_plan(za, zb)
    inputs = [a.reshape(1, 2, 3), b.reshape(1, 3, 2)]
    np.testing.assert_array_equal(golden.run_plan(plan, inputs)[0].reshape(2, 2), want)
    sched = schedule_partition(plan)
    regions, statuses = golden.run_stream(Machine(), plan, sched.words(), sched.constants, inputs)
    assert statuses[-1].ok, statuses[-1]
    np.testing.assert_array_equal(golden.read_outputs(plan, regions)[0].reshape(2, 2), want)


def _int_matmul(a_shape, b_shape, adj_x=False, adj_y=False, zps=(-3, 9, 4), scales=(0.05, 0.02, 0.11)):
    """LiteRT's BATCH_MATMUL as npu_byoc.frontends.tflite_batch_matmul imports it."""
    x = relax.Var("a", relax.TensorType(list(a_shape), "int8"))
    y = relax.Var("b", relax.TensorType(list(b_shape), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(batch_matmul(x, y, a_shape, b_shape, adj_x, adj_y, zps, scales)))
        bb.emit_func_output(out)
    return relax.transform.Normalize()(bb.get())


INT_CASES = {
    "plain": ((1, 2, 8, 12), (1, 2, 12, 6), False, False, (-3, 9, 4)),
    "adj": ((1, 2, 12, 8), (1, 2, 6, 12), True, True, (5, -7, -1)),
    "broadcast-heads": ((1, 3, 8, 12), (1, 1, 12, 6), False, False, (2, -5, 0)),
    "zb-0": ((1, 9, 16), (1, 16, 5), False, False, (1, 0, 3)),
    "zb-minus-128": ((7, 10), (10, 4), False, False, (-128, -128, -2)),
    "za-0-transposed": ((1, 2, 6, 10), (1, 2, 10, 9), False, False, (0, 9, -4)),
    "batch-2": ((2, 2, 5, 9), (2, 2, 7, 9), False, True, (-1, 3, 6)),  # image by image
}


@pytest.mark.parametrize("backend", ["golden", "functional"])
@pytest.mark.parametrize("case", list(INT_CASES))
def test_tflite_integer_form_is_tvm_cpu_exactly(case, backend):
    a_shape, b_shape, adj_x, adj_y, zps = INT_CASES[case]
    make = lambda: _int_matmul(a_shape, b_shape, adj_x, adj_y, zps)  # noqa: E731
    log = partition_log(npu_byoc.partition_for_npu(make()))
    assert [d.accepted for d in log if d.pattern == "npu.matmul"] == [True], [(d.pattern, d.reason) for d in log]
    rng = np.random.default_rng(7)
    inputs = [rng.integers(-128, 128, a_shape).astype(np.int8), rng.integers(-128, 128, b_shape).astype(np.int8)]
    got = _build(case, make, backend).run(inputs)[0]
    cpu = _build(case, make, "cpu").run(inputs)[0]
    np.testing.assert_array_equal(got, cpu)


def _qdq_matmul(a_shape, b_shape):
    x = relax.Var("a", relax.TensorType(list(a_shape), "int8"))
    y = relax.Var("b", relax.TensorType(list(b_shape), "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            xd = bb.emit(R.dequantize(x, relax.const(0.04, "float32"), relax.const(3, "int8"), axis=-1))
            yd = bb.emit(R.dequantize(y, relax.const(0.03, "float32"), relax.const(-11, "int8"), axis=-1))
            m = bb.emit(R.matmul(xd, yd))
            q = bb.emit(R.quantize(m, relax.const(0.3, "float32"), relax.const(-2, "int8"), axis=-1, out_dtype="int8"))
            gv = bb.emit_output(q)
        bb.emit_func_output(gv)
    return bb.get()


def test_qdq_matmul_within_one_lsb_of_tvm_cpu():
    shapes = ((1, 2, 10, 16), (1, 2, 16, 12))
    make = lambda: _qdq_matmul(*shapes)  # noqa: E731
    rng = np.random.default_rng(5)
    inputs = [rng.integers(-128, 128, s).astype(np.int8) for s in shapes]
    model = _build("qdq", make, "functional")
    assert [op.kind for plan in model.plans.values() for op in plan.ops] == ["matmul"]
    got = model.run(inputs)[0]
    cpu = _build("qdq", make, "cpu").run(inputs)[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


def test_requantize_is_litert_s_float32_product():
    """LiteRT's Prepare: double(float32(s_a * s_b)) / double(s_out), not the double product."""
    s_a, s_b, s_out = 0.1, 0.3, 0.7
    want = float(np.float32(s_a) * np.float32(s_b)) / float(np.float32(s_out))
    m, shift = multiplier(s_a, s_b, s_out)
    assert abs(m * 2.0 ** (shift - 31) - want) <= 2.0 ** (shift - 31)


@pytest.mark.parametrize("name", ["vit_tiny_int8.tflite", "kws_transformer_int8.tflite"])
def test_attention_products_on_the_npu_bit_exact_with_litert(name):
    """Every BATCH_MATMUL of the fixture is offloaded and gives LiteRT's output tensor exactly
    (fed LiteRT's own operands)."""
    checked = 0
    for op, got, want in npu_layers_against_litert(name):
        if op.kind == "matmul" and want is not None:
            np.testing.assert_array_equal(got, want, err_msg=op.name)
            checked += 1
    assert checked == 4  # Q @ K^T and P @ V of two encoder blocks


@pytest.mark.parametrize("a_shape, b_shape, reason", [
    ((1, 2, 8, 5000), (1, 2, 5000, 4), "K=5000 into N=4: the NPU's MAC unit takes up to max_channels=4096"),
    ((2, 8, 12), (1, 12, 6), "NPU partitions run image by image"),
    ((1, 2, 3, 8, 12), (1, 2, 3, 12, 6), "input a: tensor of rank 5: the NPU maps tensors of rank 1 to 4"),
    ((1, 8, 12), (12, 6), "the NPU multiplies operands of the same rank, 2 to 4"),
])  # fmt: skip
def test_refused_shapes_stay_on_the_cpu_with_their_reason(a_shape, b_shape, reason):
    mod = _int_matmul(a_shape, b_shape)
    log = [d for d in partition_log(npu_byoc.partition_for_npu(mod)) if d.pattern == "npu.matmul"]
    assert log and not any(d.accepted for d in log)
    assert any(reason in (d.reason or "") for d in log), [d.reason for d in log]


def test_onnx_attention_fixture_against_onnxruntime():
    """attention_qdq.onnx (tools/make_transformer_models.py): its Q·K^T and P·V MatMuls on the
    NPU; golden == C model == RTL (cycle model exact), every layer within 1 LSB of TVM's CPU
    build, the output within 2 LSB of onnxruntime (measured 2: onnxruntime requantizes in float,
    and the scores' 1 LSB goes on through the float Softmax and P·V; TVM's CPU build is 0 off)."""
    from .conftest import check_onnx_fixture

    mod = check_onnx_fixture("attention_qdq.onnx", lsb=2)
    report = npu_byoc.coverage_report(mod)
    assert [o.pattern for o in report.ops if o.name in ("scores", "attended")] == ["npu.matmul"] * 2


def _transposed_operands_matmul():
    """Attention's head split written as transposes: q [1, 8, 2, 16] -> [1, 2, 8, 16] and
    k [1, 8, 2, 16] -> [1, 2, 16, 8] (the key transposed), then QDQ matmul (zero points 3, -11:
    a fold)."""
    q = relax.Var("q", relax.TensorType([1, 8, 2, 16], "int8"))
    k = relax.Var("k", relax.TensorType([1, 8, 2, 16], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [q, k]):
        with bb.dataflow():
            qt = bb.emit(R.permute_dims(q, [0, 2, 1, 3]))
            kt = bb.emit(R.permute_dims(k, [0, 2, 3, 1]))
            xd = bb.emit(R.dequantize(qt, relax.const(0.04, "float32"), relax.const(3, "int8"), axis=-1))
            yd = bb.emit(R.dequantize(kt, relax.const(0.03, "float32"), relax.const(-11, "int8"), axis=-1))
            m = bb.emit(R.matmul(xd, yd))
            out = bb.emit(R.quantize(m, relax.const(0.3, "float32"), relax.const(-2, "int8"), axis=-1, out_dtype="int8"))
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


def test_transposed_operands_are_read_in_place():
    """A transpose read only by a matmul lowers to no op: the matmul's DMAs read its input
    through the permuted strides (ops.transpose.permuted_view). Hand-derived: key column j of
    head h is k[0, j, h, :], one 16-byte run (before: 16 one-byte runs of the transposed copy);
    the result stays within 1 LSB of TVM's CPU build (whole model, and the layer in the
    co-simulation) and the RTL equals the golden model with the cycle model exact."""
    from npu_byoc.arch.encoder import Dma
    from npu_byoc.arch.isa import Opcode
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.runtime.cosim import cosim

    part = npu_byoc.partition_for_npu(_transposed_operands_matmul())
    (plan,) = lower_module(part).values()
    assert [op.kind for op in plan.ops] == ["matmul"]
    head = plan.ops[0].phases[1]
    assert head.rhs.offset == 16 and head.rhs.strides == (0, 32, 1)  # token stride 2 x 16, k contiguous
    column_loads = [s for s in schedule_partition(plan, overlapped=False).steps
                    if isinstance(s, Dma) and s.direction == Opcode.DMA_IN and s.region == Region.IO + 1]  # fmt: skip
    assert len(column_loads) == 2 * 8 and all((s.n0, s.n1, s.n2) == (16, 1, 1) for s in column_loads)
    rng = np.random.default_rng(11)
    inputs = [rng.integers(-128, 128, (1, 8, 2, 16)).astype(np.int8) for _ in range(2)]
    got = npu_byoc.build(part, "functional").run(inputs)[0]
    cpu = npu_byoc.build(_transposed_operands_matmul(), "cpu").run(inputs)[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1
    rep = cosim(part, inputs)  # the matmul's TVM reference is fed the inputs permuted (cosim's "permute" source)
    assert rep.summary["max_diff_golden"] == 0 and rep.summary["cycle_model_exact"]
    assert rep.summary["max_diff_tvm"] is not None and rep.summary["max_diff_tvm"] <= 1
