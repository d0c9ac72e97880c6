"""The C functional model of the NPU, from Python.

``csrc/npu_functional.cc`` implements the driver API (``npu_submit`` in npu_driver.h) by
executing the command stream bit-exactly like the golden model of the stream
(npu_byoc.runtime.machine). This module builds it standalone as a shared library with g++
(cached in ``npu_byoc.util.cache.cache_dir()``, keyed by a hash of the sources, headers and flags),
loads it with ctypes, and runs streams on it::

    result = FunctionalNpu(hw).run(words, regions)   # same arguments as Machine(hw).run
    result.status, result.word_index, result.commands, result.kicks, result.cycles

The model library build (npu_byoc.runtime.build) compiles ``functional_sources()`` into the
library with ``-I include_dir()`` and ``compile_definitions(hw)``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..util import buildlog
from ..util.cache import atomic_output, build_lock, cache_dir, content_key, is_intact
from ..errors import NpuByocError
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..arch.isa import MAX_REGIONS, Opcode, Status
from . import driver_abi
from ..arch.cycles import DEFAULT_MAX_CYCLES
from ..arch.memory import FIELDS as MEMORY_FIELDS, MEMORIES
from .driver_abi import Buffer, RegionTable, Result, stream_array, stream_pointer
from .machine import RunStatus

CSRC = Path(__file__).parent / "csrc"
TEMPLATES = Path(__file__).parents[1] / "codegen" / "templates"
CXXFLAGS = ["-O2", "-shared", "-fPIC", "-std=c++17"]
DEFAULT_MAX_COMMANDS = 1 << 22  # the golden model's budget (Machine.run)
# DEFAULT_MAX_CYCLES (cycles.py) is npu_submit's cycle budget (NPU_FUNCTIONAL_DEFAULT_MAX_CYCLES,
# the RTL simulator's default) and run()'s; generated partitions pass their own to
# npu_submit_budget (cycles.stream_budget); $NPU_FUNCTIONAL_MAX_CYCLES overrides both for the
# library's entry points; run(max_cycles=None) has no limit.
_UINT64_MAX = (1 << 64) - 1

# HwConfig field -> the macro of npu_functional.cc that overrides it in npu_submit().
_CONFIG_MACROS = {
    "sram_bytes": "NPU_FUNCTIONAL_SRAM_BYTES",
    "array_rows": "NPU_FUNCTIONAL_ARRAY_ROWS",
    "array_cols": "NPU_FUNCTIONAL_ARRAY_COLS",
    "max_kernel": "NPU_FUNCTIONAL_MAX_KERNEL",
    "max_stride": "NPU_FUNCTIONAL_MAX_STRIDE",
    "max_channels": "NPU_FUNCTIONAL_MAX_CHANNELS",
    "max_pool_window": "NPU_FUNCTIONAL_MAX_POOL_WINDOW",
    "max_pool_stride": "NPU_FUNCTIONAL_MAX_POOL_STRIDE",
    "max_mean_elements": "NPU_FUNCTIONAL_MAX_MEAN_ELEMENTS",
    "max_fc_features": "NPU_FUNCTIONAL_MAX_FC_FEATURES",
    "dma_bytes_per_cycle": "NPU_FUNCTIONAL_DMA_BYTES_PER_CYCLE",
    "dma_queue_depth": "NPU_FUNCTIONAL_DMA_QUEUE_DEPTH",
    # npu_memory_t fm_mem, const_mem: seven uint32 each, in npu_byoc.arch.memory.FIELDS order
    **{f"{m}_{f}": f"NPU_FUNCTIONAL_{m.upper()}_{f.upper()}" for m in MEMORIES for f in MEMORY_FIELDS},
    "weight_decoder_bytes_per_cycle": "NPU_FUNCTIONAL_WEIGHT_DECODER_BYTES_PER_CYCLE",
    "layernorm_unit": "NPU_FUNCTIONAL_LAYERNORM_UNIT",
}


class FunctionalBuildError(NpuByocError):
    """The C functional model could not be compiled (no C++ compiler, or a compile error)."""


def include_dir() -> Path:
    """Where npu_driver.h and npu_isa.h live (``-I`` when compiling the functional model)."""
    return TEMPLATES


def functional_sources() -> list[Path]:
    """The C++ sources of the functional model backend (they define ``npu_submit``)."""
    return [CSRC / "npu_functional.cc"]


def headers() -> list[Path]:
    return [TEMPLATES / "npu_driver.h", TEMPLATES / "npu_isa.h"]


def compile_definitions(hw: HwConfig = DEFAULT_CONFIG) -> list[str]:
    """``-D`` flags that make ``npu_submit()`` run with ``hw`` where it differs from the
    configuration npu_isa.h was generated from (empty for the default configuration)."""
    return [
        f"-D{macro}={int(getattr(hw, name))}"
        for name, macro in _CONFIG_MACROS.items()
        if getattr(hw, name) != getattr(DEFAULT_CONFIG, name)
    ]


def _compiler() -> str:
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise FunctionalBuildError(f"the C functional model needs a C++17 compiler: '{cxx}' not found (set CXX)")
    return cxx


def _compile_cached(dest: Path, cxx: str, flags: Sequence[str]) -> Path:
    """Compile the functional model's sources into the cache entry ``dest`` unless it is intact."""
    with build_lock(dest):
        if is_intact(dest):
            return dest
        with atomic_output(dest) as tmp:
            cmd = [cxx, *flags, *map(str, functional_sources()), "-o", str(tmp)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise FunctionalBuildError(buildlog.failure("compiling the C functional model", cmd, proc.stdout + proc.stderr))
    return dest


def build_library(extra_flags: Sequence[str] = ()) -> Path:
    """Compile the functional model as a shared library (or reuse the cached one); its path."""
    cxx = _compiler()
    flags = [*CXXFLAGS, *extra_flags, f"-I{include_dir()}"]
    key = content_key([*functional_sources(), *headers(), cxx, " ".join(CXXFLAGS), " ".join(extra_flags)])
    lib = cache_dir() / f"npu_functional-{key}.so"
    return _compile_cached(lib, cxx, flags)


def build_object(hw: HwConfig = DEFAULT_CONFIG) -> Path:
    """The functional model compiled once to a position-independent object for ``hw`` (cached):
    model libraries link it instead of recompiling the source every build."""
    cxx = _compiler()
    flags = ["-O2", "-fPIC", "-std=c++17", "-c", *compile_definitions(hw), f"-I{include_dir()}"]
    key = content_key([*functional_sources(), *headers(), cxx, " ".join(flags)])
    obj = cache_dir() / f"npu_functional-{key}.o"
    return _compile_cached(obj, cxx, flags)




class _Config(ctypes.Structure):
    """npu_functional_config_t (npu_functional.cc)."""

    _fields_ = [
        ("sram_bytes", ctypes.c_uint64),
        *[(name, ctypes.c_uint32) for name in list(_CONFIG_MACROS)[1:]],
        ("max_commands", ctypes.c_uint64),
        ("max_cycles", ctypes.c_uint64),
    ]


@functools.lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build_library()))
    lib.npu_functional_submit.argtypes = [
        ctypes.POINTER(_Config),
        ctypes.POINTER(ctypes.c_uint32),
        ctypes.c_size_t,
        ctypes.POINTER(Buffer),
        ctypes.c_size_t,
        ctypes.POINTER(Result),
        ctypes.POINTER(ctypes.c_uint64),
    ]
    lib.npu_functional_submit.restype = ctypes.c_uint32
    lib.npu_submit.argtypes = [
        ctypes.POINTER(ctypes.c_uint32),
        ctypes.c_size_t,
        ctypes.POINTER(Buffer),
        ctypes.c_size_t,
        ctypes.POINTER(Result),
    ]
    lib.npu_submit.restype = ctypes.c_uint32
    return lib


