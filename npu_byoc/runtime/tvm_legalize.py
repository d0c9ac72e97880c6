"""CPU legalizations TVM 0.27 lacks for operators its own frontends emit.

TVM's TFLite frontend imports TRANSPOSE_CONV as an NHWC ``relax.nn.conv2d_transpose``, but
TVM's legalization (``relax/transform/legalize_ops/nn.py``) lowers only NCHW / IOHW and leaves
the NHWC call in place, so any CPU build holding one stops in VM codegen ("cannot emit this
Relax operator"). That CPU build is what a transposed convolution left on the CPU, the CPU
backend and co-simulation's per-layer reference all need. Registered over TVM's entry at a
higher level: the NHWC call becomes one TE function (transpose to NCHW, TOPI's NCHW kernel,
transpose back); every other call goes to TVM's own legalization unchanged.
"""

from __future__ import annotations

import tvm
from tvm import relax, topi

_OP = "relax.nn.conv2d_transpose"
_ATTR = "FLegalize"


def _conv2d_transpose(tvm_legalize):
    def legalize(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        a = call.attrs
        if not (a.data_layout == a.out_layout == "NHWC" and a.kernel_layout == "IOHW"):
            return tvm_legalize(bb, call)
        strides, padding = [int(s) for s in a.strides], [int(p) for p in a.padding]
        output_padding, dilation = [int(o) for o in a.output_padding], [int(d) for d in a.dilation]
        groups, out_dtype = int(a.groups), call.ty.dtype

        def te(data, kernel):
            if any(d != 1 for d in dilation):  # a dilated kernel is the kernel zero-inserted
                kernel = topi.nn.dilate(kernel, [1, 1, *dilation], name="kernel_dilate")
            nchw = topi.transpose(data, [0, 3, 1, 2])
            out = topi.nn.group_conv2d_transpose_nchw(nchw, kernel, strides, padding, out_dtype, output_padding, groups)
            return topi.transpose(out, [0, 2, 3, 1])

        return bb.call_te(te, call.args[0], call.args[1], primfunc_name_hint="conv2d_transpose_nhwc")

    return legalize


_REGISTERED = []


def register() -> None:
    """Install the legalizations (once per process)."""
    if _REGISTERED:
        return
    tvm_legalize = tvm.ir.Op.get(_OP).get_attr(_ATTR)
    # TVM registers its own at the default level, 10: a higher level replaces it
    tvm.ir.register_op_attr(_OP, _ATTR, _conv2d_transpose(tvm_legalize), level=11)
    _REGISTERED.append(True)


__all__ = ["register"]
