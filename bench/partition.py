"""Benchmark: npu_byoc.partition_for_npu() against the raw TVM passes it wraps.

    .venv/bin/python bench/partition.py            # fixtures + 10/100/1000-layer synthetic graphs
    .venv/bin/python bench/partition.py --quick    # smoke run: tiny_cnn_int8 + 5/10-layer graphs (seconds)
    .venv/bin/python bench/partition.py --profile  # also cProfile partition_for_npu on the largest graph

"raw" is the same work without the checks: split_shared_dequantize, then FuseOpsByPattern over
the same pattern table with check=None, then MergeCompositeFunctions. The difference between
the two columns is therefore the cost of what partition_for_npu adds: the NPU checks (extraction
of every candidate match into a quantized-op record), the partition log, and any post-processing
of the result (such as naming the partitions).

"raw+uid" is the raw passes with one change: every composite gets a unique attribute
("npu.match_id") through FusionPattern's attrs_getter. TVM's BlockBuilder.AddFunction dedups
functions in a map whose hash ignores tensor content but whose equality compares it (apache/tvm
#19801), so composites that differ only in their bound weights all collide in one bucket and
each AddFunction compares against all earlier ones: O(n^2) in FuseOpsByPattern(bind_constants=True)
and again in MergeCompositeFunctions. A unique attribute changes the hash and removes the
collisions; the column shows what that fix would buy partition_for_npu.

This script prints figures and asserts nothing. Without checks the raw passes also fuse near
misses the checks reject, and npu.conv2d (first in the table) takes the depthwise convolutions
too, so the composite counts of real models may differ; on the synthetic graphs they agree.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import itertools
import pstats
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import tvm
from tvm import relax
from tvm.relax.transform import FusionPattern

from benchlib import QUICK_BANNER, QUICK_MODEL, fixture_models, load_fixture  # noqa: E402  (puts the repo on sys.path)

import npu_byoc  # noqa: E402
from npu_byoc import patterns as P  # noqa: E402


# ---------------------------------------------------------------------------------------------
# The two partitioners


def partition_npu(mod: tvm.IRModule) -> tvm.IRModule:
    return npu_byoc.partition_for_npu(mod)


def partition_raw(mod: tvm.IRModule) -> tvm.IRModule:
    """The same passes and patterns as partition_for_npu, with no checks and no log."""
    seq = tvm.transform.Sequential(
        [
            relax.transform.FuseOpsByPattern(
                P.fusion_patterns(P.PATTERN_TABLE, check_factory=None), bind_constants=True, annotate_codegen=False
            ),
            relax.transform.MergeCompositeFunctions(),
        ]
    )
    return seq(P.split_shared_dequantize(mod))


def partition_raw_uid(mod: tvm.IRModule) -> tvm.IRModule:
    """partition_raw, with a unique attribute on every composite (see the module docstring)."""
    ids = itertools.count()

    def unique_attr(_annotated):
        return {"npu.match_id": str(next(ids))}

    pats = [
        FusionPattern(p.name, p.pattern, p.annotation_patterns, None, unique_attr)
        for p in P.fusion_patterns(P.PATTERN_TABLE, check_factory=None)
    ]
    seq = tvm.transform.Sequential(
        [
            relax.transform.FuseOpsByPattern(pats, bind_constants=True, annotate_codegen=False),
            relax.transform.MergeCompositeFunctions(),
        ]
    )
    return seq(P.split_shared_dequantize(mod))


def composite_counts(mod: tvm.IRModule) -> Counter:
    counts: Counter = Counter()
    for func in P.npu_functions(mod).values():
        counts.update(name for name, _ in P.composite_functions(func))
    return counts


# ---------------------------------------------------------------------------------------------
# Synthetic QDQ graphs, in the form TVM's TFLite frontend produces for a conv layer:
#   dequantize(x), dequantize(W, axis=3) -> conv2d -> add(dequantize(bias)) -> quantize -> clip


def synthetic_conv_chain(layers: int, hw: int = 8, channels: int = 8, seed: int = 0) -> tvm.IRModule:
    rng = np.random.default_rng(seed)
    f32 = np.float32
    zero = relax.const(np.int32(0))
    x = relax.Var("x", relax.TensorType([1, hw, hw, channels], "int8"))
    bb = relax.BlockBuilder()
    s_x, zp_x = f32(0.02), -128
    with bb.function("main", [x]):
        with bb.dataflow():
            act = x
            for i in range(layers):
                w = rng.integers(-127, 128, size=(3, 3, channels, channels), dtype=np.int8)  # HWIO
                s_w = rng.uniform(0.002, 0.01, size=channels).astype(f32)
                bias = rng.integers(-1000, 1000, size=channels, dtype=np.int32)
                s_b = (s_x * s_w).astype(f32)
                s_y, zp_y = f32(0.02), -128
                xf = bb.emit(relax.op.dequantize(act, relax.const(s_x), relax.const(np.int32(zp_x)), axis=0), f"l{i}_x")
                wf = bb.emit(relax.op.dequantize(relax.const(w), relax.const(s_w), zero, axis=3), f"l{i}_w")
                conv = bb.emit(
                    relax.op.nn.conv2d(
                        xf, wf, strides=1, padding=1, data_layout="NHWC", kernel_layout="HWIO", out_layout="NHWC"
                    ),
                    f"l{i}_conv",
                )
                bf = bb.emit(relax.op.dequantize(relax.const(bias), relax.const(s_b), zero, axis=0), f"l{i}_b")
                acc = bb.emit(relax.op.add(conv, bf), f"l{i}_add")
                q = bb.emit(relax.op.quantize(acc, relax.const(s_y), relax.const(np.int32(zp_y)), axis=0), f"l{i}_q")
                act = bb.emit(relax.op.clip(q, -128, 127), f"l{i}")
                s_x, zp_x = s_y, zp_y
            out = bb.emit_output(act)
        bb.emit_func_output(out)
    return bb.get()


# ---------------------------------------------------------------------------------------------
# Timing


def best_of(fn, mod, reps: int) -> tuple[float, tvm.IRModule]:
    best, out = float("inf"), None
    for _ in range(reps):
        gc.collect()
        t0 = time.perf_counter()
        out = fn(mod)
        best = min(best, time.perf_counter() - t0)
    return best, out


def adaptive_reps(first: float) -> int:
    """How many more runs after a first one of ``first`` seconds (best of 5 / 3 / 2)."""
    if first < 1.0:
        return 4
    if first < 10.0:
        return 2
    return 1


def measure(mod: tvm.IRModule, max_reps: int = 4) -> dict:
    row = {"bindings": sum(len(b.bindings) for b in mod["main"].body.blocks)}
    for key, fn in (("npu", partition_npu), ("raw", partition_raw), ("uid", partition_raw_uid)):
        gc.collect()
        t0 = time.perf_counter()
        out = fn(mod)  # first run, also warms caches
        first = time.perf_counter() - t0
        reps = min(adaptive_reps(first), max_reps)
        best, out = best_of(fn, mod, reps)
        row[key] = min(first, best)
        row[f"{key}_n"] = reps + 1
        row[f"{key}_comp"] = composite_counts(out)
    row["ratio"] = row["npu"] / row["raw"]
    return row


def fmt_counts(c: Counter) -> str:
    return " ".join(f"{k.removeprefix('npu.')}:{v}" for k, v in sorted(c.items())) or "-"


def print_table(rows: list[tuple[str, dict, int | None]]) -> None:
    head = (
        f"{'workload':<28} {'bindings':>8} {'npu_byoc s':>11} {'n':>2} {'raw s':>9} {'n':>2} {'ratio':>6}"
        f" {'npu ms/layer':>12} {'raw ms/layer':>12} {'raw+uid s':>10} {'ms/layer':>8}  {'composites npu_byoc | raw'}"
    )
    print(head)
    print("-" * len(head))
    for name, r, layers in rows:
        per_npu = f"{1e3 * r['npu'] / layers:12.2f}" if layers else f"{'':>12}"
        per_raw = f"{1e3 * r['raw'] / layers:12.2f}" if layers else f"{'':>12}"
        per_uid = f"{1e3 * r['uid'] / layers:8.2f}" if layers else f"{'':>8}"
        same = "" if r["npu_comp"] == r["raw_comp"] else "  (differ)"
        comp = f"{sum(r['npu_comp'].values())} | {sum(r['raw_comp'].values())}{same}"
        print(
            f"{name:<28} {r['bindings']:>8} {r['npu']:>11.3f} {r['npu_n']:>2} {r['raw']:>9.3f} {r['raw_n']:>2}"
            f" {r['ratio']:>6.2f} {per_npu} {per_raw} {r['uid']:>10.3f} {per_uid}  {comp}"
        )
    print()
    print("composites by op (npu_byoc | raw); without checks raw also fuses near misses, and npu.conv2d")
    print("(first in the table) takes the depthwise convolutions:")
    for name, r, _ in rows:
        print(f"  {name:<26} {fmt_counts(r['npu_comp'])}  |  {fmt_counts(r['raw_comp'])}")


def print_growth(rows: list[tuple[str, dict, int | None]]) -> None:
    synth = [(layers, r) for _, r, layers in rows if layers]
    if len(synth) < 2:
        return
    print()
    print("growth of the synthetic series (time ratio / layer ratio; 1.0 = linear):")
    for (l0, r0), (l1, r1) in zip(synth, synth[1:]):
        k = l1 / l0
        print(
            f"  {l0:>5} -> {l1:<5} layers x{k:g}:  npu_byoc x{r1['npu'] / r0['npu']:.1f} ({r1['npu'] / r0['npu'] / k:.2f}),"
            f"  raw x{r1['raw'] / r0['raw']:.1f} ({r1['raw'] / r0['raw'] / k:.2f}),"
            f"  raw+uid x{r1['uid'] / r0['uid']:.1f} ({r1['uid'] / r0['uid'] / k:.2f})"
        )


def phases(name: str, mod: tvm.IRModule) -> None:
    """Time each pass of the raw pipeline, with bound and lifted constants and with unique attrs."""

    def timed(fn):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out

    plain = P.fusion_patterns(P.PATTERN_TABLE, check_factory=None)
    ids = itertools.count()
    uid = [FusionPattern(p.name, p.pattern, p.annotation_patterns, None, lambda _a: {"npu.match_id": str(next(ids))}) for p in plain]
    t_split, split = timed(lambda: P.split_shared_dequantize(mod))
    print()
    print(f"raw passes one by one on {name} (seconds):")
    print(f"  split_shared_dequantize                               {t_split:8.3f}")
    for label, pats, bind in (("bound constants", plain, True), ("lifted constants", plain, False), ("bound + unique attr", uid, True)):
        t_fuse, fused = timed(lambda: relax.transform.FuseOpsByPattern(pats, bind_constants=bind, annotate_codegen=False)(split))
        t_merge, _ = timed(lambda: relax.transform.MergeCompositeFunctions()(fused))
        print(f"  {label:<20} FuseOpsByPattern {t_fuse:8.3f}   MergeCompositeFunctions {t_merge:8.3f}")


def profile(name: str, mod: tvm.IRModule, top: int = 25) -> None:
    phases(name, mod)
    print()
    print(f"cProfile of partition_for_npu on {name} (top {top} by cumulative time):")
    prof = cProfile.Profile()
    prof.enable()
    partition_npu(mod)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(top)
    print(buf.getvalue())
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(15)
    print(buf.getvalue())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK_MODEL}, 5- and 10-layer synthetic graphs, best of 2")
    ap.add_argument("--profile", action="store_true", help="cProfile partition_for_npu on the largest synthetic graph")
    ap.add_argument("--layers", type=int, nargs="*", help="synthetic layer counts (overrides the defaults)")
    args = ap.parse_args(argv)

    layer_counts = args.layers or ([5, 10] if args.quick else [10, 100, 1000])
    max_reps = 1 if args.quick else 4
    if args.quick:
        print(QUICK_BANNER)
    print(f"tvm {tvm.__version__}, python {sys.version.split()[0]}; times are best-of-n wall seconds")
    print()

    rows: list[tuple[str, dict, int | None]] = []
    for name in [QUICK_MODEL] if args.quick else fixture_models():
        mod = load_fixture(name)  # not timed
        rows.append((name, measure(mod, max_reps), None))

    synth = {}
    for n in layer_counts:
        t0 = time.perf_counter()
        synth[n] = mod = synthetic_conv_chain(n)
        build = time.perf_counter() - t0
        print(f"built synthetic {n}-layer graph in {build:.2f} s", flush=True)
        rows.append((f"synthetic conv x{n}", measure(mod, max_reps), n))
    print()

    print_table(rows)
    print_growth(rows)

    if args.profile and synth:
        n = max(synth)
        profile(f"synthetic conv x{n}", synth[n])


if __name__ == "__main__":
    main()
