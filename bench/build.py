"""Benchmark: npu_byoc.build(mod, "functional") against TVM's plain CPU build of the same model.

    .venv/bin/python bench/build.py              # every fixture model, 3 fresh processes per build (~2 min)
    .venv/bin/python bench/build.py --quick      # smoke run: tiny_cnn_int8, 1 process per build, 5 runs (seconds)
    .venv/bin/python bench/build.py --profile    # also: each source of the g++ step compiled alone
    .venv/bin/python bench/build.py --models tiny_cnn_int8 --threads 1

Compile. Every build runs in a fresh Python process (`python bench/build.py --child ...`), so
neither TVM's caches nor the peak memory of one build leak into the next. The process loads the
model (not timed), then for "functional" times `partition_for_npu(mod)` and
`npu_byoc.build(partitioned, "functional")` (RunCodegen + tvm.compile + export_library with the
generated C++ and the C functional model + load_module), and for "cpu" times
`npu_byoc.build(mod, "cpu")` (tvm.compile of the unpartitioned module + VM). The product code is
not changed: the phases are timed by wrapping `relax.transform.RunCodegen`, `tvm.compile`,
`Executable.export_library`, `tvm.support.cc.create_shared` (the g++ step inside
export_library) and `tvm.runtime.load_module` for the duration of the child process.

Peak memory is `resource.getrusage`'s ru_maxrss in the child: RUSAGE_SELF (the Python process:
imports, model, TVM's compilation) and RUSAGE_CHILDREN (the largest descendant: g++'s cc1plus).
"before" is RUSAGE_SELF just before build(), after the imports and the model load, so
peak - before is what the build added.

Inference. In the same child, after the build figures are taken: `model.run([x])` with
x = input_0[0:1] of the model's .npz, `--warmup` runs, then `--runs` timed runs; best and
median in milliseconds.

Across the `--repeat` processes of one (model, backend): the best wall times, the highest peak
memory, and the best median inference time. The script prints figures and asserts nothing;
the targets of issue 4 (compile no slower than TVM's CPU compile, functional inference <= 2x
TVM CPU) are marked "ok" / "MISSED" in the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import QUICK_BANNER, QUICK_MODEL, REPO, fixture_models, load_fixture, sample  # noqa: E402

BACKENDS = ("cpu", "functional")
MARK = "BENCH_RESULT "
SOURCE_SUFFIXES = (".cc", ".cpp", ".cxx", ".c")


# ---------------------------------------------------------------------------------------------
# The child process: one build, its figures, then inference


def _maxrss_mb(who) -> float:
    import resource

    return resource.getrusage(who).ru_maxrss / 1024.0  # KiB on Linux


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _instrument(phases: dict, keep_dir: str | None) -> None:
    """Wrap the TVM entry points build() goes through, adding their wall time to ``phases``."""
    import tvm
    import tvm.support.cc as cc
    from tvm import relax

    def timed(key, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                phases[key] = phases.get(key, 0.0) + time.perf_counter() - t0

        return wrapper

    run_codegen = relax.transform.RunCodegen

    def RunCodegen(*args, **kwargs):  # noqa: N802  (a pass factory; time the pass, not its creation)
        return timed("codegen", run_codegen(*args, **kwargs))

    relax.transform.RunCodegen = RunCodegen
    tvm.compile = timed("tvm_compile", tvm.compile)
    tvm.runtime.Executable.export_library = timed("export", tvm.runtime.Executable.export_library)
    tvm.runtime.load_module = timed("load", tvm.runtime.load_module)

    create_shared = cc.create_shared

    def gxx(output, objects, options=None, **kwargs):
        cpu0 = _children_cpu()
        t0 = time.perf_counter()
        try:
            return create_shared(output, objects, options=options, **kwargs)
        finally:
            phases["gxx"] = phases.get("gxx", 0.0) + time.perf_counter() - t0
            phases["gxx_cpu"] = phases.get("gxx_cpu", 0.0) + _children_cpu() - cpu0
            if keep_dir:  # --profile: keep the g++ inputs to compile them one by one
                kept = []
                for obj in objects:
                    dst = os.path.join(keep_dir, os.path.basename(obj))
                    shutil.copy(obj, dst)
                    kept.append(dst)
                with open(os.path.join(keep_dir, "gxx.json"), "w") as f:
                    json.dump({"objects": kept, "options": list(options or []), "cc": cc.get_cc()}, f)

    cc.create_shared = gxx


def child(spec: dict) -> dict:
    import resource

    t0 = time.perf_counter()
    import numpy as np
    import tvm

    import npu_byoc
    from npu_byoc.codegen import c_codegen

    t_import = time.perf_counter() - t0
    backend = spec["backend"]
    mod = load_fixture(spec["model"])  # not timed
    x = sample(spec["model"])[0][0]

    res = {"tvm": tvm.__version__, "import_s": t_import, "partition_s": 0.0}
    if backend != "cpu":
        t0 = time.perf_counter()
        mod = npu_byoc.partition_for_npu(mod)
        res["partition_s"] = time.perf_counter() - t0

    phases: dict = {}
    _instrument(phases, spec.get("keep_dir"))
    res["rss_before_mb"] = _maxrss_mb(resource.RUSAGE_SELF)
    with tempfile.TemporaryDirectory(prefix="npu_byoc_bench_") as tmp:
        kwargs = {"output": os.path.join(tmp, "model.so")} if backend != "cpu" else {}
        t0 = time.perf_counter()
        model = npu_byoc.build(mod, backend, **kwargs)
        res["build_s"] = time.perf_counter() - t0
        res["rss_self_mb"] = _maxrss_mb(resource.RUSAGE_SELF)
        res["rss_children_mb"] = _maxrss_mb(resource.RUSAGE_CHILDREN)
        res["phases"] = phases
        res["partitions"] = len(model.plans)
        sources = c_codegen.LAST["sources"]  # what the last RunCodegen rendered
        res["gen_c_bytes"] = sum(len(s.encode()) for s in sources.values())
        res["gen_c_lines"] = sum(s.count("\n") for s in sources.values())
        res["so_bytes"] = os.path.getsize(model.extra["library"]) if "library" in model.extra else 0

        for _ in range(spec["warmup"]):
            out = model.run([x])
        times = []
        for _ in range(spec["runs"]):
            t0 = time.perf_counter()
            out = model.run([x])
            times.append(time.perf_counter() - t0)
        res["infer_best_ms"] = 1e3 * min(times)
        res["infer_median_ms"] = 1e3 * statistics.median(times)
        res["output"] = [o.tolist() for o in out]
        res["output_dtype"] = [str(o.dtype) for o in out]
    return res


# ---------------------------------------------------------------------------------------------
# The parent: run the children, print the tables


def run_child(spec: dict, env: dict) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    sys.stderr.write(proc.stdout + proc.stderr)
    raise RuntimeError(f"child {spec['model']} {spec['backend']} failed (exit {proc.returncode})")


def merge(runs: list[dict]) -> dict:
    """Best wall times, highest memory, best median inference, phases of the fastest build."""
    fastest = min(runs, key=lambda r: r["partition_s"] + r["build_s"])
    out = dict(fastest)
    out["n"] = len(runs)
    out["compile_s"] = fastest["partition_s"] + fastest["build_s"]
    for key in ("rss_before_mb", "rss_self_mb", "rss_children_mb"):
        out[key] = max(r[key] for r in runs)
    out["infer_best_ms"] = min(r["infer_best_ms"] for r in runs)
    out["infer_median_ms"] = min(r["infer_median_ms"] for r in runs)
    return out


def _f(v: float | None, spec: str = "7.2f") -> str:
    return f"{v:{spec}}" if v else f"{'-':>{int(spec.split('.')[0])}}"


def print_compile_table(results: dict) -> None:
    print("compile (wall seconds, best of n fresh processes; memory MB, highest of n)")
    head = (
        f"{'model':<26} {'backend':<10} {'n':>2} {'total s':>7} {'partit':>7} {'build':>7} {'codegen':>7}"
        f" {'tvm.cmp':>7} {'emit':>7} {'g++':>7} {'g++cpu':>7} {'load':>7} {'other':>7}"
        f" {'RSS bef':>7} {'RSS pk':>7} {'g++ pk':>7} {'gen C':>8} {'C lines':>7} {'.so':>8}"
    )
    print(head)
    print("-" * len(head))
    for (name, backend), r in results.items():
        p = r["phases"]
        export = p.get("export", 0.0)
        emit = export - p.get("gxx", 0.0) if export else 0.0
        other = r["build_s"] - p.get("codegen", 0.0) - p.get("tvm_compile", 0.0) - export - p.get("load", 0.0)
        gen = f"{r['gen_c_bytes'] / 1024:6.0f}KB" if r["gen_c_bytes"] else f"{'-':>8}"
        so = f"{r['so_bytes'] / 1024:6.0f}KB" if r["so_bytes"] else f"{'-':>8}"
        lines = f"{r['gen_c_lines']:>7}" if r["gen_c_lines"] else f"{'-':>7}"
        print(
            f"{name:<26} {backend:<10} {r['n']:>2} {r['compile_s']:7.2f} {_f(r['partition_s'])} {r['build_s']:7.2f}"
            f" {_f(p.get('codegen'))} {_f(p.get('tvm_compile'))} {_f(emit)} {_f(p.get('gxx'))} {_f(p.get('gxx_cpu'))}"
            f" {_f(p.get('load'))} {other:7.2f}"
            f" {r['rss_before_mb']:7.0f} {r['rss_self_mb']:7.0f} {_f(r['rss_children_mb'], '7.0f')} {gen} {lines} {so}"
        )
    print()
    print("total = partition + build; build = npu_byoc.build(); codegen = RunCodegen (lower, schedule, encode,")
    print("render); emit = export_library minus g++ (LLVM machine code to .o, packed imports); g++cpu = its")
    print("user+sys CPU; other = rest of build(): for cpu mostly relax.VirtualMachine(ex), where LLVM generates")
    print("the machine code; for functional the plans. RSS bef = Python process before build(), RSS pk = its")
    print("peak, g++ pk = peak of the largest child process (cc1plus).")


def _diff(a: dict, b: dict) -> str:
    import numpy as np

    xs = [np.asarray(o) for o in a["output"]]
    ys = [np.asarray(o) for o in b["output"]]
    if any(x.shape != y.shape for x, y in zip(xs, ys)):
        return "shape!"
    n = sum(int((x != y).sum()) for x, y in zip(xs, ys))
    size = sum(x.size for x in xs)
    if a["output_dtype"][0].startswith("int"):
        lsb = max(int(np.abs(x.astype(np.int64) - y.astype(np.int64)).max()) for x, y in zip(xs, ys))
        return f"{n}/{size} (max {lsb} LSB)"
    err = max(float(np.abs(x - y).max()) for x, y in zip(xs, ys))
    return f"{n}/{size} (max {err:.3g})"


def print_summary(results: dict, models: list[str]) -> None:
    print()
    print("summary: functional (npu_byoc) vs cpu (TVM); ratio = functional / cpu")
    head = (
        f"{'model':<26} {'compile s':>9} {'cpu s':>7} {'ratio':>6} {'<=1?':>6}  {'peak MB':>7} {'cpu MB':>7}"
        f"  {'infer ms':>9} {'cpu ms':>8} {'ratio':>6} {'<=2?':>6}  {'best ms':>8} {'cpu best':>8}  {'outputs != cpu'}"
    )
    print(head)
    print("-" * len(head))
    for name in models:
        f, c = results.get((name, "functional")), results.get((name, "cpu"))
        if not f or not c:
            continue
        rc = f["compile_s"] / c["compile_s"]
        ri = f["infer_median_ms"] / c["infer_median_ms"]
        peak_f = max(f["rss_self_mb"], f["rss_children_mb"])
        peak_c = max(c["rss_self_mb"], c["rss_children_mb"])
        print(
            f"{name:<26} {f['compile_s']:9.2f} {c['compile_s']:7.2f} {rc:6.2f} {'ok' if rc <= 1 else 'MISSED':>6}"
            f"  {peak_f:7.0f} {peak_c:7.0f}"
            f"  {f['infer_median_ms']:9.3f} {c['infer_median_ms']:8.3f} {ri:6.2f} {'ok' if ri <= 2 else 'MISSED':>6}"
            f"  {f['infer_best_ms']:8.3f} {c['infer_best_ms']:8.3f}  {_diff(f, c)}"
        )
    print()
    print("compile s = partition + build; peak MB = max(process, largest child); infer ms = median of the")
    print("timed runs (best of the n processes); outputs != cpu: elements differing from TVM CPU")
    print("(the NPU is bit-exact with the golden model, which may round differently from TVM's kernels).")


# ---------------------------------------------------------------------------------------------
# --profile: the g++ step, one source at a time


def _timed_cmd(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB, the command and its descendants) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out = proc.stdout.read().decode(errors="replace")
    proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)}\n{out}")
    return wall, usage.ru_maxrss / 1024.0


def profile_gxx(name: str, keep_dir: str) -> None:
    with open(os.path.join(keep_dir, "gxx.json")) as f:
        info = json.load(f)
    options = info["options"]
    flags = [o for o in options if not o.endswith(SOURCE_SUFFIXES)]
    sources = [o for o in options if o.endswith(SOURCE_SUFFIXES)] + [
        o for o in info["objects"] if o.endswith(SOURCE_SUFFIXES)
    ]
    objects = [o for o in info["objects"] if not o.endswith(SOURCE_SUFFIXES)]
    print()
    print(f"g++ step of {name}, one source at a time ({info['cc']} -c -fPIC <build()'s flags>):")
    built = []
    for src in sources:
        size = os.path.getsize(src)
        label = os.path.basename(src)
        if src.startswith(keep_dir):
            label += " (generated)"
        for opt in ("-O2", "-O0"):
            obj = os.path.join(keep_dir, f"{os.path.basename(src)}{opt}.o")
            wall, rss = _timed_cmd([info["cc"], "-c", "-fPIC", *flags, opt, src, "-o", obj])
            print(f"  {label:<34} {size / 1024:8.0f} KB  {opt}  {wall:6.2f} s  {rss:6.0f} MB")
            if opt == "-O2":
                built.append(obj)
    # the headers alone: an empty translation unit with the generated code's includes
    probe = os.path.join(keep_dir, "headers_only.cc")
    with open(probe, "w") as f:
        f.write(
            "#include <tvm/ffi/container/tensor.h>\n#include <tvm/ffi/error.h>\n"
            "#include <tvm/ffi/function.h>\n#include \"npu_driver.h\"\n"
        )
    wall, rss = _timed_cmd([info["cc"], "-c", "-fPIC", *flags, probe, "-o", probe + ".o"])
    print(f"  {'(tvm/ffi + npu_driver.h headers only)':<34} {'':>11}  -O2  {wall:6.2f} s  {rss:6.0f} MB")
    wall, rss = _timed_cmd([info["cc"], "-shared", "-fPIC", "-o", os.path.join(keep_dir, "link.so"), *built, *objects])
    print(f"  {'link (+ ' + ', '.join(os.path.basename(o) for o in objects) + ')':<34} {'':>11}       {wall:6.2f} s  {rss:6.0f} MB")


# ---------------------------------------------------------------------------------------------


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK_MODEL}, one process per build, 5 inference runs")
    ap.add_argument("--repeat", type=int, help="fresh processes per (model, backend) (default 3)")
    ap.add_argument("--runs", type=int, help="timed inference runs per process (default 100)")
    ap.add_argument("--warmup", type=int, help="untimed inference runs first (default 5)")
    ap.add_argument("--models", nargs="*", help="fixture names (or stems) to run (default: all)")
    ap.add_argument("--threads", type=int, help="TVM_NUM_THREADS for the children (default: TVM's choice)")
    ap.add_argument("--profile", action="store_true", help="time each source of the g++ step alone")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        print(MARK + json.dumps(child(json.loads(args.child))), flush=True)
        return

    repeat = args.repeat or (1 if args.quick else 3)
    runs = args.runs or (5 if args.quick else 100)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 5)
    models = [QUICK_MODEL] if args.quick and not args.models else fixture_models()
    if args.quick:
        print(QUICK_BANNER)
    if args.models:
        models = [m for m in models if m in args.models or Path(m).stem in args.models]
    env = dict(os.environ)
    if args.threads:
        env["TVM_NUM_THREADS"] = str(args.threads)

    results: dict = {}
    keep: dict = {}
    version = None
    for name in models:
        runs_by_backend: dict = {b: [] for b in BACKENDS}
        for i in range(repeat):
            for backend in BACKENDS:  # interleaved, so drift in the machine's load hits both
                spec = {"model": name, "backend": backend, "warmup": args.warmup, "runs": runs}
                if args.profile and backend != "cpu" and i == 0:
                    keep[name] = spec["keep_dir"] = tempfile.mkdtemp(prefix="npu_byoc_bench_gxx_")
                r = run_child(spec, env)
                version = r["tvm"]
                runs_by_backend[backend].append(r)
                print(
                    f"  {name} {backend}: compile {r['partition_s'] + r['build_s']:.2f} s,"
                    f" infer {r['infer_median_ms']:.3f} ms",
                    file=sys.stderr,
                    flush=True,
                )
        for backend in BACKENDS:
            results[(name, backend)] = merge(runs_by_backend[backend])

    threads = env.get("TVM_NUM_THREADS", "default")
    print(
        f"tvm {version}, python {sys.version.split()[0]}, {os.cpu_count()} cores, TVM_NUM_THREADS={threads};"
        f" inference: {args.warmup} warm-up + {runs} timed runs per process, x = input_0[0:1]"
    )
    print()
    print_compile_table(results)
    print_summary(results, models)

    for name, keep_dir in keep.items():
        try:
            profile_gxx(name, keep_dir)
        finally:
            shutil.rmtree(keep_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
