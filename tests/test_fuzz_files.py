"""Files mode of the fuzzer on Relax ``.json`` and ONNX external-data files (issue 22; docs/fuzz.md).

The mutators must produce what they claim (a hostile Relax file is refused by the gates, in
process and fast), the small campaigns of each family pass, and the checker must see a broken
gate: a planted command that ran, leaked bytes, a crash, a hang or a blow-up is a violation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tvm_ffi

import npu_byoc
from npu_byoc.errors import ModelLoadError, NpuByocError
from npu_byoc.tools.fuzz import files, files_relax
from npu_byoc.tools.fuzz.files import ChildResult, classify, run_child, run_files

from .conftest import model_path

SEED_FIXTURE = "op_relu_int8.tflite"


@pytest.fixture(scope="module")
def seed_json(tmp_path_factory) -> str:
    folder = files_relax.make_seed(model_path(SEED_FIXTURE), tmp_path_factory.mktemp("seeds"))
    assert [p.name for p in files_relax.seed_inputs(folder)] == ["input_0.npy"]
    assert np.load(folder / "input_0.npy").shape == (1, 8, 8, 4)  # the shapes model_info gives
    return (folder / "model.json").read_text()


def _load(tmp_path, data: bytes):
    path = tmp_path / "model.json"
    path.write_bytes(data)
    return npu_byoc.load_model(path)


# ---------------------------------------------------------------------------------------------
# The Relax mutators, in process (the gates refuse before anything runs)


@pytest.mark.parametrize("name", ["op", "type", "nest", "code-node", "dup-main", "codegen", "planted-code"])
def test_hostile_relax_mutations_are_refused(tmp_path, seed_json, name):
    """Each mutation that must never load is refused with one ModelLoadError, for a few random
    draws; the op swap names a non-tensor operator at least once."""
    refused = 0
    for k in range(4):
        rng = np.random.default_rng([22, k])
        data, what, refuse = files_relax.mutate(seed_json, name, rng, {"marker": tmp_path / "MARKER"})
        if refuse is None:  # another tensor operator, another legal type: a different model
            assert name in ("op", "type"), what
            continue
        with pytest.raises(ModelLoadError):
            _load(tmp_path, data)
        refused += 1
    assert refused >= 1


@pytest.mark.parametrize("name", ["attr", "type", "ref", "tensor", "delete"])
def test_other_relax_mutations_load_or_fail_cleanly(tmp_path, seed_json, name):
    """Mutations that may leave a model: it loads, or it is refused as a model error, never
    another exception."""
    for k in range(4):
        data, what, _ = files_relax.mutate(seed_json, name, np.random.default_rng([23, k]), {"marker": tmp_path / "M"})
        try:
            _load(tmp_path, data)
        except NpuByocError:
            pass


def test_insert_and_delete_keep_every_reference(tmp_path, seed_json):
    """An unreferenced object inserted in the middle, and then deleted, leaves the same module:
    the other references moved with it (what the structural mutators rely on)."""
    original = _load(tmp_path, seed_json.encode())
    doc = json.loads(seed_json)
    at = len(doc["nodes"]) // 2
    files_relax.insert(doc, at, [{"type": "ffi.String", "data": "unused"}])
    assert doc["nodes"][at] == {"type": "ffi.String", "data": "unused"}
    moved = _load(tmp_path, json.dumps(doc).encode())
    assert tvm_ffi.structural_equal(moved["main"], original["main"], map_free_vars=True)
    files_relax.delete(doc, at)
    assert doc == json.loads(seed_json)


def test_type_lie_is_a_private_copy(tmp_path, seed_json):
    """A changed dimension goes to a new shape object: the shared one (and every other type
    that uses it) stays as it was, and the gates name the lie."""
    for k in range(6):
        rng = np.random.default_rng([5, k])
        data, what, _ = files_relax.mutate(seed_json, "type", rng, {})
        if "dim" not in what:
            continue
        dim = int(what.rsplit("-> ", 1)[1])
        if dim == 1:  # the same shape: no lie
            continue
        with pytest.raises(ModelLoadError, match=r"declares type|declares return type|input|inputs"):
            _load(tmp_path, data)
        return
    pytest.fail("no dimension lie drawn")


# ---------------------------------------------------------------------------------------------
# The checker


@pytest.mark.parametrize(
    "result, must_refuse, must_load, verdict",
    [
        (ChildResult(0), None, False, "ok"),
        (ChildResult(2, "npu-byoc: error: m.json: refused\n"), "an ExternFunc call", False, "clean error"),
        (ChildResult(2, "npu-byoc: error: m.json: refused\n", marker=True), None, False,
         "code execution (the planted command ran)"),
        (ChildResult(0, marker=True), None, False, "code execution (the planted command ran)"),
        (ChildResult(0, secret=True), None, False, "file read (the secret reached the output)"),
        (ChildResult(0), "an ExternFunc call", False, "accepted an ExternFunc call"),
        (ChildResult(2, "npu-byoc: error: m.onnx: no\n"), None, True, "refused a model that must load"),
        (ChildResult(1, "Traceback (most recent call last):\n  File ...\nRecursionError\n"), None, False, "traceback"),
        (ChildResult(-11), "x", False, "signal 11"),
        (ChildResult(None), None, False, "hang"),
        (ChildResult(1, "terminate called after throwing an instance of 'std::bad_alloc'\n"), None, False, "out of memory"),
        (ChildResult(-6, "terminate called after throwing an instance of 'std::bad_alloc'\n"), None, False,
         "out of memory (signal 6)"),
        (ChildResult(1, "Traceback (most recent call last):\n  File ...\nMemoryError\n"), None, False,
         "out of memory (traceback)"),
        (ChildResult(2, "npu-byoc: error: m.onnx: out of memory (MemoryError)\n"), None, False, "clean error"),
    ],
)  # fmt: skip
def test_classify(result, must_refuse, must_load, verdict):
    assert classify(result, must_refuse, must_load) == verdict


def test_timeout_kills_the_child(tmp_path):
    res = run_child(["coverage", str(model_path(SEED_FIXTURE))], tmp_path, timeout=0.3)
    assert res.returncode is None and classify(res) == "hang"


def test_memory_limit_turns_a_blowup_into_a_failure(tmp_path, monkeypatch):
    """The child runs under RLIMIT_AS: with a limit too small to import TVM it fails (a
    traceback or an abort), it does not take the machine's memory."""
    monkeypatch.setattr(files, "MEMORY_LIMIT", 200 << 20)
    res = run_child(["coverage", str(model_path(SEED_FIXTURE))], tmp_path, timeout=120)
    assert classify(res) not in ("ok", "clean error"), res.stderr[-500:]


