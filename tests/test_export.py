"""`npu-byoc export`: the stand-alone C99 library of a model, built with cc alone (make) and with
the Verilated RTL (make rtl), bit-exact with LiteRT's recorded outputs; CPU operators refused
with their reasons; names from model files escaped in the C."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relax

import npu_byoc
from npu_byoc.cli import main
from npu_byoc.frontends.bundled import bundled_model
from npu_byoc.ops.composites import npu_functions
from npu_byoc.runtime.verilator import find_verilator
from npu_byoc.tools.export import ExportError, export_model
from npu_byoc.util import escape

from .conftest import model_path, reference
from .relax_builders import qdq_conv2d

# The C of an export must compile as strict C99: the Makefile's -std=c99 -Wall -Wextra -pedantic
# plus -Werror, with the system's cc and nothing else.
STRICT = ["CC=cc", "CFLAGS=-O2 -Werror"]


def _make(directory: Path, *args: str) -> None:
    proc = subprocess.run(["make", "-C", str(directory), *STRICT, *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _run(exe: Path, x: np.ndarray, work: Path) -> tuple[np.ndarray, str]:
    """model_run on the raw bytes of x: the raw output bytes and what it printed."""
    inp, out = work / "in.bin", work / "out.bin"
    np.ascontiguousarray(x).tofile(inp)
    out.unlink(missing_ok=True)
    proc = subprocess.run([str(exe), str(inp), str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return np.fromfile(out, dtype=np.int8), proc.stderr


@pytest.fixture(scope="session")
def mobilenet(tmp_path_factory) -> Path:
    """The bundled MobileNetV2 exported through the command line and built with `make`."""
    out = tmp_path_factory.mktemp("export") / "mobilenet_v2"
    assert main(["export", str(bundled_model("mobilenet_v2")), "-o", str(out)]) == 0
    _make(out)
    return out


@pytest.fixture(scope="session")
def mobilenet_rtl(mobilenet) -> Path:
    """The same library on the Verilated RTL (`make -j2 rtl`: one object per C++ file, compiled in
    parallel), built once per session."""
    v = find_verilator()
    _make(mobilenet, "-j2", "rtl", f"VERILATOR={v.exe}", f"VERILATOR_ROOT={v.root}")
    return mobilenet / "model_run_rtl"


def test_export_writes_a_self_contained_library(mobilenet):
    for name in ("model.h", "model.c", "model_run.c", "Makefile", "npu_hal.h", "npu_hal_driver.c", "npu_functional.c",
                 "npu_isa.h", "npu_driver.h", "rtl/npu_top.v", "rtl/npu_config.vh", "sim/npu_verilator.cc"):
        assert (mobilenet / name).is_file(), name
    header = (mobilenet / "model.h").read_text()
    assert "uint32_t npu_model_run(const npu_hal_t *hal, const int8_t *input0, int8_t *output0);" in header
    assert "#define NPU_MODEL_INPUT0_BYTES 27648u" in header and "#define NPU_MODEL_OUTPUT0_BYTES 10u" in header
    for path in mobilenet.rglob("*"):  # C (and the Verilog) only: no TVM, no Python, no C++ of npu_byoc's own
        assert path.suffix not in (".py", ".cc", ".cpp", ".so") or path.parts[-2] in ("sim", "obj_rtl"), path


def test_mobilenet_v2_on_the_c_model_is_bit_exact(mobilenet, tmp_path):
    """Every recorded sample, on the C functional model, equals LiteRT's reference kernels."""
    ref = reference("mobilenet_v2_int8.tflite")
    assert ref["reference"].startswith("litert")
    for (x,), (y,) in zip(ref["inputs"], ref["outputs"]):
        got, printed = _run(mobilenet / "model_run", x, tmp_path)
        np.testing.assert_array_equal(got.reshape(y.shape), y)
        assert "NPU cycles" in printed


@pytest.mark.slow
def test_mobilenet_v2_on_the_rtl_is_bit_exact(mobilenet, mobilenet_rtl, tmp_path):
    """The RTL gives the same bytes, and its clock cycles equal the C model's estimate."""
    ref = reference("mobilenet_v2_int8.tflite")
    (x,), (y,) = ref["inputs"][0], ref["outputs"][0]
    got, rtl_printed = _run(mobilenet_rtl, x, tmp_path)
    np.testing.assert_array_equal(got.reshape(y.shape), y)
    _, c_printed = _run(mobilenet / "model_run", x, tmp_path)
    assert rtl_printed == c_printed  # "model_run: OK, N NPU cycles"
    verilated = sorted(p.stem for p in (mobilenet / "obj_rtl").glob("*.cpp"))
    assert len(verilated) > 2 and sorted(p.stem for p in (mobilenet / "obj_rtl").glob("*.o")) == verilated
    assert {p.name for p in (mobilenet / "obj_rtl" / "rt").glob("*.o")} == {
        "verilated.o", "verilated_threads.o", "npu_verilator.o"}  # fmt: skip


