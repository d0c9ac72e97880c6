"""One source of truth for limits: the partition refuses exactly what lowering, the scheduler
and the encoder refuse (issue 10's cases), with a reason; and when lowering still fails for an
op, that op goes back to the CPU with the compiler's reason, never failing the compile."""

from __future__ import annotations

from npu_byoc.codegen import dryrun
import numpy as np
import pytest
from tvm import relax
from tvm.script import relax as R

import npu_byoc.arch.limits as limits
from npu_byoc.codegen.tiling import choose_tiling, tile_sram_bytes
from npu_byoc.codegen.lower import lower_module
from npu_byoc.partition.fallback import REASON_PREFIX
from npu_byoc.arch.config import DEFAULT_CONFIG
from npu_byoc.ops.composites import npu_functions
from npu_byoc.partition.pipeline import partition_for_npu, partition_log
from npu_byoc.runtime.build import build

from . import relax_builders as rb

SRAM = DEFAULT_CONFIG.sram_bytes


def _only_decision(mod):
    log = partition_log(partition_for_npu(mod))
    assert len(log) == 1, log
    return log[0]


def _rank_fc(shape=(1, 5, 16)) -> relax.Expr:
    """dequantize(x[..., 16]) @ dequantize(W[16, 8]) -> quantize: a fully connected layer over
    the last axis of a tensor of any rank (a Dense on a sequence: rank 3)."""
    x = rb._tensor("x", shape, "int8")

    def body(bb):
        xd = bb.emit(R.dequantize(x, rb._scale_const(0.5), rb._zp_const(3), axis=-1))
        w = relax.const(rb.rng_weights((16, 8)))
        wd = bb.emit(R.dequantize(w, rb._scale_const(rb.default_weight_scales(8)), rb._zp_const(np.zeros(8, np.int8)), axis=1))
        y = bb.emit(R.matmul(xd, wd, out_dtype="float32"))
        return rb._requantize_tail(bb, y, 0.25, -5, "int8")

    return rb._build([x], body)


def _big_kernel_conv(in_channels: int = 4096, out_channels: int = 4, input_hw=(8, 8)):
    """An 11x11 kernel over 4096 channels: within every per-op limit, but one output channel's
    weights alone (11*11*4096 bytes) exceed the 256 KiB SRAM. Weights 1 keep the accumulator
    inside int32."""
    w = np.ones((11, 11, in_channels, out_channels), np.int8)
    return rb.qdq_conv2d(input_hw=input_hw, in_channels=in_channels, out_channels=out_channels, kernel=(11, 11),
                         padding=(5, 5), weight=w)  # fmt: skip


