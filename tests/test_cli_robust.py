"""One clean line, exit status 2, for the file errors a user can cause; quiet on a closed pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from npu_byoc.cli import main
from npu_byoc.partition.docs import pattern_table_text

from .conftest import model_path


def test_output_into_missing_directory_is_created(tmp_path):
    out = tmp_path / "new" / "dir" / "patterns.txt"
    assert main(["patterns", "-o", str(out)]) == 0
    assert out.read_text() == pattern_table_text()


def test_output_directory_that_cannot_be_created_is_refused(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    out = blocker / "sub" / "cov.json"
    assert main(["coverage", str(model_path("tiny_cnn_qdq.onnx")), "--format", "json", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{out}: cannot create the directory" in err[0], err


def test_broken_pipe_is_quiet():
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    p = subprocess.Popen([sys.executable, "-m", "npu_byoc.cli", "patterns"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=root)  # fmt: skip
    p.stdout.close()  # the reader is gone before the first write, as `| head -0` does
    err = p.stderr.read().decode()
    p.wait()
    assert "Traceback" not in err and "BrokenPipe" not in err, err


# ---------------------------------------------------------------------------------------------
# Inputs are checked before compiling; compiler output goes to a log; no TVM warnings.


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _no_build(*args, **kwargs):
    raise AssertionError("compiled before checking the inputs")


def test_run_checks_the_input_shape_before_compiling(tmp_path, capsys, monkeypatch):
    import numpy as np

    from npu_byoc.runtime import build as build_module

    monkeypatch.setitem(build_module.BACKENDS, "functional", _no_build)
    bad = tmp_path / "x.npy"
    np.save(bad, np.zeros((1, 3, 32, 32), np.int8))  # the model takes NHWC [1, 32, 32, 3]
    assert main(["run", str(model_path("tiny_cnn_int8.tflite")), "--input", str(bad)]) == 2
    line = _one_line(capsys)
    assert f"{bad}: input " in line and "must be int8 [1, 32, 32, 3], got int8 [1, 3, 32, 32]" in line, line


def test_run_checks_the_input_count_before_compiling(tmp_path, capsys, monkeypatch):
    import numpy as np

    from npu_byoc.runtime import build as build_module

    monkeypatch.setitem(build_module.BACKENDS, "functional", _no_build)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 32, 32, 3), np.int8))
    model = model_path("tiny_cnn_int8.tflite")
    assert main(["run", str(model), "--input", str(x), "--input", str(x)]) == 2
    assert f"{model}: the model takes 1 input(s)" in _one_line(capsys)


def test_no_blockbuilder_warning_after_an_import_error(tmp_path):
    """An importer refusing an operator inside TVM's BlockBuilder scopes used to leave TVM
    printing "BlockBuilder destroyed with remaining blocks!" after the clean error."""
    import npu_byoc

    from .test_tflite_ops import _load, _name, _with_output_scale_doubled

    src = model_path(_name("transpose"))
    ops = [npu_byoc.model_info(_load(_name("transpose"))).ops[k].op for k in range(3)]
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(_with_output_scale_doubled(src, ops.index("TRANSPOSE")))
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    p = subprocess.run([sys.executable, "-m", "npu_byoc.cli", "coverage", str(bad)], capture_output=True, text=True,
                       env=env, cwd=root)  # fmt: skip
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "TRANSPOSE: input and output quantization" in err[0], err


def _failing_compiler(tmp_path) -> Path:
    cxx = tmp_path / "fake-g++"
    cxx.write_text("#!/bin/sh\nfor i in $(seq 3000); do echo \"npu.cc:$i: warning: noise\" >&2; done\n"
                   "echo 'npu.cc:7:1: error: the compiler broke' >&2\nexit 1\n")  # fmt: skip
    cxx.chmod(0o755)
    return cxx


def test_compiler_failure_is_one_line_naming_its_log(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CXX", str(_failing_compiler(tmp_path)))
    monkeypatch.setenv("NPU_BYOC_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "model.so"
    assert main(["compile", str(model_path("tiny_cnn_int8.tflite")), "-o", str(out)]) == 2
    line = _one_line(capsys)
    assert "compiling the C functional model failed: npu.cc:7:1: error: the compiler broke" in line, line
    log = Path(line.rsplit("(full output: ", 1)[1].rstrip(")"))
    text = log.read_text()
    assert text.startswith(f"$ {tmp_path / 'fake-g++'} ") and text.count("warning: noise") == 3000


def test_verilator_step_failure_names_its_log(tmp_path, monkeypatch):
    from npu_byoc.runtime import verilator

    monkeypatch.setenv("NPU_BYOC_CACHE", str(tmp_path))
    try:
        verilator._run(["sh", "-c", "echo 'V.cpp:1: error: boom' >&2; exit 3"], "linking")
    except verilator.VerilatorBuildError as err:
        message = str(err)
    assert "\n" not in message and message.startswith("linking failed: V.cpp:1: error: boom (full output: ")
    assert "boom" in Path(message.rsplit("(full output: ", 1)[1].rstrip(")")).read_text()


def test_model_library_link_failure_names_its_log(tmp_path, monkeypatch):
    from npu_byoc.errors import NpuByocError
    from npu_byoc.arch.config import DEFAULT_CONFIG
    from npu_byoc.partition.pipeline import partition_for_npu
    from npu_byoc.runtime.build import export_model_library

    from . import relax_builders as rb

    monkeypatch.setenv("NPU_BYOC_CACHE", str(tmp_path))
    out = tmp_path / "m.so"
    missing = tmp_path / "no_such_driver.cc"
    try:
        export_model_library(partition_for_npu(rb.qdq_add()), str(out), DEFAULT_CONFIG, "llvm", [str(missing)])
    except NpuByocError as err:
        message = str(err)
    assert "\n" not in message and message.startswith(f"{out}: compiling the model library failed: "), message
    assert "no_such_driver.cc" in Path(message.rsplit("(full output: ", 1)[1].rstrip(")")).read_text()


@pytest.mark.parametrize("scale", [0.0, float("nan"), -0.25])
def test_relax_json_with_a_bad_scale_is_refused(tmp_path, capsys, scale):
    import tvm

    from . import relax_builders as rb

    p = tmp_path / "bad_scale.json"
    p.write_text(tvm.ir.save_json(rb.qdq_conv2d(output_scale=scale)))
    assert main(["coverage", str(p)]) == 2
    assert _one_line(capsys) == f"npu-byoc: error: {p}: quantize with scale {scale}: scales must be finite and > 0"


def test_byte_mutants_of_a_tflite_file_load_or_fail_cleanly(tmp_path):
    """Random byte changes (seed 1: mutants 5, 36, 45, ... used to escape the import
    validation as struct.error / ValueError from the flatbuffer reader)."""
    import random

    import npu_byoc
    from npu_byoc.errors import NpuByocError

    src = model_path("tiny_cnn_int8.tflite").read_bytes()
    rng = random.Random(1)
    outcomes = []
    for k in range(60):
        data = bytearray(src)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        p = tmp_path / f"mutant_{k}.tflite"
        p.write_bytes(data)
        try:
            npu_byoc.load_model(p)
            outcomes.append("loaded")
        except NpuByocError as err:
            assert "\n" not in str(err) and str(p) in str(err)
            outcomes.append("refused")
    assert "refused" in outcomes and "loaded" in outcomes


# ---------------------------------------------------------------------------------------------
# One line and exit 2 instead of a traceback (issue 22, route 8).


def test_npz_as_input_is_one_line(tmp_path, capsys, monkeypatch):
    import numpy as np

    from npu_byoc.runtime import build as build_module

    monkeypatch.setitem(build_module.BACKENDS, "functional", _no_build)
    x = tmp_path / "x.npz"
    np.savez(x, input=np.zeros((1, 32, 32, 3), np.int8))
    assert main(["run", str(model_path("tiny_cnn_int8.tflite")), "--input", str(x)]) == 2
    assert f"{x}: a .npz archive, not a .npy array" in _one_line(capsys)


def test_reference_of_the_wrong_shape_is_one_line(tmp_path, capsys, monkeypatch):
    import numpy as np

    from npu_byoc.runtime import build as build_module

    for backend in ("golden", "cpu"):
        monkeypatch.setitem(build_module.BACKENDS, backend, _no_build)
    x, ref = tmp_path / "x.npy", tmp_path / "ref.npy"
    np.save(x, np.zeros((1, 32, 32, 3), np.int8))
    np.save(ref, np.zeros((1, 3), np.int8))  # the model's output is [1, 10]
    assert main(["compare", str(model_path("tiny_cnn_int8.tflite")), "--input", str(x), "--reference", str(ref)]) == 2
    line = _one_line(capsys)
    assert f"{ref}: reference int8 [1, 3] does not fit the model output" in line and "[1, 10]" in line, line


@pytest.mark.parametrize("command", [
    ["coverage", "{model}", "-o", "{dir}"],
    ["cosim", "{model}", "--input", "{x}", "--report", "{dir}"],
    ["sweep", "{model}", "--plot", "{dir}"],
])  # fmt: skip
def test_output_naming_a_directory_is_one_line(tmp_path, capsys, command):
    values = {"model": str(model_path("tiny_cnn_int8.tflite")), "dir": str(tmp_path), "x": str(tmp_path / "x.npy")}
    assert main([a.format(**values) for a in command]) == 2
    assert f"{tmp_path}: is a directory" in _one_line(capsys)


def test_onnx_input_with_a_zero_dimension_is_one_line(tmp_path, capsys):
    import numpy as np
    import onnx

    m = onnx.load(str(model_path("onnx_ops_qdq.onnx")))
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 0
    bad, x = tmp_path / "zero.onnx", tmp_path / "x.npy"
    onnx.save(m, str(bad))
    np.save(x, np.zeros((0, 3, 8, 8), np.float32))
    assert main(["run", str(bad), "--input", str(x)]) == 2
    line = _one_line(capsys)
    assert f"{bad}: input " in line and "has a dimension 0 (shape [0, 3, 8, 8])" in line, line


_MATHTEXT = "net$\\frac{$.tflite"  # not valid mathtext: matplotlib raised at savefig


def test_cosim_plot_title_takes_a_file_name_literally(tmp_path):
    from npu_byoc.runtime.cosim_report import CosimReport, plot_utilization

    report = CosimReport(model=_MATHTEXT, hw={"array_rows": 8, "array_cols": 8}, layers=[])
    report.summary = {"cycles": 5, "utilization": 0.5}
    plot_utilization(report, tmp_path / "u.png")
    assert (tmp_path / "u.png").read_bytes().startswith(b"\x89PNG")



def test_cosim_plot_draws_every_mac_class(tmp_path):
    """Every MAC class the report knows has a colour and a legend name: a model with a transposed
    conv raised KeyError in --plot."""
    from npu_byoc.runtime.cosim_report import CLASS_COLOURS, CLASS_NAMES, MAC_CLASSES, CosimReport, LayerResult
    from npu_byoc.runtime.cosim_report import plot_utilization

    assert set(MAC_CLASSES) <= set(CLASS_COLOURS) and set(MAC_CLASSES) <= set(CLASS_NAMES)
    layers = [LayerResult(k, "p", f"l{k}", c, "", 8, 10, 8, 1, 1, 10, 4.0, 0.5, 0.4, 0, 0, 1, 0.0)
              for k, c in enumerate(MAC_CLASSES)]
    report = CosimReport(model="m.tflite", hw={"array_rows": 8, "array_cols": 8}, layers=layers)
    report.summary = {"cycles": 60, "utilization": 0.5}
    plot_utilization(report, tmp_path / "u.png")
    assert (tmp_path / "u.png").read_bytes().startswith(b"\x89PNG")

def test_sweep_plot_title_takes_a_file_name_literally(tmp_path):
    from npu_byoc.tools.sweep import SweepResult

    point = {"model": _MATHTEXT, "error": None, "area_um2": 1e6, "cycles": 10, "pareto": True,
             "config": {"array_rows": 8}}  # fmt: skip
    SweepResult(grid={"array_rows": [8]}, base={}, area_weights={}, points=[point]).plot(tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")


def test_relax_string_constant_is_one_line(tmp_path, capsys, monkeypatch):
    import numpy as np
    import tvm
    from tvm import relax

    from npu_byoc.runtime import build as build_module

    monkeypatch.setitem(build_module.BACKENDS, "functional", _no_build)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 8, 4), "int8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.abs(x))
            s = bb.emit(tvm.ir.StringImm("hello"))
            out = bb.emit_output(relax.Tuple([y, s]))
        bb.emit_func_output(out)
    path, xs = tmp_path / "m.json", tmp_path / "x.npy"
    path.write_text(tvm.ir.save_json(bb.get()))
    np.save(xs, np.zeros((1, 8, 8, 4), np.int8))
    assert main(["run", str(path), "--input", str(xs)]) == 2  # the Relax file check refuses it at load
    line = _one_line(capsys)
    assert line.startswith(f"npu-byoc: error: {path}: ") and "StringImm" in line, line


def test_ctrl_c_exits_130_in_one_line(capsys, monkeypatch):
    import npu_byoc.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_patterns", interrupted)
    assert main(["patterns"]) == 130
    assert capsys.readouterr().err == "npu-byoc: interrupted\n"


def test_ctrl_c_during_a_sweep_is_quiet(tmp_path):
    """The terminal sends SIGINT to the whole process group: the pool's workers too."""
    import signal
    import time

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root), NPU_BYOC_CACHE=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-m", "npu_byoc.cli", "sweep", "tiny_cnn", "--grid", "array_rows=2,4,8,16",
                          "--grid", "array_cols=2,4,8,16", "--jobs", "2", "--no-cache"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=root, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.rglob("*.json")) and time.monotonic() < deadline:  # a point was stored
            time.sleep(0.2)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    lines = [s for s in err.decode().splitlines() if s.strip() and not s.startswith("sweep")]
    assert p.returncode == 130 and lines == ["npu-byoc: interrupted"], err.decode()[-2000:]


