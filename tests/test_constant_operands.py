"""ADD / MUL with a constant operand: a BatchNorm the converter cannot fold into a conv (DenseNet's
pre-activation BN on a concatenation) is MUL and ADD by per-channel constants. The constant goes
into the partition's CONST region and the NPU reads it as the op's second, broadcast operand.

* bn_concat_int8.tflite (tools/make_models.py): both ops on the NPU, the model 0 LSB off LiteRT's
  reference kernels on golden, the C model and (slow) the RTL;
* Relax QDQ modules: the constant operand gives exactly what the same op gives with that
  constant fed as an activation, the MUL equals TFLite's arithmetic written out, and a
  constant that is not a channel vector is broadcast by the DMA (a stride-0 view).
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.arch import numerics as nx
from npu_byoc.ops.composites import npu_functions
from npu_byoc.partition.pipeline import partition_for_npu

from . import relax_builders as rb
from .conftest import model_path, reference
from .test_mul import _mbqm

MODEL = "bn_concat_int8.tflite"
_built: dict = {}


def _model(backend: str):
    if backend not in _built:
        _built[backend] = npu_byoc.build(npu_byoc.load_model(model_path(MODEL)), backend)
    return _built[backend]


def test_batchnorm_on_a_concatenation_runs_on_the_npu():
    report = npu_byoc.coverage_report(npu_byoc.load_model(model_path(MODEL)))
    by_op = {o.op: o for o in report.ops if o.op in ("MUL", "ADD")}
    assert by_op["MUL"].offloaded and by_op["MUL"].pattern == "npu.mul"
    assert by_op["ADD"].offloaded and by_op["ADD"].pattern == "npu.add"


@pytest.mark.parametrize("backend", ["golden", "functional", pytest.param("verilator", marks=pytest.mark.slow)])
def test_model_is_litert_exactly(backend):
    ref = reference(MODEL)
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = _model(backend).run(inputs)
        for g, w in zip(got, outputs):
            np.testing.assert_array_equal(g, w)


_X = np.random.default_rng(5).integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
_C = np.array([-128, -3, 40, 127], np.int8)  # per channel, with the int8 extremes


def _npu(mod):
    part = partition_for_npu(mod)
    assert npu_functions(part), part.script()
    return npu_byoc.build(part, "golden").run([_X])[0]


@pytest.mark.parametrize("op", ["add", "multiply"])
@pytest.mark.parametrize("shape", [(4,), (1, 1, 1, 4), (1, 8, 8, 4)], ids=["vector", "nhwc_vector", "full"])
def test_constant_operand_equals_the_activation_operand(op, shape):
    """The op with the constant built in gives what the same op gives with the constant's
    values passed as a second input (that path is LiteRT-exact in test_mul)."""
    c = np.broadcast_to(_C, shape) if len(shape) == 4 else _C
    const = _npu(rb.qdq_add(op=op, b_const=c, relu=True))
    b_shape = (1, 1, 1, 4) if len(shape) == 1 else shape
    part = partition_for_npu(rb.qdq_add(op=op, b_shape=b_shape, relu=True))
    fed = npu_byoc.build(part, "golden").run([_X, np.ascontiguousarray(np.broadcast_to(_C, b_shape))])[0]
    np.testing.assert_array_equal(const, fed)


def test_constant_mul_is_tflite_arithmetic():
    """zp_out + MBQM((x − zp_x)·(c − zp_c), s_x·s_c/s_out), clamped: written out here."""
    got = _npu(rb.qdq_add(op="multiply", b_const=_C))
    m, s = nx.mul_params(0.5, 0.25, 0.75)  # qdq_add's default scales
    want = np.clip(_mbqm((_X.astype(np.int64) - 1) * (_C.astype(np.int64) + 2), m, s) + 3, -128, 127)
    np.testing.assert_array_equal(got, want.astype(np.int8))


def test_a_constant_row_is_broadcast_by_the_dma():
    """A constant that is no channel vector ([1, 8, 1, 4]: one value per row and channel) is
    read through a stride-0 view (tests/test_broadcast.py): it gives what the same op gives with
    those values broadcast to the activation's shape and fed as a second input."""
    c = np.arange(-16, 16, dtype=np.int8).reshape(1, 8, 1, 4) * 7
    const = _npu(rb.qdq_add(op="multiply", b_const=c))
    part = partition_for_npu(rb.qdq_add(op="multiply", b_shape=(1, 8, 8, 4)))
    fed = npu_byoc.build(part, "golden").run([_X, np.ascontiguousarray(np.broadcast_to(c, (1, 8, 8, 4)))])[0]
    np.testing.assert_array_equal(const, fed)
