"""Every check binds to the hardware configuration it runs with (issue 22, routes 4, 6 and 11).

* accepted => runs: for a sample of fixtures x extreme-but-legal configurations, every partition
  the checks put on the NPU lowers, and its command stream runs on the C functional model with
  status OK and the golden model's outputs (the golden kernels check no unit limit, so they are
  the independent reference for the values; the C model's kick checks are the one for limits);
* RESIZE_BILINEAR's depthwise passes meet max_channels and max_kernel (they did not).
"""

from __future__ import annotations

from npu_byoc.ops import registry
import numpy as np
import pytest

import npu_byoc
from npu_byoc.codegen.lower import lower_module
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.arch.config import configure
from npu_byoc.partition.pipeline import partition_log
from npu_byoc.runtime import golden
from npu_byoc.runtime.functional import FunctionalNpu

from .conftest import model_path
from .relax_builders import qdq_resize2d

# Extreme but inside hwconfig.FIELD_RANGES: a narrow MAC unit, the smallest SRAM on a 1x1 array,
# and every window / reduction limit at its floor.
CONFIGS = {
    "max_channels=4": dict(max_channels=4),
    "tiny": dict(sram_bytes=1024, array_rows=1, array_cols=1),
    "units": dict(max_kernel=1, max_stride=1, max_pool_window=2, max_pool_stride=1, max_mean_elements=4,
                  max_fc_features=16),
}  # fmt: skip
# About a second each: three in the default run, the rest marked slow.
FIXTURES = [
    "resize_bilinear_int8.tflite", "tiny_cnn_int8.tflite", "qop_ops.onnx",
    *(pytest.param(f, marks=pytest.mark.slow) for f in (
        "ds_cnn_int8.tflite", "batch2_mean_int8.tflite", "conv1d_cnn_int8.tflite", "transpose_conv_int8.tflite",
        "op_softmax_beta_int8.tflite", "onnx_ops_qdq.onnx", "lut_ops_qdq.onnx", "dense_seq_int8.tflite",
        "glue_cnn_int8.tflite", "upsample_cnn_int8.tflite", "unet_int8.tflite",
        "se_qdq.onnx", "ops_uint8.tflite")),
]  # fmt: skip


def _random_inputs(plan, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(np.iinfo(io.dtype).min, np.iinfo(io.dtype).max + 1, size=io.shape, dtype=io.dtype)
            for io in plan.inputs]  # fmt: skip


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("fixture", FIXTURES)
def test_accepted_partitions_run_on_the_c_model(fixture, config):
    hw = configure(**CONFIGS[config])
    mod = npu_byoc.partition_for_npu(npu_byoc.load_model(model_path(fixture)), hw=hw)
    npu = FunctionalNpu(hw)
    for name, plan in lower_module(mod, hw).items():
        schedule = schedule_partition(plan, hw)
        inputs = _random_inputs(plan)
        regions, statuses = golden.run_stream(npu, plan, schedule.words(), schedule.constants, inputs)
        assert statuses[-1].ok, f"{name} accepted for {config}, stopped with {statuses[-1]}"
        for got, want in zip(golden.read_outputs(plan, regions), golden.run_plan(plan, inputs)):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fields, limit", [(dict(max_channels=7), "max_channels=7"), (dict(max_kernel=1), "max_kernel=1")])
def test_resize_binds_the_configuration(fields, limit):
    """A 2x half-pixel resize of 8 channels runs as 2-tap depthwise passes over all 8 channels."""
    mod = qdq_resize2d([1, 4, 4, 8], (8, 8), "linear", "half_pixel", output_scale=0.1)
    (default,) = partition_log(npu_byoc.partition_for_npu(mod))
    assert default.pattern == "npu.resize_bilinear" and default.accepted
    (d,) = partition_log(npu_byoc.partition_for_npu(mod, hw=configure(**fields)))
    assert d.pattern == "npu.resize_bilinear" and not d.accepted
    assert limit in d.reason


