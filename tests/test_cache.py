"""Cache entries survive corruption: a damaged artifact is rebuilt, never loaded; an unwritable
cache directory falls back to a temporary one with one warning."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from npu_byoc.util import cache
from npu_byoc.runtime import functional


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_BYOC_CACHE", str(tmp_path / "c"))
    return tmp_path / "c"


def test_seal_detects_truncation(fresh_cache):
    dest = cache.cache_dir() / "x.bin"
    cache.atomic_write(dest, b"0123456789")
    assert cache.is_intact(dest)
    dest.write_bytes(b"01234")
    assert not cache.is_intact(dest)
    dest.write_bytes(b"")
    assert not cache.is_intact(dest)
    assert not cache.is_intact(fresh_cache / "missing.bin")


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "empty"])
def test_damaged_functional_library_is_rebuilt(fresh_cache, damage):
    lib = functional.build_library()
    good = lib.read_bytes()
    lib.write_bytes(good[: len(good) // 3] if damage == "truncate" else b"")  # SIGBUS / dlopen error on load
    assert functional.build_library() == lib and lib.read_bytes() == good
    ctypes.CDLL(str(lib))  # loads: the rebuilt library is whole


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "empty"])
def test_damaged_functional_object_is_rebuilt(fresh_cache, damage):
    obj = functional.build_object()
    good = obj.read_bytes()
    obj.write_bytes(good[:100] if damage == "truncate" else b"")  # `ld: file too short` / undefined npu_submit
    assert functional.build_object() == obj and obj.read_bytes() == good


def test_unwritable_cache_dir_falls_back_with_one_warning(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("NPU_BYOC_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(cache, "_FALLBACK", {})
    first, second = cache.cache_dir(), cache.cache_dir()
    assert first == second and first.is_dir() and first != blocker / "cache"
    probe = cache.atomic_write(first / "probe.bin", np.arange(4, dtype=np.uint8).tobytes())
    assert cache.is_intact(probe)
    probe.unlink()
    probe.with_name("probe.bin.sha256").unlink()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "warning: cache directory" in err[0] and str(first) in err[0], err