# Small fixtures for what MobileNetV2 does not have: several partitions (one stream each, in
# turn), uint8 at the boundary with a reshape left in main, a batch of 2, another configuration.
OTHERS = [
    ("op_split_int8.tflite", []),
    ("tiny_cnn_uint8.tflite", []),
    ("batch2_mean_int8.tflite", []),
    ("tiny_cnn_int8.tflite", ["--hw", "array_rows=16", "--hw", "sram_bytes=128K"]),
]


@pytest.mark.parametrize("name,options", OTHERS, ids=[n for n, _ in OTHERS])
def test_other_models_are_bit_exact_with_litert(name, options, tmp_path):
    out = tmp_path / "lib"
    assert main(["export", str(model_path(name)), "-o", str(out), *options]) == 0
    _make(out)
    if options:
        assert "#define NPU_ARRAY_ROWS 16 " in (out / "npu_isa.h").read_text()
    ref = reference(name)
    assert ref["reference"].startswith("litert")
    for xs, ys in zip(ref["inputs"], ref["outputs"]):
        (tmp_path / "in.bin").write_bytes(b"".join(np.ascontiguousarray(x).tobytes() for x in xs))
        subprocess.run([str(out / "model_run"), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], check=True,
                       capture_output=True)  # fmt: skip
        assert (tmp_path / "out.bin").read_bytes() == b"".join(np.ascontiguousarray(y).tobytes() for y in ys)
    assert (out / "model.c").read_text().count("static const uint32_t npu_model_stream") == (3 if "split" in name else 1)


def test_float_boundary_of_an_onnx_model_is_left_to_the_caller(tmp_path):
    """se_qdq.onnx takes and gives float32: the library takes the int8 input and gives the int8
    output, declaring the scales and zero points of the boundary quantize / dequantize. Quantized
    here, run, dequantized, it equals the golden model's run of the whole model (the boundary on
    TVM's CPU) on every recorded sample."""
    name = "se_qdq.onnx"
    mod = npu_byoc.load_model(model_path(name))
    result = export_model(mod, tmp_path / "lib", model_name=name)
    (t_in,), (t_out,) = result.inputs, result.outputs
    assert (t_in["dtype"], t_in["shape"], t_out["dtype"]) == ("int8", [1, 3, 8, 8], "int8")
    header = (tmp_path / "lib" / "model.c").read_text()
    assert f'{{"input", "int8", 4, input0_shape, NPU_MODEL_INPUT0_BYTES, {t_in["scale"]!r}, {t_in["zero_point"]}}}' in header
    _make(tmp_path / "lib")
    golden = npu_byoc.build(npu_byoc.partition_for_npu(mod), backend="golden")
    for (x,), _ in zip(*[reference(name)[k] for k in ("inputs", "outputs")]):
        q = np.clip(np.rint(x / np.float32(t_in["scale"])) + t_in["zero_point"], -128, 127).astype(np.int8)
        got, _ = _run(tmp_path / "lib" / "model_run", q, tmp_path)
        y = (got.astype(np.int32) - t_out["zero_point"]).astype(np.float32) * np.float32(t_out["scale"])
        np.testing.assert_array_equal(y.reshape(t_out["shape"]), golden.run([x])[0])


