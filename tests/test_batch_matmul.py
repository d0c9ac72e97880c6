"""Quantized TFLite BATCH_MATMUL (npu_byoc.frontends.tflite_batch_matmul) on TVM's CPU build:
bit-exact with a hand-written integer reference of LiteRT's kernel, and with LiteRT itself on
every BATCH_MATMUL of the transformer fixtures, fed LiteRT's own recorded operands."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import tvm
from tvm import relax

from npu_byoc.frontends.tflite_batch_matmul import batch_matmul, multiplier

from .conftest import MODELS


# --------------------------------------------------------------------------------------------
# The reference: LiteRT's int8 BATCH_MATMUL written out with Python / numpy integers


def _quantize_multiplier(real: float) -> tuple[int, int]:
    q, e = math.frexp(real)
    m = int(math.floor(abs(q) * 2**31 + 0.5))  # q * 2^31 is exact; round half away from zero
    if m == 2**31:
        m, e = m // 2, e + 1
    return m, e


def reference_batch_matmul(a, b, zps, scales, adj_x=False, adj_y=False):
    """int8 a @ b as LiteRT computes it: zero points off, int32 sums, the multiplier of
    float32(s_a * s_b) / s_out, SRDHM then rounding right shift, + zero point, clamp."""
    x = a.astype(np.int64) - zps[0]
    y = b.astype(np.int64) - zps[1]
    if adj_x:
        x = np.swapaxes(x, -1, -2)
    if adj_y:
        y = np.swapaxes(y, -1, -2)
    acc = np.matmul(x, y)
    assert np.abs(acc).max() < 2**31
    real = float(np.float32(np.float32(scales[0]) * np.float32(scales[1]))) / float(np.float32(scales[2]))
    m, e = _quantize_multiplier(real)
    acc = acc * (1 << max(e, 0))
    ab = acc * m
    t = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    hi = np.sign(t) * (np.abs(t) >> 31)  # C's division: toward zero
    right = max(-e, 0)
    mask = (1 << right) - 1
    threshold = (mask >> 1) + (hi < 0)
    out = (hi >> right) + ((hi & mask) > threshold)
    return np.clip(out + zps[2], -128, 127).astype(np.int8)


def run_import(cases):
    """Each case ``(a, b, zps, scales, adj_x, adj_y)`` through the imported Relax expression,
    all in one function compiled once for the CPU; the outputs in order."""
    params, outs = [], []
    bb = relax.BlockBuilder()
    for k, (a, b, *_rest) in enumerate(cases):
        params += [relax.Var(f"a{k}", relax.TensorType(list(a.shape), "int8")),
                   relax.Var(f"b{k}", relax.TensorType(list(b.shape), "int8"))]
    with bb.function("main", params):
        with bb.dataflow():
            for k, (a, b, zps, scales, adj_x, adj_y) in enumerate(cases):
                outs.append(bb.emit(batch_matmul(params[2 * k], params[2 * k + 1], a.shape, b.shape, adj_x, adj_y,
                                                 zps, scales)))
            y = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(y)
    vm = relax.VirtualMachine(tvm.compile(bb.get(), target="llvm"), tvm.cpu())
    got = vm["main"](*[tvm.runtime.tensor(x) for a, b, *_ in cases for x in (a, b)])
    return [got[k].numpy() for k in range(len(cases))]


CASES = [  # (lhs shape, rhs shape, adj_x, adj_y)
    ((4, 8), (8, 5), False, False),
    ((2, 6, 16), (2, 16, 6), False, False),  # attention scores, heads as batch
    ((1, 2, 6, 16), (1, 2, 6, 16), False, True),  # q @ k^T
    ((1, 2, 16, 6), (1, 2, 16, 5), True, False),
    ((3, 1, 8, 4), (2, 5, 8), True, True),  # broadcast of batch dims, ranks 4 and 3
    ((2, 3, 7), (7, 4), False, False),  # a shared RHS matrix
]


# full-range operands (a multiplier < 1: a right shift), and operands in {-1, 0, 1} whose small
# sums need a multiplier > 1 (a left shift); each case takes one in turn
REGIMES = [((-128, 128), (-3, 5, -7)), ((-128, 128), (100, -90, 10)), ((-1, 2), (0, 0, 3))]


def test_import_equals_litert_arithmetic():
    cases = []
    for k, (lhs, rhs, adj_x, adj_y) in enumerate(CASES):
        rng = np.random.default_rng(k)
        (lo, hi), zps = REGIMES[k % len(REGIMES)]
        a = rng.integers(lo, hi, lhs).astype(np.int8)
        b = rng.integers(lo, hi, rhs).astype(np.int8)
        x, y = a.astype(np.int64) - zps[0], b.astype(np.int64) - zps[1]
        acc = np.matmul(np.swapaxes(x, -1, -2) if adj_x else x, np.swapaxes(y, -1, -2) if adj_y else y)
        scales = (0.021, 0.0137, 0.021 * 0.0137 * max(int(np.abs(acc).max()), 1) / 110)  # no clamping
        cases.append((a, b, zps, scales, adj_x, adj_y))
    assert {multiplier(*c[3])[1] > 0 for c in cases} == {True, False}  # both shift directions
    for case, got in zip(cases, run_import(cases)):
        want = reference_batch_matmul(*case)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert len(np.unique(want)) >= min(6, want.size // 4)  # the rounding is reached, not only the clamps


def test_rounding_ties_and_both_shift_signs():
    """Sums on the exact rounding ties of the right shift, both signs, through the import."""
    scales = (0.5, 0.5, 4.0)  # real 1/16: M = 2^30, shift -3 (SRDHM halves, RDBPOT by 8)
    assert multiplier(*scales) == (1 << 30, -3)
    a = np.array([[[8, -8, 24, -24, 1, -1, 40, -40]]], np.int8)  # acc = a * 1
    b = np.ones((1, 1, 1), np.int8)
    (got,) = run_import([(a.transpose(0, 2, 1), b, (0, 0, 0), scales, False, False)])
    want = reference_batch_matmul(a.transpose(0, 2, 1), b, (0, 0, 0), scales)
    np.testing.assert_array_equal(got, want)
    # 8/16 = 0.5 -> 1, -0.5 -> -1, 1.5 -> 2, -1.5 -> -2, 1/16 -> 0, 2.5 -> 3, -2.5 -> -3
    np.testing.assert_array_equal(got.ravel(), [1, -1, 2, -2, 0, 0, 3, -3])


def test_multiplier_takes_the_scale_product_in_float32():
    """LiteRT multiplies the two float scales in float32 before widening to double."""
    s1, s2, so = 0.03517231, 0.00390625 * 1.37, 0.027174268
    product32 = float(np.float32(s1) * np.float32(s2))
    assert product32 != float(np.float32(s1)) * float(np.float32(s2))  # the order matters here
    assert multiplier(s1, s2, so) == _quantize_multiplier(product32 / float(np.float32(so)))


@pytest.mark.parametrize("lhs, rhs, why", [((2, 3, 4), (2, 5, 6), "do not multiply"),
                                           ((2, 3, 4), (3, 4, 6), "do not broadcast"),
                                           ((4,), (4, 2), "ranks")])
def test_bad_shapes_are_refused_in_one_line(lhs, rhs, why):
    x = relax.Var("x", relax.TensorType(list(lhs), "int8"))
    y = relax.Var("y", relax.TensorType(list(rhs), "int8"))
    with pytest.raises(ValueError, match=why):
        batch_matmul(x, y, lhs, rhs, False, False, (0, 0, 0), (0.1, 0.1, 0.1))


# --------------------------------------------------------------------------------------------
# Against LiteRT: every BATCH_MATMUL of the transformer fixtures, on LiteRT's own operands


def _batch_matmuls(name: str):
    """(lhs, rhs, output, adj_x, adj_y, zero points, scales) of every BATCH_MATMUL in the
    fixture, its tensors the ones LiteRT recorded for sample 0 (NAME.tensors.npz)."""
    import tflite
    from tflite.BatchMatMulOptions import BatchMatMulOptions
    from tflite.BuiltinOperator import BuiltinOperator

    model = tflite.Model.GetRootAsModel((MODELS / name).read_bytes(), 0)
    graph = model.Subgraphs(0)
    recorded = np.load(MODELS / name.replace(".tflite", ".tensors.npz"))
    index = json.loads(str(recorded["__index__"]))
    found = []
    for k in range(graph.OperatorsLength()):
        op = graph.Operators(k)
        if model.OperatorCodes(op.OpcodeIndex()).BuiltinCode() != BuiltinOperator.BATCH_MATMUL:
            continue
        o = BatchMatMulOptions()
        table = op.BuiltinOptions()
        o.Init(table.Bytes, table.Pos)
        ts = [int(op.Inputs(0)), int(op.Inputs(1)), int(op.Outputs(0))]
        q = [graph.Tensors(t).Quantization() for t in ts]
        arrays = [recorded[index[t]] for t in ts]
        found.append((*arrays, bool(o.AdjX()), bool(o.AdjY()),
                      tuple(int(x.ZeroPoint(0)) for x in q), tuple(float(x.Scale(0)) for x in q)))
    return found


@pytest.mark.parametrize("name", ["vit_tiny_int8.tflite", "kws_transformer_int8.tflite"])
def test_every_batch_matmul_of_a_transformer_equals_litert(name):
    ops = _batch_matmuls(name)
    assert len(ops) == 4  # 2 blocks x (scores, weighted values)
    cases = [(a, b, zps, scales, adj_x, adj_y) for a, b, _, adj_x, adj_y, zps, scales in ops]
    for (a, b, want, *_), case, got in zip(ops, cases, run_import(cases)):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(reference_batch_matmul(*case), want)
