"""HTML coverage report: the model's operator graph, NPU and CPU operators in different
colours with the reasons visible, plus the summary and the full table."""

from __future__ import annotations

from ..util import escape
from jinja2 import Environment, PackageLoader, select_autoescape

NODE_W, NODE_H, GAP_X, GAP_Y = 240, 58, 24, 34
LINE_CHARS = 38


def _layout(ops):
    """Layered layout: an operator sits one row below its deepest producer."""
    level = {}
    for o in ops:  # ops come in topological (model) order
        level[o.index] = 1 + max((level.get(p, 0) for p in o.producers if p >= 0), default=-1)
    rows: dict[int, list] = {}
    for o in ops:
        rows.setdefault(level[o.index], []).append(o)
    pos = {}
    width = max(len(r) for r in rows.values()) if rows else 1
    for lv, row in rows.items():
        offset = (width - len(row)) * (NODE_W + GAP_X) / 2
        for k, o in enumerate(row):
            pos[o.index] = (GAP_X + offset + k * (NODE_W + GAP_X), GAP_Y + lv * (NODE_H + GAP_Y))
    height = GAP_Y + (max(rows) + 1 if rows else 1) * (NODE_H + GAP_Y)
    return pos, GAP_X * 2 + width * (NODE_W + GAP_X), height


def render_coverage_html(report) -> str:
    env = Environment(
        loader=PackageLoader("npu_byoc.partition", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        # autoescape makes names inert HTML; clean() also drops control and bidi characters
        finalize=lambda v: escape.clean(v, 4000) if isinstance(v, str) else v,
    )
    pos, width, height = _layout(report.ops)
    edges = []
    for o in report.ops:
        for p in o.producers:
            if p in pos:
                x1, y1 = pos[p]
                x2, y2 = pos[o.index]
                edges.append((x1 + NODE_W / 2, y1 + NODE_H, x2 + NODE_W / 2, y2))
    labels = {o.index: _wrap(o.pattern if o.offloaded else _short_reason(o.reason)) for o in report.ops}
    s = report.summary
    pct = lambda a, b: f"{100.0 * a / b:.1f}%" if b else "n/a"  # noqa: E731
    return env.get_template("coverage.html.j2").render(
        report=report,
        s=s,
        ops_pct=pct(s["ops_offloaded"], s["ops_total"]),
        macs_pct=pct(s["macs_offloaded"], s["macs_total"]),
        pos=pos,
        edges=edges,
        width=width,
        height=height,
        labels=labels,
        node_w=NODE_W,
        node_h=NODE_H,
    )


def _short_reason(reason: str | None) -> str:
    """The reason without the 'npu.<op>: ' prefix (the node already names the operator)."""
    reason = reason or ""
    head, sep, tail = reason.partition(": ")
    return tail if sep and head.startswith("npu.") else reason


def _wrap(text: str | None, lines: int = 2) -> list[str]:
    words, out, cur = (text or "").split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > LINE_CHARS:
            out.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    out.append(cur)
    if len(out) > lines:
        out = out[: lines - 1] + [(" ".join(out[lines - 1 :]))[: LINE_CHARS - 1] + "…"]
    return out
