"""Generated C: pinned text for a small partition, clean compiles with -Werror, clear errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import tvm_ffi

import npu_byoc
from npu_byoc.codegen.c_codegen import generate_partition, generate_source, include_dir
from npu_byoc.codegen.lower import lower_module
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.errors import LoweringError
from npu_byoc.arch.config import HwConfig
from npu_byoc.ops.composites import npu_functions

from . import relax_builders as rb
from .conftest import ALL_MODELS

GOLDEN = Path(__file__).parent / "golden"


def _small_conv_source() -> str:
    mod = rb.qdq_conv2d(input_hw=(4, 4), in_channels=2, out_channels=4, kernel=(3, 3), clip=(-5, 127))
    part = npu_byoc.partition_for_npu(mod)
    (name, func), = npu_functions(part).items()
    return generate_partition(name, func, model="small_conv (tests/relax_builders.py)")


def test_generated_c_matches_golden_text(update_golden):
    """Regenerate with `pytest tests/test_codegen.py --update-golden` after a deliberate change."""
    path = GOLDEN / "small_conv.cc"
    src = _small_conv_source()
    if update_golden:
        path.write_text(src)
    assert src == path.read_text()


def _compile(src: str, tmp_path: Path) -> subprocess.CompletedProcess:
    cc = tmp_path / "part.cc"
    cc.write_text(src)
    cmd = [
        "g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
        f"-I{include_dir()}", f"-isystem{tvm_ffi.libinfo.find_include_path()}", str(cc),
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True)


def test_small_partition_compiles_with_werror(tmp_path):
    proc = _compile(_small_conv_source(), tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", ALL_MODELS)
def test_fixture_partitions_compile_with_werror(partitioned, name, tmp_path):
    for plan in lower_module(partitioned(name)).values():
        src = generate_source(plan, schedule_partition(plan), name)
        assert f"void {plan.name}(" in src and "npu_submit_budget(" in src
        proc = _compile(src, tmp_path)
        assert proc.returncode == 0, proc.stderr


def test_unschedulable_layer_names_the_layer(partitioned):
    part = partitioned("tiny_cnn_int8.tflite")
    name, func = next(iter(npu_functions(part).items()))
    with pytest.raises(LoweringError, match=r"tiny_cnn_1/relu6_s2_1/Relu6"):
        generate_partition(name, func, HwConfig(sram_bytes=256))


def test_run_codegen_lowers_for_the_configuration_in_its_target_options():
    """The hook takes the hardware configuration from RunCodegen's target options (a plain
    RunCodegen() lowers for the default): its C++ is generate_partition's for that configuration."""
    from tvm import relax

    from npu_byoc.codegen import c_codegen

    small = HwConfig(array_rows=4, sram_bytes=2048)
    mod = npu_byoc.partition_for_npu(rb.qdq_conv2d(input_hw=(16, 16), in_channels=8), hw=small)
    ((name, func),) = npu_functions(mod).items()
    relax.transform.RunCodegen(c_codegen.codegen_options(small, "m.tflite"))(mod)
    assert c_codegen.LAST["sources"][name] == generate_partition(name, func, small, "m.tflite")
    relax.transform.RunCodegen()(mod)
    assert c_codegen.LAST["sources"][name] == generate_partition(name, func)
    assert generate_partition(name, func) != generate_partition(name, func, small)