# ---------------------------------------------------------------------------------------------
# Small campaigns through the CLI (subprocesses)


def test_planted_command_is_refused_and_never_runs(tmp_path):
    """main calls rpc.CreatePipeClient("/bin/sh", "-c", "touch MARKER"): `run --backend cpu`
    refuses it with one line and the marker never appears."""
    tally = run_files(1, 3, tmp_path, progress=None, families=("relax",), only=("planted-code",))
    assert tally.per_mutation == {"planted-code": 1} and tally.commands == {"run": 1}
    assert not tally.failures, tally.to_text(3)
    assert tally.refused_as_required == 1
    assert not list(tmp_path.rglob("MARKER"))


def test_broken_gate_is_caught(tmp_path, monkeypatch):
    """With the Relax gates switched off in the children (a sitecustomize that replaces
    check_text and rebuild), the same case runs the planted command: the fuzzer reports code
    execution and keeps the case."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sitecustomize.py").write_text(
        "from npu_byoc.frontends import relax_json\n"
        "relax_json.check_text = lambda path, data: None\n"
        "relax_json.rebuild = lambda path, mod: mod\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(broken))
    tally = run_files(1, 3, tmp_path / "out", progress=None, families=("relax",), only=("planted-code",))
    assert len(tally.failures) == 1 and tally.failures[0].startswith("code execution (the planted command ran)")
    assert (tmp_path / "out" / "files" / "case-0" / "README.txt").read_text().startswith("code execution")


@pytest.mark.parametrize("mutation, outcome", [
    ("ext-cwd", "refused"),  # the data only in the current directory (the secret)
    ("ext-symlink", "refused"),  # a link out of the model's folder to the secret
    ("ext-model-link", "ok"),  # the model through a symlink: its data next to the real file
])  # fmt: skip
def test_onnx_external_data_cases(tmp_path, mutation, outcome):
    tally = run_files(1, 2, tmp_path, progress=None, families=("onnx-external",), only=(mutation,))
    assert tally.per_mutation == {mutation: 1}
    assert not tally.failures, tally.to_text(2)
    if outcome == "refused":
        assert tally.refused_as_required == 1
    else:
        assert tally.outcomes == {"ok": 1}


def test_relax_small_campaign(tmp_path):
    """Two random Relax cases (any mutation, any command) keep every rule; the seed is cached
    once in the output directory."""
    tally = run_files(2, 22, tmp_path, progress=None, families=("relax",))
    assert tally.cases == 2 and tally.per_family == {"relax": 2}
    assert not tally.failures, tally.to_text(22)
    assert list((tmp_path / "seeds").glob("*/model.json"))


def test_fixture_that_does_not_load_is_no_seed(tmp_path):
    """A fixture with an open input dimension cannot be loaded without shapes: it is skipped
    as a seed (no model.json, no inputs), not a crash of the campaign."""
    folder = files_relax.make_seed(model_path("op_squeeze_int8.tflite"), tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["not-a-seed.txt"]
    assert "open dimension" in (folder / "not-a-seed.txt").read_text()
