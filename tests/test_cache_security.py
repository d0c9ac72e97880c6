"""No other user can plant code in the build cache (issue 22, route 3): a cache directory, a
fallback directory or a subdirectory that another uid owns, that is a symlink or that others
can write is never read; the fallback is replaced by a fresh private directory, the configured
one is refused with one line. "Another user" is uid 65534, made with chown (the suite runs as
root, so the checks must compare owners, not ask os.access)."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from npu_byoc.util import cache
from npu_byoc.errors import NpuByocError
from npu_byoc.runtime import functional

from .conftest import model_path

OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")

CONSTRUCTOR = """
#include <stdio.h>
__attribute__((constructor)) static void planted(void) { FILE *f = fopen(MARKER, "w"); if (f) fclose(f); }
"""


def _private(path: Path) -> bool:
    st = os.lstat(path)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def _hostile_dir(path: Path, how: str) -> Path:
    """``path`` made the way an attacker would leave it: world-writable, or another uid's."""
    path.mkdir(parents=True)
    if how == "mode-0777":
        path.chmod(0o777)
    else:
        os.chown(path, OTHER_UID, OTHER_UID)
    return path


def _plant(entry: Path, data: bytes) -> None:
    """An entry with a matching seal, as the attacker (who can compute a digest) writes it."""
    entry.write_bytes(data)
    cache.atomic_write_text(entry.with_name(entry.name + ".sha256"), hashlib.sha256(data).hexdigest())


@pytest.fixture
def no_home_cache(tmp_path, monkeypatch):
    """The configured cache cannot be created (as with no writable HOME), so npu-byoc falls
    back to $TMPDIR/npu_byoc-cache-<uid>; $TMPDIR is fresh. Returns the fallback path."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("NPU_BYOC_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(cache, "_FALLBACK", {})
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp / f"npu_byoc-cache-{os.geteuid()}"


def test_fallback_is_created_private(no_home_cache, capsys):
    assert cache.cache_dir() == no_home_cache and _private(no_home_cache)
    assert "warning: cache directory" in capsys.readouterr().err


@needs_root
@pytest.mark.parametrize("how", ["mode-0777", "other-uid"])
def test_hostile_fallback_is_not_reused(no_home_cache, capsys, how):
    _hostile_dir(no_home_cache, how)
    _plant(no_home_cache / "x.bin", b"planted")
    got = cache.cache_dir()
    assert got != no_home_cache and got.parent == no_home_cache.parent and _private(got)
    assert not (got / "x.bin").exists() and cache.cache_dir() == got  # one fresh directory per process
    (line,) = capsys.readouterr().err.strip().splitlines()
    problem = "writable by other users (mode 0777)" if how == "mode-0777" else f"owned by uid {OTHER_UID}"
    assert f"using {got} ({no_home_cache} is " in line and problem in line, line


def test_symlink_at_fallback_path_is_not_followed(no_home_cache, tmp_path, capsys):
    target = tmp_path / "attacker"
    target.mkdir(mode=0o700)  # even a private directory: the link's owner chose where it points
    _plant(target / "x.bin", b"planted")
    no_home_cache.symlink_to(target)
    got = cache.cache_dir()
    assert got not in (no_home_cache, target) and _private(got) and not (got / "x.bin").exists()
    assert "is a symlink" in capsys.readouterr().err


def test_fallback_under_a_loose_tmpdir_is_refused(no_home_cache):
    """A $TMPDIR others can write without the sticky bit: they could rename any directory made
    there and put theirs in its place, so no fallback there is safe."""
    no_home_cache.parent.chmod(0o777)
    with pytest.raises(NpuByocError) as err:
        cache.cache_dir()
    assert f"is inside {no_home_cache.parent}, which is writable by other users (mode 0777)" in str(err.value)


def _fake_compiler(tmp_path: Path) -> Path:
    """A CXX that builds a harmless shared library whatever it is asked (fast, and its output
    is recognisable): the test is about which file is loaded, not the functional model."""
    src = tmp_path / "good.c"
    src.write_text("int npu_good(void) { return 42; }\n")
    cxx = tmp_path / "fake-g++"
    cxx.write_text(f'#!/bin/sh\nfor a; do out=$a; done\nexec gcc -shared -fPIC -o "$out" {src}\n')
    cxx.chmod(0o755)
    return cxx


@needs_root
@pytest.mark.parametrize("how", ["mode-0777", "other-uid"])
def test_planted_library_in_hostile_fallback_is_never_loaded(no_home_cache, tmp_path, monkeypatch, capsys, how):
    """The reported attack: a library with a constructor, sealed, under the name the victim's
    build uses, in a fallback directory the attacker created first."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    monkeypatch.setenv("CXX", str(_fake_compiler(tmp_path)))
    name = functional.build_library().name  # the entry's name for this CXX (in a private cache)
    shutil.rmtree(no_home_cache)
    monkeypatch.setattr(cache, "_FALLBACK", {})
    marker = tmp_path / "constructor-ran"
    evil_c = tmp_path / "evil.c"
    evil_c.write_text(CONSTRUCTOR)
    evil = tmp_path / "evil.so"
    subprocess.run(["gcc", "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", evil, evil_c], check=True)
    _hostile_dir(no_home_cache, how)
    _plant(no_home_cache / name, evil.read_bytes())
    lib = functional.build_library()
    ctypes.CDLL(str(lib))
    assert not marker.exists(), f"the planted library was loaded from {lib}"
    assert lib.parent != no_home_cache and lib.name == name
    assert ctypes.CDLL(str(lib)).npu_good() == 42


