"""ONNX external data (issue 22, route 2): read from the model file's own folder after checks, never
from the current directory, and part of the sweep's cache key.

The model is the committed QDQ fixture tiny_cnn_qdq.onnx, saved again with every tensor in one
external file ``w.bin`` next to it; the hostile variants edit the ``location`` / ``offset`` /
``length`` entries of that model's tensors.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import external_data_helper, helper, numpy_helper

import npu_byoc
from npu_byoc.frontends import onnx_external
from npu_byoc.cli import main
from npu_byoc.errors import ModelLoadError
from npu_byoc.tools.sweep import model_ref, point, run_sweep, store

from .conftest import model_path, reference

NAME = "tiny_cnn_qdq.onnx"


def save_external(model, folder: Path, location: str = "w.bin") -> Path:
    """``model`` as ``folder/model.onnx`` with every tensor's bytes in ``folder/location``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=location, size_threshold=0)  # fmt: skip
    return path


def external_tensors(model) -> list:
    return [t for t in onnx_external._all_tensors(model) if external_data_helper.uses_external_data(t)]


def edit_entries(path: Path, **entries) -> None:
    """Set the external-data entries (location, offset, length) of every external tensor of the
    model file ``path`` (its bytes stay where they are)."""
    model = onnx.load(path, load_external_data=False)
    tensors = external_tensors(model)
    assert tensors
    for t in tensors:
        kept = {e.key: e.value for e in t.external_data}
        kept.update({k: str(v) for k, v in entries.items()})
        del t.external_data[:]
        for k, v in kept.items():
            t.external_data.add(key=k, value=v)
    path.write_bytes(model.SerializeToString())


@pytest.fixture
def external(tmp_path) -> Path:
    """The fixture with its tensors in ``tmp_path/model/w.bin``."""
    return save_external(onnx.load(model_path(NAME)), tmp_path / "model")


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A current directory that is not the model's."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_external_data_loads_from_the_model_folder_and_runs_as_the_embedded_model(external, elsewhere):
    """(a) The weights come from next to the model whatever the current directory; TVM's CPU build
    gives the embedded model's outputs bit for bit, and the model's own recorded onnxruntime ones."""
    assert external_tensors(onnx.load(external, load_external_data=False))
    ext = npu_byoc.build(npu_byoc.load_model(external), "cpu")
    emb = npu_byoc.build(npu_byoc.load_model(model_path(NAME)), "cpu")
    ref = reference(NAME)
    for x, _ in zip(ref["inputs"], ref["outputs"]):
        got, want = ext.run(x)[0], emb.run(x)[0]
        assert got.dtype == want.dtype and np.array_equal(got, want)
    # A relative model path given from its parent folder resolves the same way.
    os.chdir(external.parent.parent)
    npu_byoc.load_model(Path(external.parent.name) / external.name)


def test_location_found_only_in_the_current_directory_is_refused(external, elsewhere):
    """(b) The data file sits in the current directory, not next to the model: today's main read
    it from there (onnx resolves a bare location against the CWD); now it is not found."""
    shutil.move(external.parent / "w.bin", elsewhere / "w.bin")
    with pytest.raises(ModelLoadError, match=r"model\.onnx: tensor '.+': external data 'w\.bin' cannot be read from "
                       + str(external.parent.resolve()) + r" \(No such file or directory\)"):  # fmt: skip
        npu_byoc.load_model(external)


def test_dotdot_location_is_refused(external, elsewhere):
    """(c) ``../secret`` (a file of exactly the right size, so nothing else would stop it)."""
    shutil.move(external.parent / "w.bin", external.parent.parent / "secret")
    edit_entries(external, location="../secret")
    with pytest.raises(ModelLoadError, match=r"external data '\.\./secret' has a '\.\.' component"):
        npu_byoc.load_model(external)
    edit_entries(external, location="sub/../../secret")  # '..' anywhere, not only first
    with pytest.raises(ModelLoadError, match=r"has a '\.\.' component"):
        npu_byoc.load_model(external)


