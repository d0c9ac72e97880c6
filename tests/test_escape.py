"""Model-supplied strings are data, never code: every writer escapes them for where they go.

Unit tests hold each escaping function to its target's grammar (the C++ string literal is
compiled and printed back by g++, the CSV parsed back by the csv module). The end-to-end
tests reproduce the injection routes found against earlier versions — a TFLite input tensor
name, ONNX node and input names, a Relax parameter name and the model's file name — and
check that the built model runs exactly like the same model with plain names, and that the
payload (``std::system("touch ...")``, ``#error``) never ran nor reached the compiler as code.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
import tvm

import npu_byoc
from npu_byoc.util import escape
from npu_byoc.codegen import c_codegen
from npu_byoc.partition.coverage import CoverageReport, OpCoverage
from npu_byoc.runtime.cosim_report import CosimReport, LayerResult

from . import relax_builders as rb
from .conftest import model_path, reference

HOSTILE = [
    "plain_name",
    "a\nb",
    "end */ start /* x",
    'quote " and \' quotes',
    "back\\slash\\",
    "trigraph ??/\nnext",
    "#include <cstdlib>",
    "nul\x00byte",
    "bad utf8 \udcff\udcfe",  # what surrogateescape leaves of invalid UTF-8
    b"raw \xff\xfe bytes",
    "x" * 100_000,
    "\x1b[31mred\x1b[0m \u202ereversed",
    "=HYPERLINK(\"http://x\")",
    "@SUM(A1)",
    "-2+3",
    "tab\tcr\r",
    "| pipe | `code` <b>html</b> [link](x) *em*",
    "ünïcödé",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_c_comment_stays_one_inert_comment(value):
    out = escape.c_comment(value)
    assert re.fullmatch(r"[A-Za-z0-9 _\-+=.,:;/()\[\]{}<>#@!&|^~'\"$%]*", out)
    assert "\\" not in out and "?" not in out and "*" not in out
    assert len(out) <= 3 * 4 * escape.MAX_LENGTH


@pytest.mark.parametrize("value", HOSTILE)
def test_c_identifier(value):
    assert escape.is_c_identifier(escape.c_identifier(value))


def test_c_string_compiles_back_to_the_value(tmp_path):
    """g++ compiles every escaped literal, and the program prints exactly the name's bytes."""
    lines = ["#include <cstdio>", "#include <cstdlib>", "int main(int argc, char** argv) {", "  switch (std::atoi(argv[1])) {"]
    for k, v in enumerate(HOSTILE):
        lines.append(f'  case {k}: {{ static const char s[] = "{escape.c_string(v)}"; std::fwrite(s, 1, sizeof s - 1, stdout); break; }}')
    lines += ["  }", "  return 0;", "}"]
    src = tmp_path / "strings.cc"
    src.write_text("\n".join(lines))
    exe = tmp_path / "strings"
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-o", str(exe), str(src)], check=True)
    printed = [subprocess.run([str(exe), str(k)], check=True, capture_output=True).stdout for k in range(len(HOSTILE))]
    assert printed == [escape.normalize(v).encode() for v in HOSTILE]


@pytest.mark.parametrize("value", HOSTILE)
def test_text_has_no_control_characters(value):
    out = escape.text(value)
    assert not re.search(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e]", out)
    assert len(out) <= escape.MAX_LENGTH
    out.encode("utf-8")  # valid UTF-8: no lone surrogates


@pytest.mark.parametrize("value", HOSTILE)
def test_markdown_cell_is_literal(value):
    out = escape.markdown(value)
    assert "\n" not in out and "<" not in out and ">" not in out
    assert not re.search(r"(?<!\\)[|`*\[\]]", out)


def test_csv_cells_parse_back_and_never_start_a_formula():
    buf = io.StringIO()
    csv.writer(buf).writerows([[escape.csv_cell(v), escape.csv_cell(-3), escape.csv_cell(1.5)] for v in HOSTILE])
    rows = list(csv.reader(io.StringIO(buf.getvalue())))
    assert len(rows) == len(HOSTILE)
    for row in rows:
        assert row[0][:1] not in ("=", "+", "-", "@", "\t", "\r")
        assert row[1:] == ["-3", "1.5"]  # numbers untouched


@pytest.mark.parametrize("value", HOSTILE + ["..", ".hidden", "a/b/../c"])
def test_file_name(value):
    out = escape.file_name(value)
    assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", out)


def test_template_refuses_an_unescaped_string():
    """The generated-C template fails closed: a string it prints without a filter must be inert."""
    with pytest.raises(Exception, match="unescaped"):
        c_codegen._finalize('x"); system("touch y")')
    assert c_codegen._finalize("npu_subgraph_0") == "npu_subgraph_0"


# ---------------------------------------------------------------------------------------------
# Reports


def _report(name: str) -> CoverageReport:
    op = OpCoverage(0, name, name, False, None, f"no NPU pattern for {name}", 0)
    summary = dict(ops_offloaded=0, ops_total=1, macs_offloaded=0, macs_total=0, partitions=0, transitions=0)
    return CoverageReport(name, "tflite", summary, [op])


