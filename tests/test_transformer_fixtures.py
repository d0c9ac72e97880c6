"""Issue 24's fixtures (tools/make_transformer_models.py) through the whole flow: imported,
partitioned with whatever the NPU offloads today, run, and compared with the reference runtime
that recorded them (LiteRT's reference kernels, onnxruntime).

What is exact today and what is not, and why (each bound below is a measured figure, not a
target; the issue's goal is 0 LSB on TFLite):

* every BATCH_MATMUL is LiteRT's arithmetic exactly (tests/test_batch_matmul.py) and runs on the
  NPU (npu.matmul), LiteRT's output tensor exactly layer by layer (tests/test_matmul.py): the
  ViT and the keyword transformer offload 100% of their MACs; their output bounds below did
  not change (the attention products were exact on the CPU too);
* the grouped-conv model runs whole on the NPU (npu.grouped_conv2d), its layers LiteRT's
  arithmetic exactly (the per-layer check below) and so its output (0 LSB);
* LayerNorm's broadcast MUL / ADD (a pixel or token vector, a constant channel vector over it)
  run on the NPU and are LiteRT's arithmetic exactly, layer by layer (test_broadcast_layers_...);
* the stride-4 patch convs (ViT's patch embedding, ConvNeXt's stem) run on the NPU as
  space-to-depth copies and a 1x1 conv, LiteRT's output tensor exactly (tests/test_patchify.py);
* LayerNorm's SQUARED_DIFFERENCE runs on the NPU (npu.squared_difference), LiteRT's arithmetic
  exactly layer by layer (tests/test_squared_difference.py);
* what stays on the CPU and came through TVM's own TFLite converters (RSQRT) runs dequantize ->
  float op -> quantize: float32 rounding instead of LiteRT's integer requantize, 1 LSB per
  layer now and then, a few LSB at the output of a 2-block transformer;
* LayerNorm's MEAN over a token's features (the last axis of a rank-3 [N, L, C] sequence) stays
  on the CPU: npu.mean's guess that the axis is an NCHW sequence's length ([N, C, L]) is refused
  where the partition's fully connected layers read that axis as channels
  (npu_byoc.codegen.layout_agreement). Before, the layouts mixed in one partition and the models
  were 50 LSB (ViT) and 123 LSB (keyword transformer) off LiteRT at the output.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import npu_byoc
from npu_byoc.frontends.load import model_info
from npu_byoc.ops.broadcast import ChannelReplicated

from .conftest import check_onnx_fixture, model_path, npu_layers_against_litert, reference

# fixture -> max |NPU flow - LiteRT| in LSB, measured on its samples (the default partition)
TFLITE = {
    "vit_tiny_int8.tflite": 1,  # TVM's CPU build alone: 2
    # each Dense a RESHAPE to [T, C] rows, FC, RESHAPE back: the rows were read from an NCHW
    # partition's transposed [1, T, C] (135 LSB) until a rank-3 reshape there stopped being a view
    "vit_dynamic_batch_int8.tflite": 1,  # TVM's CPU build alone: 4
    # TVM's CPU build alone: 5. With LayerNorm's broadcast MUL / ADD on the NPU (each exact, the
    # per-layer test below), the float RSQRT / channel MEAN left on the CPU feed them values 1 LSB
    # off LiteRT's now and then, which the exact MULs scale: 6 (SQUARED_DIFFERENCE on the NPU too).
    "kws_transformer_int8.tflite": 6,
    # npu.mean refuses its channel MEANs (4-D): on the CPU; TVM's CPU build alone: 2; with the stem
    # conv and the broadcast MULs on the NPU (each exact layer by layer) the float LayerNorm left on
    # the CPU rounds differently: 3
    "convnext_block_int8.tflite": 3,
    "grouped_conv_int8.tflite": 0,  # one NPU partition (before npu.grouped_conv2d: 3, 1 LSB)
    "nasnet_pads_int8.tflite": 0,  # one partition, every PAD on the NPU (tests/test_pad.py)
}

_built: dict = {}
_partitions: dict = {}


def _partitioned(name: str):
    """The fixture imported and partitioned, once."""
    if name not in _partitions:
        _partitions[name] = npu_byoc.partition_for_npu(npu_byoc.load_model(model_path(name)))
    return _partitions[name]


def _functional(name: str):
    """The fixture partitioned and built on the C model, once."""
    if name not in _built:
        _built[name] = npu_byoc.build(_partitioned(name), "functional")
    return _built[name]


def _max_lsb(name: str, model) -> int:
    ref = reference(name)
    worst = 0
    for inputs, outputs in zip(ref["inputs"], ref["outputs"]):
        got = model.run(inputs)[0]
        worst = max(worst, int(np.abs(got.astype(int) - outputs[0].reshape(got.shape).astype(int)).max()))
    return worst


@pytest.mark.parametrize("name", list(TFLITE))
def test_tflite_fixture_runs_close_to_litert(name):
    model = _functional(name)
    assert model.plans, "nothing offloaded to the NPU"
    assert _max_lsb(name, model) <= TFLITE[name]


@pytest.mark.parametrize("name", ["vit_tiny_int8.tflite", "kws_transformer_int8.tflite"])
def test_layernorm_means_next_to_fully_connected_layers_stay_on_the_cpu(name):
    """LayerNorm's MEAN over a token's features is offloaded only where no op of its partition
    reads that axis as channels (then the NCHW reading is the same arithmetic, and the output
    bound above holds); next to the fully connected layers it stays on the CPU and says why."""
    means = [o for o in npu_byoc.coverage_report(_partitioned(name)).ops if o.op == "MEAN"]
    layout = [o for o in means if not o.offloaded and "the NPU's MEAN reduces spatial axes, not channels" in o.reason]
    assert len(means) >= 4 and layout  # two per encoder block
    assert all(o.offloaded or o.reason for o in means)


def _npu_layers_vs_litert(name: str) -> list:
    """Every NPU layer of the fixture LiteRT recorded, fed LiteRT's own input tensors (a
    broadcast operand through its stride-0 view), gives LiteRT's output tensor exactly (the
    per-layer contract); returns the ops checked (conftest.npu_layers_against_litert)."""
    checked = []
    for op, got, want in npu_layers_against_litert(name):
        if want is not None:
            np.testing.assert_array_equal(got, want, err_msg=op.name)
            checked.append(op)
    return checked


def test_grouped_conv_npu_layers_bit_exact_with_litert():
    kinds = [op.kind for op in _npu_layers_vs_litert("grouped_conv_int8.tflite")]
    assert kinds.count("conv2d") >= 6 and kinds.count("grouped_conv2d") == 2
    assert {"mean", "fully_connected", "softmax"} <= set(kinds)


def test_tensordot_fully_connected_layers_bit_exact_with_litert():
    """The open-batch ViT's Dense layers (Tensordot: RESHAPE [1, T, C] -> [T, C], 2-D
    FULLY_CONNECTED) on the NPU give LiteRT's output tensors exactly, as every other NPU layer."""
    kinds = [op.kind for op in _npu_layers_vs_litert("vit_dynamic_batch_int8.tflite")]
    assert kinds.count("fully_connected") >= 5


