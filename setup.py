"""Packaging hook: the wheel carries the Verilog NPU and its Verilator harness.

hw/ stays at the top of the repository (it is the hardware engineers' tree); a wheel copies
hw/rtl and hw/sim into npu_byoc/hw/, where npu_byoc.runtime.verilator looks first, so that
`pip install .` (not editable) runs the verilator backend from any directory. Everything
else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HW_SOURCES = {"rtl": ("*.v", "*.vh"), "sim": ("*.cc", "*.h", "*.vlt")}


class BuildPyWithHardware(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # editable installs read hw/ where it is
            return
        root = Path(__file__).resolve().parent / "hw"
        for sub, patterns in HW_SOURCES.items():
            dest = Path(self.build_lib) / "npu_byoc" / "hw" / sub
            dest.mkdir(parents=True, exist_ok=True)
            for pattern in patterns:
                for src in sorted((root / sub).glob(pattern)):
                    shutil.copy2(src, dest / src.name)


setup(cmdclass={"build_py": BuildPyWithHardware})
