"""uint8 activations on the int8 NPU: one byte flip at each partition boundary.

A uint8 tensor ``q_u`` with zero point ``z_u`` holds the real value ``s · (q_u − z_u)``. The
int8 tensor ``q_i = q_u − 128`` — the same byte with its top bit flipped, ``q_u ^ 0x80`` — with
zero point ``z_i = z_u − 128`` holds the same real value, and every NPU operation computes on
``q − z`` (or, for max pooling, on the order of ``q``, which the flip keeps). So:

- extraction turns each uint8 tensor of a quantized-op record into its int8 equivalent
  (:func:`int8_equivalent`: zero point − 128, clamp bounds − 128, ``source_dtype="uint8"``)
  before the checks, and uint8 weights with zero point 128 into int8 weights with zero point 0;
- inside a partition every tensor is int8: the NPU, the golden model, the stream machine, the C
  functional model and the RTL never see a uint8 byte;
- a partition's inputs and outputs keep the model's dtype; the generated C++ entry
  (codegen/templates/partition.cc.j2) and the Python partition runners
  (:func:`npu_byoc.runtime.golden.allocate_regions`) flip the bytes of uint8 inputs on the way
  in and of uint8 outputs on the way out (:func:`to_npu`, :func:`to_model`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .records import QOp, QTensor

FLIP = 128  # q_i = q_u - FLIP: the byte q_u ^ 0x80
FLIPPED_DTYPES = ("uint8",)  # model dtypes the NPU runs through the flip


def _tensor(t: QTensor) -> QTensor:
    if t.dtype not in FLIPPED_DTYPES:
        return t
    return dataclasses.replace(t, dtype="int8", zero_point=t.zero_point - FLIP, source_dtype=t.dtype)


def _uint8_weights(op) -> dict:
    """uint8 weights with zero point 128 on every channel are int8 weights with zero point 0.
    Any other uint8 weights are left as they are (the weights_int8 check says why)."""
    w = getattr(op, "weight", None)
    if w is None or w.dtype != np.uint8 or np.any(np.asarray(op.weight_zero_point) != FLIP):
        return {}
    return {
        "weight": (w.astype(np.int16) - FLIP).astype(np.int8),
        "weight_zero_point": np.zeros_like(np.asarray(op.weight_zero_point)),
        "weight_source_dtype": "uint8",
    }


def int8_equivalent(op: QOp) -> QOp:
    """``op`` with every uint8 activation as its int8 equivalent (same real values)."""
    changes = {}
    for f in dataclasses.fields(op):
        value = getattr(op, f.name)
        if isinstance(value, QTensor) and value.dtype in FLIPPED_DTYPES:
            changes[f.name] = _tensor(value)
        elif isinstance(value, tuple) and any(isinstance(t, QTensor) and t.dtype in FLIPPED_DTYPES for t in value):
            changes[f.name] = tuple(_tensor(t) if t.dtype in FLIPPED_DTYPES else t for t in value)  # QConcat.inputs
    if "output" in changes and hasattr(op, "act_min"):  # clamp bounds are quantized values of the output
        changes["act_min"] = op.act_min - FLIP
        changes["act_max"] = op.act_max - FLIP
    changes.update(_uint8_weights(op))
    constant = getattr(op, "constant", None)
    if constant is not None and str(constant.dtype) in FLIPPED_DTYPES:  # a constant operand flips as input_b did
        changes["constant"] = (constant.astype(np.int16) - FLIP).astype(np.int8)
    return dataclasses.replace(op, **changes) if changes else op


def activation_dtypes(op: QOp) -> tuple[str, ...]:
    """The model dtypes of the op's activations (inputs and output), deduplicated, in order."""
    out: list[str] = []
    for f in dataclasses.fields(op):
        value = getattr(op, f.name)
        for t in value if isinstance(value, tuple) else (value,):
            if isinstance(t, QTensor) and (t.source_dtype or t.dtype) not in out:
                out.append(t.source_dtype or t.dtype)
    return tuple(out)


def activations_label(op: QOp) -> str:
    """How the op's activations were read, for coverage reports: "int8 activations",
    "uint8 activations (U8S8)" (uint8 activations, int8 weights: onnxruntime's default),
    "uint8 activations (U8U8)" (uint8 weights with zero point 128: TFLite's uint8 models)."""
    dtypes = activation_dtypes(op)
    label = "/".join(dtypes) + " activations"
    w = getattr(op, "weight", None)
    if "uint8" in dtypes and w is not None:
        weights = getattr(op, "weight_source_dtype", None) or str(w.dtype)
        label += {"int8": " (U8S8)", "uint8": " (U8U8)"}.get(weights, f" ({weights} weights)")
    return label


# ---------------------------------------------------------------------------------------------
# The boundary flip (the Python twin of the generated C++ entry's)


def to_npu(x: np.ndarray) -> np.ndarray:
    """A partition input as the NPU reads it: uint8 bytes flipped to int8, int8 as is."""
    x = np.ascontiguousarray(x)
    if x.dtype == np.uint8:
        return (x ^ np.uint8(0x80)).view(np.int8)
    return x


def to_model(y: np.ndarray, dtype: str) -> np.ndarray:
    """An NPU (int8) tensor in the model's dtype: flipped back to uint8 where the model has uint8."""
    y = np.ascontiguousarray(y)
    if str(dtype) in FLIPPED_DTYPES and y.dtype == np.int8:
        return y.view(np.uint8) ^ np.uint8(0x80)
    return y