# ---------------------------------------------------------------------------------------------
# Bounded inputs (issue 22, route 10).


@pytest.mark.parametrize("name", ["/dev/zero", "{dir}"])
def test_hw_file_must_be_a_regular_file(tmp_path, capsys, name):
    path = name.format(dir=tmp_path)
    assert main(["hw", "--hw-file", path]) == 2
    assert _one_line(capsys) == f"npu-byoc: error: {path}: not a regular file (--hw-file takes a TOML file)"


def test_hw_file_has_a_size_cap(tmp_path, capsys):
    from npu_byoc.arch.options import MAX_FILE_BYTES

    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * MAX_FILE_BYTES + "\narray_rows = 16\n")
    assert main(["hw", "--hw-file", str(big)]) == 2
    assert f"{big}: {big.stat().st_size} bytes, more than a hardware configuration's {MAX_FILE_BYTES}" in _one_line(capsys)


def _grid(n: int) -> list[str]:
    """--grid options of n distinct values per field over four fields (n**4 points)."""
    values = ",".join(str(v) for v in range(1, n + 1))
    return [a for f in ("array_rows", "array_cols", "max_kernel", "dma_bytes_per_cycle") for a in ("--grid", f"{f}={values}")]


def test_sweep_refuses_above_max_points_before_making_any(tmp_path, capsys, monkeypatch):
    from npu_byoc.tools import sweep
    from npu_byoc.tools.sweep import grid

    monkeypatch.setattr(grid, "configure", _no_build)  # counted, never generated
    model = str(model_path("tiny_cnn_int8.tflite"))
    assert main(["sweep", model, model, *_grid(6)]) == 2  # 2 models x 1296 configurations
    assert _one_line(capsys) == (f"npu-byoc: error: the sweep has 2,592 points (2 model(s) x 1,296 configurations), "
                                 f"more than the limit of {sweep.MAX_POINTS:,}: raise it with --max-points 2592 "
                                 "to run them all")  # fmt: skip


