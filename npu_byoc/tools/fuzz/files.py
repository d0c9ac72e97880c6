"""Files mode: mutated model files must give success or one clean line, never a crash, never
run code or read a file the model does not own.

Each case takes one family (:data:`FAMILIES`): a committed fixture model (``.tflite`` /
``.onnx``) mutated here; a fixture saved as a Relax ``.json`` and mutated through its object
graph (:mod:`.files_relax`); or an ONNX fixture saved with external data and its references or
data file mutated (:mod:`.files_onnx_external`). It runs ``npu-byoc coverage`` / ``partition``
/ ``run --backend cpu`` on the result in a subprocess with a timeout and a memory limit. The
one-clean-line rule: exit status 0, or exit status 2 with exactly one line on stderr,
``npu-byoc: error: ...``. A traceback, another exit status, a signal (negative status) or the
timeout is a failure; so is a planted command's marker file, a secret's bytes in the output, a
hostile file that was accepted (:func:`classify`). The mutated files are kept under ``--out``
with the command that reproduces them.

Mutations of TFLite / ONNX (``MUTATORS``): byte flips, truncation, a zeroed or duplicated chunk,
and field-level edits through the file's own structure — a tensor's dimension, a quantization
scale or zero point, a name (newline, quotes, ``*/``, invalid UTF-8) — in place in the
FlatBuffer (TFLite) or through the ``onnx`` protobuf API (ONNX; invalid UTF-8 in the bytes).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
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

FAMILIES = ("tflite", "onnx", "relax", "onnx-external")
MEMORY_LIMIT = 4 << 30  # address space of a child: a blow-up fails the case, not the machine
MARKER = "MARKER"  # the file a planted command would create, in the case directory


@dataclass
class FileTally:
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)  # ok / clean error / failure kinds
    per_mutation: Counter = field(default_factory=Counter)
    per_family: Counter = field(default_factory=Counter)
    commands: Counter = field(default_factory=Counter)
    refused_as_required: int = 0  # cases that must be refused, and were
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_text(self, seed: int) -> str:
        rate = self.cases / self.seconds if self.seconds else 0.0
        lines = [f"npu-byoc fuzz (files): seed {seed}"]
        lines.append("  families: " + ", ".join(f"{k} {v}" for k, v in sorted(self.per_family.items())))
        lines.append("  mutations: " + ", ".join(f"{k} {v}" for k, v in sorted(self.per_mutation.items())))
        lines.append("  commands: " + ", ".join(f"{k} {v}" for k, v in sorted(self.commands.items())))
        for f in self.failures[:20]:
            lines.append(f"  FAILED {f}")
        lines.append("  outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
                     + f"; hostile files refused as required: {self.refused_as_required}")  # fmt: skip
        lines.append(f"  cases: {self.cases}; violations: {len(self.failures)}")
        lines.append(f"  time: {self.seconds:.1f} s, {rate:.2f} cases/s; result: {'FAIL' if self.failures else 'PASS'}")
        return "\n".join(lines) + "\n"


def judge(returncode: int | None, stderr: str) -> str:
    """'ok', 'clean error', or what broke the one-clean-line rule."""
    if returncode is None:
        return "hang"
    # An allocation refused under the child's RLIMIT_AS: named as such (a clean line that says
    # "out of memory" is a clean error, not this).
    oom = "std::bad_alloc" in stderr
    if returncode < 0:
        return f"out of memory (signal {-returncode})" if oom else f"signal {-returncode}"
    lines = [line for line in stderr.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in stderr:
        return "out of memory (traceback)" if lines and lines[-1].startswith("MemoryError") else "traceback"
    if returncode == 0:
        return "ok"
    if returncode != 2:
        return "out of memory" if oom else f"exit status {returncode}"
    if lines and lines[0].startswith("npu-byoc: error: ") and len(lines) > 1 and all(map(_TVM_WARNING.match, lines[1:])):
        return "tvm warning after the error"  # issue 10: e.g. "BlockBuilder destroyed with remaining blocks!"
    if len(lines) != 1 or not lines[0].startswith("npu-byoc: error: "):
        return f"{len(lines)} stderr lines"
    return "clean error"


_TVM_WARNING = re.compile(r"^\[\d\d:\d\d:\d\d\] \S+: Warning: ")


@dataclass
class ChildResult:
    """What one command did: its status and streams, and what the case checks beyond them."""

    returncode: int | None  # None: killed at the timeout
    stderr: str = ""
    stdout: str = ""
    marker: bool = False  # the planted command's file appeared
    secret: bool = False  # the CWD / outside secret's bytes reached stdout or an output file


def classify(res: ChildResult, must_refuse: str | None = None, must_load: bool = False) -> str:
    """'ok', 'clean error', or the violation: code execution and leaked bytes first (whatever
    the exit status), then the one-clean-line rule, then a hostile file that was accepted or a
    good one that was refused."""
    if res.marker:
        return "code execution (the planted command ran)"
    if res.secret:
        return "file read (the secret reached the output)"
    verdict = judge(res.returncode, res.stderr)
    if verdict == "ok" and must_refuse:
        return f"accepted {must_refuse}"
    if verdict == "clean error" and must_load:
        return "refused a model that must load"
    return verdict


def _limits() -> None:  # in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_child(argv: list[str], cwd: Path, timeout: float) -> ChildResult:
    """``python -m npu_byoc.cli ARGV`` in ``cwd`` with the memory limit; the whole process
    group is killed at the timeout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[3]),
                                                                   os.environ.get("PYTHONPATH")])))  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "npu_byoc.cli", *argv], cwd=cwd, env=env, text=True,
                            errors="replace", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, preexec_fn=_limits, start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return ChildResult(None)
    return ChildResult(proc.returncode, err, out)


