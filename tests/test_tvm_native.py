"""TVM's own BYOC flow after a bare ``import npu_byoc``: get_patterns_with_prefix("npu") ->
FuseOpsByPattern -> MergeCompositeFunctions -> RunCodegen -> tvm.compile -> export_library ->
run, with no npu_byoc function called. The reference is TVM's CPU build of the same module."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax
from tvm.relax.backend import get_patterns_with_prefix
from tvm.script import relax as R

import npu_byoc

ROOT = Path(npu_byoc.__file__).parent
# export_library's options as docs/codegen.md gives them, spelled as paths (no npu_byoc call):
# npu_driver.h and the C functional model as the NPU driver.
EXPORT_OPTIONS = [
    f"-I{ROOT / 'codegen' / 'templates'}",
    f"-I{tvm_ffi.libinfo.find_include_path()}",
    "-std=c++17",
    "-O2",
    str(ROOT / "runtime" / "csrc" / "npu_functional.cc"),
]


def _qconv(bb, x, seed, in_c, out_c, kernel, stride, s_in, zp_in, s_out, zp_out):
    """dequantize(x), dequantize(W) -> conv2d (NHWC, 'same'-ish padding) -> quantize (TFLite QDQ)."""
    w = np.random.default_rng(seed).integers(-127, 128, size=(kernel, kernel, in_c, out_c), dtype=np.int8)
    w_scale = relax.const((0.01 + 0.002 * np.arange(out_c)).astype(np.float32))
    xd = bb.emit(R.dequantize(x, relax.const(np.float32(s_in)), relax.const(np.int8(zp_in)), axis=-1))
    wd = bb.emit(R.dequantize(relax.const(w), w_scale, relax.const(np.zeros(out_c, np.int8)), axis=3))
    pad = kernel // 2
    y = bb.emit(R.nn.conv2d(xd, wd, strides=[stride] * 2, padding=[pad] * 4, data_layout="NHWC",
                            kernel_layout="HWIO", out_dtype="float32"))  # fmt: skip
    return bb.emit(R.quantize(y, relax.const(np.float32(s_out)), relax.const(np.int8(zp_out)), axis=-1))


def _model() -> tvm.IRModule:
    """conv 3x3 -> conv 13x13 stride 4 -> conv 1x1. The middle conv's kernel is beyond the NPU's
    (max_kernel 11): its check refuses it, so it must stay on the CPU between two partitions."""
    x = relax.Var("x", relax.TensorType([1, 8, 8, 4], "int8"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = _qconv(bb, x, 0, 4, 8, 3, 1, 0.5, 3, 0.25, -5)
            y = _qconv(bb, y, 1, 8, 8, 13, 4, 0.25, -5, 0.2, 2)
            y = _qconv(bb, y, 2, 8, 4, 1, 1, 0.2, 2, 0.1, 0)
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    return bb.get()


def _input() -> np.ndarray:
    return np.random.default_rng(7).integers(-128, 128, size=(1, 8, 8, 4), dtype=np.int8)


def _cpu_reference(mod: tvm.IRModule, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def _native_partition(mod: tvm.IRModule) -> tvm.IRModule:
    # bind_constants=True: the codegen reads weights and scales as constants inside composites.
    patterns = get_patterns_with_prefix("npu")
    mod = relax.transform.FuseOpsByPattern(patterns, bind_constants=True, annotate_codegen=False)(mod)
    return relax.transform.MergeCompositeFunctions()(mod)


def _codegen_functions(mod: tvm.IRModule) -> dict[str, relax.Function]:
    return {gv.name_hint: f for gv, f in mod.functions_items()
            if isinstance(f, relax.Function) and f.attrs is not None and f.attrs.get("Codegen") == "npu"}  # fmt: skip


def _main_ops(mod: tvm.IRModule) -> list[str]:
    return [str(b.value.op.name) for block in mod["main"].body.blocks for b in block.bindings
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)]  # fmt: skip


def test_import_registers_the_table_under_the_npu_prefix_in_table_order():
    from npu_byoc.ops.table import PATTERN_TABLE

    names = [p.name for p in get_patterns_with_prefix("npu")]
    expected = [entry.name for entry in PATTERN_TABLE for _ in entry.conventions]
    assert names == expected  # most specific convention first, as partition_for_npu applies them
    assert tvm.get_global_func("relax.ext.npu", allow_missing=True) is not None


def test_registering_again_adds_nothing():
    import importlib

    from npu_byoc import tvm_register

    n = len(get_patterns_with_prefix("npu"))
    tvm_register.register()
    importlib.reload(tvm_register).register()  # a fresh module: its once-flag is reset
    assert len(get_patterns_with_prefix("npu")) == n


@pytest.mark.slow
def test_native_flow_runs_the_partitions_and_leaves_the_refused_conv_on_the_cpu(tmp_path):
    mod, x = _model(), _input()
    part = _native_partition(mod)
    assert len(_codegen_functions(part)) == 2
    assert _main_ops(part).count("relax.nn.conv2d") == 1  # the 13x13 conv, refused by its check

    lib = tmp_path / "native.so"
    tvm.compile(relax.transform.RunCodegen()(part), target="llvm").export_library(str(lib), options=EXPORT_OPTIONS)
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(lib)), tvm.cpu())
    y = vm["main"](tvm.runtime.tensor(x)).numpy()

    ref = _cpu_reference(mod, x)
    assert y.shape == ref.shape == (1, 2, 2, 4)
    assert np.abs(y.astype(np.int32) - ref).max() <= 1  # the project's tolerance against TVM's CPU


@pytest.mark.slow
def test_native_flow_on_a_tflite_model_equals_litert(tmp_path):
    """A real model the plain table matches whole (tiny_cnn_int8: conv, depthwise, pools, add,
    concat, LUTs, FC, softmax in one partition): every recorded sample gives LiteRT's outputs
    exactly, as partition_for_npu's build does (tests/test_functional.py)."""
    from .conftest import model_path, reference

    mod = npu_byoc.load_model(model_path("tiny_cnn_int8.tflite"))  # the import; the flow is TVM's
    part = _native_partition(mod)
    ((_, func),) = _codegen_functions(part).items()
    from npu_byoc.ops.composites import composite_functions
    from npu_byoc.ops.table import LAYER_ATTR

    # composites carry the TFLite operator they offload, as partition_for_npu names them
    layers = {str(f.attrs[LAYER_ATTR]) for _, f in composite_functions(func) if LAYER_ATTR in f.attrs}
    assert "tiny_cnn_1/relu6_s2_1/Relu6" in layers and len(layers) == len(composite_functions(func))
    lib = tmp_path / "tiny.so"
    tvm.compile(relax.transform.RunCodegen()(part), target="llvm").export_library(str(lib), options=EXPORT_OPTIONS)
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(lib)), tvm.cpu())
    ref = reference("tiny_cnn_int8.tflite")
    for (x,), (want,) in zip(ref["inputs"], ref["outputs"]):
        got = vm["main"](tvm.runtime.tensor(x)).numpy()
        np.testing.assert_array_equal(got, np.asarray(want).reshape(got.shape))