def test_a_tensor_between_two_streams_stays_in_the_library(tmp_path):
    """main calls one NPU partition twice, the second on the first's output: two streams, the
    tensor between them in a static buffer; equal to the golden model run twice."""
    part = npu_byoc.partition_for_npu(qdq_conv2d(in_channels=8, out_channels=8))
    (name,) = npu_functions(part)
    gv = part.get_global_var(name)
    x = relax.Var("x", relax.TensorType([1, 8, 8, 8], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.Call(gv, [x]))
            z = bb.emit_output(relax.Call(gv, [y]))
        bb.emit_func_output(z)
    chained = tvm.IRModule({gv: part[name], tvm.ir.GlobalVar("main"): bb.get()["main"]})
    result = export_model(chained, tmp_path / "lib")
    assert result.partitions == (name, name)
    assert "static uint8_t npu_model_p0_output0[512]" in (tmp_path / "lib" / "model.c").read_text()
    _make(tmp_path / "lib")
    once = npu_byoc.build(part, backend="golden")
    x = np.random.default_rng(1).integers(-128, 128, size=(1, 8, 8, 8), dtype=np.int8)
    expected = once.run([once.run([x])[0]])[0]
    got, _ = _run(tmp_path / "lib" / "model_run", x, tmp_path)
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_model_run_refuses_an_input_of_the_wrong_size(mobilenet, tmp_path):
    (tmp_path / "short.bin").write_bytes(b"\0" * 100)
    proc = subprocess.run([str(mobilenet / "model_run"), str(tmp_path / "short.bin"), str(tmp_path / "o.bin")],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"model_run: {tmp_path / 'short.bin'}: expected exactly 27648 bytes of input"]
    assert not (tmp_path / "o.bin").exists()


def test_a_model_with_cpu_operators_is_refused_with_their_list(tmp_path, capsys):
    """tiny_cnn_qdq.onnx keeps its Softmax on the CPU (onnxruntime computes it in float)."""
    path = model_path("tiny_cnn_qdq.onnx")
    with pytest.raises(ExportError) as err:
        export_model(npu_byoc.load_model(path), tmp_path / "out", model_name=path.name)
    message = str(err.value)
    assert message.startswith("tiny_cnn_qdq.onnx: cannot export: 1 operator(s) would run on the CPU")
    assert "Softmax" in message and "onnxruntime computes Softmax in float" in message
    assert not (tmp_path / "out").exists()
    assert main(["export", str(path), "-o", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npu-byoc: error: ") and "Softmax" in lines[0]



def test_excluded_operators_are_named_in_the_refusal(tmp_path, capsys):
    """--exclude partitions the model as the other commands do: the excluded SOFTMAX would run
    on the CPU, so the export refuses the model and says the user kept it there."""
    path = model_path("tiny_cnn_int8.tflite")
    assert main(["export", str(path), "-o", str(tmp_path / "out"), "--exclude", "SOFTMAX"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "1 operator(s) would run on the CPU" in line and "SOFTMAX" in line and "excluded by the user" in line
    assert not (tmp_path / "out").exists()

def test_operators_computed_at_import_are_not_listed(tmp_path):
    """dense_seq_int8.tflite: ten SHAPE / GATHER / PACK ... operators TVM's import computed as
    constants (no run-time work), and one TRANSPOSE kept on the CPU: only the TRANSPOSE counts.
    Whole on the NPU (the TRANSPOSE too), the model exports."""
    path = model_path("dense_seq_int8.tflite")
    mod = npu_byoc.load_model(path)
    with pytest.raises(ExportError, match=r"cannot export: 1 operator\(s\) would run on the CPU.*: TRANSPOSE '[^']+' "
                                          r"\(npu.transpose: excluded by the user \(TRANSPOSE\)\)$"):  # fmt: skip
        export_model(npu_byoc.partition_for_npu(mod, exclude=["TRANSPOSE"]), tmp_path / "out", model_name=path.name)
    assert export_model(mod, tmp_path / "whole", model_name=path.name).partitions

HOSTILE = 'x*/ #define npu_model_run evil /*\n"??/\\'


def test_hostile_names_are_escaped(tmp_path):
    """A tensor name and a model file name that would end a comment, start a directive or end a
    string: the library still builds strictly, the C string holds the name, and it runs exactly
    like the golden model (the NPU's specification)."""
    model = tmp_path / "hostile.json"
    model.write_text(tvm.ir.save_json(qdq_conv2d(input_name=HOSTILE)))
    mod = npu_byoc.load_model(model)
    out = tmp_path / "lib"
    export_model(mod, out, model_name='evil*/\n#error "x')
    for name in ("model.c", "model.h", "Makefile"):
        text = (out / name).read_text()
        assert not re.search(r"^\s*#\s*(error|define npu_model_run)", text, re.M), name  # no directive escaped
        code = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text)  # outside its string literals, no name ends
        assert "x*/" not in code and "evil /*" not in code, name  # or begins a comment
    (out / "names.c").write_text(
        '#include <stdio.h>\n#include "model.h"\nint main(void) { fputs(npu_model_inputs[0].name, stdout); return 0; }\n')
    _make(out)
    subprocess.run(["cc", "-std=c99", "-I", str(out), "-o", str(out / "names"), str(out / "names.c"), str(out / "model.c")],
                   check=True)  # fmt: skip
    printed = subprocess.run([str(out / "names")], capture_output=True, check=True).stdout.decode()
    assert printed == escape.normalize(HOSTILE) == HOSTILE
    x = np.random.default_rng(0).integers(-128, 128, size=(1, 8, 8, 4), dtype=np.int8)
    expected = npu_byoc.build(npu_byoc.partition_for_npu(mod), backend="golden").run([x])[0]
    got, _ = _run(out / "model_run", x, tmp_path)
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)
