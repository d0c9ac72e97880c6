"""What ``import npu_byoc`` registers with TVM, so TVM's own BYOC flow finds the NPU: the
codegen hook ``relax.ext.npu`` (RunCodegen) and the pattern table of the default hardware
configuration under the ``npu`` prefix (``tvm.relax.backend.get_patterns_with_prefix``), each
pattern with its checks as TVM's ``check`` so a refused match stays on the CPU.

Importing TVM takes about a second, which commands that never touch it (``npu-byoc hw``) must
not pay. So ``import npu_byoc`` imports no TVM: if TVM is loaded already it registers at once,
otherwise an import hook registers as soon as ``import tvm`` has finished — or, when it is
npu_byoc's own modules that import TVM, once the outermost of them has finished (the table
needs them whole).
"""

from __future__ import annotations

import _thread  # not threading: 1.5 ms more import time for a lock and a thread id
import sys

HOOK = "relax.ext.npu"
PREFIX = "npu"  # patterns are registered as the composites are named: "npu.<op>"

_registered = False
_lock = _thread.RLock()
_depth: dict[int, int] = {}  # per thread: npu_byoc modules being executed by the import hook


def _relax_ext_npu(functions, options, constant_names):
    """The hook as TVM calls it; the C codegen (Jinja, lowering) loads on the first call."""
    from .codegen.c_codegen import relax_ext_npu

    return relax_ext_npu(functions, options, constant_names)


def _check_and_attrs(entry, hw):
    """TVM's ``check`` and ``attrs_getter`` for one table entry: what partition_for_npu's checks
    accept, with nothing recorded (the native flow keeps no coverage log), and an accepted
    composite named after the source operator it offloads, as partition_for_npu names it (the
    generated C++ and lowering errors then say which layer). TVM asks for the attributes right
    after the check accepts."""
    from .partition import dryrun
    from .partition.pipeline import _shared_pad_reason
    from .ops.table import LAYER_ATTR

    accepted = {}

    def check(ctx) -> bool:
        from .frontends.load import source_op_of

        bindings = dict(ctx.matched_bindings)
        _, reason = dryrun.evaluate(entry, ctx.matched_expr, bindings, hw)
        ok = reason is None and _shared_pad_reason(ctx, bindings) is None
        if ok:
            accepted["layer"] = next(filter(None, map(source_op_of, [ctx.matched_expr, *bindings.values()])), None)
        return ok

    def attrs(_annotated) -> dict:
        layer = accepted.pop("layer", None)
        return {LAYER_ATTR: layer} if layer else {}

    return check, attrs


def pattern_entries():
    """The table as ``register_patterns`` entries, default configuration. Tuples, not
    FusionPatterns: TVM unregisters only tuples' names at exit, before libtvm drops the Python
    check functions it holds (else, says tvm/relax/backend/pattern_registry.py, the exit
    segfaults)."""
    from .arch.config import DEFAULT_CONFIG
    from .ops.table import PATTERN_TABLE

    entries = [(entry.name, conv.pattern, {}, *_check_and_attrs(entry, DEFAULT_CONFIG))
               for entry in PATTERN_TABLE for conv in entry.conventions]  # fmt: skip
    # TVM hands back the last registered first: reversed, get_patterns_with_prefix("npu") is
    # in the table's order (most specific convention first), as partition_for_npu applies it.
    return entries[::-1]


def register() -> None:
    """Register the hook and the table with TVM (imports TVM); once per process."""
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
        import tvm
        from tvm.relax.backend.pattern_registry import get_pattern, register_patterns

        tvm.register_global_func(HOOK, _relax_ext_npu, override=True)
        if get_pattern(f"{PREFIX}.conv2d") is None:  # a reloaded npu_byoc must not add the table twice
            register_patterns(pattern_entries())


def _register_or_warn() -> None:
    try:
        register()
    except Exception as err:  # never break the user's import: say so instead
        import warnings

        warnings.warn(f"npu_byoc could not register {HOOK} and its patterns with TVM: {err}", stacklevel=3)


def _tvm_loaded() -> bool:
    tvm = sys.modules.get("tvm")
    return tvm is not None and not getattr(getattr(tvm, "__spec__", None), "_initializing", False)


def _after_import(tvm_executed: bool = False) -> None:
    # Right after tvm/__init__ has run, its spec still says "initializing" (importlib clears
    # that flag after exec_module returns): the caller then says TVM is whole.
    if _registered or _depth.get(_thread.get_ident()) or not (tvm_executed or _tvm_loaded()):
        return
    _remove_finder()
    _register_or_warn()


class _Finder:  # a sys.meta_path finder (importlib.abc would cost the import 10 ms)
    """Runs :func:`_after_import` when ``tvm`` or an npu_byoc module has been executed."""

    def find_spec(self, name, path, target=None):
        if name != "tvm" and not name.startswith("npu_byoc."):
            return None
        spec = None
        for finder in sys.meta_path:  # the spec the other finders give, loader wrapped
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute = loader.exec_module

        def exec_module(module):
            tid = _thread.get_ident()
            _depth[tid] = _depth.get(tid, 0) + 1
            try:
                execute(module)
            finally:
                _depth[tid] -= 1
            _after_import(tvm_executed=name == "tvm")

        loader.exec_module = exec_module  # this spec's own loader instance
        return spec


_FINDER = _Finder()


def _remove_finder() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def register_on_import() -> None:
    """Register now if TVM is loaded, else as soon as it is (see the module docstring)."""
    if _registered:
        return
    if _tvm_loaded():
        _register_or_warn()
    elif _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
