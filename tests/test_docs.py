"""The Python examples in docs/ run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parents[1] / "docs"
RUNNABLE = ["coverage.md", "codegen.md", "models.md", "hardware.md", "sweep.md", "fuzz.md", "isa.md", "export.md",
            "timeline.md", "waveforms.md", "memory.md"]


def _blocks(name: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), re.S)


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNABLE)
def test_doc_examples_run(name, capsys):
    blocks = _blocks(name)
    assert blocks, f"{name} has no python example"
    for code in blocks:
        exec(compile(code, f"docs/{name}", "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().out  # every example prints what it shows
