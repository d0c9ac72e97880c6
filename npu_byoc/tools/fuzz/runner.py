"""Run one fuzz case through every backend and compare.

For a case (a spec of npu_byoc.tools.fuzz.generators) the runner checks:

1. **golden = C functional model = RTL, exactly**, on the whole partitioned model: every NPU
   partition call runs the golden model (``golden.run_plan``) and the partition's scheduled
   command stream on the C functional model and on the RTL under Verilator (one loaded library
   each, reused across cases), all on the same inputs; a stop status other than OK is a
   mismatch too. A model whose main is one partition call runs without TVM; otherwise the host
   graph is compiled once and calls the partitions as packed functions
   (``build_with_runner``).
2. **golden vs TVM's CPU build, per op, at most 1 LSB** (or an expected class, see
   ``EXPECTED``): each op alone (its own one-op module, partitioned and lowered) on the golden
   model, against TVM's CPU build of the unpartitioned op fed the *same* inputs: the NPU
   path's values of the ops before it. (Comparing whole chains would let a 1-LSB rounding
   difference of one op grow through the next conv.) The CPU side is one compile per case: a
   "detached" module computing every op from parameters of its own.
3. **the fused partition = the ops one at a time, exactly**: when every op is offloaded, the
   whole model's output equals the last op's output of step 2.
4. **refusals have a reason**: an op that stays on the CPU has a non-empty reason in the
   partition log. Such ops are counted as refused, never as NPU passes; the partitioned
   model's result for them equals TVM's (CPU vs CPU, trivially).

Any exception along the way (partitioning, lowering, scheduling, a backend) is a mismatch of
the class ``crash``.
"""

from __future__ import annotations

import math
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax

from ...codegen.lower import PartitionPlan, lower_module
from ...ops.npu_ops import NpuOp
from ...codegen.schedule import schedule_partition
from ...arch.config import DEFAULT_CONFIG, HwConfig, configure
from ...arch.cycles import stream_budget
from ...ops.kick_limits import left_shift_wrap
from ...ops.composites import npu_functions
from ...partition.pipeline import partition_for_npu, partition_log
from ...runtime import golden
from ...runtime.tvm_legalize import register as _register_legalizations
from . import builder
from . import generators as gen

_register_legalizations()  # TVM's CPU build of NHWC conv2d_transpose (npu_byoc.runtime.tvm_legalize)

ALL_BACKENDS = ("golden", "functional", "verilator", "cpu")
STREAM_BACKENDS = ("functional", "verilator")


# ---------------------------------------------------------------------------------------------
# Expected deviations from TVM's CPU build (documented in docs/fuzz.md): (class, LSB allowed)
# per op; ``None`` where the usual 1 LSB holds.


def _left_shift_wrap(op: NpuOp, origin: str) -> tuple[str, int] | None:
    """TFLite's MultiplyByQuantizedMultiplier shifts the int32 accumulator (a conv, depthwise or
    transposed-conv sum, a MEAN's sum) left *before* the multiply and wraps on overflow (the
    golden model follows it bit-exactly); TVM computes in float and saturates. When the worst
    case can wrap (kick_limits.left_shift_wrap, the partition check's own test) the two differ
    arbitrarily. Only a TFLite-origin case keeps such an op on the NPU: a Relax one refuses it
    (checks.requant_left_shift_fits), so no class applies there."""
    if origin == "tflite" and left_shift_wrap(op):
        return "TFLite requantize left shift wraps on overflow", 255
    return None


def _int32_mean(op: NpuOp, t_in: gen.Tensor, t_out: gen.Tensor) -> tuple[str, int] | None:
    """TVM's int32 ``mean`` truncates sum / count to an integer before requantizing; the NPU
    (TFLite) keeps the fraction: up to s_in / s_out LSB, +1 for the final rounding."""
    return "TVM int32 mean truncates before requantizing", 1 + math.ceil(t_in.scale / t_out.scale)