def run_one(path: Path, command: list[str], timeout: float) -> tuple[str, str]:
    res = run_child([command[0], str(path), *command[1:]], path.parent, timeout)
    return judge(res.returncode, res.stderr), res.stderr


@dataclass
class FileCase:
    family: str
    mutation: str
    source: Path
    model: Path
    what: str
    cwd: Path
    commands: list[list[str]]
    must_refuse: str | None = None
    must_load: bool = False
    then_run: list[str] | None = None  # run this too when the first command succeeds


def _run_command(case_dir: Path, inputs: list[Path]) -> list[str]:
    return ["run", "--backend", "cpu", *[a for p in inputs for a in ("--input", str(p))],
            "--output", str(case_dir / "out.npy")]  # fmt: skip


def _seed_folder(src: Path, work: Path) -> Path:
    from .files_relax import make_seed

    return make_seed(src, work.parent / "seeds")


def _choose(rng, names, only):
    names = [n for n in names if only is None or n in only] or list(names)
    return names[int(rng.integers(0, len(names)))]


def make_case(i: int, seed: int, files: list[Path], work: Path, families=FAMILIES, only=None) -> FileCase:
    """Case ``i``: a family, a fixture and a mutation (``only``: a subset of mutation names)."""
    rng = np.random.default_rng([seed, i])
    family = families[int(rng.integers(0, len(families)))]
    case_dir = work / f"case-{i}"
    shutil.rmtree(case_dir, ignore_errors=True)
    case_dir.mkdir(parents=True)
    if family in ("tflite", "onnx"):
        pool = [p for p in files if p.suffix == f".{family}"] or files
        src = pool[int(rng.integers(0, len(pool)))]
        mutators = MUTATORS[src.suffix]
        name = _choose(rng, mutators, only)
        try:
            data, what = mutators[name](src.read_bytes(), rng)
        except Exception as err:  # noqa: BLE001 - the field edit itself did not parse: mutate bytes
            data, what = flip_bytes(src.read_bytes(), rng)
            what += f" (the {name} edit failed: {type(err).__name__})"
        path = case_dir / f"model{src.suffix}"
        path.write_bytes(data)
        command = COMMANDS[int(rng.integers(0, len(COMMANDS)))]
        return FileCase(family, name, src, path, what, case_dir, [command])
    if family == "relax":
        from . import files_relax

        pool = files_relax.seed_fixtures(files)
        start = int(rng.integers(0, len(pool)))
        for k in range(len(pool)):  # the first fixture from a random start that makes a seed
            src = pool[(start + k) % len(pool)]
            folder = _seed_folder(src, work)
            if (folder / "model.json").exists():
                break
        name = _choose(rng, [*files_relax.MUTATORS, *BYTE_MUTATORS], only)
        seed_json = (folder / "model.json").read_text()
        if name in BYTE_MUTATORS:
            data, what = BYTE_MUTATORS[name](seed_json.encode(), rng)
            refuse = None
        else:
            data, what, refuse = files_relax.mutate(seed_json, name, rng, {"marker": case_dir / MARKER})
        path = case_dir / "model.json"
        path.write_bytes(data)
        run = _run_command(case_dir, files_relax.seed_inputs(folder))
        first = [["coverage", "--format", "json"], ["partition"], run][int(rng.integers(0, 3))]
        if name == "planted-code":
            first = run  # the planted call would run only here
        return FileCase(family, name, src, path, what, case_dir, [first], refuse, then_run=run if first is not run else None)
    from . import files_onnx_external as ext
    from .files_relax import seed_inputs

    pool = [p for p in files if p.suffix == ".onnx"]
    start = int(rng.integers(0, len(pool)))
    for k in range(len(pool)):  # the first fixture from a random start that loads (inputs for run)
        src = pool[(start + k) % len(pool)]
        folder = _seed_folder(src, work)
        if seed_inputs(folder):
            break
    name = _choose(rng, ext.MUTATORS, only)
    built = ext.build(src, case_dir, name, rng)
    run = _run_command(case_dir, seed_inputs(folder))
    first = run if built.always_run else [["coverage", "--format", "json"], ["partition"], run][int(rng.integers(0, 3))]
    return FileCase(family, name, src, built.model, built.what, built.cwd, [first], built.must_refuse, built.must_load)