CASES = {
    # name: (module builder, pattern, the reason's text)
    "rank-5 FC": (lambda: _rank_fc((1, 2, 1, 5, 16)), "npu.fully_connected", "tensor of rank 5: the NPU maps tensors of rank 1 to 4"),
    "5-D ADD": (lambda: rb.qdq_add(shape=(1, 2, 8, 8, 4)), "npu.add", "tensor of rank 5"),
    "1x100000x100000x4 conv": (
        lambda: rb.qdq_conv2d(input_hw=(100000, 100000), in_channels=4, out_channels=4),
        "npu.conv2d",
        "input: tensor of 40000000000 bytes: the NPU's DMA addresses 4 GiB",
    ),
    "FC rows beyond the shape registers": (
        lambda: rb.qdq_fc(batch=2**32 + 1),
        "npu.fully_connected",
        "input: dimension 4294967297: wider than the NPU's 32-bit shape registers",
    ),
    "mean output scale 1e-30": (
        lambda: rb.qdq_mean(output_scale=1e-30),
        "npu.mean",
        "mean shift 94: NPU shifts lie in [-31, 30]",
    ),
    "add rescaling beyond TFLite's": (
        lambda: rb.qdq_add(output_scale=1e-20),
        "npu.add",
        "add rescaling out of range: add_params: real multiplier",
    ),
    "11x11x4096 kernel": (
        _big_kernel_conv,
        "npu.conv2d",
        # one channel's weights 11*11*4096 + its requantize record (12, aligned to 16) + the 8
        # input rows one output row reads (8*8*4096) + one output row of one channel (8 -> 16)
        f"a 1-row x 1-channel tile needs {11 * 11 * 4096 + 16 + 8 * 8 * 4096 + 16} bytes of SRAM, the NPU has {SRAM}",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_partition_refuses_what_the_npu_cannot_run(case):
    make, pattern, reason = CASES[case]
    mod = make()
    log = partition_log(partition_for_npu(mod))
    assert not any(d.accepted for d in log), log  # (npu.matmul also looks at a matmul, and refuses)
    [d] = [d for d in log if d.pattern == pattern]
    assert (d.pattern, d.accepted) == (pattern, False)
    assert reason in d.reason, d.reason


def test_rank3_fc_runs_over_its_rows():
    """A Dense on a sequence ([1, L, C] @ [C, K]): the NPU maps [1, L, C] as one row of L pixels
    and runs the fully connected layer over them, equal to TVM's CPU build."""
    import npu_byoc
    from npu_byoc.ops.composites import npu_functions
    from npu_byoc.partition.pipeline import partition_for_npu

    mod = _rank_fc()
    part = partition_for_npu(mod)
    assert len(npu_functions(part)) == 1
    x = np.random.default_rng(1).integers(-128, 128, (1, 5, 16), dtype=np.int8)
    got = npu_byoc.build(part, "golden").run([x])[0]
    assert got.shape == (1, 5, 8) and np.array_equal(got, npu_byoc.build(part, "functional").run([x])[0])
    assert np.abs(got.astype(int) - npu_byoc.build(mod, "cpu").run([x])[0].astype(int)).max() <= 1


def test_tile_check_is_the_schedulers_own_refusal(monkeypatch):
    """Without the partition check, the same op fails in the scheduler with the same words:
    the check calls the scheduler's tiling search, it does not re-derive it."""
    mod = _big_kernel_conv()
    refused = _only_decision(mod).reason
    monkeypatch.setattr(dryrun, "lowering_reason", lambda op, hw: None)
    d = _only_decision(mod)
    assert not d.accepted and d.reason == REASON_PREFIX + refused


def test_shift_out_of_range_found_by_the_dry_run(monkeypatch):
    """The dry run checks the lowered ops' shifts as the stream machine does: without the
    partition check, a mean whose shift is 94 still stays on the CPU."""
    monkeypatch.setattr(dryrun, "lowering_reason", lambda op, hw: None)
    d = _only_decision(rb.qdq_mean(output_scale=1e-30))
    assert not d.accepted and d.reason.startswith(REASON_PREFIX + "mean shift 94: NPU shifts lie in [-31, 30]")


def test_one_row_tile_that_fits_is_accepted():
    """The edge just inside: 11x11x2048 weights of one channel (247,808 bytes) plus the 1x4
    input fit the 256 KiB; the partition accepts and the scheduler tiles it."""
    mod = _big_kernel_conv(in_channels=2048, input_hw=(1, 4))
    part = partition_for_npu(mod)
    assert partition_log(part)[0].accepted
    plan = next(iter(lower_module(part).values()))
    tiling = choose_tiling(plan.ops[0], DEFAULT_CONFIG)
    assert tile_sram_bytes(plan.ops[0], tiling.rows, tiling.channels) <= SRAM


# ---------------------------------------------------------------------------------------------
# Lowering failures at compile time: that op goes back to the CPU.


def _conv_chain(layers, input_hw=(8, 8)) -> relax.Expr:
    """NHWC QDQ convolutions in sequence; ``layers``: (in, out, kernel, weight or None)."""
    x = rb._tensor("x", (1, *input_hw, layers[0][0]), "int8")

    def body(bb):
        q = x
        for k, (cin, cout, kernel, weight) in enumerate(layers):
            w = rb.rng_weights((kernel, kernel, cin, cout), seed=k) if weight is None else weight
            xd = bb.emit(R.dequantize(q, rb._scale_const(0.5), rb._zp_const(3), axis=-1))
            s_w = rb.default_weight_scales(cout)
            wd = bb.emit(R.dequantize(relax.const(w), rb._scale_const(s_w), rb._zp_const(np.zeros(cout, np.int8)), axis=3))
            pad = kernel // 2
            y = bb.emit(R.nn.conv2d(xd, wd, padding=(pad, pad, pad, pad), data_layout="NHWC", kernel_layout="HWIO",
                                    out_dtype="float32"))  # fmt: skip
            q = rb._requantize_tail(bb, y, 0.5, 3, "int8")
        return q

    return rb._build([x], body)


@pytest.fixture(scope="module")
def chain():
    """conv 4->2304 (1x1), conv 2304->4 (11x11: no tile fits), conv 4->4 (3x3)."""
    return _conv_chain([(4, 2304, 1, None), (2304, 4, 11, np.ones((11, 11, 2304, 4), np.int8)), (4, 4, 3, None)])


@pytest.mark.slow
def test_op_that_fails_lowering_goes_back_to_the_cpu(chain, monkeypatch):
    """With the tile check removed the middle conv passes the partition checks and fails in
    the scheduler: the dry run sends it (only it) back to the CPU with the scheduler's reason,
    the partition is split around it, and the model compiles and runs exactly as the
    partition the check makes."""
    x = np.random.default_rng(0).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    checked = partition_for_npu(chain)
    monkeypatch.setattr(dryrun, "lowering_reason", lambda op, hw: None)
    fallen = partition_for_npu(chain)

    log = partition_log(fallen)
    assert [d.accepted for d in log] == [True, False, True]
    assert log[1].reason.startswith(REASON_PREFIX) and "1-row x 1-channel tile" in log[1].reason
    assert len(npu_functions(fallen)) == 2  # the chain split around the CPU conv

    out = build(fallen, "golden").run([x])[0]
    assert np.array_equal(out, build(checked, "golden").run([x])[0])
    cpu = build(chain, "cpu").run([x])[0]  # TVM's CPU build of the whole model
    assert np.abs(out.astype(int) - cpu.astype(int)).max() <= 1


def test_failure_no_single_op_is_at_fault_names_every_op(monkeypatch):
    """A lowering failure without a layer (here every lowering refused) still ends in a
    compiled model: every op of the partition goes back to the CPU with the reason."""
    from npu_byoc.codegen import lower
    from npu_byoc.errors import LoweringError

    def refuse(name, func, hw=DEFAULT_CONFIG, **options):
        raise LoweringError(f"{name}: refused for the test")

    monkeypatch.setattr(lower, "lower_partition", refuse)
    mod = rb.qdq_add()
    part = partition_for_npu(mod)
    assert not npu_functions(part)
    (d,) = partition_log(part)
    assert d.reason.endswith("refused for the test") and d.reason.startswith(REASON_PREFIX)
    a = np.arange(256, dtype=np.int8).reshape(1, 8, 8, 4)
    assert np.array_equal(build(part, "golden").run([a, a])[0], build(mod, "cpu").run([a, a])[0])


def _add_fan_in(n: int) -> relax.Expr:
    """x0 + x1 + ... + x{n-1} as a chain of int8 adds: one partition with n inputs."""
    xs = [rb._tensor(f"x{k}", (1, 4, 4, 4), "int8") for k in range(n)]

    def body(bb):
        s = xs[0]
        for x in xs[1:]:
            a = bb.emit(R.dequantize(s, rb._scale_const(0.5), rb._zp_const(0), axis=-1))
            b = bb.emit(R.dequantize(x, rb._scale_const(0.5), rb._zp_const(0), axis=-1))
            s = rb._requantize_tail(bb, bb.emit(R.add(a, b)), 0.5, 0, "int8")
        return s

    return rb._build(xs, body)


@pytest.fixture(scope="module")
def fan_in():
    mod = _add_fan_in(16)
    return mod, partition_for_npu(mod)


def test_partition_needing_more_regions_than_the_driver_binds_is_split(fan_in):
    """16 inputs + 1 output would need regions 2..18 (isa.MAX_REGIONS = 16): the adds reading
    the inputs beyond stay on the CPU until the partition has 13 inputs and 1 output."""
    _, part = fan_in
    (func,) = npu_functions(part).values()
    assert len(func.params) == 13
    refused = [d.reason for d in partition_log(part) if not d.accepted]
    assert len(refused) == 3 and all(r.startswith(REASON_PREFIX) and "the NPU driver binds 16" in r for r in refused)


@pytest.mark.slow
def test_split_partition_runs_on_the_c_model(fan_in):
    """It used to stop with INVALID_REGION on the C functional model (the golden model does
    not bind regions). TVM's CPU build of the same model is the reference."""
    mod, part = fan_in
    xs = [np.full((1, 4, 4, 4), k - 8, np.int8) for k in range(16)]
    assert np.array_equal(build(part, "functional").run(xs)[0], build(mod, "cpu").run(xs)[0])