def test_native_flow_matches_partition_for_npu():
    """On a module the plain table matches, both partitioners make the same partitions: the
    same composites, and the hook renders the same C++ for each: the same command stream and
    constants (comments aside: partition_for_npu names layers, the native flow cannot)."""
    from npu_byoc.codegen.c_codegen import generate_partition

    def code(func) -> str:
        return "\n".join(line.split("//")[0].rstrip() for line in generate_partition("p", func).splitlines())

    mod = _model()
    native = _codegen_functions(_native_partition(mod))
    ours = _codegen_functions(npu_byoc.partition_for_npu(mod))
    assert len(native) == len(ours) == 2
    assert "k_stream" in code(next(iter(native.values())))
    assert sorted(map(code, native.values())) == sorted(map(code, ours.values()))


def test_native_flow_takes_the_configuration_from_runcodegen_options():
    """A non-default configuration reaches the hook as RunCodegen's target options (plain data:
    every HwConfig field that differs): it lowers for it, not for the default."""
    from npu_byoc.codegen import c_codegen
    from npu_byoc.arch.config import HwConfig

    from . import relax_builders as rb

    part = _native_partition(rb.qdq_conv2d(input_hw=(16, 16), in_channels=8))
    ((name, func),) = _codegen_functions(part).items()
    relax.transform.RunCodegen({"npu": {"array_rows": 4, "sram_bytes": 2048}})(part)
    small = c_codegen.LAST["sources"][name]
    assert small == c_codegen.generate_partition(name, func, HwConfig(array_rows=4, sram_bytes=2048))
    assert small != c_codegen.generate_partition(name, func)  # 4 rows, 2 KiB: another schedule


# The fresh process: TVM loads the saved module, then `import npu_byoc` and nothing else of it.
_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tvm
    from tvm import relax

    mod = tvm.ir.load_json(open(sys.argv[1]).read())
    import npu_byoc  # noqa: F401  registers relax.ext.npu

    lowered = relax.transform.RunCodegen()(mod)
    tvm.compile(lowered, target="llvm").export_library(sys.argv[3], options=sys.argv[5:])
    vm = relax.VirtualMachine(tvm.runtime.load_module(sys.argv[3]), tvm.cpu())
    np.save(sys.argv[4], vm["main"](tvm.runtime.tensor(np.load(sys.argv[2]))).numpy())
    """
)


@pytest.mark.slow
def test_saved_partitioned_module_compiles_in_a_fresh_process_after_import(tmp_path):
    mod, x = _model(), _input()
    (tmp_path / "part.json").write_text(tvm.ir.save_json(_native_partition(mod)))
    np.save(tmp_path / "x.npy", x)
    args = [sys.executable, "-c", _CHILD, str(tmp_path / "part.json"), str(tmp_path / "x.npy"),
            str(tmp_path / "m.so"), str(tmp_path / "y.npy"), *EXPORT_OPTIONS]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    y = np.load(tmp_path / "y.npy")
    assert np.abs(y.astype(np.int32) - _cpu_reference(mod, x)).max() <= 1


@pytest.mark.parametrize(
    "first",
    ["import tvm; import npu_byoc", "import npu_byoc; import tvm", "import npu_byoc.ops.table", "import npu_byoc.cli; import tvm"],
)
def test_import_registers_whatever_imports_tvm_first(first):
    """`import npu_byoc` imports no TVM; registration follows TVM's import, also when TVM is
    first imported by an npu_byoc module half-way through its own import."""
    code = (f"{first}\nimport sys, tvm\nfrom tvm.relax.backend import get_patterns_with_prefix\n"
            "print(len(get_patterns_with_prefix('npu')), tvm.get_global_func('relax.ext.npu', allow_missing=True) is not None)")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from npu_byoc.ops.table import PATTERN_TABLE

    n = sum(len(entry.conventions) for entry in PATTERN_TABLE)
    assert proc.stdout.split() == [str(n), "True"]


def test_import_npu_byoc_imports_no_tvm():
    proc = subprocess.run([sys.executable, "-c", "import sys, npu_byoc; print('tvm' in sys.modules)"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.stdout.strip() == "False", proc.stderr
