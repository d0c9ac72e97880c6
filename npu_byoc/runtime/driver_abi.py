"""The driver API (npu_driver.h) seen from Python through ctypes, for every backend library
that exports ``npu_submit``: the structs, region binding and the plain submit call."""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence

import numpy as np

from ..arch.isa import MAX_REGIONS, Region, Status

_EMPTY = np.zeros(1, np.uint8)  # a valid pointer for bound regions of 0 bytes


class Buffer(ctypes.Structure):
    """npu_buffer_t."""

    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class Result(ctypes.Structure):
    """npu_result_t."""

    _fields_ = [
        ("status", ctypes.c_uint32),
        ("word_index", ctypes.c_uint32),
        ("cycles", ctypes.c_uint64),
        ("commands", ctypes.c_uint64),
    ]


def stream_array(words: Sequence[int] | np.ndarray) -> np.ndarray:
    """The stream as contiguous uint32 words (larger values are cut to 32 bits)."""
    return np.ascontiguousarray(np.asarray(words, dtype=np.uint64).ravel() & 0xFFFFFFFF, dtype=np.uint32)


def stream_pointer(stream: np.ndarray):
    return stream.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32))


class RegionTable:
    """``regions`` (region number -> uint8 array) as an npu_buffer_t[MAX_REGIONS] table.

    Non-contiguous arrays run on a contiguous copy; call :meth:`write_back` after the call so
    DMA_OUT results reach them. Only CONST may be read-only (the NPU never writes it)."""

    def __init__(self, regions: Mapping[int, np.ndarray]):
        self.buffers = (Buffer * MAX_REGIONS)()
        self._keep: list[np.ndarray] = []
        self._copies: list[tuple[np.ndarray, np.ndarray]] = []
        for r, arr in regions.items():
            if not 0 <= int(r) < MAX_REGIONS or arr is None:
                continue
            arr = np.asarray(arr)
            if arr.dtype != np.uint8:
                raise TypeError(f"region {r}: expected a uint8 buffer, got {arr.dtype}")
            if int(r) != Region.CONST and not arr.flags.writeable:
                raise ValueError(f"region {r} is read-only; only CONST (region 0) may be")
            buf = arr
            if not arr.flags.c_contiguous:
                buf = np.ascontiguousarray(arr)
                self._copies.append((arr, buf))
            self._keep.append(buf)
            self.buffers[int(r)] = Buffer((buf if buf.size else _EMPTY).ctypes.data, buf.size)

    def write_back(self) -> None:
        for original, copy in self._copies:
            original[...] = copy.reshape(original.shape)


def submit(lib: ctypes.CDLL, words, buffers: Sequence[np.ndarray | None]) -> tuple[Status, int, int, int]:
    """Call ``lib``'s ``npu_submit`` itself: buffers[r] is region r (None: unbound).
    Returns (status, word_index, cycles, commands)."""
    stream = np.ascontiguousarray(words, dtype=np.uint32)
    table = (Buffer * max(len(buffers), 1))()
    for r, arr in enumerate(buffers):
        if arr is not None:
            if arr.dtype != np.uint8 or not arr.flags.c_contiguous:
                raise TypeError(f"region {r}: expected a contiguous uint8 buffer")
            table[r] = Buffer((arr if arr.size else _EMPTY).ctypes.data, arr.size)
    result = Result()
    lib.npu_submit(stream_pointer(stream), stream.size, table, len(buffers), ctypes.byref(result))
    return Status(result.status), int(result.word_index), int(result.cycles), int(result.commands)
