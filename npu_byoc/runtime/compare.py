"""Per-layer comparison of the NPU path with TVM's CPU build and a reference runtime.

For every NPU layer: the layer's output on the golden path (NPU layers on the golden model,
the rest on TVM's CPU build) against the same tensor in TVM's CPU build of the whole
model; for the model outputs: both paths against the reference runtime's outputs, where
given. Differences are in LSB of the layer's int8 output, so a user sees where a model's
error comes from and how it compounds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import tvm
from tvm import relax

from ..util import escape
from ..arch.config import DEFAULT_CONFIG, HwConfig
from ..partition.pipeline import partition_for_npu, partition_log
from ..ops.uint8 import to_model
from .build import build


@dataclass
class Diff:
    max_lsb: float
    mean_lsb: float
    fraction: float  # of elements that differ

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray, scale: float | None = None) -> "Diff":
        """|a - b|; with ``scale``, float values of a dequantized tensor, counted in its LSB."""
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            d = np.abs(a.astype(np.float64) - b.astype(np.float64))
            if scale:
                d = np.round(d / scale, 3)  # on the quantization grid: whole LSB up to float rounding
        else:
            d = np.abs(a.astype(np.int64) - b.astype(np.int64))
        if d.size == 0:
            return cls(0, 0.0, 0.0)
        return cls(float(d.max()), float(d.mean()), float(np.mean(d > 0)))


@dataclass
class LayerRow:
    partition: str
    layer: str
    op: str
    golden_vs_cpu: Diff


@dataclass
class OutputRow:
    output: int
    golden_vs_cpu: Diff
    golden_vs_reference: Diff | None = None
    cpu_vs_reference: Diff | None = None
    scale: float | None = None  # a float output (ONNX DequantizeLinear): differences in LSB of this scale


@dataclass
class CompareReport:
    model: str
    layers: list[LayerRow] = field(default_factory=list)
    outputs: list[OutputRow] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        lines = [f"Per-layer comparison of {escape.text(self.model)}: golden path vs TVM CPU (LSB of the layer output)"]
        w = min(max([len(r.layer) for r in self.layers] + [5]), 50)
        lines.append(f"  {'partition':<15} {'layer':<{w}} {'op':<17} {'max':>4} {'mean':>7} {'differ':>7}")
        for r in self.layers:
            d = r.golden_vs_cpu
            name = escape.text_column(r.layer, w)
            lines.append(
                f"  {r.partition:<15} {name:<{w}} {r.op:<17} {d.max_lsb:>4g} {d.mean_lsb:>7.3f} {100 * d.fraction:>6.1f}%"
            )
        lines.append("")
        lines.append("Model outputs:")
        for o in self.outputs:
            parts = [f"golden vs TVM CPU max {o.golden_vs_cpu.max_lsb:g} ({100 * o.golden_vs_cpu.fraction:.1f}% differ)"]
            if o.golden_vs_reference is not None:
                g, c = o.golden_vs_reference, o.cpu_vs_reference
                parts.append(f"golden vs reference max {g.max_lsb:g} ({100 * g.fraction:.1f}%)")
                parts.append(f"TVM CPU vs reference max {c.max_lsb:g} ({100 * c.fraction:.1f}%)")
            unit = f" (float, in LSB of its scale {o.scale:.6g})" if o.scale else ""
            lines.append(f"  output {o.output}{unit}: " + "; ".join(parts))
        return "\n".join(lines) + "\n"


def with_outputs(mod: tvm.IRModule, var_names: Sequence[str]) -> tvm.IRModule:
    """``mod`` whose main also returns the bindings named ``var_names`` (after its outputs)."""
    mod = relax.transform.ToNonDataflow()(mod)
    main = mod["main"]
    found = {}
    for block in main.body.blocks:
        for b in block.bindings:
            if b.var.name in var_names:
                found[b.var.name] = b.var
    ret = main.body.body
    if isinstance(ret, relax.Tuple):
        outs = list(ret.fields)
    elif isinstance(ret.ty, relax.TupleType):  # a variable bound to the outputs' tuple
        outs = [relax.TupleGetItem(ret, i) for i in range(len(ret.ty.fields))]
    else:
        outs = [ret]
    extra = [found[n] for n in var_names if n in found]
    fields = outs + extra
    body = relax.SeqExpr(main.body.blocks, relax.Tuple(fields))
    ret_ty = relax.TupleType([f.ty for f in fields])
    new_main = relax.Function(main.params, body, ret_ty, main.is_pure, main.attrs, main.span)
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = new_main
    return out


def compare(
    mod: tvm.IRModule,
    inputs: Sequence[np.ndarray],
    reference: Sequence[np.ndarray] | None = None,
    *,
    hw: HwConfig = DEFAULT_CONFIG,
    exclude: Sequence[str] = (),
) -> CompareReport:
    """Compare the golden NPU path, TVM's CPU build and (optionally) reference outputs.

    ``mod`` is an imported module (from :func:`npu_byoc.load_model`); ``exclude``: operators
    kept on the CPU (partition_for_npu's)."""
    from ..frontends.load import model_info
    from ..partition.pipeline import canonicalise

    part = partition_for_npu(mod, hw=hw, exclude=exclude)
    root_of_layer = layer_roots(part)

    golden = build(part, "golden", hw=hw)
    seen: list[tuple[str, object, np.ndarray]] = []
    golden.layer_hooks.append(lambda p, op, out: seen.append((p, op, out.copy())))
    golden_out = golden.run(inputs)

    roots = [root_of_layer[op.name] for _, op, _ in seen if op.name in root_of_layer]
    cpu_mod = with_outputs(canonicalise(mod), roots)  # the bindings the decisions name
    cpu = build(cpu_mod, "cpu", hw=hw)
    cpu.info = None  # extra outputs: skip the model-signature check on results
    cpu_all = cpu.run(inputs)
    n_out = len(golden_out)
    cpu_out, cpu_layers = cpu_all[:n_out], dict(zip(roots, cpu_all[n_out:]))

    info = model_info(mod)
    report = CompareReport(model=info.path if info else "<module>")
    for partition, op, out in seen:
        root = root_of_layer.get(op.name)
        if root is None or root not in cpu_layers:
            continue
        plan = golden.plans[partition]
        nchw = any(io.ref.layout == "NCHW" for io in plan.inputs + plan.outputs)
        ref = cpu_layers[root]
        out = to_model(plan.model_order(op, out), ref.dtype)  # a uint8 layer's int8 bytes, flipped back
        held = plan.nchw_sequences(nchw) if ref.ndim == 3 else nchw
        report.layers.append(LayerRow(partition, op.name, op.kind, Diff.of(out.reshape(-1), _layer_flat(ref, held))))
    scales = output_scales(mod)
    for k, (g, c) in enumerate(zip(golden_out, cpu_out)):
        scale = scales[k] if k < len(scales) and g.dtype.kind == "f" else None
        row = OutputRow(k, Diff.of(g, c, scale), scale=scale)
        if reference is not None:
            r = reference_like(reference, k, g)
            row.golden_vs_reference, row.cpu_vs_reference = Diff.of(g, r, scale), Diff.of(c, r, scale)
        report.outputs.append(row)
    return report


def layer_roots(part: tvm.IRModule) -> dict[str, str]:
    """Each NPU layer of a partitioned module (its composite's layer name) -> the binding of the
    model it computes (its partition decision's root). A decision names the source operator,
    which several composites can share (an ONNX Split's halves are "split" and "split#1"):
    those are told apart by the bindings inside the composite, which keep the model's names;
    a layer no decision tells apart is left out rather than compared with another's tensor."""
    from ..ops.composites import composite_functions, npu_functions
    from ..ops.table import LAYER_ATTR

    by_source: dict[str, list] = {}
    for d in partition_log(part) or []:
        if d.accepted and d.layer:
            by_source.setdefault(d.layer, []).append(d)
    roots = {}
    for func in npu_functions(part).values():
        for _, composite in composite_functions(func):
            if LAYER_ATTR not in composite.attrs:
                continue
            layer = str(composite.attrs[LAYER_ATTR])
            candidates = by_source.get(layer) or by_source.get(layer.rsplit("#", 1)[0], [])
            inner = {str(b.var.name) for block in composite.body.blocks for b in block.bindings}
            shared = [len(inner & set(d.vars)) for d in candidates]
            if len(candidates) == 1 or (shared and shared.count(max(shared)) == 1 and max(shared) > 0):
                roots[layer] = candidates[shared.index(max(shared))].vars[0]
    return roots


def reference_like(reference: Sequence[np.ndarray], k: int, y: np.ndarray) -> np.ndarray:
    """Reference output ``k`` in the shape of the model's output ``y`` (same element count)."""
    from ..errors import NpuByocError

    if k >= len(reference):
        raise NpuByocError(f"the model has {k + 1} or more outputs, got {len(reference)} reference array(s)")
    r = np.asarray(reference[k])
    if r.size != y.size:
        raise NpuByocError(f"reference {k}: {r.dtype} {list(r.shape)} does not fit the model output {y.dtype} "
                           f"{list(y.shape)}")  # fmt: skip
    return r.reshape(y.shape)


def output_scales(mod: tvm.IRModule) -> list[float | None]:
    """Per output of ``main``: the per-tensor scale of the dequantize that makes it float (an
    ONNX QDQ model ends in DequantizeLinear), else None."""
    from ..util.relax_utils import Constant, constant_value, op_name

    main = mod["main"]
    values = {b.var: b.value for block in main.body.blocks for b in block.bindings}
    ret = main.body.body
    ret = values.get(ret, ret) if isinstance(ret, relax.Var) and isinstance(values.get(ret), relax.Tuple) else ret
    out: list[float | None] = []
    for f in ret.fields if isinstance(ret, relax.Tuple) else [ret]:
        v = values.get(f) if isinstance(f, relax.Var) else f
        scale = None
        if op_name(v) == "relax.dequantize" and isinstance(v.args[1], Constant):
            s = constant_value(v.args[1])
            scale = float(s.reshape(-1)[0]) if s.size == 1 and float(s.reshape(-1)[0]) > 0 else None
        out.append(scale)
    return out


def _layer_flat(value: np.ndarray, nchw: bool) -> np.ndarray:
    """TVM's tensor of a layer in the NPU's H x W x C order, flattened: an NCHW partition holds
    [N, C, H, W] and the sequences [N, C, L] channel-last."""
    if value.ndim in (3, 4) and nchw:
        value = np.moveaxis(value[0], 0, -1)
    return value.reshape(-1)
