"""A sweep's result as text (a table per model), JSON, CSV and a Pareto plot (PNG)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ...util import escape

SHORT = {"array_rows": "rows", "array_cols": "cols", "sram_bytes": "SRAM", "dma_bytes_per_cycle": "DMA B/cyc"}
CSV_FIELDS = ["ops_total", "ops_offloaded", "macs_total", "macs_offloaded", "partitions", "npu_macs", "cycles",
              "dma_cycles", "utilization", "sram_high_water", "dma_in_bytes", "dma_out_bytes", "external_bytes",
              "area_um2", "pareto", "error"]  # fmt: skip


def size(n: int) -> str:
    """1024 -> 1K, 1572864 -> 1.5M, 1000 -> 1000 (binary units, one decimal when inexact)."""
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.{0 if n % scale == 0 else 1}f}{unit}"
    return str(n)


def _value(name: str, v: int) -> str:
    return size(v) if name == "sram_bytes" else str(v)


def to_json(result) -> str:
    return json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n"


def _verdict(p: dict) -> str:
    v = p.get("verify")
    return "" if v is None else ("ok" if v["ok"] else "FAIL")


def to_text(result) -> str:
    w = result.area_weights
    lines = [f"area proxy: R·C·{w['mac']:g} + SRAM bytes·{w['sram_byte']:g} + DMA bytes/cycle·{w['dma_byte']:g} µm² "
             "(docs/sweep.md); cycles: the analytic model of every NPU partition's schedule (= the RTL)"]  # fmt: skip
    if result.exclude:
        lines.append(f"kept on the CPU (--exclude): {escape.text(', '.join(result.exclude), 300)}")
    fields = list(result.grid)
    heads = [SHORT.get(f, f) for f in fields]
    by_model: dict[str, list[dict]] = {}
    for p in result.points:
        by_model.setdefault(p["model"], []).append(p)
    for model, points in by_model.items():
        ok = [p for p in points if p["error"] is None]
        lines += ["", f"{escape.text(model)}: {len(points)} configuration(s), {sum(p['pareto'] for p in points)} on the "
                      f"Pareto front, {len(points) - len(ok)} infeasible"]  # fmt: skip
        cols = [*heads, "MACs on NPU", "ops", "parts", "cycles", "util", "SRAM peak", "ext. bytes", "area mm²",
                "front", "RTL"]  # fmt: skip
        rows = []
        for p in points:
            cfg = [_value(f, p["config"][f]) for f in fields]
            if p["error"] is not None:
                rows.append([*cfg, "infeasible (the reason is below the table)"])
                continue
            pct = 100 * p["macs_offloaded"] / p["macs_total"] if p["macs_total"] else 0.0
            rows.append([*cfg, f"{pct:.1f}%", f"{p['ops_offloaded']}/{p['ops_total']}", str(p["partitions"]),
                         str(p["cycles"]), f"{100 * p['utilization']:.1f}%", size(p["sram_high_water"]),
                         size(p["external_bytes"]), f"{p['area_um2'] / 1e6:.3f}", "*" if p["pareto"] else "",
                         _verdict(p)])  # fmt: skip
        widths = [max([len(c)] + [len(r[k]) for r in rows if k < len(r) and len(r) == len(cols)])
                  for k, c in enumerate(cols)]  # fmt: skip
        lines.append("  " + "  ".join(c.rjust(wd) for c, wd in zip(cols, widths)).rstrip())
        for r in rows:
            if len(r) == len(cols):
                lines.append("  " + "  ".join(c.rjust(wd) for c, wd in zip(r, widths)).rstrip())
            else:
                lines.append("  " + "  ".join(c.rjust(wd) for c, wd in zip(r[:-1], widths)) + "  " + r[-1])
        for p in points:
            if p["error"] is not None:
                where = " ".join(f"{SHORT.get(f, f)}={_value(f, p['config'][f])}" for f in fields)
                lines.append(f"  infeasible at {where}: {escape.text(p['error'], 400)}")
        for p in points:
            v = p.get("verify")
            if v is not None and not v["ok"]:
                bad = [r for r in v["partitions"] if r["status"] != "OK" or r["rtl_cycles"] != r["predicted_cycles"]
                       or r["max_diff_golden"]]  # fmt: skip
                for r in bad:
                    lines.append(f"  RTL MISMATCH at {p['config']}: {escape.text(r['partition'])}: status {r['status']}, "
                                 f"RTL {r['rtl_cycles']} cycles vs analytic {r['predicted_cycles']}, "
                                 f"max |RTL - golden| {r['max_diff_golden']} LSB")  # fmt: skip
    lines += ["", "front: * = on the Pareto front of cycles vs area (no other configuration has fewer or equal cycles "
                  "and less or equal area);", "RTL: ok = co-simulated on Verilator (--verify): cycles equal the "
                  "analytic model and outputs the golden model"]  # fmt: skip
    return "\n".join(lines) + "\n"


def to_csv(result) -> str:
    out = io.StringIO()
    fields = list(result.grid)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["model", *fields, *CSV_FIELDS, "rtl_cycles", "rtl_ok"])
    for p in result.points:
        v = p.get("verify") or {}
        row = [p["model"], *(p["config"][f] for f in fields), *(p.get(k) for k in CSV_FIELDS),
               v.get("rtl_cycles"), v.get("ok")]  # fmt: skip
        writer.writerow(["" if c is None else escape.csv_cell(c) for c in row])
    return out.getvalue()


def _label(p: dict, fields: list[str]) -> str:
    """A point's grid values, compactly: ``16x32 128K 16B/c max_kernel=7``."""
    c, parts = p["config"], []
    if "array_rows" in c and "array_cols" in c:
        parts.append(f"{c['array_rows']}x{c['array_cols']}")
    for f in fields:
        if f in ("array_rows", "array_cols") and len(parts) and "x" in parts[0]:
            continue
        parts.append({"sram_bytes": size(c[f]), "dma_bytes_per_cycle": f"{c[f]}B/c"}.get(f, f"{f}={c[f]}"))
    return " ".join(parts)