def test_sweep_max_points_lets_a_larger_grid_through(tmp_path, capsys):
    missing = str(tmp_path / "missing.tflite")
    assert main(["sweep", missing, *_grid(6), "--max-points", "1295"]) == 2
    assert "more than the limit of 1,295" in _one_line(capsys)
    assert main(["sweep", missing, *_grid(6), "--max-points", "1296"]) == 2
    assert _one_line(capsys) == f"npu-byoc: error: {missing}: no such model file"  # past the limit


def test_sweep_points_are_generated_lazily():
    from npu_byoc.tools.sweep.grid import iter_points, point_count

    huge = {f: list(range(1, 101)) for f in ("array_rows", "array_cols", "max_kernel", "dma_bytes_per_cycle")}
    assert point_count(huge) == 100_000_000
    first = next(iter_points(huge))
    assert (first.array_rows, first.array_cols, first.max_kernel) == (1, 1, 1)


# ---------------------------------------------------------------------------------------------
# Reports that tell the truth (issue 22, route 12).


def test_run_output_is_written_under_the_name_it_prints(tmp_path, capsys):
    import numpy as np

    model = npu_byoc_data("tiny_cnn_int8.tflite")
    out = tmp_path / "result"  # no suffix: numpy would have written result.npy
    assert main(["run", str(model), "--input", str(model.with_suffix(".input.npy")), "--backend", "cpu",
                 "--output", str(out)]) == 0  # fmt: skip
    assert capsys.readouterr().err.strip() == f"wrote {out}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result"]
    assert np.load(out).shape == (1, 10)


