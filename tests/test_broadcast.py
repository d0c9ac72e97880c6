"""ADD / MUL with a broadcast beyond the channel vector: a pixel vector [1, H, W, 1], a row, a
column, a scalar, both operands broadcast, a transformer's per-token vector [1, L, 1] and a
lower-rank operand. Lowering gives the smaller operand the output's shape with a stride of 0
along each broadcast axis (ops.lowering.broadcast_view); the DMA repeats its bytes, except an
operand repeated over the channels, which a 1x1 CONV replicates in SRAM (ops.broadcast).

Each Relax QDQ module is one NPU partition; its output is TFLite's MUL arithmetic written out
in numpy (MultiplyByQuantizedMultiplier of the zero-point-corrected product) or the ADD of
npu_byoc.arch.numerics on the operands broadcast by numpy; the command stream on the stream
machine and (a few cases) the C model equal the golden model; and it is within 1 LSB of TVM's CPU build (float QDQ). The ConvNeXt / ViT / keyword-transformer LayerNorms are
checked layer by layer against LiteRT in tests/test_transformer_fixtures.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.arch.config import DEFAULT_CONFIG
from npu_byoc.arch.encoder import Dma, Kick
from npu_byoc.arch.isa import Opcode, Reg
from npu_byoc.codegen.lower import lower_module
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.ops.broadcast import IDENTITY_MULTIPLIER, IDENTITY_SHIFT, ChannelReplicated, replicate_channels
from npu_byoc.ops.composites import npu_functions
from npu_byoc.ops.npu_ops import TensorRef
from npu_byoc.partition.pipeline import partition_for_npu
from npu_byoc.runtime import golden
from npu_byoc.runtime.machine import Machine

from . import relax_builders as rb
from . import litert_reference as ref

# kind -> (first operand's shape, second operand's shape)
KINDS = {
    "pixel_vector": ((1, 6, 5, 8), (1, 6, 5, 1)),
    "pixel_vector_first": ((1, 6, 5, 1), (1, 6, 5, 8)),
    "row": ((1, 6, 5, 8), (1, 1, 5, 8)),
    "column": ((1, 6, 5, 8), (1, 6, 1, 8)),
    "scalar": ((1, 6, 5, 8), (1, 1, 1, 1)),
    "both": ((1, 6, 5, 1), (1, 1, 1, 8)),
    "token_vector": ((1, 12, 8), (1, 12, 1)),
    "lower_rank": ((1, 12, 8), (8,)),
}
C_MODEL = {("pixel_vector", "multiply"), ("both", "add"), ("lower_rank", "multiply")}
SCALES = dict(scale_a=0.5, zp_a=1, scale_b=0.25, zp_b=-2, output_scale=0.75, output_zp=3)


def _inputs(kind: str) -> list[np.ndarray]:
    rng = np.random.default_rng(sorted(KINDS).index(kind))
    return [rng.integers(-128, 128, s, dtype=np.int8) for s in KINDS[kind]]


def _tflite(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """TFLite's int8 MUL / ADD as LiteRT's source computes them (tests/litert_reference.py), on
    numpy's broadcast of the operands."""
    x, y = np.broadcast_arrays(x, y)
    sa, sb, so = SCALES["scale_a"], SCALES["scale_b"], SCALES["output_scale"]
    zps = (SCALES["zp_a"], SCALES["zp_b"], SCALES["output_zp"])
    if op == "multiply":
        return ref.mul_elementwise(x, y, *zps, *ref.mul_prepare(sa, sb, so)).astype(np.int8)
    return ref.add_func(x, y, *zps, ref.add_prepare(sa, sb, so)).astype(np.int8)