def plot(result, path: str | Path) -> None:
    """Cycles against area per model: every feasible configuration, the Pareto front joined
    and labelled."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        from ...errors import NpuByocError

        raise NpuByocError("--plot needs matplotlib: pip install matplotlib") from None
    by_model: dict[str, list[dict]] = {}
    for p in result.points:
        if p["error"] is None:
            by_model.setdefault(p["model"], []).append(p)
    n = max(len(by_model), 1)
    fig = Figure(figsize=(4.6 * n, 4.0), dpi=90)
    FigureCanvasAgg(fig)
    fields = list(result.grid)
    for k, (model, points) in enumerate(by_model.items()):
        ax = fig.add_subplot(1, n, k + 1)
        ax.scatter([p["area_um2"] / 1e6 for p in points], [p["cycles"] for p in points], s=14, color="#999999",
                   label="configuration")  # fmt: skip
        front = sorted((p for p in points if p["pareto"]), key=lambda p: p["area_um2"])
        xs, ys = [p["area_um2"] / 1e6 for p in front], [p["cycles"] for p in front]
        ax.step(xs, ys, where="post", color="#d62728", lw=1.2)
        ax.scatter(xs, ys, s=22, color="#d62728", zorder=3, label="Pareto front")
        for k_, (p, x, y) in enumerate(zip(front, xs, ys)):  # alternate above/below: neighbours stay apart
            ax.annotate(_label(p, fields), (x, y), textcoords="offset points", xytext=(5, 4 if k_ % 2 == 0 else -10),
                        fontsize=6.5)
        ax.set_title(escape.text(model, 60), fontsize=9, parse_math=False)  # a "$" in a file name is not mathtext
        ax.set_xlabel("area proxy (mm²)")
        ax.set_ylabel("NPU cycles")
        ax.grid(True, lw=0.4, alpha=0.5)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(str(path), format="png")


__all__ = ["to_json", "to_text", "to_csv", "plot", "size"]