@pytest.mark.parametrize("value", HOSTILE)
def test_coverage_reports_are_inert(value):
    if isinstance(value, bytes):  # what a lenient decoder hands on
        value = value.decode("utf-8", "surrogateescape")
    report = _report(value)
    for line in report.to_text().splitlines()[4:]:
        assert not re.search(r"[\x00-\x1f\x7f]", line)
    assert len(report.to_text().splitlines()) == 6  # one line per op, whatever the name
    md = report.to_markdown()
    assert len(md.splitlines()) == 9 and "<" not in md.split("\n", 1)[1]
    assert json.loads(report.to_json())["ops"][0]["name"] == value  # JSON escapes, and round-trips the name
    assert "<b>html</b>" not in report.to_html() and "\x1b" not in report.to_html()


def test_cosim_csv_has_no_formula(tmp_path):
    fields = {f: 0 for f in LayerResult.__dataclass_fields__}
    fields.update(name='=HYPERLINK("http://x","y")', partition="npu_subgraph_0", op="-1+1", shape="1x1")
    report = CosimReport("@model", {}, [LayerResult(**fields)])
    row = next(csv.DictReader(io.StringIO(report.to_csv())))
    assert row["name"] == "'" + fields["name"] and row["op"] == "'-1+1" and row["macs"] == "0"


# ---------------------------------------------------------------------------------------------
# End to end: the routes of the security report


def _payload(sentinel) -> str:
    return (f'pwn\n#include <cstdlib>\nstatic int pwn = std::system("touch {sentinel}");\n#error injected\n'
            f"*/ ??/ \\ \" ' end")  # fmt: skip


def _run(mod, inputs):
    return npu_byoc.build(npu_byoc.partition_for_npu(mod), "functional").run(inputs)


@pytest.mark.slow
def test_hostile_relax_parameter_name(tmp_path):
    sentinel = tmp_path / "PWNED"
    plain = rb.qdq_conv2d()
    hostile = rb.qdq_conv2d(input_name=_payload(sentinel))
    path = tmp_path / "hostile.json"
    path.write_text(tvm.ir.save_json(hostile))
    x = np.random.default_rng(0).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    got = _run(npu_byoc.load_model(path), [x])
    want = _run(plain, [x])
    np.testing.assert_array_equal(got[0], want[0])
    src = "\n".join(c_codegen.LAST["sources"].values())
    assert "std::system" not in src.replace("std::system(%22touch", "") and not sentinel.exists()


def _hostile_onnx(tmp_path, sentinel):
    model = onnx.load(model_path("tiny_cnn_qdq.onnx"))
    old_input = model.graph.input[0].name
    new_input = _payload(sentinel)
    for node in model.graph.node:
        node.name = _payload(sentinel) + node.name
        node.input[:] = [new_input if i == old_input else i for i in node.input]
    model.graph.input[0].name = new_input
    path = tmp_path / "hostile.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.slow
def test_hostile_onnx_node_and_input_names(tmp_path, imported):
    sentinel = tmp_path / "PWNED"
    path = _hostile_onnx(tmp_path, sentinel)
    x = reference("tiny_cnn_qdq.onnx")["inputs"][0]
    got = npu_byoc.build(npu_byoc.load_model(path), "functional").run(x)
    want = npu_byoc.build(imported("tiny_cnn_qdq.onnx"), "functional").run(x)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert not sentinel.exists()
    # the coverage report shows the names, inert, one line per operator
    text = npu_byoc.coverage_report(npu_byoc.load_model(path)).to_text()
    plain = npu_byoc.coverage_report(imported("tiny_cnn_qdq.onnx")).to_text()
    assert len(text.splitlines()) == len(plain.splitlines()) and "\\x0a#error injected" in text


@pytest.mark.slow
def test_hostile_tflite_input_tensor_name(tmp_path, imported):
    """TFLite names can only be patched in place: a same-length payload with quotes,
    a newline and a backslash in the input tensor name (it goes into a C++ string literal)."""
    data = model_path("tiny_cnn_int8.tflite").read_bytes()
    old = b"serving_default_input:0"
    new = b'");system("t\\\n");//?"'
    new = new.ljust(len(old), b"x")
    assert data.count(old) == 1 and len(new) == len(old)
    path = tmp_path / "hostile.tflite"
    path.write_bytes(data.replace(old, new))
    x = reference("tiny_cnn_int8.tflite")["inputs"][0]
    got = npu_byoc.build(npu_byoc.load_model(path), "functional").run(x)
    want = npu_byoc.build(imported("tiny_cnn_int8.tflite"), "functional").run(x)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_hostile_model_file_name(tmp_path):
    """The file name itself (newlines are legal in POSIX file names): `npu-byoc compile`."""
    name = 'm\n#include <cstdlib>\nstatic int pwn_f = std::system("touch PWNED");\n#define JUNK .tflite'
    path = tmp_path / name
    shutil.copy(model_path("tiny_cnn_int8.tflite"), path)
    proc = subprocess.run(
        [sys.executable, "-m", "npu_byoc.cli", "compile", str(path), "-o", str(tmp_path / "model.so")],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "model.so").exists() and not (tmp_path / "PWNED").exists()
