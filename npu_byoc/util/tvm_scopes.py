"""Close what TVM's BlockBuilder leaves open when an importer stops with an exception.

``with bb.function(...)`` opens a scope and a binding block in C++ (BlockBuilder keeps both
stacks there); ``emit_func_output`` closes them. An exception raised inside the ``with``
(an importer's converter refusing an operator) pops the Python side only, and when the
builder is freed TVM prints "BlockBuilder destroyed with remaining blocks!" after our
one-line error. Inside :func:`builders_closed_on_error` a function scope left by an exception
closes its block and scope too. (TVM aborts on EndBlock with no open block, so the scope
closes exactly what it opened, never "until empty".)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tvm import relax

_original_exit = relax.BlockBuilder._exit_function_scope


def _exit_closing(self, exc_type, exc_val, exc_tb):
    if exc_type is not None and self._func_stack and not self._func._is_emit_func_output_called:
        self._end_block()  # the block _enter_function_scope (or a DataflowScope's exit) began
        self.end_scope()  # the scope _enter_function_scope began
    return _original_exit(self, exc_type, exc_val, exc_tb)


@contextlib.contextmanager
def builders_closed_on_error() -> Iterator[None]:
    """Within the block, a BlockBuilder function scope that an exception leaves is closed."""
    relax.BlockBuilder._exit_function_scope = _exit_closing
    try:
        yield
    finally:
        relax.BlockBuilder._exit_function_scope = _original_exit


__all__ = ["builders_closed_on_error"]
