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
* LayerNorm runs on the NPU: its MEANs over a token's or a pixel's features (the last axis of
  [N, L, C], [N, H, W, C], [N, C]) on the MEAN unit through a strided view that makes the channels
  its H x W and the tokens or pixels its channels (npu_byoc.ops.mean.reduction_view), its
  SQUARED_DIFFERENCE on the SQDIFF unit (tests/test_squared_difference.py), RSQRT as a LUT of
  LiteRT's integer kernel (tests/test_rsqrt.py), each LiteRT's arithmetic exactly layer by layer;
  the keyword transformer's class-token CONCATENATION copies a constant into its row;
* the keyword transformer's class-token selection (STRIDED_SLICE x[:, 0, :], a flatten + take)
  is an NPU gather of one pixel: the model is one NPU partition (it was two around a CPU take);
* BATCH_MATMUL runs on the NPU as one CONV kick per head (npu_byoc.ops.matmul, tests/test_matmul.py);
* before the channel MEANs ran on the NPU, npu.mean guessed an NCHW sequence's length for a
  rank-3 last axis, refused next to fully connected layers (npu_byoc.codegen.layout_agreement,
  still guarding such a record); with the layouts mixed the models had been 50 LSB (ViT) and
  123 LSB (keyword transformer) off LiteRT at the output.
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
    # every operator on the NPU, each LiteRT's arithmetic exactly: 0 LSB end to end. Before the
    # channel MEANs, RSQRT, SQUARED_DIFFERENCE and BATCH_MATMUL ran on the NPU (TVM's float ops
    # between exact NPU layers): 1, 6 and 3 LSB; the open-batch ViT's Dense rows were read from an
    # NCHW partition's transposed [1, T, C] (135 LSB) until a rank-3 reshape there stopped being a view
    "vit_tiny_int8.tflite": 0,  # TVM's CPU build alone: 2
    "vit_dynamic_batch_int8.tflite": 0,  # TVM's CPU build alone: 4
    "kws_transformer_int8.tflite": 0,  # one NPU partition, its class-token take a gather; TVM's CPU build alone: 5
    "convnext_block_int8.tflite": 0,  # TVM's CPU build alone: 2
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


LAYERNORM_FIXTURES = {"vit_tiny_int8.tflite": 5, "kws_transformer_int8.tflite": 5, "convnext_block_int8.tflite": 3}


@pytest.mark.parametrize("name, layernorms", list(LAYERNORM_FIXTURES.items()))
def test_layernorm_runs_on_the_npu(name, layernorms):
    """Every MEAN (two per LayerNorm, and the pooling ones), SQUARED_DIFFERENCE and RSQRT is
    offloaded, and so is every other operator: one NPU partition, nothing on the CPU (the
    coverage counts an operator offloaded only when none of its run-time bindings stays there)."""
    report = npu_byoc.coverage_report(_partitioned(name))
    ops = report.ops
    assert sum(o.op == "RSQRT" for o in ops) == layernorms and sum(o.op == "MEAN" for o in ops) >= 2 * layernorms
    assert sum(o.op == "SQUARED_DIFFERENCE" for o in ops) == layernorms
    assert [o.name for o in ops if not o.offloaded] == [] and report.summary["partitions"] == 1


_layers: dict = {}


def _npu_layers_vs_litert(name: str) -> list:
    """Every NPU layer of the fixture LiteRT recorded, fed LiteRT's own input tensors (a
    broadcast operand through its stride-0 view), gives LiteRT's output tensor exactly (the
    per-layer contract); returns the ops checked (conftest.npu_layers_against_litert)."""
    if name not in _layers:
        checked = []
        for op, got, want in npu_layers_against_litert(name):
            if want is not None:
                np.testing.assert_array_equal(got, want, err_msg=op.name)
                checked.append(op)
        _layers[name] = checked
    return _layers[name]


def test_kws_class_token_take_runs_on_the_npu_bit_exact_with_litert():
    """The keyword transformer's class-token STRIDED_SLICE (x[:, 0, :] of [1, 50, 32], imported as
    a flatten + take + reshape) is an NPU gather, one pixel of the token row: the model is ONE
    NPU partition (it was two around a CPU take: three transitions), the gather LiteRT's tensor
    exactly, as every other NPU layer (tests/test_strided_slice.py for the other forms)."""
    name = "kws_transformer_int8.tflite"
    report = npu_byoc.coverage_report(_partitioned(name))
    assert (report.summary["partitions"], report.summary["transitions"]) == (1, 1)
    assert [o.pattern for o in report.ops if o.op == "STRIDED_SLICE"] == ["npu.gather"]
    assert [op.kind for op in _npu_layers_vs_litert(name)].count("gather") == 1


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


@pytest.mark.parametrize("name, layernorms", list(LAYERNORM_FIXTURES.items()))
def test_layernorm_means_and_rsqrt_bit_exact_with_litert(name, layernorms):
    """LayerNorm's MEANs over channels (a 1x1 CONV of all-ones weights with MEAN's requantize) and
    its RSQRT tables, fed LiteRT's own input tensors, give LiteRT's output tensors exactly."""
    checked = _npu_layers_vs_litert(name)
    channel_means = [op for op in checked if op.kind == "channel_mean"]
    assert len(channel_means) >= 2 * layernorms
    assert sum(op.kind == "lut" and op.function == "rsqrt" for op in checked) == layernorms


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


def test_compare_reads_the_token_sequence_partition():
    """`npu-byoc compare` on the keyword transformer: its position-embedding ADD (fed the same
    input on both sides) matches TVM's CPU build. The partition of that ADD and LayerNorm's first
    MEAN once held the [1, 50, 32] sequence as an NCHW sequence stored channel-last (read without
    the transpose it showed 141 LSB); since LayerNorm's channel MEANs read it channel-last the model
    is one NHWC partition, the ADD's tensors [1, 50, 32] NHWC."""
    from npu_byoc.codegen.lower import lower_module
    from npu_byoc.runtime.compare import compare

    name = "kws_transformer_int8.tflite"
    (plan,) = lower_module(_partitioned(name)).values()
    add = next(op for op in plan.ops if op.name.endswith("pos_embed_1/add"))
    assert [(r.shape, r.layout) for r in (*add.inputs, add.ofm)] == [((1, 50, 32), "NHWC")] * 3
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
