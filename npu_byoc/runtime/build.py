"""build() and run(): a model compiled with TVM for the CPU, its NPU partitions executed by
a backend.

Backends (a registry; later milestones add the C functional model and the RTL):
- ``cpu``: TVM's CPU build of the unpartitioned model (the reference TVM itself gives);
- ``golden``: NPU partitions executed by the golden model (npu_byoc.runtime.golden), the
  rest by TVM's CPU build. The partitions are called from TVM's VM as packed functions.
- ``functional``: RunCodegen turns every partition into generated C++ (command stream,
  constants, entry function) linked into the model library with the C functional model of
  the NPU behind the driver API (npu_driver.h).
- ``verilator``: the same generated C++ linked with the Verilator co-simulation of the RTL
  (hw/rtl) behind the same driver API.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from ..codegen.lower import PartitionPlan, lower_partition
from ..util import buildlog
from ..errors import NpuByocError, NpuStreamError
from ..frontends.load import ModelInfo, model_info
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..ops.composites import npu_functions
from ..partition.pipeline import partition_for_npu, partition_log, unpartition
from .tvm_legalize import register as _register_legalizations
from . import golden

_register_legalizations()  # TVM's CPU build of NHWC conv2d_transpose (npu_byoc.runtime.tvm_legalize)

LayerHook = Callable[[str, object, np.ndarray], None]  # (partition, npu op, output)


@dataclass
class CompiledModel:
    """A model ready to run: TVM's VM for the host graph plus the NPU backend."""

    backend: str
    vm: relax.VirtualMachine
    info: ModelInfo | None
    plans: dict[str, PartitionPlan] = field(default_factory=dict)
    layer_hooks: list[LayerHook] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run on numpy inputs (one per model input, in order); returns the outputs."""
        args = [tvm.runtime.tensor(np.ascontiguousarray(x)) for x in _check_inputs(self.info, inputs)]
        try:
            out = self.vm["main"](*args)
        except RuntimeError as err:
            raise stream_error(err) or err
        return _to_numpy(out)


# What the generated entry (partition.cc.j2) throws when npu_submit does not return OK.
_STOPPED = re.compile(r"(\w+): the NPU stopped with status (\w+) at command word (\d+)( \(image \d+\))?")


def stream_error(err: BaseException) -> NpuStreamError | None:
    """The one-line NpuStreamError for a partition's stream stopping with an error status (TVM
    hands it over as a RuntimeError with its backtrace), None for any other error."""
    m = _STOPPED.search(str(err))
    if m is None:
        return None
    name, status, word, image = m.group(1), m.group(2), m.group(3), m.group(4) or ""
    where = f"partition {name}, command word {word}{image}"
    if status == "OUT_OF_MEMORY":
        return NpuStreamError(f"out of memory: the NPU backend could not allocate host memory for its run ({where})",
                              status=status)  # fmt: skip
    if status == "CYCLE_LIMIT":
        return NpuStreamError(f"{where}: the NPU run exceeded its cycle budget (CYCLE_LIMIT); the budget is twice the "
                              "stream's estimated cycles, $NPU_FUNCTIONAL_MAX_CYCLES / $NPU_VERILATOR_MAX_CYCLES "
                              "override it", status=status)  # fmt: skip
    return NpuStreamError(f"{where}: the NPU stopped with status {status}", status=status)


def _to_numpy(out) -> list[np.ndarray]:
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [o.numpy() for o in out]


def _check_inputs(info: ModelInfo | None, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    inputs = [np.asarray(x) for x in inputs]
    if info is None:
        return inputs
    if len(inputs) != len(info.inputs):
        names = ", ".join(t.name for t in info.inputs)
        raise NpuByocError(f"the model takes {len(info.inputs)} input(s) ({names}), got {len(inputs)}")
    for x, t in zip(inputs, info.inputs):
        problem = input_mismatch(x, t)
        if problem:
            raise NpuByocError(problem)
    return inputs


def input_mismatch(x: np.ndarray, t) -> str | None:
    """Why array ``x`` cannot be the model input ``t`` (a ModelInfo input), or None."""
    if tuple(x.shape) != tuple(t.shape) or str(x.dtype) != t.dtype:
        return f"input '{t.name}' must be {t.dtype} {list(t.shape)}, got {x.dtype} {list(x.shape)}"
    return None


# ---------------------------------------------------------------------------------------------
# Backends


def _build_cpu(mod: tvm.IRModule, hw: HwConfig, target: str) -> CompiledModel:
    plain = unpartition(mod) if npu_functions(mod) else mod
    ex = tvm.compile(plain, target=target)
    return CompiledModel("cpu", relax.VirtualMachine(ex, tvm.cpu()), model_info(mod))


_instance = itertools.count()


@mutator
class _CallPacked(PyExprMutator):
    """Replaces calls of NPU functions in main by call_dps_packed of registered functions."""

    def __init__(self, symbols: dict, mod=None):
        super().__init__(mod)
        self.symbols = symbols

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if isinstance(call.op, tvm.ir.GlobalVar) and call.op.name_hint in self.symbols:
            name, out_ty = self.symbols[call.op.name_hint]
            return relax.op.call_dps_packed(name, relax.Tuple(list(call.args)), out_ty)
        return call


PartitionRunner = Callable[[PartitionPlan, list[np.ndarray], Callable[[object, np.ndarray], None]], list[np.ndarray]]
"""Executes one partition from Python: ``runner(plan, inputs, on_op)`` returns the outputs in
their model shapes and calls ``on_op(op, output)`` after each op (``golden.run_plan``)."""


def build_with_runner(mod: tvm.IRModule, runner: PartitionRunner, *, backend: str, hw: HwConfig = DEFAULT_CONFIG,
                      target: str = "llvm") -> CompiledModel:  # fmt: skip
    """``mod`` (partitioned) with TVM's CPU build for the host graph and every NPU partition
    executed by ``runner``, called from TVM's VM as a packed function: the golden backend,
    and the co-simulation (npu_byoc.runtime.cosim), which runs each layer on the RTL."""
    funcs = npu_functions(mod)
    plans = {name: lower_partition(name, f, hw) for name, f in funcs.items()}
    model = CompiledModel(backend, None, model_info(mod), plans)
    tag = next(_instance)
    symbols = {}
    for name, plan in plans.items():
        symbol = f"npu_byoc.{backend}.{tag}.{name}"
        tvm.register_global_func(symbol, _runner_entry(model, plan, runner), override=True)
        ret = funcs[name].ret_ty
        out_ty = list(ret.fields) if isinstance(ret, relax.TupleType) else ret
        symbols[name] = (symbol, out_ty)
    host = tvm.IRModule({gv: f for gv, f in mod.functions_items() if gv.name_hint not in funcs}, attrs=mod.attrs)
    host["main"] = _CallPacked(symbols).visit_expr(mod["main"])
    model.vm = relax.VirtualMachine(tvm.compile(host, target=target), tvm.cpu())
    return model


def _build_golden(mod: tvm.IRModule, hw: HwConfig, target: str) -> CompiledModel:
    return build_with_runner(mod, golden.run_plan, backend="golden", hw=hw, target=target)


def _runner_entry(model: CompiledModel, plan: PartitionPlan, runner: PartitionRunner):
    n_in = len(plan.inputs)

    def entry(*args):
        inputs = [a.numpy() for a in args[:n_in]]

        def on_op(op, out):
            for hook in model.layer_hooks:
                hook(plan.name, op, out)

        outputs = runner(plan, inputs, on_op)
        for dst, value in zip(args[n_in:], outputs):
            dst.copyfrom(value)

    return entry


def export_model_library(mod: tvm.IRModule, path: str, hw: HwConfig, target: str, driver_sources: list[str]) -> str:
    """RunCodegen + tvm.compile + export_library: the model library with the NPU partitions as
    generated C++ linked against an NPU driver (``driver_sources``: the backend)."""
    import tvm_ffi

    from ..codegen import c_codegen

    info = model_info(mod)
    c_codegen.LAST.update(error=None)
    try:  # the hook lowers for `hw`: it reaches it as RunCodegen's target options
        lowered = relax.transform.RunCodegen(c_codegen.codegen_options(hw, Path(info.path).name if info else None))(mod)
    except Exception:
        if c_codegen.LAST["error"] is not None:
            raise c_codegen.LAST["error"] from None
        raise
    ex = tvm.compile(lowered, target=target)
    options = [
        f"-I{c_codegen.include_dir()}",
        f"-isystem{tvm_ffi.libinfo.find_include_path()}",  # third-party: its warnings are not ours
        "-std=c++17",
        "-O2",
        *driver_sources,
    ]
    # Linked next to ``path`` and renamed over it: a concurrent build or a loader never sees a
    # half-written library ("file too short"), and a failed link leaves an old one intact.
    dest = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=dest.suffix or ".so", dir=dest.parent)
    os.close(fd)
    try:
        ex.export_library(tmp, options=options)
        os.chmod(tmp, 0o755 & ~_umask())  # mkstemp's 0600 would differ from a plain link's mode
        os.replace(tmp, dest)
    except Exception as err:  # TVM's RuntimeError carries the whole command line and g++ output
        raise NpuByocError(f"{path}: " + buildlog.failure("compiling the model library", "tvm export_library", str(err))) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path


def _umask() -> int:
    """The process umask, read without setting it (os.umask would change it for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def _build_library(backend: str, driver_sources: Callable[[HwConfig], list[str]]):
    def builder(mod: tvm.IRModule, hw: HwConfig, target: str, output: str | None = None) -> CompiledModel:
        workdir = None
        if output is None:
            workdir = tempfile.mkdtemp(prefix="npu_byoc_")
            output = str(Path(workdir) / "model.so")
        try:
            export_model_library(mod, output, hw, target, driver_sources(hw))
            lib = tvm.runtime.load_module(output)
            plans = {name: lower_partition(name, f, hw) for name, f in npu_functions(mod).items()}
            model = CompiledModel(backend, relax.VirtualMachine(lib, tvm.cpu()), model_info(mod), plans)
        except BaseException:
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            raise
        model.extra["library"] = output
        if workdir is not None:  # the library stays loaded (dlopen) after its file is removed
            weakref.finalize(model, shutil.rmtree, workdir, ignore_errors=True)
        return model

    return builder


def _functional_sources(hw: HwConfig) -> list[str]:
    from .functional import build_object

    return [str(build_object(hw))]  # compiled once per configuration, cached


def _verilator_sources(hw: HwConfig) -> list[str]:
    from . import verilator

    return verilator.driver_sources(hw)


BACKENDS: dict[str, Callable[..., CompiledModel]] = {
    "cpu": _build_cpu,
    "golden": _build_golden,
    "functional": _build_library("functional", _functional_sources),
    "verilator": _build_library("verilator", _verilator_sources),
}


def build(
    mod: tvm.IRModule,
    backend: str = "functional",
    *,
    hw: HwConfig = DEFAULT_CONFIG,
    target: str = "llvm",
    output: str | None = None,
) -> CompiledModel:
    """Compile ``mod`` (imported or partitioned) for ``backend``; see :data:`BACKENDS`.

    ``functional`` (and ``verilator``) produce a model library (``output``, default a file in
    a temporary ``npu_byoc_*`` directory, removed when the CompiledModel is garbage-collected
    or the interpreter exits) whose NPU partitions are generated C++ calling the NPU driver."""
    if backend not in BACKENDS:
        raise NpuByocError(f"unknown backend '{backend}' (available: {', '.join(BACKENDS)})")
    if backend != "cpu" and partition_log(mod) is None and not npu_functions(mod):
        mod = partition_for_npu(mod, hw=hw)
    if output is not None:
        return BACKENDS[backend](mod, hw, target, output)
    return BACKENDS[backend](mod, hw, target)


def run(model, inputs: Sequence[np.ndarray], backend: str = "functional") -> list[np.ndarray]:
    """Run a CompiledModel, or build ``model`` (an IRModule) for ``backend`` and run it."""
    if not isinstance(model, CompiledModel):
        model = build(model, backend)
    return model.run(inputs)
