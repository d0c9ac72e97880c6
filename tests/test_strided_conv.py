"""npu.strided_conv2d: convolutions with a stride above the MAC array's whose windows overlap or
pad (7x7 stride 4 pad 3, TFLite's "same" 5x5 / 4, an unpadded 6x6 / 4), run per output row as a
KH x 1 conv over a strided view of the input plus a KH x KW conv per border column
(npu_byoc.ops.strided_conv). Against LiteRT's reference kernels layer by layer and end to end
(strided_conv_int8.tflite, tools/make_transformer_models.py), TVM's CPU build of Relax QDQ
convolutions, and on the RTL the golden model with the cycle model exact."""

from __future__ import annotations

import numpy as np
import pytest

import npu_byoc
from npu_byoc.codegen.lower import lower_module
from npu_byoc.ops.composites import npu_functions
from npu_byoc.ops.strided_conv import StridedConv2D
from npu_byoc.partition.pipeline import partition_log
from npu_byoc.runtime.cosim import cosim

from . import relax_builders as rb
from .conftest import model_path, npu_layers_against_litert, reference

NAME = "strided_conv_int8.tflite"


@pytest.mark.parametrize("input_hw, channels, kernel, stride, padding", [
    ((32, 32), 3, 7, 4, 3),              # ConvNeXt-V2 / Swin stem: PyTorch's padding=3
    ((19, 23), 5, 7, 4, (1, 2, 2, 3)),   # asymmetric, and a width the stride does not divide
    ((16, 16), 4, 5, 4, 0),              # overlapping windows, no padding
    ((13, 13), 2, 3, 5, 1),              # a kernel smaller than the stride, padded
])  # fmt: skip
def test_strided_conv_is_one_npu_op_within_1_lsb_of_tvm_cpu(input_hw, channels, kernel, stride, padding):
    """One NPU partition; golden model = C model bit for bit; within 1 LSB of TVM's CPU build
    (float QDQ: the requantize rounds once there too, so a tie may differ)."""
    mod = rb.qdq_conv2d(input_hw=input_hw, in_channels=channels, out_channels=8, kernel=(kernel, kernel),
                        strides=(stride, stride), padding=padding, output_scale=2.0)  # fmt: skip
    part = npu_byoc.partition_for_npu(mod)
    assert [(d.pattern, d.accepted) for d in partition_log(part)] == [("npu.strided_conv2d", True)]
    assert len(npu_functions(part)) == 1
    x = np.random.default_rng(kernel * stride).integers(-128, 128, (1, *input_hw, channels), dtype=np.int8)
    golden = npu_byoc.build(part, "golden").run([x])[0]
    np.testing.assert_array_equal(npu_byoc.build(part, "functional").run([x])[0], golden)
    cpu = npu_byoc.build(mod, "cpu").run([x])[0]
    assert golden.shape == cpu.shape and np.abs(golden.astype(int) - cpu.astype(int)).max() <= 1


def test_row_kicks_read_a_strided_view_and_border_columns_their_own_window():
    """Hand-derived for 32x32x3, 7x7 stride 4 pad 3 (8x8 out): output column j reads input columns
    4j - 3 .. 4j + 3, inside the input for j = 1..7, so each row has one 7x1 kick over a
    (rows, 7, 21) view (column stride 4·3 bytes, 21 = 7 columns x 3 channels contiguous) and one
    7x7 kick for column 0 padded 3 on the left; row 0 is padded 3 on top, row 7 reads rows 25..31."""
    mod = rb.qdq_conv2d(input_hw=(32, 32), in_channels=3, out_channels=8, kernel=(7, 7), strides=(4, 4), padding=3)
    (plan,) = lower_module(npu_byoc.partition_for_npu(mod)).values()
    (op,) = plan.ops
    assert isinstance(op, StridedConv2D) and len(op.phases) == 16
    row0, col0 = op.phases[:2]
    assert row0.ifm.shape == (4, 7, 21) and row0.ifm.strides == (96, 12, 1) and row0.kernel == (7, 1)
    assert row0.padding == (3, 0, 0, 0) and row0.ofm.shape == (1, 7, 8)
    assert col0.ifm.shape == (4, 4, 3) and col0.kernel == (7, 7) and col0.padding == (3, 3, 0, 0)
    last = op.phases[-2]
    assert last.ifm.offset - op.ifm.offset == 25 * 96 + 1 * 3 and last.padding == (0, 0, 0, 0)
    np.testing.assert_array_equal(row0.weights[:, 2, 0, 3:6], op.weights[:, 2, 1, :])  # tap (2, 1)