def test_absolute_location_is_refused(external, elsewhere):
    """(d) ``/etc/passwd``, and an absolute path to the model's own data file too."""
    for location in ["/etc/passwd", str((external.parent / "w.bin").resolve())]:
        edit_entries(external, location=location, offset=0, length=4)
        with pytest.raises(ModelLoadError, match=r"is an absolute path"):
            npu_byoc.load_model(external)


def test_symlink_out_of_the_model_folder_is_refused(external, elsewhere):
    """(e) ``w.bin`` next to the model is a symlink to a file outside its folder (the real
    weights, so only the containment check can stop it)."""
    outside = elsewhere / "outside.bin"
    shutil.move(external.parent / "w.bin", outside)
    (external.parent / "w.bin").symlink_to(outside)
    with pytest.raises(ModelLoadError, match=r"external data 'w\.bin' resolves outside the model's folder"):
        npu_byoc.load_model(external)
    # A symlink inside the folder to a file inside it is the folder's own data: accepted.
    (external.parent / "w.bin").unlink()
    (external.parent / "data").mkdir()
    shutil.move(outside, external.parent / "data" / "real.bin")
    (external.parent / "w.bin").symlink_to(external.parent / "data" / "real.bin")
    npu_byoc.load_model(external)


def test_symlinked_model_reads_data_next_to_its_target(tmp_path, external, elsewhere):
    """A model reached through a symlink reads its data next to the real file, never next to the
    link (which may sit in a folder of the user's own files)."""
    link_dir = tmp_path / "links"
    link_dir.mkdir()
    (link_dir / "model.onnx").symlink_to(external)
    npu_byoc.load_model(link_dir / "model.onnx")
    shutil.move(external.parent / "w.bin", link_dir / "w.bin")
    with pytest.raises(ModelLoadError, match=r"cannot be read from " + str(external.parent.resolve())):
        npu_byoc.load_model(link_dir / "model.onnx")


def test_offset_or_length_past_the_end_is_refused(external, elsewhere):
    """(f) Ranges past the end of the file, and a range that does not hold the tensor."""
    size = (external.parent / "w.bin").stat().st_size
    edit_entries(external, offset=size - 2, length=4)
    with pytest.raises(ModelLoadError, match=rf"offset {size - 2} \+ length 4 is past the file's end \({size} bytes\)"):
        npu_byoc.load_model(external)
    edit_entries(external, offset=size + 100)  # each tensor keeps its own length
    with pytest.raises(ModelLoadError, match=r"is past the file's end"):
        npu_byoc.load_model(external)
    edit_entries(external, offset=0, length=size)  # inside the file, but not the tensor's size
    with pytest.raises(ModelLoadError, match=rf"has {size} bytes, its shape \[.*\] needs \d+"):
        npu_byoc.load_model(external)
    edit_entries(external, offset=-1)
    with pytest.raises(ModelLoadError, match=r"negative offset or length"):
        npu_byoc.load_model(external)


def test_not_a_regular_file_and_oversized_data_are_refused(external, elsewhere, monkeypatch):
    (external.parent / "dir").mkdir()
    edit_entries(external, location="dir")
    with pytest.raises(ModelLoadError, match=r"external data 'dir' is not a regular file"):
        npu_byoc.load_model(external)
    edit_entries(external, location="w.bin")
    npu_byoc.load_model(external)
    monkeypatch.setattr(onnx_external, "MAX_EXTERNAL_BYTES", 1000)
    with pytest.raises(ModelLoadError, match=r"past 1000 bytes"):
        npu_byoc.load_model(external)


