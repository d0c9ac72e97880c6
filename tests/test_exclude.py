"""The deny-list: ``--exclude OP_OR_LAYER`` keeps operator types and layers on the CPU."""

import json

import numpy as np
import pytest

import npu_byoc
from npu_byoc.cli import main
from npu_byoc.frontends.bundled import bundled_model
from npu_byoc.partition.exclude import UnknownExcludeError

TINY = bundled_model("tiny_cnn")
MAXPOOL = "tiny_cnn_1/maxpool_1/MaxPool2d"


def test_coverage_reports_the_excluded_ops_as_excluded_by_the_user(tmp_path):
    out = tmp_path / "cov.json"
    assert main(["coverage", str(TINY), "--exclude", "SOFTMAX", "--exclude", MAXPOOL, "--format", "json",
                 "-o", str(out)]) == 0  # fmt: skip
    ops = {o["name"]: o for o in json.loads(out.read_text())["ops"]}
    on_cpu = {name: o["reason"] for name, o in ops.items() if not o["offloaded"]}
    assert set(on_cpu) == {"StatefulPartitionedCall_1:0", MAXPOOL}  # the SOFTMAX and the named layer, nothing else
    assert on_cpu[MAXPOOL] == f"npu.max_pool2d: excluded by the user ({MAXPOOL})"
    assert on_cpu["StatefulPartitionedCall_1:0"] == "npu.softmax: excluded by the user (SOFTMAX)"


def test_an_unknown_name_is_one_line_naming_it(capsys):
    assert main(["coverage", str(TINY), "--exclude", "SOFTMAXX"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'SOFTMAXX'" in err and "tiny_cnn_int8.tflite" in err
    with pytest.raises(UnknownExcludeError, match="CONV_3D"):
        npu_byoc.partition_for_npu(npu_byoc.load_model(TINY), exclude=["CONV_3D"])


def test_excluded_ops_run_on_the_cpu_and_the_output_stays_exact(tmp_path, monkeypatch):
    """tiny_cnn's NPU result equals TVM's CPU build of the whole model bit for bit; with its
    ADD, MAX_POOL_2D and SOFTMAX on the CPU (five partitions instead of one) it still does. The
    output alone cannot tell whether `run` honoured --exclude (it is exact either way): the
    partitioning it asked for is recorded."""
    real, asked = npu_byoc.partition_for_npu, []

    def spy(mod, *args, **kwargs):
        asked.append(list(kwargs.get("exclude") or ()))
        return real(mod, *args, **kwargs)

    monkeypatch.setattr(npu_byoc, "partition_for_npu", spy)
    x = np.load(TINY.with_suffix(".input.npy"))
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    assert main(["run", str(TINY), "--input", str(tmp_path / "x.npy"), "--exclude", "ADD", "--exclude", "MAX_POOL_2D",
                 "--exclude", "SOFTMAX", "--output", str(out)]) == 0  # fmt: skip
    assert ["ADD", "MAX_POOL_2D", "SOFTMAX"] in asked
    mod = npu_byoc.load_model(TINY)
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert np.array_equal(np.load(out), cpu)
    part = npu_byoc.partition_for_npu(mod, exclude=["ADD", "MAX_POOL_2D", "SOFTMAX"])
    report = npu_byoc.coverage_report(part)
    assert report.summary["partitions"] > 1
    assert sorted(o.op for o in report.ops if not o.offloaded) == ["ADD", "MAX_POOL_2D", "SOFTMAX"]


@pytest.mark.parametrize("argv", [
    ["run", str(TINY), "--input", "x.npy", "--backend", "cpu", "--exclude", "SOFTMAXX"],  # partitions nothing
    ["sweep", "tiny_cnn", "--jobs", "1", "--no-progress", "--exclude", "SOFTMAXX"],
])  # fmt: skip
def test_commands_that_do_not_partition_for_the_output_check_the_names_too(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.load(TINY.with_suffix(".input.npy")))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "exclude 'SOFTMAXX'" in err and "tiny_cnn_int8.tflite" in err, err


def test_sweep_partitions_every_point_without_the_excluded_ops(tmp_path, monkeypatch):
    """tiny_cnn's SOFTMAX and its one MAX_POOL_2D leave the NPU in the sweep's point as in the
    coverage report; the point is cached under a key of its own (the same point without
    --exclude is another)."""
    from npu_byoc.tools.sweep import run_sweep, store

    monkeypatch.setattr(store, "_path", lambda key: tmp_path / f"{key}.json")
    plain = run_sweep([TINY], {}).points[0]
    kept = run_sweep([TINY], {}, exclude=["SOFTMAX", MAXPOOL])
    point = kept.points[0]
    assert kept.exclude == ["SOFTMAX", MAXPOOL] and json.loads(kept.to_json())["exclude"] == ["SOFTMAX", MAXPOOL]
    assert point["ops_total"] == plain["ops_total"] and point["ops_offloaded"] == plain["ops_offloaded"] - 2
    assert point["partitions"] == 2 and plain["partitions"] == 1  # the max pool splits the stream in two
    assert len(list(tmp_path.glob("*.json"))) == 2
    assert "kept on the CPU (--exclude): SOFTMAX, " + MAXPOOL in kept.to_text()