EXPECTED: dict[tuple[str, str | None], Callable] = {
    ("mean", "int32"): _int32_mean,
}


def tolerance(op: dict, npu_op: NpuOp | None, t_in: gen.Tensor, t_out: gen.Tensor,
              origin: str = "relax") -> tuple[int, str | None]:  # fmt: skip
    """LSB allowed between the golden model and TVM's CPU result of ``op`` (and the class)."""
    found = _left_shift_wrap(npu_op, origin) if npu_op is not None else None
    rule = EXPECTED.get((op["kind"], op.get("convention")))
    if found is None and rule is not None:
        found = rule(npu_op, t_in, t_out)
    return (1, None) if found is None else (found[1], found[0])


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class Mismatch:
    pair: str  # one of npu_byoc.tools.fuzz.campaign.PAIRS
    detail: str


@dataclass
class Outcome:
    spec: dict
    placement: str = "npu"  # "npu" (every op offloaded), "partial", "cpu" (nothing offloaded)
    ops: list[str] = field(default_factory=list)  # "kind/convention" per op
    offloaded: list[bool] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # per op that stayed on the CPU
    mismatches: list[Mismatch] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)  # expected-deviation classes that applied
    max_cpu_lsb: int = 0
    cpu_unavailable: str = ""  # why TVM's CPU build of the case failed (no CPU comparison then)
    hw: dict = field(default_factory=dict)  # the case's configuration (fields off the default)
    rtl_skipped: bool = False  # the RTL was not run: it is built for another configuration
    inputs: list[np.ndarray] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def signature(self) -> set[str]:
        """What failed (the reducer keeps a shrink only while the same pairs still fail)."""
        return {m.pair for m in self.mismatches}


def op_label(op: dict) -> str:
    conv = op.get("convention")
    return f"{op['kind']}/{conv}" if conv else op["kind"]


# ---------------------------------------------------------------------------------------------
# The stream backends (one loaded library each, reused by every case)


class StreamBackends:
    """Runs a partition's command stream on the C functional model and the RTL.

    The C model takes its configuration at run time (one library for all), so it runs every
    case under the case's configuration. The RTL is built per configuration (minutes for a new
    one): it runs under ``hw`` (the configuration it was built for) only, and a partition of
    another configuration is marked ``rtl_skipped``."""

    def __init__(self, names: Sequence[str], hw: HwConfig = DEFAULT_CONFIG):
        self.hw = hw
        self.npus = {}
        if "functional" in names:
            from ...runtime.functional import FunctionalNpu

            self.npus["functional"] = FunctionalNpu(hw)
        if "verilator" in names:
            from ...runtime.verilator import VerilatorNpu

            self.npus["verilator"] = VerilatorNpu(hw)

    def _npus(self, hw: HwConfig, out: Outcome) -> dict:
        if hw == self.hw:
            return self.npus
        npus = {}
        if "functional" in self.npus:
            from ...runtime.functional import FunctionalNpu

            npus["functional"] = FunctionalNpu(hw)
        if "verilator" in self.npus:
            out.rtl_skipped = True
        return npus

    def run(self, plan: PartitionPlan, inputs: list[np.ndarray], expected: list[np.ndarray], out: Outcome,
            hw: HwConfig | None = None) -> None:  # fmt: skip
        hw = hw or self.hw
        npus = self._npus(hw, out) if self.npus else {}
        if not npus:
            return
        schedule = schedule_partition(plan, hw)
        words = schedule.words()
        budget = stream_budget(schedule.steps, hw)  # as a model library passes it (c_codegen)
        for name, npu in npus.items():
            regions, statuses = golden.run_stream(npu, plan, words, schedule.constants, inputs, max_cycles=budget)
            status = statuses[-1]
            pair = f"golden-{name}"
            if not status.ok:
                out.mismatches.append(Mismatch(pair, f"{plan.name}: {name} stopped with {status}"))
                continue
            for io, got, want in zip(plan.outputs, golden.read_outputs(plan, regions), expected):
                if not np.array_equal(got, want):
                    d = np.abs(got.astype(np.int32) - want.astype(np.int32))
                    out.mismatches.append(Mismatch(pair, f"{plan.name} output '{io.name}': max {int(d.max())} LSB, "
                                                         f"{int((d > 0).sum())} of {d.size} elements differ"))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Running a partitioned module on the NPU path