def test_constant_attribute_and_subgraph_tensors_are_checked_too(tmp_path, elsewhere):
    """A Constant node's ``value`` and an initializer inside an If branch are tensors too: their
    locations are checked like initializers', and legit ones are read from the model's folder."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "c.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    (elsewhere / "c.bin").write_bytes(np.full(4, 7, np.float32).tobytes())

    def tensor(name: str, location: str):
        t = onnx.TensorProto(name=name, data_type=onnx.TensorProto.FLOAT, dims=[4],
                             data_location=onnx.TensorProto.EXTERNAL)  # fmt: skip
        for key, value in [("location", location), ("offset", "0"), ("length", "16")]:
            t.external_data.add(key=key, value=value)
        return t

    def build(location: str) -> Path:
        branch = helper.make_graph([helper.make_node("Identity", ["b"], ["bo"])], "branch", [],
                                   [helper.make_tensor_value_info("bo", onnx.TensorProto.FLOAT, [4])],
                                   initializer=[tensor("b", location)])  # fmt: skip
        nodes = [helper.make_node("Constant", [], ["c"], value=tensor("c_value", location)),
                 helper.make_node("If", ["cond"], ["i"], then_branch=branch, else_branch=branch),
                 helper.make_node("Add", ["c", "i"], ["y"])]  # fmt: skip
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, [])],
                                  [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])])  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        path = folder / "m.onnx"
        path.write_bytes(model.SerializeToString())
        return path

    path = build("c.bin")
    model = onnx.load_from_string(path.read_bytes())
    assert len(external_tensors(model)) == 3  # the Constant's and each branch's
    onnx_external.load(path, model)
    assert not external_tensors(model)
    values = [numpy_helper.to_array(t) for t in onnx_external._all_tensors(model)]
    assert all(np.array_equal(v, np.arange(4, dtype=np.float32)) for v in values)  # not the CWD's 7s
    for location in ["../secret", "/etc/passwd"]:
        path = build(location)
        with pytest.raises(ModelLoadError, match=r"tensor 'c_value'"):
            npu_byoc.load_model(path)


def test_cli_says_one_line_and_exits_2(external, elsewhere, capsys):
    edit_entries(external, location="/etc/passwd")
    assert main(["coverage", str(external)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is an absolute path" in err and "model.onnx" in err


def test_sweep_key_follows_the_external_data(tmp_path, external, elsewhere, monkeypatch):
    """(g) The sweep caches a point by the model's hash: changing only the external weights file
    (same size, one weight different) must measure the point again, not serve the old one."""
    monkeypatch.setattr(store, "_path", lambda key: tmp_path / "sweep" / f"{key}.json")
    monkeypatch.chdir(external.parent)  # where today's main reads the data from
    calls = []
    evaluate = point.TASKS["point"]
    monkeypatch.setitem(point.TASKS, "point", lambda m, hw: calls.append(hw) or evaluate(m, hw))
    grid = {"array_rows": [8]}
    first = model_ref(external).sha256
    run_sweep([external], grid)
    run_sweep([external], grid)
    assert len(calls) == 1  # the second sweep came from the cache

    model = onnx.load(model_path(NAME))
    w = next(t for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 4)
    values = numpy_helper.to_array(w).copy()
    values.flat[0] = -values.flat[0] if values.flat[0] else 1
    w.CopyFrom(numpy_helper.from_array(values, w.name))
    # (onnx refuses a location that exists in the current directory: hence another name)
    changed = save_external(model, tmp_path / "changed", "changed.bin").parent / "changed.bin"
    assert changed.stat().st_size == (external.parent / "w.bin").stat().st_size
    shutil.copy(changed, external.parent / "w.bin")  # the .onnx file is untouched

    assert model_ref(external).sha256 != first
    run_sweep([external], grid)
    assert len(calls) == 2
    # A model without external data keeps its key: the file's own SHA-256.
    assert model_ref(model_path(NAME)).sha256 == point.file_sha256(model_path(NAME))
    # What a Ray worker gets loads anywhere: the data is inside.
    embedded = onnx.load_from_string(point.model_bytes(external))
    assert not external_tensors(embedded)