def _broadcast(op) -> bool:
    """An elementwise op one of whose operands the DMA repeats (a stride of 0) or a CONV kick
    replicates over the channels (ops.broadcast)."""
    return isinstance(op, ChannelReplicated) or any(r.box_strides is not None and 0 in r.box_strides for r in op.inputs)


@pytest.mark.parametrize("name, broadcasts", [("convnext_block_int8.tflite", 6), ("vit_tiny_int8.tflite", 2), ("kws_transformer_int8.tflite", 2)])
def test_broadcast_layers_bit_exact_with_litert(name, broadcasts):
    """LayerNorm's MUL / ADD over a pixel vector ([1, H, W, 1] × [1, H, W, C]), of a pixel
    vector by a constant channel vector (both broadcast), over a token's row: on the NPU and
    LiteRT's arithmetic exactly, layer by layer, with every other NPU layer of the model."""
    checked = _npu_layers_vs_litert(name)
    assert sum(map(_broadcast, checked)) >= broadcasts


# ONNX QDQ: golden == C model, within lsb of onnxruntime, the RTL bit-exact with golden and
# cycle-exact with the cycle model, every layer within 1 LSB of TVM's CPU build
# (channel_shuffle: four requantizations in a chain, stem -> pw1 -> dw -> pw2, reach 2 LSB)
ONNX = {"channel_shuffle_qdq.onnx": 2, "ceil_pool_qdq.onnx": 1, "layernorm_qdq.onnx": 1, "grouped_conv_qdq.onnx": 1, "pad_qdq.onnx": 1}


@pytest.mark.parametrize("name", list(ONNX))
def test_onnx_fixture_against_onnxruntime(name):
    mod = check_onnx_fixture(name, lsb=ONNX[name])
    meta = json.loads(str(np.load(model_path(name).with_suffix(".npz"))["meta"]))
    assert meta["quantize_static"]["quant_format"] == "QDQ"
    assert any(o.op == "Conv" for o in model_info(mod).ops)


def test_compare_reads_an_nchw_sequence_partition_channel_last():
    """`npu-byoc compare` on the keyword transformer: the partition of its position-embedding ADD
    and LayerNorm's first MEAN holds the [1, 50, 32] token sequence as an NCHW sequence (the
    MEAN's reading), stored channel-last. The ADD (fed the same input on both sides) matches TVM's
    CPU build; read without the transpose it showed 141 LSB. (The ViT's ADD now shares the patch
    conv's NHWC partition, so the ViT no longer has such a layer.)"""
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.runtime.compare import compare

    name = "kws_transformer_int8.tflite"
    plans = lower_module(_partitioned(name)).values()
    plan = next(p for p in plans if any(op.name.endswith("pos_embed_1/add") for op in p.ops))
    assert [(io.shape, io.ref.layout) for io in plan.inputs] == [((1, 50, 32), "NCHW")]
    x = reference(name)["inputs"][0]
    report = compare(npu_byoc.load_model(model_path(name)), x)
    first = next(r for r in report.layers if r.layer.endswith("pos_embed_1/add"))
    assert first.golden_vs_cpu.max_lsb <= 1
    assert max(r.golden_vs_cpu.max_lsb for r in report.layers) <= 16  # drift along 2 blocks, not a misread


def test_compare_tells_a_split_s_halves_apart():
    """An ONNX Split becomes two NPU gathers named after the one operator ("split", "split#1");
    `npu-byoc compare` reads each against its own tensor in TVM's CPU build, within the fixture's
    bound above. Matched by the operator's name alone, "split" was read against the second half
    (164 LSB) and "split#1" was left out."""
    from npu_byoc.runtime.compare import compare

    name = "channel_shuffle_qdq.onnx"
    report = compare(npu_byoc.load_model(model_path(name)), reference(name)["inputs"][0])
    rows = {r.layer: r.golden_vs_cpu.max_lsb for r in report.layers}
    assert {"split", "split#1"} <= set(rows)
    assert max(rows.values()) <= ONNX[name]