def _single_call(mod: tvm.IRModule, funcs: dict) -> str | None:
    """The partition name when main is just ``gv = partition(params...)`` (no host graph)."""
    main = mod["main"]
    bindings = [b for block in main.body.blocks for b in block.bindings]
    if len(bindings) != 1:
        return None
    call = bindings[0].value
    if not (isinstance(call, relax.Call) and isinstance(call.op, tvm.ir.GlobalVar) and call.op.name_hint in funcs):
        return None
    if [a.same_as(p) for a, p in zip(call.args, main.params)] != [True] * len(main.params) or len(call.args) != len(main.params):
        return None
    body = main.body.body
    return call.op.name_hint if body.same_as(bindings[0].var) else None


class CpuUnavailable(Exception):
    """TVM cannot build the ops that stay on the CPU (a TVM limitation, counted, not a mismatch)."""


def hw_of(spec: dict) -> HwConfig:
    """The configuration of a spec: the default with ``spec["hw"]``'s fields (each checked
    against its range; a spec without ``hw`` is the default configuration)."""
    fields = spec.get("hw") or {}
    if not isinstance(fields, dict):
        raise gen.InvalidSpec(f"spec 'hw' must be an object of HwConfig fields, got {fields!r}")
    return configure(DEFAULT_CONFIG, **fields)


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:160]