def library() -> ctypes.CDLL:
    """The loaded functional model (built on first use)."""
    return _library()


@dataclass
class FunctionalRunStatus(RunStatus):
    """The golden model's RunStatus plus the analytic cycle estimate (npu_byoc.arch.cycles)."""

    cycles: int = 0




class FunctionalNpu:
    """One NPU executed by the C functional model, with the hardware configuration ``hw``."""

    def __init__(self, hw: HwConfig = DEFAULT_CONFIG) -> None:
        if not 1 <= hw.sram_bytes <= 1 << 32:
            raise ValueError(f"FunctionalNpu: sram_bytes {hw.sram_bytes} outside [1, 2^32]")
        self.hw = hw
        self._lib = _library()

    def _config(self, max_commands: int, max_cycles: int | None) -> _Config:
        cfg = _Config(sram_bytes=self.hw.sram_bytes)
        for name in list(_CONFIG_MACROS)[1:]:
            setattr(cfg, name, min(int(getattr(self.hw, name)), 0xFFFFFFFF))
        cfg.max_commands = min(max(int(max_commands), 0), _UINT64_MAX)
        cfg.max_cycles = _UINT64_MAX if max_cycles is None else min(max(int(max_cycles), 0), _UINT64_MAX)
        return cfg

    def run(self, words: Sequence[int] | np.ndarray, regions: Mapping[int, np.ndarray],
            max_commands: int = DEFAULT_MAX_COMMANDS, max_cycles: int | None = DEFAULT_MAX_CYCLES) -> FunctionalRunStatus:  # fmt: skip
        """Execute ``words`` (uint32) with ``regions`` (region number -> uint8 buffer, written in
        place by DMA_OUT), like ``Machine(hw).run``. ``max_cycles``: stop with CYCLE_LIMIT at
        the first command after the estimated cycles exceed it."""
        stream = stream_array(words)
        table = RegionTable(regions)
        buffers = table.buffers
        result = Result()
        kicks = (ctypes.c_uint64 * 256)()
        self._lib.npu_functional_submit(
            ctypes.byref(self._config(max_commands, max_cycles)),
            stream_pointer(stream),
            stream.size,
            buffers,
            MAX_REGIONS,
            ctypes.byref(result),
            kicks,
        )
        table.write_back()
        counted = Counter({Opcode(op): int(n) for op, n in enumerate(kicks) if n})
        return FunctionalRunStatus(Status(result.status), int(result.word_index), counted, int(result.commands),
                                   cycles=int(result.cycles))  # fmt: skip


def submit(words: Sequence[int] | np.ndarray, buffers: Sequence[np.ndarray | None]) -> tuple[Status, int, int, int]:
    """Call the driver API ``npu_submit`` itself (default configuration): buffers[r] is region r
    (None: unbound). Returns (status, word_index, cycles, commands)."""
    return driver_abi.submit(_library(), words, buffers)


__all__ = [
    "FunctionalNpu",
    "FunctionalRunStatus",
    "FunctionalBuildError",
    "functional_sources",
    "include_dir",
    "compile_definitions",
    "build_library",
    "library",
    "submit",
]