def npu_byoc_data(name: str) -> Path:
    return Path(__file__).resolve().parents[1] / "npu_byoc" / "data" / name


# ---------------------------------------------------------------------------------------------
# compile -o is atomic (issue 22, route 11): concurrent compiles of one output never see a
# half-written library.


def test_compile_output_is_replaced_atomically(tmp_path, capsys, monkeypatch):
    import stat

    import tvm

    monkeypatch.setenv("NPU_BYOC_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "model.so"
    out.write_bytes(b"the previous library")
    seen = []
    original = tvm.runtime.Executable.export_library

    def export(self, file_name, *args, **kwargs):
        original(self, file_name, *args, **kwargs)
        # Linked in full elsewhere while the old library is still in place.
        seen.append((Path(file_name).parent == out.parent, Path(file_name) != out, out.read_bytes()))

    monkeypatch.setattr(tvm.runtime.Executable, "export_library", export)
    assert main(["compile", str(model_path("tiny_cnn_int8.tflite")), "-o", str(out)]) == 0
    assert seen == [(True, True, b"the previous library")]
    assert out.read_bytes().startswith(b"\x7fELF") and sorted(p.name for p in tmp_path.iterdir()) == ["cache", "model.so"]
    assert stat.S_IMODE(out.stat().st_mode) & 0o700 == 0o700
    assert f"wrote {out}" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["compile", "-o", "{tmp}/lib.so"], ["cosim", "--input", "{tmp}/x.npy"],
                                     ["export", "-o", "{tmp}/out"]])  # fmt: skip
def test_a_model_that_does_not_fit_the_sram_is_refused_in_one_line(tmp_path, capsys, command):
    """tiny_cnn_qdq's 5x5 conv (6x6x24 -> 6x6x8) cannot fit 1 KiB: its smallest tile is 1 output
    row x 1 channel, reading 5 input rows of 6 x 24 bytes (720), 5 x 5 x 24 weights (600 -> 608,
    16-byte aligned), 6 output bytes (16) and one 12-byte requantize record (16): 1360 bytes."""
    import numpy as np

    np.save(tmp_path / "x.npy", np.zeros((1, 3, 32, 32), np.float32))
    args = [a.format(tmp=tmp_path) for a in command]
    assert main([args[0], str(model_path("tiny_cnn_qdq.onnx")), *args[1:], "--hw", "sram_bytes=1K"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "does not fit sram_bytes=1024: layer 'conv_dilated'" in err
    assert "needs 1360 bytes of SRAM, the NPU has 1024" in err