class Runner:
    """Runs fuzz cases; ``backends`` ⊆ ALL_BACKENDS (golden is always run: it is the spec)."""

    def __init__(self, backends: Sequence[str] = ALL_BACKENDS, hw: HwConfig = DEFAULT_CONFIG):
        self.hw = hw
        self.backends = tuple(backends)
        self.streams = StreamBackends([b for b in backends if b in STREAM_BACKENDS], hw)
        self.host_compiles = 0
        self.cpu_compiles = 0

    # -- the NPU path ---------------------------------------------------------------------------

    def _partition_runner(self, out: Outcome):
        def runner(plan: PartitionPlan, inputs: list[np.ndarray], on_op=None) -> list[np.ndarray]:
            inputs = [np.ascontiguousarray(x) for x in inputs]
            expected = golden.run_plan(plan, inputs, on_op)
            self.streams.run(plan, inputs, expected, out, self.hw)
            return expected

        return runner

    def run_npu_path(self, part: tvm.IRModule, inputs: list[np.ndarray], out: Outcome, allow_host: bool = True):
        """The partitioned module's outputs on the golden model (stream backends compared on the
        way; no NPU partition: TVM's CPU build of it) and its partition plans; None when that
        needs TVM's CPU build and ``allow_host`` is False."""
        from ...runtime.build import build_with_runner

        funcs = npu_functions(part)
        runner = self._partition_runner(out)
        plans = lower_module(part, self.hw) if funcs else {}
        single = _single_call(part, funcs) if funcs else None
        if single is not None:
            return runner(plans[single], inputs), plans
        if not allow_host:
            return None
        self.host_compiles += 1
        try:  # the host graph (or the whole model) on TVM's CPU build
            if funcs:
                model = build_with_runner(part, runner, backend="fuzz", hw=self.hw)
            else:
                from ...runtime.build import build

                model = build(part, "cpu", hw=self.hw)
        except Exception as err:  # noqa: BLE001 - TVM raises TypeError, ValueError, TVMError...
            raise CpuUnavailable(_first_line(err)) from None
        return model.run(inputs), plans

    # -- one case -------------------------------------------------------------------------------

    def run(self, spec: dict, inputs: list[np.ndarray] | None = None) -> Outcome:
        """One case, under its own configuration (``spec["hw"]``, fields off the default:
        ``--random-hw``) or else the runner's."""
        out = Outcome(spec, ops=[op_label(op) for op in spec["ops"]])
        base = self.hw
        try:
            if "hw" in spec:
                self.hw = hw_of(spec)
                out.hw = dict(spec["hw"])
            self._run(spec, inputs, out)
        except gen.InvalidSpec:
            raise
        except Exception as err:  # noqa: BLE001 - every failure is a finding
            last = traceback.extract_tb(err.__traceback__)[-1]
            msg = str(err).strip().splitlines()
            out.mismatches.append(Mismatch("crash", f"{type(err).__name__}: {msg[0] if msg else ''} "
                                                    f"({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"))  # fmt: skip
        finally:
            self.hw = base
        return out

    def _run(self, spec: dict, inputs: list[np.ndarray] | None, out: Outcome) -> None:
        built = builder.build(spec)
        out.inputs = inputs = builder.random_inputs(spec, built) if inputs is None else list(inputs)
        part = partition_for_npu(built.mod, hw=self.hw)
        final, plans = None, {}
        try:  # without the CPU backend, models with a host graph are checked op by op only
            done = self.run_npu_path(part, inputs, out, allow_host="cpu" in self.backends)
            if done is not None:
                final, plans = done[0][0], done[1]
        except CpuUnavailable as err:
            out.cpu_unavailable = str(err)
        # per op: alone on the golden model vs TVM's CPU build, fed the NPU path's values
        per_op = self._per_op(spec, built, inputs, (part, final, plans), out)
        n = len(spec["ops"])
        on = sum(out.offloaded)
        out.placement = "npu" if on == n else ("cpu" if on == 0 else "partial")
        if out.placement == "npu" and n > 1 and per_op is not None and final is not None and not np.array_equal(final, per_op):
            d = np.abs(final.astype(np.int32) - per_op.astype(np.int32))
            out.mismatches.append(Mismatch("fused-per-op", f"whole-model output differs from the ops run one at a "
                                                           f"time: max {int(d.max())} LSB"))  # fmt: skip

    def _cpu_reference(self, spec: dict, out: Outcome):
        """TVM's CPU build of the detached module (every op from parameters of its own)."""
        if "cpu" not in self.backends:
            return None
        det = builder.build(spec, detached=True)
        self.cpu_compiles += 1
        try:
            return relax.VirtualMachine(tvm.compile(det.mod, target="llvm"), tvm.cpu()), det.roles
        except Exception as err:  # noqa: BLE001 - TVM itself cannot build the reference
            out.cpu_unavailable = _first_line(err)
            return None

    def _per_op(self, spec: dict, built: builder.Built, inputs: list[np.ndarray], whole, out: Outcome) -> np.ndarray | None:
        ops = spec["ops"]
        cpu = self._cpu_reference(spec, out)
        values: dict[int, np.ndarray] = {0: inputs[0]}  # the chain's tensors on the NPU path
        for k, op in enumerate(ops):
            if len(ops) == 1:
                part, value, plans = whole  # the whole model is this op
            else:
                one, one_inputs = _one_op_case(spec, k, built, values, inputs)
                part = partition_for_npu(builder.build(one).mod, hw=self.hw)
            offloaded = bool(npu_functions(part))
            out.offloaded.append(offloaded)
            if not offloaded:
                reasons = [d.reason for d in partition_log(part) or [] if not d.accepted and d.reason]
                if not reasons:
                    out.mismatches.append(Mismatch("reason", f"op {k} ({op_label(op)}) stayed on the CPU without a reason"))
                out.reasons.append(reasons[0] if reasons else "")
            if len(ops) == 1 and value is None:
                return None  # not run (TVM cannot build it, or no CPU backend for a host graph)
            cpu_value = self._cpu_op(cpu, built, k, values, inputs) if cpu else None
            if len(ops) > 1:
                if not offloaded and "cpu" not in self.backends:  # any value will do for the ops after it
                    value = np.random.default_rng(k).integers(-128, 128, built.tensors[k + 1].shape, dtype=np.int8)
                elif offloaded or cpu_value is None:
                    try:
                        (value, *_), plans = self.run_npu_path(part, one_inputs, out)
                    except CpuUnavailable as err:  # neither the NPU nor TVM computes this op: the chain ends here
                        out.cpu_unavailable = str(err)
                        return None
                else:
                    value = cpu_value
            if offloaded and cpu_value is not None:
                npu_op = next(iter(plans.values())).ops[0] if len(plans) == 1 and plans else None
                self._compare_cpu(k, op, npu_op, built, value, cpu_value, out, spec.get("origin", "relax"))
            elif cpu_value is not None and not np.array_equal(value, cpu_value):  # refused: CPU vs CPU, trivially
                out.mismatches.append(Mismatch("refused-cpu", f"op {k} ({op_label(op)}) stayed on the CPU, yet the "
                                                              "partitioned model's result differs from TVM's"))  # fmt: skip
            values[k + 1] = value
        return values[len(ops)]

    def _compare_cpu(self, k: int, op: dict, npu_op, built: builder.Built, value, cpu_value, out: Outcome,
                     origin: str = "relax") -> None:  # fmt: skip
        tol, cls = tolerance(op, npu_op, built.tensors[k], built.tensors[k + 1], origin)
        d = int(np.max(np.abs(value.astype(np.int32) - cpu_value.astype(np.int32)), initial=0))
        out.max_cpu_lsb = max(out.max_cpu_lsb, d)
        if d > 1 and cls:
            out.expected.append(cls)
        if d > tol:
            out.mismatches.append(Mismatch("golden-cpu", f"op {k} ({op_label(op)}): {d} LSB from TVM's CPU build "
                                                         f"(allowed {tol})"))  # fmt: skip

    @staticmethod
    def _cpu_op(cpu, built: builder.Built, k: int, values, inputs) -> np.ndarray:
        """TVM's CPU result of op k (the detached module) for the NPU path's values."""
        vm, roles = cpu
        args = []
        for role, i in roles:
            if role == "tensor":
                args.append(values[i] if i in values else np.zeros(built.tensors[i].shape, np.int8))
            else:
                args.append(inputs[i])
        res = vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(a)) for a in args])
        return res[k].numpy()


