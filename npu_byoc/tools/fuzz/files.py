"""Files mode: mutated model files must give success or one clean line, never a crash.

Each case takes a committed fixture model (``.tflite`` / ``.onnx``), mutates it and runs
``npu-byoc coverage`` (import, validation, partition) or ``npu-byoc partition`` on it in a
subprocess with a timeout. The one-clean-line rule: exit status 0, or exit status 2 with
exactly one line on stderr, ``npu-byoc: error: ...``. A traceback, another exit status, a
signal (negative status) or the timeout is a failure; the mutated file is kept under
``--out`` with the command that reproduces it.

Mutations (``MUTATORS``): byte flips, truncation, a zeroed or duplicated chunk, and
field-level edits through the file's own structure — a tensor's dimension, a quantization
scale or zero point, a name (newline, quotes, ``*/``, invalid UTF-8) — in place in the
FlatBuffer (TFLite) or through the ``onnx`` protobuf API (ONNX; invalid UTF-8 in the bytes).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HOSTILE_BYTES = [b"\n", b"\"", b"'", b"*/", b"\\", b"\xff\xfe", b"??/", b"#", b"\x00", b"=", b"`"]
DIMS = [0, -1, -7, 2**31 - 1, 100_000, 3]
SCALES = [0.0, -1.0, float("nan"), float("inf"), 1e-30, 1e30, 1e-45]


def default_fixtures() -> Path:
    return Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "models"


def fixture_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in (".tflite", ".onnx"))


# ---------------------------------------------------------------------------------------------
# Byte-level mutations


def flip_bytes(data: bytes, rng) -> tuple[bytes, str]:
    buf = bytearray(data)
    n = int(rng.integers(1, 9))
    for _ in range(n):
        i = int(rng.integers(0, len(buf)))
        buf[i] ^= 1 << int(rng.integers(0, 8))
    return bytes(buf), f"{n} bit flip(s)"


def truncate(data: bytes, rng) -> tuple[bytes, str]:
    n = int(rng.integers(0, len(data)))
    return data[:n], f"truncated to {n} bytes"


def zero_chunk(data: bytes, rng) -> tuple[bytes, str]:
    buf = bytearray(data)
    i = int(rng.integers(0, len(buf)))
    n = int(rng.integers(1, 65))
    buf[i : i + n] = bytes(len(buf[i : i + n]))
    return bytes(buf), f"{n} bytes zeroed at {i}"


def duplicate_chunk(data: bytes, rng) -> tuple[bytes, str]:
    i = int(rng.integers(0, len(data)))
    n = int(rng.integers(1, 257))
    return data[:i] + data[i : i + n] + data[i:], f"{n} bytes duplicated at {i}"


# ---------------------------------------------------------------------------------------------
# Field-level mutations: TFLite (in place in the FlatBuffer)


def _tflite_tensors(buf: bytearray):
    import tflite

    model = tflite.Model.GetRootAsModel(buf, 0)
    return [sg.Tensors(k) for i in range(model.SubgraphsLength()) for sg in [model.Subgraphs(i)]
            for k in range(sg.TensorsLength())]  # fmt: skip


def _tflite_field(data: bytes, rng, edit) -> tuple[bytes, str]:
    buf = bytearray(data)
    t = _pick(rng, _tflite_tensors(buf))
    if t is None:
        return flip_bytes(data, rng)
    what = edit(buf, t, rng)  # edits buf in place
    return bytes(buf), what


def _tflite_dim(buf: bytearray, t, rng) -> str:
    shape = t.ShapeAsNumpy()  # a view into buf: writing it edits the file
    if not isinstance(shape, np.ndarray) or shape.size == 0:
        return "no shape to edit"
    i, v = int(rng.integers(0, shape.size)), int(rng.choice(DIMS))
    shape[i] = v
    return f"tensor {t.Name()!r} dim {i} = {v}"


def _tflite_qparam(buf: bytearray, t, rng) -> str:
    q = t.Quantization()
    if q is None:
        return "no quantization to edit"
    if q.ScaleLength() and rng.random() < 0.7:
        s = q.ScaleAsNumpy()
        v = float(rng.choice(SCALES))
        s[int(rng.integers(0, s.size))] = v
        return f"tensor {t.Name()!r} scale = {v}"
    if q.ZeroPointLength():
        z = q.ZeroPointAsNumpy()
        v = int(rng.choice([-129, 128, 2**40, -(2**40), 255]))
        z[int(rng.integers(0, z.size))] = v
        return f"tensor {t.Name()!r} zero point = {v}"
    return "no quantization to edit"


def _tflite_name(buf: bytearray, t, rng) -> str:
    tab = t._tab
    o = tab.Offset(10)  # Tensor.name
    if not o:
        return "no name to edit"
    start = tab.Pos + o
    start += int.from_bytes(buf[start : start + 4], "little")
    length = int.from_bytes(buf[start : start + 4], "little")
    if length == 0:
        return "no name to edit"
    bad = _pick(rng, HOSTILE_BYTES)
    i = int(rng.integers(0, length))
    piece = bad[: length - i]
    buf[start + 4 + i : start + 4 + i + len(piece)] = piece
    return f"tensor name byte {i} = {piece!r}"


# ---------------------------------------------------------------------------------------------
# Field-level mutations: ONNX (protobuf API)


def _onnx_field(data: bytes, rng, edit) -> tuple[bytes, str]:
    import onnx

    model = onnx.load_from_string(data)
    what = edit(model, rng)
    return model.SerializeToString(), what


def _pick(rng, items):
    """A random element of ``items`` (None if empty)."""
    items = list(items)
    return items[int(rng.integers(0, len(items)))] if items else None


def _onnx_dim(model, rng) -> str:
    values = [*model.graph.input, *model.graph.output, *model.graph.value_info]
    d = _pick(rng, (d for v in values for d in v.type.tensor_type.shape.dim))
    if d is None:
        return "no dim to edit"
    v = int(rng.choice(DIMS))
    d.dim_value = v
    return f"dim = {v}"


def _onnx_initializer(model, rng) -> str:
    from onnx import numpy_helper

    t = _pick(rng, model.graph.initializer)
    if t is None:
        return "no initializer"
    a = numpy_helper.to_array(t).copy()
    if a.size == 0:
        return "empty initializer"
    if a.dtype.kind == "f":
        v = float(rng.choice(SCALES))
        a.flat[int(rng.integers(0, a.size))] = v
    else:
        info = np.iinfo(a.dtype)
        v = int(rng.choice([info.min, info.max, 0]))
        a.flat[int(rng.integers(0, a.size))] = v
    t.CopyFrom(numpy_helper.from_array(a, t.name))
    return f"initializer {t.name!r} element = {v}"


def _onnx_name(model, rng) -> str:
    n = _pick(rng, model.graph.node)
    if n is None:
        return "no node"
    bad = _pick(rng, HOSTILE_BYTES).decode("latin-1")
    n.name = f"{n.name}{bad}x"
    return f"node name += {bad!r}"


def _onnx_invalid_utf8_name(data: bytes, rng) -> tuple[bytes, str]:
    """A node name's last byte replaced by 0xff in the serialized file (same length: the protobuf
    stays well-formed, the string is no longer UTF-8)."""
    import onnx

    n = _pick(rng, [n for n in onnx.load_from_string(data).graph.node if n.name])
    if n is None:
        return flip_bytes(data, rng)
    name = n.name.encode()
    return data.replace(name, name[:-1] + b"\xff", 1), f"node name {n.name!r} made invalid UTF-8"


BYTE_MUTATORS: dict[str, Callable] = {"flip": flip_bytes, "truncate": truncate, "zero": zero_chunk,
                                      "duplicate": duplicate_chunk}  # fmt: skip
MUTATORS: dict[str, dict[str, Callable]] = {
    ".tflite": {
        **BYTE_MUTATORS,
        "dim": lambda d, r: _tflite_field(d, r, _tflite_dim),
        "qparam": lambda d, r: _tflite_field(d, r, _tflite_qparam),
        "name": lambda d, r: _tflite_field(d, r, _tflite_name),
    },
    ".onnx": {
        **BYTE_MUTATORS,
        "dim": lambda d, r: _onnx_field(d, r, _onnx_dim),
        "initializer": lambda d, r: _onnx_field(d, r, _onnx_initializer),
        "name": lambda d, r: _onnx_field(d, r, _onnx_name),
        "utf8": _onnx_invalid_utf8_name,
    },
}
COMMANDS = (["coverage", "--format", "json"], ["partition"])


# ---------------------------------------------------------------------------------------------
# Running


@dataclass
class FileTally:
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)  # ok / clean error / failure kinds
    per_mutation: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_text(self, seed: int) -> str:
        rate = self.cases / self.seconds if self.seconds else 0.0
        lines = [f"npu-byoc fuzz (files): seed {seed}"]
        lines.append("  mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(self.per_mutation.items())))
        for f in self.failures[:20]:
            lines.append(f"  FAILED {f}")
        lines.append("  outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())))
        lines.append(f"  cases: {self.cases}; one-clean-line violations: {len(self.failures)}")
        lines.append(f"  time: {self.seconds:.1f} s, {rate:.2f} cases/s; result: {'FAIL' if self.failures else 'PASS'}")
        return "\n".join(lines) + "\n"


def judge(returncode: int | None, stderr: str) -> str:
    """'ok', 'clean error', or what broke the one-clean-line rule."""
    if returncode is None:
        return "hang"
    if returncode < 0:
        return f"signal {-returncode}"
    lines = [line for line in stderr.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    if returncode == 0:
        return "ok"
    if returncode != 2:
        return f"exit status {returncode}"
    if lines and lines[0].startswith("npu-byoc: error: ") and len(lines) > 1 and all(map(_TVM_WARNING.match, lines[1:])):
        return "tvm warning after the error"  # issue 10: e.g. "BlockBuilder destroyed with remaining blocks!"
    if len(lines) != 1 or not lines[0].startswith("npu-byoc: error: "):
        return f"{len(lines)} stderr lines"
    return "clean error"


_TVM_WARNING = re.compile(r"^\[\d\d:\d\d:\d\d\] \S+: Warning: ")


def run_one(path: Path, command: list[str], timeout: float) -> tuple[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[3]),
                                                                   os.environ.get("PYTHONPATH")])))  # fmt: skip
    cmd = [sys.executable, "-m", "npu_byoc.cli", command[0], str(path), *command[1:]]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, errors="replace")
    except subprocess.TimeoutExpired:
        return "hang", ""
    return judge(proc.returncode, proc.stderr), proc.stderr


def run_files(count: int, seed: int, out_dir: Path, fixtures: Path | None = None, timeout: float = 120.0,
              progress=sys.stderr) -> FileTally:  # fmt: skip
    """``count`` mutated fixtures, each checked in a subprocess; failures kept under ``out_dir``."""
    files = fixture_files(fixtures or default_fixtures())
    tally = FileTally()
    work = Path(out_dir) / "files"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for i in range(count):
        rng = np.random.default_rng([seed, i])
        src = files[int(rng.integers(0, len(files)))]
        mutators = MUTATORS[src.suffix]
        name = list(mutators)[int(rng.integers(0, len(mutators)))]
        try:
            data, what = mutators[name](src.read_bytes(), rng)
        except Exception as err:  # noqa: BLE001 - the field edit itself did not parse: mutate bytes
            data, what = flip_bytes(src.read_bytes(), rng)
            name = f"{name}->flip ({type(err).__name__})"
        path = work / f"case-{i}{src.suffix}"
        path.write_bytes(data)
        command = COMMANDS[int(rng.integers(0, len(COMMANDS)))]
        verdict, stderr = run_one(path, command, timeout)
        tally.cases += 1
        tally.per_mutation[name.split("->")[0]] += 1
        tally.outcomes[verdict if verdict in ("ok", "clean error") else "VIOLATION"] += 1
        if verdict in ("ok", "clean error"):
            path.unlink()
        else:
            last = stderr.strip().splitlines()[-1:] if stderr.strip() else [""]
            tally.failures.append(f"{verdict}: {src.name} {what}: npu-byoc {command[0]} {path} -> {last[0][:200]}")
        tally.seconds = time.perf_counter() - t0
        if progress is not None and (i + 1) % 10 == 0:
            print(f"fuzz files: {i + 1}/{count}, {len(tally.failures)} failing", file=progress, flush=True)
    return tally