# --- route 6: the C model's host memory follows the stream, not sram_bytes ---------------------

_CHILD = r"""
import resource, sys
import numpy as np
from npu_byoc.arch.encoder import Dma, encode
from npu_byoc.arch.config import HwConfig
from npu_byoc.arch.isa import Opcode
from npu_byoc.runtime.functional import FunctionalNpu

npu = FunctionalNpu(HwConfig(sram_bytes=1 << 32))  # the library is loaded before the limit
sram_addr, headroom = int(sys.argv[1]), int(sys.argv[2])
vm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + headroom, resource.getrlimit(resource.RLIMIT_AS)[1]))
region = np.arange(64, dtype=np.uint8)
words = encode([Dma(Opcode.DMA_IN, 1, 0, sram_addr, 64), Dma(Opcode.DMA_OUT, 1, 0, sram_addr, 64, stride0=1)])
st = npu.run(words, {1: region})
print(st.status.name, st.word_index, len(words))
"""


def _child(sram_addr: int, headroom: int) -> tuple[str, int, int]:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(sram_addr), str(headroom)], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    name, index, n_words = proc.stdout.split()
    return name, int(index), int(n_words)


def test_c_model_memory_follows_the_stream():
    """A 4 GiB SRAM whose stream touches 64 bytes runs within 64 MiB of host memory (it took 18 x
    sram_bytes up front, and said CYCLE_LIMIT at word 0 when the host had less)."""
    status, index, n_words = _child(sram_addr=4096, headroom=64 << 20)
    assert (status, index) == ("OK", n_words - 1)  # the STOP word


def test_c_model_out_of_memory_is_said_as_such():
    """The same stream at the top of the 4 GiB SRAM needs 4 GiB of host memory: OUT_OF_MEMORY at
    the DMA that needed it, not CYCLE_LIMIT at word 0."""
    status, index, n_words = _child(sram_addr=(1 << 32) - 64, headroom=64 << 20)
    assert status == "OUT_OF_MEMORY" and 3 < index < n_words - 1


# --- route 11: the cycle budget follows the work ------------------------------------------------

ONE_MAC = dict(array_rows=1, array_cols=1)


def _big_conv():
    """302 M MACs: on a 1x1 array about as many cycles, past the harnesses' 200 M default budget."""
    from .relax_builders import qdq_conv2d

    return qdq_conv2d(input_hw=(64, 64), in_channels=64, out_channels=128, kernel=(3, 3), padding=(1, 1))


@pytest.fixture(scope="module")
def big_conv_stream():
    hw = configure(**ONE_MAC)
    mod = npu_byoc.partition_for_npu(_big_conv(), hw=hw)
    (plan,) = lower_module(mod, hw).values()
    return hw, plan, schedule_partition(plan, hw)


def test_budget_follows_the_estimate(big_conv_stream):
    """The generated partition passes twice the stream's estimate; the C model runs the stream
    to its STOP within it, and stops it with CYCLE_LIMIT under the old fixed budget."""
    from npu_byoc.codegen.c_codegen import generate_source
    from npu_byoc.arch.cycles import DEFAULT_MAX_CYCLES, stream_cycles

    hw, plan, schedule = big_conv_stream
    estimate = stream_cycles(schedule.steps, hw)
    assert estimate > DEFAULT_MAX_CYCLES
    src = generate_source(plan, schedule, hw=hw)
    assert f", {2 * estimate}ull, &result)" in src
    npu, inputs = FunctionalNpu(hw), _random_inputs(plan)
    regions, statuses = golden.run_stream(npu, plan, schedule.words(), schedule.constants, inputs)
    assert statuses[-1].status.name == "CYCLE_LIMIT"  # FunctionalNpu.run's default: the old budget
    words = schedule.words()
    status = npu.run(words, golden.allocate_regions(plan, inputs) | {0: np.frombuffer(schedule.constants, np.uint8).copy()},
                     max_cycles=2 * estimate)  # fmt: skip
    assert status.ok and status.cycles == estimate