def test_an_nchw_strided_conv_stays_on_the_cpu_with_a_reason():
    mod = rb.qdq_conv2d(layout="NCHW", input_hw=(16, 16), kernel=(7, 7), strides=(4, 4), padding=3)
    part = npu_byoc.partition_for_npu(mod)
    assert not npu_functions(part)
    assert any("on NHWC maps" in (d.reason or "") for d in partition_log(part) if d.pattern == "npu.strided_conv2d")


def test_fixture_every_layer_is_litert_exactly_and_the_model_too():
    """strided_conv_int8.tflite: every operator on the NPU, each NPU layer fed LiteRT's own input
    gives LiteRT's output tensor, and the whole model LiteRT's outputs on the C model."""
    mod = npu_byoc.load_model(model_path(NAME))
    ops = npu_byoc.coverage_report(npu_byoc.partition_for_npu(mod)).ops
    assert all(o.offloaded for o in ops) and sum(o.op == "CONV_2D" for o in ops) == 3
    kinds = []
    for op, got, want in npu_layers_against_litert(NAME):
        if want is not None:
            np.testing.assert_array_equal(got, want, err_msg=op.name)
            kinds.append(op.kind)
    assert kinds.count("strided_conv2d") == 3
    ref, model = reference(NAME), npu_byoc.build(mod, "functional")
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        np.testing.assert_array_equal(model.run(inputs)[0], outputs[0])


def test_fixture_on_the_rtl_is_golden_and_cycle_exact():
    ref = reference(NAME)
    rep = cosim(model_path(NAME), ref["inputs"][0], ref["outputs"][0])
    assert rep.summary["max_diff_golden"] == 0 and rep.summary["cycle_model_exact"]


def test_weights_load_once_and_stay_across_row_kicks():
    """The hand-derived 7x7 / 4 pad 3 layer above: its 16 kicks (8 row kicks, 8 border kicks) hold
    the same weight bytes (a row kick's (8, 7, 1, 21) is the border kick's (8, 7, 7, 3)) and one
    requantize table, so the stream loads 8 x 147 weight bytes and 8 records from CONST once, not
    16 times; the RTL, the golden model and the cycle model still agree on it."""
    from npu_byoc.arch.encoder import Dma
    from npu_byoc.arch.isa import REQUANT_RECORD_BYTES, Opcode, Region
    from npu_byoc.codegen.schedule import schedule_partition

    mod = rb.qdq_conv2d(input_hw=(32, 32), in_channels=3, out_channels=8, kernel=(7, 7), strides=(4, 4), padding=3)
    part = npu_byoc.partition_for_npu(mod)
    (plan,) = lower_module(part).values()
    steps = schedule_partition(plan, overlapped=False).steps
    const_loads = [s.n0 * s.n1 * s.n2 for s in steps
                   if isinstance(s, Dma) and s.direction == Opcode.DMA_IN and s.region == Region.CONST]  # fmt: skip
    assert sorted(const_loads) == sorted([8 * 147, 8 * REQUANT_RECORD_BYTES])
    x = np.random.default_rng(3).integers(-128, 128, (1, 32, 32, 3), dtype=np.int8)
    rep = cosim(part, [x])
    assert rep.summary["max_diff_golden"] == 0 and rep.summary["cycle_model_exact"]
