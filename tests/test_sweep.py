"""npu-byoc sweep: grid parsing, the measures of a point, the cache, the Pareto front, the
executors (serial, process pool, Ray) and the RTL verification."""

from __future__ import annotations

import json

import pytest

from npu_byoc.cli import main
from npu_byoc.arch.encoder import Dma
from npu_byoc.codegen.lower import lower_module
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.codegen.tiling import tile_sram_bytes
from npu_byoc.errors import NpuByocError
from npu_byoc.arch.config import HwConfig, configure
from npu_byoc.arch import cycles
from npu_byoc.tools.sweep import point, run_sweep, store
from npu_byoc.tools.sweep.grid import parse_grid, points
from npu_byoc.tools.sweep.pareto import area_um2, pareto_front, parse_area_weights, spread

from .conftest import model_path

TINY = model_path("tiny_cnn_int8.tflite")
GRID = {"array_rows": [8, 16], "sram_bytes": [4096, 128 * 1024]}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets an empty sweep cache (the Verilator builds stay in the user's cache)."""
    monkeypatch.setattr(store, "_path", lambda key: tmp_path / "sweep" / f"{key}.json")


@pytest.fixture
def counted(monkeypatch):
    """Count the points measured (not served from the cache); in this process (jobs=1)."""
    calls = []
    evaluate = point.TASKS["point"]

    def counting(model, hw_fields):
        calls.append(hw_fields)
        return evaluate(model, hw_fields)

    monkeypatch.setitem(point.TASKS, "point", counting)
    return calls


# ---------------------------------------------------------------------------------------------
# The grid


def test_grid_values_take_the_hw_syntax():
    grid = parse_grid(["sram_bytes=128K,0x40000,1M", "array_rows=8,16"])
    assert grid == {"sram_bytes": [131072, 262144, 1 << 20], "array_rows": [8, 16]}
    configs = points(grid, configure(array_cols=16))
    assert len(configs) == 6 and {c.array_cols for c in configs} == {16}
    assert configs[0] == HwConfig(array_cols=16, sram_bytes=131072, array_rows=8)
    assert points({}) == [HwConfig()]


@pytest.mark.parametrize(
    "option, message",
    [
        ("array_rows=8,0", "--grid array_rows: array_rows=0: must be in [1, 128]"),
        ("sram_bytes=128K,512", "--grid sram_bytes: sram_bytes=512: must be in [1024, 67108864]"),
        ("array_rows=8,x", "--grid array_rows: 'x' is not an integer"),
        ("rows=8", "--grid rows: unknown hardware field 'rows'"),
        ("array_rows", "--grid 'array_rows': expected FIELD=v1,v2,..."),
        ("array_rows=", "--grid 'array_rows=': expected FIELD=v1,v2,..."),
        ("array_rows=8,8", "--grid array_rows: the value 8 is given twice"),
    ],
)
def test_grid_errors_name_field_value_and_range(option, message):
    with pytest.raises(NpuByocError) as err:
        parse_grid([option])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_grid_field_given_twice():
    with pytest.raises(NpuByocError, match="array_rows: the field is given twice"):
        parse_grid(["array_rows=8", "array_rows=16"])


def test_cli_invalid_grid_value_is_one_line(capsys):
    assert main(["sweep", str(TINY), "--grid", "array_cols=16,256"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "npu-byoc: error: --grid array_cols: array_cols=256: must be in [1, 128]"


def test_cli_model_that_does_not_load_is_one_line(tmp_path, capsys):
    bad = tmp_path / "broken.tflite"
    bad.write_bytes(b"not a flatbuffer")
    assert main(["sweep", str(bad), "--grid", "array_rows=8,16", "--jobs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("npu-byoc: error: ") and "broken.tflite" in err[0]
    assert main(["sweep", str(tmp_path / "missing.tflite"), "--jobs", "1"]) == 2
    assert "missing.tflite: no such model file" in capsys.readouterr().err


def test_area_weights_option():
    assert parse_area_weights("mac=100,dma_byte=0") == {"mac": 100.0, "sram_byte": 2.0, "dma_byte": 0.0}
    assert area_um2(HwConfig(array_rows=2, array_cols=3, sram_bytes=1024, dma_bytes_per_cycle=4),
                    {"mac": 10.0, "sram_byte": 1.0, "dma_byte": 100.0}) == 6 * 10 + 1024 + 400  # fmt: skip
    for bad in ("mac", "gates=3", "mac=-1", "mac=x"):
        with pytest.raises(NpuByocError, match="--area-weights"):
            parse_area_weights(bad)


# ---------------------------------------------------------------------------------------------
# The Pareto front


def test_pareto_front_of_a_hand_built_set():
    # (cycles, area): (5, 3) is dominated by (5, 2); (6, 6) by (5, 2); equal points both stay
    pts = [(10, 1), (5, 2), (5, 3), (1, 10), (6, 6), (10, 1), (11, 1)]
    assert pareto_front(pts) == [True, True, False, True, False, True, False]
    assert pareto_front([]) == []
    assert spread([4, 7, 9, 12, 20], 3) == [4, 9, 20]
    assert spread([4, 7], 3) == [4, 7] and spread([4, 7], 1) == [4] and spread([4, 7], 0) == []


# ---------------------------------------------------------------------------------------------
# The measures of a point


def test_tiny_cnn_2x2_measures_equal_the_cycle_model(imported, counted):
    result = run_sweep([TINY], GRID)
    assert len(result.points) == 4 and len(counted) == 4
    assert [tuple(p["config"].values()) for p in result.points] == [(8, 4096), (8, 131072), (16, 4096), (16, 131072)]
    assert all(p["error"] is None for p in result.points)

    # one point, recomputed here from the flow's own stages
    p = result.points[2]
    hw = HwConfig(array_rows=16, sram_bytes=4096)
    import npu_byoc

    part = npu_byoc.partition_for_npu(imported("tiny_cnn_int8.tflite"), hw=hw)
    total = ext = macs = high = 0
    for plan in lower_module(part, hw).values():
        schedule = schedule_partition(plan, hw)
        total += cycles.stream_cycles(schedule.steps, hw)
        ext += sum(s.nbytes for s in schedule.steps if isinstance(s, Dma))
        macs += plan.macs
        high = max([high] + [tile_sram_bytes(op, t.rows, t.channels) for op, t in zip(plan.ops, schedule.tilings)])
    assert p["cycles"] == total and p["external_bytes"] == ext and p["npu_macs"] == macs
    assert p["sram_high_water"] == high <= 4096
    assert p["utilization"] == pytest.approx(macs / (total * 16 * 32))
    cov = npu_byoc.coverage_report(part).summary
    assert (p["ops_offloaded"], p["ops_total"], p["partitions"]) == (cov["ops_offloaded"], cov["ops_total"], 1)
    # every offloaded MAC is on the NPU (the dilated 3x3 conv's zero-inserted 5x5 kernel counts
    # its 9 model taps: the inserted zeros are array work, not MACs)
    assert p["macs_offloaded"] == cov["macs_offloaded"] == macs
    assert p["area_um2"] == 16 * 32 * 400 + 4096 * 2 + 16 * 1000

    # a larger SRAM needs fewer tiles: fewer cycles and less traffic, at more area
    big = result.points[3]
    assert big["cycles"] < p["cycles"] and big["external_bytes"] < p["external_bytes"]
    fronts = [q["pareto"] for q in result.points]
    expected = pareto_front([(q["cycles"], q["area_um2"]) for q in result.points])
    assert fronts == expected and fronts[0]  # the smallest configuration is always on the front


def test_infeasible_point_says_why():
    """MobileNetV2's classifier does not fit a 1.5 KiB SRAM even as 1-row x 1-channel tiles (2592
    bytes; tiny_cnn's largest tile, the dilated conv's 1360 bytes, does): that point is
    infeasible, with the scheduler's reason."""
    result = run_sweep([TINY, model_path("mobilenet_v2_int8.tflite")], {"sram_bytes": [1536]})
    tiny, mobilenet = result.points
    assert tiny["error"] is None and tiny["pareto"]
    assert "bytes of SRAM" in mobilenet["error"] and not mobilenet["pareto"] and "cycles" not in mobilenet
    text = result.to_text()
    assert "infeasible at SRAM=1.5K: layer " in text and "needs 2592 bytes of SRAM, the NPU has 1536" in text
    assert result.to_csv().count("\n") == 3


# ---------------------------------------------------------------------------------------------
# The cache


def test_cache_hit_recomputes_nothing(counted, monkeypatch):
    first = run_sweep([TINY], GRID)
    assert len(counted) == 4
    again = run_sweep([TINY], GRID)
    assert len(counted) == 4 and again.to_json() == first.to_json()
    run_sweep([TINY], GRID, use_cache=False)  # --no-cache measures again
    assert len(counted) == 8
    monkeypatch.setattr(store, "code_version", lambda: "another compiler")
    run_sweep([TINY], GRID)  # other code: the cached points do not count
    assert len(counted) == 12


def test_interrupted_sweep_resumes(monkeypatch):
    evaluate, done = point.TASKS["point"], []

    def dies_after_two(model, hw_fields):
        if len(done) == 2:
            raise KeyboardInterrupt
        done.append(hw_fields)
        return evaluate(model, hw_fields)

    monkeypatch.setitem(point.TASKS, "point", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        run_sweep([TINY], GRID)
    done.clear()
    monkeypatch.setitem(point.TASKS, "point", lambda m, hw: done.append(hw) or evaluate(m, hw))
    result = run_sweep([TINY], GRID)
    assert len(done) == 2 and len(result.points) == 4  # the two measured before the interrupt were kept


def test_cli_formats_and_plot(tmp_path, capsys):
    args = ["sweep", str(TINY), "--grid", "array_rows=8,16", "--grid", "sram_bytes=4K,128K", "--jobs", "1",
            "--no-progress"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "tiny_cnn_int8.tflite: 4 configuration(s)" in out and "   *" in out
    assert main([*args, "--format", "csv", "-o", str(tmp_path / "s.csv"), "--plot", str(tmp_path / "p.png")]) == 0
    rows = (tmp_path / "s.csv").read_text().splitlines()
    assert rows[0].startswith("model,array_rows,sram_bytes,ops_total") and len(rows) == 5
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([*args, "--format", "json", "-o", str(tmp_path / "s.json")]) == 0
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["grid"] == {"array_rows": [8, 16], "sram_bytes": [4096, 131072]} and len(data["points"]) == 4


# ---------------------------------------------------------------------------------------------
# Executors: the same JSON whichever way the points ran


@pytest.mark.slow
def test_process_pool_equals_serial():
    serial = run_sweep([TINY], GRID, jobs=1, use_cache=False).to_json()
    assert run_sweep([TINY], GRID, jobs=2, use_cache=False).to_json() == serial


@pytest.mark.slow
def test_ray_local_equals_process_pool():
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'npu_byoc[ray]')")
    pool = run_sweep([TINY], GRID, jobs=2, use_cache=False).to_json()
    assert run_sweep([TINY], GRID, jobs=2, ray=True, use_cache=False).to_json() == pool


# ---------------------------------------------------------------------------------------------
# --verify: the RTL against the analytic model and the golden model

SMALL_RTL = HwConfig(array_rows=4, array_cols=8)  # with 4 KiB SRAM: built by test_rtl_stream too


@pytest.mark.slow
def test_verify_one_point_on_the_rtl():
    result = run_sweep([TINY], {"sram_bytes": [4096]}, SMALL_RTL, verify=1)
    (p,) = result.points
    v = p["verify"]
    assert v["ok"] and v["rtl_cycles"] == p["cycles"] == v["predicted_cycles"] and v["max_diff_golden"] == 0
    assert [r["partition"] for r in v["partitions"]] == sorted(r["partition"] for r in v["partitions"])
    assert len(v["partitions"]) == p["partitions"] == 1


@pytest.mark.slow
def test_verify_fails_loudly_on_a_cycle_difference(monkeypatch, capsys):
    """A cycle model one cycle off per stream: the RTL disagrees and the command exits 1."""
    real = cycles.stream_cycles
    monkeypatch.setattr(cycles, "stream_cycles", lambda steps, hw: real(steps, hw) + 1)
    args = ["sweep", str(TINY), "--grid", "sram_bytes=4K", "--hw", "array_rows=4", "--hw", "array_cols=8",
            "--verify", "1", "--jobs", "1", "--no-progress"]  # fmt: skip
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "RTL MISMATCH" in captured.out
    assert "the RTL differs from the analytic model or the golden model at 1 point(s)" in captured.err