@pytest.mark.slow
def test_big_conv_on_a_1x1_array_runs_end_to_end():
    """`run` of a legal 302 M-MAC conv on a 1x1 array: the partition is on the NPU and the
    model library's npu_submit_budget lets it finish (it stopped at the fixed 200 M cycles)."""
    from npu_byoc.runtime.build import build

    hw = configure(**ONE_MAC)
    model = build(_big_conv(), "functional", hw=hw)
    assert len(model.plans) == 1
    x = np.random.default_rng(3).integers(-128, 128, (1, 64, 64, 64), dtype=np.int8)
    np.testing.assert_array_equal(model.run([x])[0], build(_big_conv(), "golden", hw=hw).run([x])[0])


# --- routes 4, 6, 11 at the CLI: a stream's error status is one line, exit 2 ---------------------


def test_stream_status_error_is_one_line(tmp_path, capsys, monkeypatch):
    from npu_byoc.cli import main

    data = model_path("tiny_cnn_int8.tflite").parents[3] / "npu_byoc" / "data"
    monkeypatch.setenv("NPU_FUNCTIONAL_MAX_CYCLES", "50")  # the environment's budget wins
    assert main(["run", str(data / "tiny_cnn_int8.tflite"), "--input", str(data / "tiny_cnn_int8.input.npy")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "CYCLE_LIMIT" in err and "command word" in err


def test_out_of_memory_reads_as_such():
    from npu_byoc.errors import NpuByocError
    from npu_byoc.runtime.build import stream_error

    err = stream_error(RuntimeError("Traceback...\n  npu_subgraph_0: the NPU stopped with status OUT_OF_MEMORY at "
                                    "command word 17"))  # fmt: skip
    assert isinstance(err, NpuByocError) and str(err).startswith("out of memory: ") and "\n" not in str(err)
    assert stream_error(RuntimeError("something else")) is None


@pytest.mark.parametrize("fixture", ["resize_bilinear_int8.tflite", "tiny_cnn_int8.tflite", "qop_ops.onnx",
                                     "batch2_mean_int8.tflite", "op_softmax_beta_int8.tflite"])  # fmt: skip
def test_unit_reason_is_what_the_c_model_refuses(fixture):
    """registry.unit_reason against the C model's kick checks, both ways: partitions lowered and
    scheduled for the default configuration, run on a C model with tighter unit limits (the same
    SRAM and array, so the same stream), stop with INVALID_PARAMETER exactly when unit_reason
    names one of their ops."""
    from npu_byoc.arch import limits
    from npu_byoc.arch.config import DEFAULT_CONFIG

    mod = npu_byoc.partition_for_npu(npu_byoc.load_model(model_path(fixture)))
    plans = lower_module(mod, DEFAULT_CONFIG)
    seen = set()
    for fields in (CONFIGS["max_channels=4"], CONFIGS["units"]):
        tight = configure(**fields)
        npu = FunctionalNpu(tight)
        for plan in plans.values():
            schedule = schedule_partition(plan, DEFAULT_CONFIG)
            refused = any(registry.unit_reason(op, tight) for op in plan.ops)
            _, statuses = golden.run_stream(npu, plan, schedule.words(), schedule.constants, _random_inputs(plan))
            assert statuses[-1].status.name == ("INVALID_PARAMETER" if refused else "OK"), plan.name
            seen.add(refused)
    assert True in seen or fixture in ("batch2_mean_int8.tflite", "op_softmax_beta_int8.tflite")  # limits met


def test_sram_beyond_what_the_backends_serve_is_refused_in_one_line(capsys):
    """--hw sram_bytes=4G was in range, then cost 18 x 4 GiB per submit: now the range is what
    the RTL harness and the C model serve (64 MiB), said in one line."""
    from npu_byoc.cli import main

    assert main(["coverage", str(model_path("tiny_cnn_int8.tflite")), "--hw", "sram_bytes=4G"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sram_bytes" in err and "67108864" in err