# ---------------------------------------------------------------------------------------------
# One op of a chain as a case of its own


def _one_op_case(spec: dict, k: int, built: builder.Built, values, inputs):
    """Op k alone: a spec whose input is the chain's tensor k (and, for ADD, a second input with
    the quantization of the operand it adds), and its inputs on the NPU path."""
    op = dict(spec["ops"][k])
    t = built.tensors[k]
    one_inputs = [values[k]]
    if op["kind"] == "add":
        op["residual"] = False
        src, i = built.b_operands[k]
        if src == "tensor":
            prev = built.tensors[i]
            op["b_scale"], op["b_zp"] = prev.scale, prev.zp
            one_inputs.append(values[i])
        else:
            one_inputs.append(inputs[i])
    one = {"seed": spec["seed"], "layout": spec["layout"], "input": {"shape": list(t.shape), "scale": t.scale, "zp": t.zp},
           "ops": [op], "origin": spec.get("origin", "relax")}  # fmt: skip
    return one, one_inputs


# ---------------------------------------------------------------------------------------------
# Reasons, counted


def reason_class(reason: str) -> str:
    """A refusal reason with its numbers and quoted names masked, to count like with like."""
    text = re.sub(r"'[^']*'", "'…'", reason)
    text = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", text)
    return text[:90]

