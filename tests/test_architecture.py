"""The architecture contract: npu_byoc's packages are layers, and imports only go down.

The import graph is read from the source (every ``import`` statement, those inside functions
too: a lazy import up the layers is still a dependency up the layers). Two rules:

- layers, bottom to top: ``errors``, ``util``, ``arch``, ``frontends``, ``ops``, ``codegen``,
  ``partition``, ``runtime``, ``tools``, and the front doors (``cli``, the ``patterns`` facade,
  the package itself, the TVM registration). A module imports its own layer or those below it;
- no cycles between modules, within a layer too.

docs/architecture.md draws the same picture.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "npu_byoc"

LAYERS = ["errors", "util", "arch", "frontends", "ops", "codegen", "partition", "runtime", "tools", "top"]
TOP = {"npu_byoc", "npu_byoc.cli", "npu_byoc.patterns", "npu_byoc.tvm_register"}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # "from pkg import module" names the module
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def layer_of(module: str) -> int:
    if module in TOP:
        return LAYERS.index("top")
    first = module.split(".")[1]
    assert first in LAYERS, f"{module}: in no layer (add its package to LAYERS and docs/architecture.md)"
    return LAYERS.index(first)


def test_every_module_is_in_a_layer():
    for module in _graph():
        layer_of(module)


def test_imports_only_go_down():
    upward = sorted(
        f"{m} ({LAYERS[layer_of(m)]}) imports {d} ({LAYERS[layer_of(d)]})"
        for m, deps in _graph().items() for d in deps
        if layer_of(d) > layer_of(m) and not (d == "npu_byoc" and m.startswith("npu_byoc."))
    )  # fmt: skip
    assert upward == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_cycles():
    # The package's __init__ loads the API lazily (PEP 562): submodules importing
    # "npu_byoc" for a name is not a cycle through it.
    graph = {m: {d for d in deps if d != "npu_byoc"} for m, deps in _graph().items()}
    assert _cycles(graph) == []


def test_the_contract_can_fail():
    """The checker itself: a made-up graph with a cycle and an upward edge is caught."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert layer_of("npu_byoc.arch.isa") < layer_of("npu_byoc.codegen.lower") < layer_of("npu_byoc.runtime.build")
