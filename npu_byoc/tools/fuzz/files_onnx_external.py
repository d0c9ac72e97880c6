"""Files mode, ONNX external data: a fixture saved with ``save_as_external_data=True`` into the
case directory, then its references or its data file mutated (docs/fuzz.md).

A case directory holds::

    model/model.onnx, model/weights.bin   the model and its data (all tensors, one file)
    outside/                               files outside the model's folder: the secret
    cwd/                                   the commands' current directory (the CWD trap)

The secret is :data:`SECRET` repeated to the data file's size, so that a reference to it passes
every size check and only the location check stands between it and the model's weights. A
mutator returns what it did and whether the result must be refused (``must_refuse``: the
bytes are not in the model's folder, or do not fit) or must load (``must_load``: the model
is reached through a symlink and its data is next to the real file; a decoy in the CWD has
the wrong size).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SECRET = b"NPU-BYOC-SECRET!"
DATA = "weights.bin"


@dataclass
class Built:
    model: Path  # the path the commands are given
    cwd: Path
    what: str
    must_refuse: str | None = None
    must_load: bool = False
    always_run: bool = False  # run --output: the secret could reach the outputs


def _secret(n: int) -> bytes:
    return (SECRET * (n // len(SECRET) + 1))[:n]


def _pick(rng, items):
    items = list(items)
    return items[int(rng.integers(0, len(items)))] if items else None


def save_external(src: Path, case: Path, attributes: bool = False):
    """``src`` saved under ``case/model`` with every initializer (and with ``attributes``, every
    Constant's tensor) in ``weights.bin``; returns the model proto as saved (external
    references, no bytes)."""
    import onnx

    folder = case / "model"
    for d in ("model", "outside", "cwd"):
        (case / d).mkdir(parents=True, exist_ok=True)
    from onnx import numpy_helper

    model = onnx.load_from_string(src.read_bytes())
    tensors = [*model.graph.initializer, *(a.t for n in model.graph.node for a in n.attribute if a.HasField("t"))]
    for t in tensors:  # typed fields (int32_data, ...) to raw bytes: only those go external
        if not t.HasField("raw_data") and t.data_type != onnx.TensorProto.STRING:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t), t.name))
    onnx.save_model(model, str(folder / "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=DATA, size_threshold=0, convert_attribute=attributes)  # fmt: skip
    return onnx.load(str(folder / "model.onnx"), load_external_data=False)


def _external(model) -> list:
    from npu_byoc.frontends.onnx_external import _external as external

    return external(model)


def _set(tensor, key: str, value: str | None) -> None:
    entries = [(e.key, e.value) for e in tensor.external_data if e.key != key]
    if value is not None:
        entries.append((key, value))
    del tensor.external_data[:]
    for k, v in entries:
        e = tensor.external_data.add()
        e.key, e.value = k, v


def _get(tensor, key: str, default: str = "") -> str:
    return next((e.value for e in tensor.external_data if e.key == key), default)


def build(src: Path, case: Path, name: str, rng) -> Built:
    model = save_external(src, case, attributes=bool(rng.random() < 0.5))
    folder, outside, cwd = case / "model", case / "outside", case / "cwd"
    data = folder / DATA
    if not data.exists():
        return Built(folder / "model.onnx", cwd, "no external tensor")
    size = data.stat().st_size
    (outside / DATA).write_bytes(_secret(size))
    tensors = _external(model)
    t = _pick(rng, tensors)
    if t is None:
        return Built(folder / "model.onnx", cwd, "no external tensor")
    built = MUTATORS[name](model, t, folder, outside, cwd, size, rng)
    (folder / "model.onnx").write_bytes(model.SerializeToString())
    return built


def _location(model, t, folder, outside, cwd, size, rng) -> Built:
    how = _pick(rng, ["absolute", "dotdot", "dotdot-inner", "backslash", "drive", "device", "proc", "nul",
                      "long", "dot-slash"])  # fmt: skip
    loc, refuse = {
        "absolute": (str(outside / DATA), "an absolute location"),
        "dotdot": (f"../outside/{DATA}", "a '..' location"),
        "dotdot-inner": (f"sub/../../outside/{DATA}", "a '..' location"),
        "backslash": (f"..\\outside\\{DATA}", None),  # one odd file name on POSIX: missing
        "drive": (f"C:{DATA}", None),
        "device": ("/dev/zero", "an absolute location"),
        "proc": ("/proc/self/environ", "an absolute location"),
        "nul": (f"{DATA}\0.png", "a NUL in the location"),
        "long": ("x" * 5000, "a missing file"),
        "dot-slash": (f"./{DATA}", None),  # the same file: may load
    }[how]
    _set(t, "location", loc)
    if how in ("backslash", "drive"):
        refuse = "a file that is not in the model's folder"
    return Built(folder / "model.onnx", cwd, f"tensor {t.name!r} location = {loc[:60]!r}", refuse, always_run=True)


def _symlink(model, t, folder, outside, cwd, size, rng) -> Built:
    if rng.random() < 0.5:  # the data file itself a link out of the folder
        (folder / DATA).unlink()
        (folder / DATA).symlink_to(outside / DATA)
        return Built(folder / "model.onnx", cwd, f"{DATA} -> a symlink out of the folder", "a symlink out of the folder",
                     always_run=True)  # fmt: skip
    (folder / "sub").symlink_to(outside)
    _set(t, "location", f"sub/{DATA}")
    return Built(folder / "model.onnx", cwd, f"tensor {t.name!r} location sub/{DATA}, sub -> a symlink out of the folder",
                 "a symlinked folder out of the folder", always_run=True)  # fmt: skip


def _special(model, t, folder, outside, cwd, size, rng) -> Built:
    how = _pick(rng, ["fifo", "folder", "missing", "empty"])
    if how == "fifo":  # opening it for reading would block: a hang, caught by the timeout
        os.mkfifo(folder / "pipe")
        loc = "pipe"
    elif how == "folder":
        (folder / "adir").mkdir()
        loc = "adir"
    elif how == "missing":
        loc = "nothere.bin"
    else:
        (folder / "empty.bin").write_bytes(b"")
        loc = "empty.bin"
    _set(t, "location", loc)
    what = {"fifo": "a FIFO", "folder": "a folder", "missing": "a missing file", "empty": "an empty file"}[how]
    return Built(folder / "model.onnx", cwd, f"tensor {t.name!r} location = {what}", f"{what} as data")


def _offset_length(model, t, folder, outside, cwd, size, rng) -> Built:
    key = _pick(rng, ["offset", "length"])
    offset, length = int(_get(t, "offset", "0")), int(_get(t, "length", "0"))
    value = str(_pick(rng, [-1, -length, "abc", "1e3", "0x10", "", " 8", "١", size, size + 1, 2**63, 2**64, length + 1,
                            max(length - 1, 0), 0]))  # fmt: skip
    _set(t, key, value)
    try:
        v = int(value)
    except ValueError:
        refuse = f"a non-integer {key}"
    else:
        o, n = (v, length) if key == "offset" else (offset, v)
        refuse = f"{key} {value}" if v < 0 or o + n > size or (key == "length" and v != length) else None
    return Built(folder / "model.onnx", cwd, f"tensor {t.name!r} {key} = {value!r}", refuse)


def _data_file(model, t, folder, outside, cwd, size, rng) -> Built:
    data = folder / DATA
    raw = bytearray(data.read_bytes())
    how = _pick(rng, ["flip", "truncate", "extend", "secret"])
    refuse = None
    if how == "flip" and raw:
        for _ in range(int(rng.integers(1, 9))):
            raw[int(rng.integers(0, len(raw)))] ^= 1 << int(rng.integers(0, 8))
    elif how == "truncate":
        end = max(int(_get(e, "offset", "0")) + int(_get(e, "length", "0")) for e in _external(model))
        raw = raw[: int(rng.integers(0, end))]
        refuse = "data past the end of a truncated file"
    elif how == "extend":
        raw += bytes(int(rng.integers(1, 10_000)))
    else:  # every byte replaced: legal data (a model with other weights)
        raw = bytearray(_secret(len(raw)))
    data.write_bytes(bytes(raw))
    return Built(folder / "model.onnx", cwd, f"{DATA}: {how} ({len(raw)} of {size} bytes)", refuse)


def _keys(model, t, folder, outside, cwd, size, rng) -> Built:
    how = _pick(rng, ["basepath", "checksum", "unknown", "two locations", "no location"])
    if how == "basepath":
        _set(t, "basepath", str(outside))
        refuse = "a basepath key"
    elif how == "checksum":
        _set(t, "checksum", "0" * 40)
        refuse = None
    elif how == "unknown":
        _set(t, "__import__", "os")
        refuse = "an unknown key"
    elif how == "two locations":  # the second entry names the secret
        e = t.external_data.add()
        e.key, e.value = "location", f"../outside/{DATA}"
        refuse = "a '..' location"
    else:
        _set(t, "location", None)
        refuse = "no location"
    return Built(folder / "model.onnx", cwd, f"tensor {t.name!r}: {how}", refuse)


def _cwd_trap(model, t, folder, outside, cwd, size, rng) -> Built:
    """The data file exists only in the current directory (as the secret): issue 22 route 2."""
    (folder / DATA).replace(cwd / DATA)
    (cwd / DATA).write_bytes(_secret(size))
    return Built(folder / "model.onnx", cwd, f"{DATA} only in the current directory (the secret)",
                 "the data file is not in the model's folder", always_run=True)  # fmt: skip


def _model_symlink(model, t, folder, outside, cwd, size, rng) -> Built:
    """The model reached through a symlink in another folder that holds a decoy data file of
    the wrong size: the data next to the real file must be read (the model must load)."""
    link = cwd / "model.onnx"
    link.symlink_to(folder / "model.onnx")
    (cwd / DATA).write_bytes(_secret(max(size - 1, 0)))
    return Built(link, cwd, "the model through a symlink, a decoy data file next to the link", must_load=True)


MUTATORS: dict[str, Callable] = {
    "ext-location": _location, "ext-symlink": _symlink, "ext-special": _special, "ext-offset": _offset_length,
    "ext-data": _data_file, "ext-keys": _keys, "ext-cwd": _cwd_trap, "ext-model-link": _model_symlink,
}  # fmt: skip


def secret_in(case: Path, stdout: str) -> bool:
    """The secret's pattern in the outputs the commands wrote (``out*``) or printed."""
    probe = SECRET[:8]
    if probe.decode() in stdout:
        return True
    for p in case.rglob("out*"):
        if p.is_file() and probe in p.read_bytes():
            return True
    return False


def clear(case: Path) -> None:
    shutil.rmtree(case, ignore_errors=True)


__all__ = ["MUTATORS", "SECRET", "Built", "build", "save_external", "secret_in"]
