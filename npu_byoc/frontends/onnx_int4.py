"""4-bit ONNX initializers (onnxruntime's QInt4 / QUInt4 weights) as 8-bit ones, before TVM.

TVM's ONNX importer copies every initializer as whole bytes per element and fails on INT4 /
UINT4, which ONNX packs two to a byte ("TensorCopyFromBytes: size mismatch"). A 4-bit weight is
an 8-bit weight whose values fit in 4 bits, so widening it keeps every DequantizeLinear value
exact and the NPU's int8 MACs run it like any int8 weight:

- INT4 becomes INT8 with the same values.
- UINT4 becomes UINT8 with the same values, except that a DequantizeLinear whose data and zero
  point are both UINT4 initializers gets INT8 copies shifted by 8: (x − 8) − (zp − 8) = x − zp,
  the same real values. onnxruntime's QUInt4 zero point 8 then becomes 0, the symmetric weight
  the NPU takes (a UINT8 weight would need zero point 128).

Only initializers are widened; a 4-bit activation stays as it is and TVM reports it.
"""

from __future__ import annotations

import numpy as np

INT4, UINT4 = 22, 21  # onnx.TensorProto.INT4 / UINT4
_WIDE = {INT4: np.int8, UINT4: np.uint8}


def has_4bit(model) -> bool:
    return any(t.data_type in _WIDE for t in model.graph.initializer)


def widen(model):
    """``model`` (an ``onnx.ModelProto``, not changed) with its 4-bit initializers 8-bit; a model
    without any comes back as it is."""
    if not has_4bit(model):
        return model
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    kinds = {t.name: t.data_type for t in g.initializer}
    values = {t.name: numpy_helper.to_array(t) for t in g.initializer if t.data_type in _WIDE}
    taken = {*kinds, *(o for n in g.node for o in n.output), *(v.name for v in g.input)}
    added, shifted_of = {}, {}
    for node in g.node:
        if node.op_type != "DequantizeLinear" or len(node.input) < 3:
            continue
        x, zp = node.input[0], node.input[2]
        if kinds.get(x) == UINT4 and kinds.get(zp) == UINT4:
            for k, name in ((0, x), (2, zp)):
                if name not in shifted_of:  # a fresh name: the model's own names are untrusted
                    fresh, n = f"{name}__int8", 1
                    while fresh in taken:
                        fresh, n = f"{name}__int8_{n}", n + 1
                    taken.add(fresh)
                    shifted_of[name] = fresh
                    added[fresh] = values[name].astype(np.int16) - 8
                node.input[k] = shifted_of[name]
    widened = [numpy_helper.from_array(values[t.name].astype(_WIDE[t.data_type]), t.name) if t.data_type in _WIDE
               else t for t in g.initializer]  # fmt: skip
    widened += [numpy_helper.from_array(v.astype(np.int8), name) for name, v in added.items()]
    del g.initializer[:]
    g.initializer.extend(widened)
    for v in [*g.input, *g.value_info]:  # an initializer also declared as a typed value
        if v.name in values:
            v.type.tensor_type.elem_type = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(_WIDE[kinds[v.name]]))
    return out