def check_case(case: FileCase, timeout: float) -> tuple[str, str, list[str]]:
    """Run the case's commands; returns (verdict, stderr, the command that decided)."""
    from .files_onnx_external import secret_in

    commands = list(case.commands)
    verdict, stderr, argv = "ok", "", []
    k = 0
    while k < len(commands):
        command = commands[k]
        argv = [command[0], str(case.model), *command[1:]]
        res = run_child(argv, case.cwd, timeout)
        res.marker = (case.cwd / MARKER).exists() or (case.model.parent / MARKER).exists()
        res.secret = case.family == "onnx-external" and secret_in(case.cwd.parent, res.stdout)
        verdict, stderr = classify(res, case.must_refuse, case.must_load), res.stderr
        if verdict == "ok" and k == len(commands) - 1 and case.then_run and command is not case.then_run:
            commands.append(case.then_run)  # the file loads: run it, where code would execute
        if verdict != "ok":
            break
        k += 1
    return verdict, stderr, argv


def run_files(count: int, seed: int, out_dir: Path, fixtures: Path | None = None, timeout: float = 120.0,
              progress=sys.stderr, families=FAMILIES, only=None) -> FileTally:  # fmt: skip
    """``count`` mutated model files, each checked in subprocesses; failures kept under
    ``out_dir/files``, seeds cached under ``out_dir/seeds``."""
    files = fixture_files(fixtures or default_fixtures())
    tally = FileTally()
    work = Path(out_dir) / "files"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for i in range(count):
        case = make_case(i, seed, files, work, families, only)
        verdict, stderr, argv = check_case(case, timeout)
        tally.cases += 1
        tally.per_family[case.family] += 1
        tally.per_mutation[case.mutation] += 1
        tally.commands[argv[0] if argv else "none"] += 1
        good = verdict in ("ok", "clean error")
        tally.outcomes[verdict if good else "VIOLATION"] += 1
        if verdict == "clean error" and case.must_refuse:
            tally.refused_as_required += 1
        case_dir = work / f"case-{i}"
        if good:
            shutil.rmtree(case_dir, ignore_errors=True)
        else:
            last = stderr.strip().splitlines()[-1:] if stderr.strip() else [""]
            line = f"{verdict}: {case.source.name} [{case.family}/{case.mutation}] {case.what}: " \
                   f"(cd {case.cwd} && npu-byoc {' '.join(argv)}) -> {last[0][:200]}"  # fmt: skip
            (case_dir / "README.txt").write_text(line + "\n")
            tally.failures.append(line)
        tally.seconds = time.perf_counter() - t0
        if progress is not None and (i + 1) % 10 == 0:
            print(f"fuzz files: {i + 1}/{count}, {len(tally.failures)} failing", file=progress, flush=True)
    return tally