@pytest.mark.parametrize("how", ["mode-0777", "other-uid", "symlink", "loose-parent"])
def test_configured_cache_others_can_write_is_refused(tmp_path, monkeypatch, how):
    if how == "other-uid" and os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    path = tmp_path / "cache"
    if how == "symlink":
        (tmp_path / "real").mkdir(mode=0o700)
        path.symlink_to(tmp_path / "real")
    elif how == "loose-parent":  # others could rename the directory away and put theirs there
        parent = tmp_path / "shared"
        parent.mkdir()
        parent.chmod(0o777)
        path = parent / "cache"
        path.mkdir(mode=0o700)
    else:
        _hostile_dir(path, how)
    monkeypatch.setenv("NPU_BYOC_CACHE", str(path))
    with pytest.raises(NpuByocError) as err:
        cache.cache_dir()
    message = str(err.value)
    problem = {"mode-0777": "is writable by other users (mode 0777)", "other-uid": f"is owned by uid {OTHER_UID}",
               "symlink": "is a symlink", "loose-parent": f"is inside {path.parent}, which is writable by other users (mode 0777) and not sticky"}[how]  # fmt: skip
    assert "\n" not in message and message.startswith(f"cache directory {path} {problem}"), message


def test_sticky_world_writable_parent_is_accepted(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: others cannot rename our entries
    monkeypatch.setenv("NPU_BYOC_CACHE", str(shared / "cache"))
    assert cache.cache_dir() == shared / "cache" and _private(shared / "cache")


def test_default_cache_is_created_private(tmp_path, monkeypatch):
    monkeypatch.delenv("NPU_BYOC_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".cache").mkdir(parents=True, mode=0o700)
    old = os.umask(0o002)  # a common umask (Debian, Ubuntu): a plain mkdir would be group-writable
    try:
        got = cache.cache_dir()
    finally:
        os.umask(old)
    assert got == tmp_path / "home" / ".cache" / "npu_byoc" and _private(got)


def test_group_writable_is_fine_only_for_a_user_private_group(monkeypatch):
    """Group-writable parents (umask 002 on Debian and Ubuntu) pass when the group is the
    owner's alone; a group with another member, primary or listed, does not."""
    import grp
    import pwd
    from types import SimpleNamespace as NS

    users = [NS(pw_name="me", pw_uid=1000, pw_gid=1000), NS(pw_name="eve", pw_uid=1001, pw_gid=1001),
             NS(pw_name="bob", pw_uid=1002, pw_gid=100)]  # fmt: skip
    groups = {1000: NS(gr_mem=[]), 1001: NS(gr_mem=["eve", "me"]), 100: NS(gr_mem=["me"])}
    monkeypatch.setattr(pwd, "getpwall", lambda: users)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: next(u for u in users if u.pw_uid == uid))
    monkeypatch.setattr(grp, "getgrgid", lambda gid: groups[gid])
    cache._private_group.cache_clear()
    try:
        st = lambda gid, mode: os.stat_result((stat.S_IFDIR | mode, 0, 0, 1, 1000, gid, 0, 0, 0, 0))  # noqa: E731
        assert cache._writers(st(1000, 0o775)) is None  # me's own group
        assert "group 1001 (mode 0775)" in cache._writers(st(1001, 0o775))  # eve's, and me listed
        assert "group 100" in cache._writers(st(100, 0o775))  # bob's primary group
        assert "other users (mode 0757)" in cache._writers(st(1000, 0o757))
        assert cache._writers(st(100, 0o755)) is None
    finally:
        cache._private_group.cache_clear()


def test_compile_with_an_unsafe_cache_is_one_line(tmp_path, monkeypatch, capsys):
    from npu_byoc.cli import main

    path = tmp_path / "cache"
    path.mkdir()
    path.chmod(0o777)
    monkeypatch.setenv("NPU_BYOC_CACHE", str(path))
    assert main(["compile", str(model_path("tiny_cnn_int8.tflite")), "-o", str(tmp_path / "m.so")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cache directory {path} is writable by other users" in err[0], err
    assert not (tmp_path / "m.so").exists() and list(path.iterdir()) == []


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_BYOC_CACHE", str(tmp_path / "c"))
    return cache.cache_dir()


@needs_root
@pytest.mark.parametrize("how", ["mode-0777", "other-uid"])
def test_hostile_sweep_subdirectory_is_not_read(private_cache, how):
    from npu_byoc.tools.sweep import store

    _hostile_dir(private_cache / "sweep", how)
    _plant(private_cache / "sweep" / "k.json", b'{"cycles": 1}')
    with pytest.raises(NpuByocError, match=f"cache directory {private_cache / 'sweep'} is "):
        store.load("k")


@needs_root
def test_hostile_sweep_model_directory_is_not_read(private_cache):
    from npu_byoc.tools.sweep.point import ModelRef, materialize

    sha = "ab" * 32
    models = private_cache / "sweep" / "models"
    models.mkdir(parents=True, mode=0o700)
    _hostile_dir(models / sha, "other-uid")
    _plant(models / sha / "m.tflite", b"planted model")
    with pytest.raises(NpuByocError, match=f"cache directory {models / sha} is owned by uid {OTHER_UID}"):
        materialize(ModelRef("m.tflite", "/elsewhere/m.tflite", sha), b"the real model")


def test_symlinked_logs_directory_is_not_written(private_cache, tmp_path):
    from npu_byoc.util import buildlog

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (private_cache / "logs").symlink_to(elsewhere)  # a log written through it lands where the link points
    with pytest.raises(NpuByocError, match="logs is a symlink"):
        buildlog.write_log("build", ["g++"], "output")
    assert list(elsewhere.iterdir()) == []


@needs_root
def test_entry_not_ours_is_not_intact(private_cache, tmp_path):
    """An entry left from before the directory was private (another uid's, or a symlink to a
    sealed file elsewhere) is rebuilt, not loaded, though its seal matches."""
    theirs = private_cache / "theirs.so"
    _plant(theirs, b"planted")
    os.chown(theirs, OTHER_UID, OTHER_UID)
    assert not cache.is_intact(theirs)
    outside = tmp_path / "outside"
    outside.mkdir()
    _plant(outside / "x.so", b"planted")
    link = private_cache / "x.so"
    link.symlink_to(outside / "x.so")
    (private_cache / "x.so.sha256").symlink_to(outside / "x.so.sha256")
    assert not cache.is_intact(link)
    mine = cache.atomic_write(private_cache / "mine.so", b"built here")
    assert cache.is_intact(mine)
