"""The wheel carries what the verilator backend builds from (a non-editable install has no
hw/ beside it); .ci/run installs that wheel and co-simulates from another directory."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from npu_byoc.runtime import verilator

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_carries_the_rtl_and_the_harness(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)  # fmt: skip
    (wheel,) = tmp_path.glob("npu_byoc-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    needed = [p.relative_to(ROOT / "hw") for p in verilator.rtl_sources() + verilator.sim_sources()]
    assert needed, "the backend builds from some sources"
    missing = [str(p) for p in needed if f"npu_byoc/hw/{p}" not in names]
    assert not missing, f"the wheel lacks {missing}"
    assert "npu_byoc/data/tiny_cnn_int8.tflite" in names  # the demo's bundled model