@pytest.mark.parametrize("op", ["multiply", "add"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_broadcast_runs_on_the_npu_as_tflite_computes_it(kind, op):
    a_shape, b_shape = KINDS[kind]
    mod = rb.qdq_add(shape=a_shape, b_shape=b_shape, op=op, **SCALES)
    part = partition_for_npu(mod)
    assert len(npu_functions(part)) == 1, part.script()
    x = _inputs(kind)
    got = npu_byoc.build(part, "golden").run(x)[0]
    np.testing.assert_array_equal(got, _tflite(op, *x))
    (plan,) = lower_module(part).values()  # its command stream (the stride-0 DMAs) on the stream machine
    schedule = schedule_partition(plan, DEFAULT_CONFIG)
    regions, statuses = golden.run_stream(Machine(DEFAULT_CONFIG), plan, schedule.words(), schedule.constants, x)
    assert all(st.ok for st in statuses), statuses
    np.testing.assert_array_equal(golden.read_outputs(plan, regions)[0], got)
    if (kind, op) in C_MODEL:  # the C model compiled: a few cases (the RTL: the fixtures' cosim)
        np.testing.assert_array_equal(npu_byoc.build(part, "functional").run(x)[0], got)
    cpu = npu_byoc.build(mod, "cpu").run(x)[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


@pytest.mark.parametrize("op", ["multiply", "add"])
def test_a_pixel_vector_is_replicated_by_the_mac_array_and_a_channel_vector_stays_the_unit_s_broadcast(op):
    """The pixel vector is read once, as its own (H, W, 1) bytes, and replicated over the
    channels by a 1x1 CONV into SRAM: no DMA of the stream repeats a byte along its innermost
    axis (a byte per cycle). A [1, 1, 1, C] vector keeps the unit's own IFM2_BROADCAST."""
    (plan,) = lower_module(partition_for_npu(rb.qdq_add(shape=(1, 6, 5, 8), b_shape=(1, 6, 5, 1), op=op))).values()
    (npu_op,) = plan.ops
    assert isinstance(npu_op, ChannelReplicated) and npu_op.binary.ifm2.box_strides == (5, 1, 0)
    assert npu_op.vector.shape == (6, 5, 1) and not npu_op.vector.is_slice
    steps = schedule_partition(plan, DEFAULT_CONFIG).steps
    assert not [s for s in steps if isinstance(s, Dma) and s.stride0 == 0 and s.n0 > 1]
    convs = [s for s in steps if isinstance(s, Kick) and s.opcode == Opcode.CONV]
    assert convs and all(k[Reg.IFM_C] == 1 and k[Reg.OFM_C] == 8 for k in convs)
    (plan,) = lower_module(partition_for_npu(rb.qdq_add(shape=(1, 6, 5, 8), b_shape=(1, 1, 1, 8)))).values()
    assert plan.ops[0].broadcast and plan.ops[0].ifm2.shape == (1, 1, 8)


@pytest.mark.parametrize("zero_point", [-128, -3, 0, 77, 127])
def test_the_replicating_conv_copies_every_int8_value_unchanged(zero_point):
    """The CONV that replicates a vector (weights 1, requantize multiplier 2^30 shift +1, the
    same zero point in and out) gives every int8 value back on every channel, by TFLite's
    MultiplyByQuantizedMultiplier (tests/litert_reference.py) and on the golden model."""
    values = np.arange(-128, 128, dtype=np.int8).reshape(16, 16, 1)
    acc = values.astype(np.int64) - zero_point  # the 1x1 conv's sum: one tap of weight 1
    again = ref.mbqm(acc, IDENTITY_MULTIPLIER, IDENTITY_SHIFT) + zero_point
    np.testing.assert_array_equal(again, values.astype(np.int64))
    vector = TensorRef("v", 2, 0, (16, 16, 1))
    conv = replicate_channels("copy", vector, TensorRef("out", 3, 0, (16, 16, 5)), zero_point)
    got = golden.KERNELS[type(conv)](conv, values)
    np.testing.assert_array_equal(got, np.broadcast_to(values, (16, 16, 5)))


def test_a_scalar_constant_is_a_table_and_a_row_constant_is_stored_per_channel():
    """A constant scalar is the LUT's (one pass through a 256-entry table); a constant broadcast
    over the channels (a row of pixels, [1, 1, W, 1]) is stored repeated along them, so only its
    rows repeat (stride 0) and the DMA moves whole pixels, not a byte per cycle; exact both."""
    x = _inputs("scalar")[0]
    mod = rb.qdq_add(shape=(1, 6, 5, 8), b_const=np.array([[[[-7]]]], np.int8), op="multiply", **SCALES)
    part = partition_for_npu(mod)
    (plan,) = lower_module(part).values()
    assert [op.kind for op in plan.ops] == ["lut"]
    got = npu_byoc.build(part, "golden").run([x])[0]
    np.testing.assert_array_equal(got, _tflite("multiply", x, np.full((1, 1, 1, 1), -7, np.int8)))

    row = np.arange(-2, 3, dtype=np.int8).reshape(1, 1, 5, 1)
    part = partition_for_npu(rb.qdq_add(shape=(1, 6, 5, 8), b_const=row, op="multiply", **SCALES))
    (plan,) = lower_module(part).values()
    assert plan.ops[0].kind == "mul" and plan.ops[0].ifm2.box_strides == (0, 8, 1)
    got = npu_byoc.build(part, "golden").run([x])[0]
    np.testing.assert_array_equal(got, _tflite("multiply", x, row))


@pytest.mark.parametrize("build, shapes", [
    (lambda: rb.qdq_add(b_shape=(1, 8, 1, 4)), [(1, 8, 8, 4), (1, 8, 1, 4)]),
    (lambda: rb.qdq_add(op="multiply", b_shape=(1, 1, 8, 1)), [(1, 8, 8, 4), (1, 1, 8, 1)]),
    (lambda: rb.qdq_add(b_const=rb.rng_weights((1, 1, 8, 4), seed=3)), [(1, 8, 8, 4)]),
], ids=["add_column", "mul_row_of_pixels", "add_constant_row"])  # fmt: skip
def test_broadcasts_once_refused_are_offloaded(build, shapes):
    """The broadcasts test_patterns_relax used to expect refused ("broadcasts only a channel
    vector") run on the NPU within 1 LSB of TVM's CPU build."""
    mod = build()
    part = partition_for_npu(mod)
    assert len(npu_functions(part)) == 1, part.script()
    rng = np.random.default_rng(11)
    x = [rng.integers(-128, 128, s, dtype=np.int8) for s in shapes]
    got = npu_byoc.build(part, "golden").run(x)[0]
    cpu = npu_byoc.build(mod, "cpu").run(x)[0]
    assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


@pytest.fixture(scope="module")
def rtl():
    from npu_byoc.runtime import verilator as V

    return V.VerilatorNpu(DEFAULT_CONFIG)


@pytest.mark.parametrize("kind, op", [("pixel_vector", "multiply"), ("token_vector", "add"), ("row", "multiply")])
def test_broadcasts_on_the_rtl(rtl, kind, op):
    """The broadcast's stream on the RTL: the golden model's output, and the cycles of the
    analytic model (a pixel or token vector replicated by a CONV kick, a row repeated by
    stride-0 outer DMA axes at full speed)."""
    from npu_byoc.arch import cycles

    (plan,) = lower_module(partition_for_npu(rb.qdq_add(shape=KINDS[kind][0], b_shape=KINDS[kind][1],
                                                        op=op, **SCALES))).values()  # fmt: skip
    x = _inputs(kind)
    schedule = schedule_partition(plan, DEFAULT_CONFIG)
    dmas = [s for s in schedule.steps if isinstance(s, Dma) and s.direction == Opcode.DMA_IN]
    assert not any(d.stride0 == 0 and d.n0 > 1 for d in dmas)
    assert any(0 in (d.stride1, d.stride2) for d in dmas) or isinstance(plan.ops[0], ChannelReplicated)
    regions, statuses = golden.run_stream(rtl, plan, schedule.words(), schedule.constants, x)
    assert statuses[0].ok, statuses
    np.testing.assert_array_equal(golden.read_outputs(plan, regions)[0], _tflite(op, *x))
    assert statuses[0].cycles == cycles.stream_cycles(schedule.steps, DEFAULT_CONFIG)
