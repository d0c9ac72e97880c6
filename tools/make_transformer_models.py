#!/usr/bin/env python3
"""Build issue 24's fixtures: small transformers and today's CNN blocks, int8, with references.

``python tools/make_transformer_models.py [--only NAME ...]`` writes into tests/fixtures/models/
(same conventions as tools/make_models.py, whose helpers it imports: fixed seeds, LiteRT
reference kernels with every activation tensor for TFLite, onnxruntime with graph optimizations
disabled for ONNX, byte-reproducible .npz files). Needs tensorflow-cpu, ai-edge-litert, onnx and
onnxruntime (``pip install -e .[models]``); not needed by the package or its tests.

The models (each from the layers its real definition uses, trained 3 epochs on make_models'
synthetic 10-class task, calibrated on its 64 calibration inputs):

``vit_tiny_int8.tflite``
    ViT: 4x4 stride-4 patch Conv2D (32x32x3 -> 64 tokens of 32), a learned position
    embedding, 2 pre-norm encoder blocks (LayerNormalization, MultiHeadAttention 2 heads of 16,
    residual; LayerNormalization, Dense 64 GELU, Dense 32, residual), LayerNormalization,
    token mean, Dense 10. Attention is BATCH_MATMUL between two activations.
``vit_dynamic_batch_int8.tflite``
    The ViT at 16x16x3 (16 tokens of 16, one block, 2 heads of 8, Dense 32 GELU) converted
    with an open batch: each Dense is a Tensordot (SHAPE, GATHER, RESHAPE to 2-D rows,
    FULLY_CONNECTED, RESHAPE back), as in Keras' ViT examples.
``kws_transformer_int8.tflite``
    Keyword transformer on 49x10 MFCCs (input 49x10x1): Dense 32 projection of each frame,
    a class token, position embedding, 2 encoder blocks as the ViT's, the class token's
    LayerNormalization, Dense 10 (the synthetic task's 10 classes).
``convnext_block_int8.tflite``
    ConvNeXt: stride-4 4x4 patchify stem + LayerNormalization, one block (depthwise 7x7,
    LayerNormalization, Dense 128 GELU, Dense 32, layer scale, residual), global pool,
    LayerNormalization, Dense 10.
``grouped_conv_int8.tflite``
    RegNetX-style: stem Conv 3x3/2, two X blocks (1x1 conv, 3x3 Conv2D(groups=4), 1x1 conv,
    BatchNorm, residual with a 1x1/2 projection in the second), global pool, Dense 10.
``channel_shuffle_int8.tflite``
    ShuffleNetV2's channel shuffle as Keras writes it (NHWC 8x8x3): Conv2D 1x1 24 ReLU,
    Reshape to [8, 8, 3, 8], Permute (1, 2, 4, 3), Reshape back, Conv2D 1x1 16 ReLU, global
    pool, Dense 10: RESHAPE (rank 5), TRANSPOSE, RESHAPE in the .tflite.
``nasnet_pads_int8.tflite``
    NASNet's pads (16x16x3): stem conv 3x3 + BN + ReLU; a reduction cell's pool branch (1x1
    conv, BN, ZeroPadding2D(((0, 1), (0, 1))), MaxPooling2D 3/2 valid: the pad's fill is the
    BN output's zero point, not int8's minimum); _adjust_block's shifted path (ZeroPadding2D
    ((0, 1), (0, 1)), Cropping2D(((1, 0), (1, 0))), AveragePooling2D 1/2: a standalone PAD) next
    to the plain one, Concat; an ops.pad filled with 0.5 (PADV2, a fill that is not the zero
    point) before a 3x3 valid conv, global pool, Dense 10.
``strided_conv_int8.tflite``
    Strides above the MAC array's (32x32x3): ZeroPadding2D(3) + Conv2D 7x7/4 16 ReLU (8x8), then
    Conv2D 5x5/4 "same" 24 ReLU and, beside it, ZeroPadding2D((0, 2), (0, 2)) + Conv2D 6x6/4
    valid 24 ReLU (2x2 each), Add, global pool, Dense 10.
``shuffle_unit_qop.onnx``
    ShuffleNetV2 stride-1 unit (onnx.helper, NCHW 1x3x8x8) in onnxruntime's QOperator format:
    Mul by a [1, 3, 1, 1] initializer (QLinearMul), stem conv, Add of a [1, 1, 8, 8] initializer
    (QLinearAdd), ``chunk(2, dim=1)`` as two Slices, branch, Concat, channel shuffle, a second
    chunk, two head convs, Concat: each Slice quantized with its half's range, unlike its input.
``channel_shuffle_qdq.onnx``
    ShuffleNetV2 unit (onnx.helper, NCHW 1x3x8x8): stem conv, channel Split, branch conv1x1 /
    depthwise 3x3 / conv1x1, Concat, channel shuffle as torchvision writes it (rank-5 Reshape
    [1, 2, 8, 8, 8] -> Transpose [0, 2, 1, 3, 4] -> Reshape [1, 16, 8, 8]), head conv.
``ceil_pool_qdq.onnx``
    SqueezeNet-style (1x3x16x16): conv 3x3, MaxPool 3/2 ceil_mode=1 (16 -> 8, floor would give
    7), a fire module (squeeze 1x1, expand 1x1 and 3x3, Concat), AveragePool 3/2 ceil_mode=1
    (8 -> 4), conv 1x1.
``grouped_conv_qdq.onnx``
    RegNet-X-style grouped convolutions (NCHW 1x3x8x8): stem conv 3x3 (16), Conv 3x3 group=2,
    Conv 3x3/2 group=4 (16 -> 32: 4 -> 8 channels per group), Conv 3x3 group=16 (2 per group,
    C/2), conv 1x1 (10).
``pad_qdq.onnx``
    Pad in constant mode (1x3x16x16): conv 3x3, Pad 0 of the bottom and right before a MaxPool
    3/2 ceil_mode=1, Pad 0.25 (not the zero point) before a 3x3 valid conv, conv 1x1.
``layernorm_qdq.onnx``
    Opset 17 (1x3x8x8): patch conv 2x2/2, Reshape + Transpose to 16 tokens of 16,
    LayerNormalization(axis=-1), MatMul 16x32, Relu, MatMul 32x16.
``attention_qdq.onnx``
    Self-attention (1x3x8x8): patch conv 2x2/2, Reshape + Transpose to 16 tokens of 16, MatMul
    Q, K, V (16x16 each), Transpose K, MatMul Q·K^T, Softmax, MatMul P·V (both MatMuls between
    two activations), MatMul 16x16.
``normalization_sub_int8.tflite``
    keras.applications' preprocessing (16x16x3): Normalization(mean, variance) (SUB of a
    3-value constant, MUL), Conv2D 3x3 16 ReLU, a SUB of a constant pixel vector [1, 16, 16, 1],
    a channel-vector constant minus the activation (SUB, the constant first), Conv2D 3x3/2,
    global pool, Dense 10.
ONNX models are quantized by onnxruntime's quantize_static (QDQ, int8 activations, per-channel
int8 weights).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_models as mm  # noqa: E402  (the shared fixture helpers)
import numpy as np  # noqa: E402

EPOCHS, LR = 3, 2e-3


# --------------------------------------------------------------------------- Keras blocks
def _encoder_block(x, dim: int, heads: int, mlp: int, name: str):
    """A pre-norm transformer encoder block as Keras' ViT examples write it."""
    from keras import layers as L

    h = L.LayerNormalization(epsilon=1e-6, name=f"{name}_ln1")(x)
    h = L.MultiHeadAttention(heads, dim // heads, name=f"{name}_mha")(h, h)
    x = L.Add(name=f"{name}_add1")([x, h])
    h = L.LayerNormalization(epsilon=1e-6, name=f"{name}_ln2")(x)
    h = L.Dense(mlp, activation="gelu", name=f"{name}_mlp1")(h)
    h = L.Dense(dim, name=f"{name}_mlp2")(h)
    return L.Add(name=f"{name}_add2")([x, h])


def _position_embedding(tokens: int, dim: int, name: str):
    import keras

    class AddPosition(keras.layers.Layer):
        def build(self, shape):
            self.pos = self.add_weight(shape=(1, tokens, dim), initializer="random_normal", name="pos")

        def call(self, x):
            return x + self.pos

    return AddPosition(name=name)


def make_vit_tiny(batch_size):
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(32, 32, 3), batch_size=batch_size, name="input")
    x = L.Conv2D(32, 4, strides=4, name="patch_embed")(x0)
    x = L.Reshape((64, 32), name="tokens")(x)
    x = _position_embedding(64, 32, "pos_embed")(x)
    for b in range(2):
        x = _encoder_block(x, 32, 2, 64, f"block{b}")
    x = L.LayerNormalization(epsilon=1e-6, name="norm")(x)
    x = L.GlobalAveragePooling1D(name="token_mean")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(x))


def make_vit_dynamic_batch(batch_size):
    """make_vit_tiny at 16x16 with one block, converted with its batch left open (Keras' own
    ViT examples do): every Dense on the [N, 16, 16] tokens becomes TFLite's Tensordot, a
    RESHAPE to [16, 16] rows, a 2-D FULLY_CONNECTED and a RESHAPE back."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(16, 16, 3), batch_size=batch_size, name="input")
    x = L.Conv2D(16, 4, strides=4, name="patch_embed")(x0)
    x = L.Reshape((16, 16), name="tokens")(x)
    x = _position_embedding(16, 16, "pos_embed")(x)
    x = _encoder_block(x, 16, 2, 32, "block0")
    x = L.LayerNormalization(epsilon=1e-6, name="norm")(x)
    x = L.GlobalAveragePooling1D(name="token_mean")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(x))


def make_kws_transformer(batch_size):
    import keras
    from keras import layers as L

    class ClassToken(keras.layers.Layer):
        def build(self, shape):
            self.cls = self.add_weight(shape=(1, 1, shape[-1]), initializer="random_normal", name="cls")

        def call(self, x):
            return keras.ops.concatenate([keras.ops.broadcast_to(self.cls, (keras.ops.shape(x)[0], 1, x.shape[-1])), x], 1)

    x0 = keras.Input(shape=(49, 10, 1), batch_size=batch_size, name="input")
    x = L.Reshape((49, 10), name="frames")(x0)
    x = L.Dense(32, name="projection")(x)
    x = ClassToken(name="class_token")(x)
    x = _position_embedding(50, 32, "pos_embed")(x)
    for b in range(2):
        x = _encoder_block(x, 32, 2, 64, f"block{b}")
    x = L.LayerNormalization(epsilon=1e-6, name="norm")(x[:, 0])
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(x))


def make_convnext_block(batch_size):
    """keras.applications.convnext's stem and block at dim 32 (layer scale init 1e-6 as there
    would make the block an identity; training moves it, 0.1 starts it visible)."""
    import keras
    from keras import layers as L

    class LayerScale(keras.layers.Layer):
        def build(self, shape):
            self.gamma = self.add_weight(shape=(shape[-1],), initializer=keras.initializers.Constant(0.1), name="gamma")

        def call(self, x):
            return x * self.gamma

    x0 = keras.Input(shape=(32, 32, 3), batch_size=batch_size, name="input")
    x = L.Conv2D(32, 4, strides=4, name="stem_conv")(x0)
    x = L.LayerNormalization(epsilon=1e-6, name="stem_ln")(x)
    h = L.DepthwiseConv2D(7, padding="same", name="block_dw")(x)
    h = L.LayerNormalization(epsilon=1e-6, name="block_ln")(h)
    h = L.Dense(128, activation="gelu", name="block_pw1")(h)
    h = L.Dense(32, name="block_pw2")(h)
    h = LayerScale(name="block_scale")(h)
    x = L.Add(name="block_add")([x, h])
    x = L.GlobalAveragePooling2D(name="pool")(x)
    x = L.LayerNormalization(epsilon=1e-6, name="head_ln")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(x))


def make_grouped_conv(batch_size):
    """keras.applications.regnet's X block (group width 8: 32 channels in 4 groups)."""
    import keras
    from keras import layers as L

    def block(x, width, stride, name):
        h = L.Conv2D(width, 1, use_bias=False, name=f"{name}_conv1")(x)
        h = L.ReLU(name=f"{name}_relu1")(L.BatchNormalization(name=f"{name}_bn1")(h))
        h = L.Conv2D(width, 3, strides=stride, padding="same", groups=4, use_bias=False, name=f"{name}_conv2")(h)
        h = L.ReLU(name=f"{name}_relu2")(L.BatchNormalization(name=f"{name}_bn2")(h))
        h = L.BatchNormalization(name=f"{name}_bn3")(L.Conv2D(width, 1, use_bias=False, name=f"{name}_conv3")(h))
        if stride != 1 or x.shape[-1] != width:
            x = L.Conv2D(width, 1, strides=stride, use_bias=False, name=f"{name}_proj")(x)
            x = L.BatchNormalization(name=f"{name}_proj_bn")(x)
        return L.ReLU(name=f"{name}_out")(L.Add(name=f"{name}_add")([x, h]))

    x0 = keras.Input(shape=(32, 32, 3), batch_size=batch_size, name="input")
    x = L.Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="stem")(x0)
    x = L.ReLU(name="stem_relu")(L.BatchNormalization(name="stem_bn")(x))
    x = block(x, 32, 1, "x1")
    x = block(x, 32, 2, "x2")
    x = L.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(x))


def make_channel_shuffle(batch_size):
    """ShuffleNetV2's channel shuffle as Keras writes it (NHWC): 1x1 conv, reshape to
    [N, H, W, groups, C/groups], swap the last two axes, reshape back, 1x1 conv."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(8, 8, 3), batch_size=batch_size, name="input")
    x = L.Conv2D(24, 1, activation="relu", name="pw1")(x0)
    x = L.Reshape((8, 8, 3, 8), name="shuffle_view")(x)
    x = L.Permute((1, 2, 4, 3), name="shuffle_transpose")(x)
    x = L.Reshape((8, 8, 24), name="shuffle_flat")(x)
    x = L.Conv2D(16, 1, activation="relu", name="pw2")(x)
    x = L.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(x))
def make_nasnet_pads(batch_size):
    """keras.applications.nasnet's pads: _reduction_a_cell's pool branch, _adjust_block's shift."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(16, 16, 3), batch_size=batch_size, name="input")
    x = L.Conv2D(16, 3, padding="same", use_bias=False, name="stem_conv")(x0)
    x = L.ReLU(name="stem_relu")(L.BatchNormalization(name="stem_bn")(x))
    h = L.BatchNormalization(name="reduce_bn")(L.Conv2D(16, 1, use_bias=False, name="reduce_conv")(x))
    h = L.ZeroPadding2D(((0, 1), (0, 1)), name="reduce_pool_pad")(h)
    h = L.MaxPooling2D(3, strides=2, name="reduce_pool")(h)
    p1 = L.AveragePooling2D(1, strides=2, name="adjust_avg1")(x)
    p1 = L.Conv2D(8, 1, use_bias=False, name="adjust_conv1")(p1)
    p2 = L.ZeroPadding2D(((0, 1), (0, 1)), name="adjust_pad")(x)
    p2 = L.Cropping2D(((1, 0), (1, 0)), name="adjust_crop")(p2)
    p2 = L.AveragePooling2D(1, strides=2, name="adjust_avg2")(p2)
    p2 = L.Conv2D(8, 1, use_bias=False, name="adjust_conv2")(p2)
    p = L.BatchNormalization(name="adjust_bn")(L.Concatenate(name="adjust_concat")([p1, p2]))
    y = L.Add(name="cell_add")([h, p])
    y = L.Lambda(lambda t: keras.ops.pad(t, [[0, 0], [1, 1], [1, 1], [0, 0]], constant_values=0.5), name="fill_pad")(y)
    y = L.ReLU(name="head_relu")(L.Conv2D(16, 3, name="head_conv")(y))
    y = L.GlobalAveragePooling2D(name="pool")(y)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(y))


def make_strided_conv(batch_size):
    """Strides above the MAC array's with overlapping, padded windows: ConvNeXt-V2 / Swin-style
    stems (ZeroPadding2D(3) + 7x7 stride 4, PyTorch's padding=3), a "same" 5x5 stride 4 (TFLite's
    asymmetric padding) and an unpadded 6x6 stride 4 (kernel above stride, no padding)."""
    import keras
    from keras import layers as L

    x0 = keras.Input(shape=(32, 32, 3), batch_size=batch_size, name="input")
    x = L.ZeroPadding2D(3, name="stem_pad")(x0)
    x = L.Conv2D(16, 7, strides=4, activation="relu", name="stem_conv")(x)
    a = L.Conv2D(24, 5, strides=4, padding="same", activation="relu", name="same_conv")(x)
    b = L.Conv2D(24, 6, strides=4, activation="relu", name="valid_conv")(L.ZeroPadding2D(((0, 2), (0, 2)), name="valid_pad")(x))
    x = L.Add(name="merge")([a, b])
    x = L.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(x))


def make_normalization_sub(batch_size):
    """keras.applications' preprocessing (EfficientNetV2, ConvNeXt): Normalization(mean, variance)
    of the 3 input channels (a SUB of a 3-value constant, a MUL by its reciprocal root), a conv;
    then SUBs of a constant of two other shapes: a pixel vector [1, H, W, 1] taken from the
    activation, and an activation taken from a channel vector (the constant first)."""
    import keras
    from keras import layers as L

    rng = np.random.default_rng(24)
    pixel = rng.uniform(-0.5, 0.5, (1, 16, 16, 1)).astype(np.float32)
    channel = rng.uniform(0.0, 1.0, (16,)).astype(np.float32)
    x0 = keras.Input(shape=(16, 16, 3), batch_size=batch_size, name="input")
    x = L.Normalization(mean=[0.1, -0.2, 0.3], variance=[0.8, 1.3, 0.6], name="normalization")(x0)
    x = L.Conv2D(16, 3, padding="same", activation="relu", name="conv1")(x)
    x = L.Lambda(lambda t: t - pixel, name="sub_pixel")(x)
    x = L.Lambda(lambda t: channel - t, name="rsub_channel")(x)
    x = L.Conv2D(16, 3, strides=2, padding="same", activation="relu", name="conv2")(x)
    x = L.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(x0, L.Dense(10, activation="softmax", name="head")(x))


KERAS = {
    "vit_tiny_int8": (make_vit_tiny, (32, 32, 3), "tiny ViT: patch conv 4x4/4, MultiHeadAttention, LayerNormalization, GELU MLP"),
    "vit_dynamic_batch_int8": (make_vit_dynamic_batch, (16, 16, 3), "tiny ViT with an open batch: Dense as Tensordot (RESHAPE, 2-D FULLY_CONNECTED)"),
    "kws_transformer_int8": (make_kws_transformer, (49, 10, 1), "keyword transformer on 49x10 MFCCs, class token"),
    "convnext_block_int8": (make_convnext_block, (32, 32, 3), "ConvNeXt stem 4x4/4 + block (dw 7x7, LayerNorm, GELU MLP, layer scale)"),
    "grouped_conv_int8": (make_grouped_conv, (32, 32, 3), "RegNetX-style blocks, Conv2D(groups=4)"),
    "channel_shuffle_int8": (make_channel_shuffle, (8, 8, 3), "channel shuffle of 3 groups (RESHAPE rank 5, TRANSPOSE, RESHAPE)"),
    "nasnet_pads_int8": (make_nasnet_pads, (16, 16, 3), "NASNet's pads: ZeroPadding2D before MaxPool, shifted path, PADV2 fill 0.5"),
    "strided_conv_int8": (make_strided_conv, (32, 32, 3), "7x7/4 pad 3, 5x5/4 same, 6x6/4 valid convolutions"),
    "normalization_sub_int8": (make_normalization_sub, (16, 16, 3), "Normalization(mean, variance) + conv, SUBs of a pixel vector and from a channel vector"),
}


OPEN_BATCH = {"vit_dynamic_batch_int8"}  # converted with batch None (SHAPE ops and all)


def build_keras(name: str, out: Path) -> Path:
    make, shape, what = KERAS[name]
    return mm._train_and_convert(name, out, make, shape, EPOCHS, LR, {"model": what + " (tools/make_transformer_models.py)"},
                                 batch=None if name in OPEN_BATCH else 1)


# --------------------------------------------------------------------------- ONNX graphs
def _onnx_builder(seed: int):
    """(inits, weight(name, shape, std), node(op, ins, out, **attrs), nodes): a graph under
    construction with seeded random weights."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def weight(name, shape, std=None, dtype=np.float32, value=None):
        if value is None:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            value = rng.normal(0, std if std is not None else 1.4 / np.sqrt(fan_in), shape)
        inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    return weight, node, nodes, inits


def _conv(weight, node, x, name, cin, cout, k=1, stride=1, group=1, relu=True, pad=None):
    p = k // 2 if pad is None else pad
    y = node("Conv", [x, weight(f"{name}.w", (cout, cin // group, k, k)), weight(f"{name}.b", (cout,), 0.1)],
             name, kernel_shape=[k, k], strides=[stride, stride], pads=[p] * 4, group=group)
    return node("Relu", [y], f"{name}_relu") if relu else y


def channel_shuffle_float_onnx():
    weight, node, nodes, inits = _onnx_builder(mm.SEED)
    x = _conv(weight, node, "input", "stem", 3, 16)
    x1 = "split_a"
    from onnx import helper

    nodes.append(helper.make_node("Split", [x, weight("split", (2,), value=[8, 8], dtype=np.int64)],
                                  ["split_a", "split_b"], name="split", axis=1))
    b = _conv(weight, node, "split_b", "branch_pw1", 8, 8)
    b = _conv(weight, node, b, "branch_dw", 8, 8, k=3, group=8, relu=False)
    b = _conv(weight, node, b, "branch_pw2", 8, 8)
    y = node("Concat", [x1, b], "concat", axis=1)
    y = node("Reshape", [y, weight("shape5", (5,), value=[1, 2, 8, 8, 8], dtype=np.int64)], "shuffle_view")
    y = node("Transpose", [y], "shuffle_transpose", perm=[0, 2, 1, 3, 4])
    y = node("Reshape", [y, weight("shape4", (4,), value=[1, 16, 8, 8], dtype=np.int64)], "shuffle_flat")
    y = _conv(weight, node, y, "head", 16, 8, relu=False)
    nodes[-1].output[0] = "output"
    return mm._float_onnx_model("channel_shuffle", nodes, inits, [1, 3, 8, 8], [1, 8, 8, 8])


def ceil_pool_float_onnx():
    weight, node, nodes, inits = _onnx_builder(mm.SEED + 1)
    x = _conv(weight, node, "input", "conv1", 3, 16, k=3)
    x = node("MaxPool", [x], "maxpool_ceil", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)  # 16 -> 8
    s = _conv(weight, node, x, "fire_squeeze", 16, 8)
    e1 = _conv(weight, node, s, "fire_expand1x1", 8, 8)
    e3 = _conv(weight, node, s, "fire_expand3x3", 8, 8, k=3)
    x = node("Concat", [e1, e3], "fire_concat", axis=1)
    x = node("AveragePool", [x], "avgpool_ceil", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)  # 8 -> 4
    _conv(weight, node, x, "classifier", 16, 10, relu=False)
    nodes[-1].output[0] = "output"
    return mm._float_onnx_model("ceil_pool", nodes, inits, [1, 3, 16, 16], [1, 10, 4, 4])


def grouped_conv_float_onnx():
    weight, node, nodes, inits = _onnx_builder(mm.SEED + 3)
    x = _conv(weight, node, "input", "stem", 3, 16, k=3)
    x = _conv(weight, node, x, "g2", 16, 16, k=3, group=2)
    x = _conv(weight, node, x, "g4_s2", 16, 32, k=3, stride=2, group=4)
    x = _conv(weight, node, x, "g16", 32, 32, k=3, group=16)
    _conv(weight, node, x, "head", 32, 10, relu=False)
    nodes[-1].output[0] = "output"
    return mm._float_onnx_model("grouped_conv", nodes, inits, [1, 3, 8, 8], [1, 10, 4, 4])
def pad_float_onnx():
    """Pad (constant mode) as ONNX models write it: a zero pad before a max pool (torchvision
    writes it into the pool; exporters of Keras models do not), and one filled with 0.25
    between two convs; MaxPool 3/2 ceil_mode=1 on the padded map."""
    weight, node, nodes, inits = _onnx_builder(mm.SEED + 3)
    x = _conv(weight, node, "input", "conv1", 3, 8, k=3)
    pads = lambda name, v: weight(name, (8,), value=v, dtype=np.int64)  # noqa: E731
    x = node("Pad", [x, pads("pool_pads", [0, 0, 0, 0, 0, 0, 1, 1])], "pool_pad", mode="constant")
    x = node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)  # 17 -> 8
    x = node("Pad", [x, pads("fill_pads", [0, 0, 1, 2, 0, 0, 2, 1]), weight("fill", (), value=0.25)], "fill_pad",
             mode="constant")  # 8 -> 11
    x = _conv(weight, node, x, "conv2", 8, 8, k=3, pad=0)  # 11 -> 9
    node("Conv", [x, weight("head.w", (10, 8, 1, 1)), weight("head.b", (10,), 0.1)], "output", kernel_shape=[1, 1])
    return mm._float_onnx_model("pad", nodes, inits, [1, 3, 16, 16], [1, 10, 9, 9])


def layernorm_float_onnx():
    weight, node, nodes, inits = _onnx_builder(mm.SEED + 2)
    x = _conv(weight, node, "input", "patch", 3, 16, k=2, stride=2, relu=False, pad=0)
    x = node("Reshape", [x, weight("tok_shape", (3,), value=[1, 16, 16], dtype=np.int64)], "tokens")
    x = node("Transpose", [x], "tokens_t", perm=[0, 2, 1])
    g = weight("ln.gamma", (16,), value=1 + 0.2 * np.random.default_rng(7).normal(size=16))
    x = node("LayerNormalization", [x, g, weight("ln.beta", (16,), 0.1)], "layernorm", axis=-1, epsilon=1e-5)
    x = node("MatMul", [x, weight("fc1.w", (16, 32), 0.35)], "fc1")
    x = node("Relu", [node("Add", [x, weight("fc1.b", (32,), 0.1)], "fc1_bias")], "fc1_relu")
    node("MatMul", [x, weight("fc2.w", (32, 16), 0.25)], "output")
    return mm._float_onnx_model("layernorm", nodes, inits, [1, 3, 8, 8], [1, 16, 16], opset=17)


def attention_float_onnx():
    """Single-head self-attention over 16 tokens of 16: the MatMuls between two activations
    (scores Q·K^T, then P·V) that onnxruntime's QDQ quantizer wraps in DequantizeLinear on both
    inputs."""
    weight, node, nodes, inits = _onnx_builder(mm.SEED + 4)
    x = _conv(weight, node, "input", "patch", 3, 16, k=2, stride=2, relu=False, pad=0)
    x = node("Reshape", [x, weight("tok_shape", (3,), value=[1, 16, 16], dtype=np.int64)], "tokens")
    x = node("Transpose", [x], "tokens_t", perm=[0, 2, 1])
    q = node("MatMul", [x, weight("wq", (16, 16), 0.3)], "q")
    k = node("MatMul", [x, weight("wk", (16, 16), 0.3)], "k")
    v = node("MatMul", [x, weight("wv", (16, 16), 0.3)], "v")
    kt = node("Transpose", [k], "k_t", perm=[0, 2, 1])
    scores = node("MatMul", [q, kt], "scores")
    p = node("Softmax", [scores], "probs", axis=-1)
    a = node("MatMul", [p, v], "attended")
    node("MatMul", [a, weight("wo", (16, 16), 0.3)], "output")
    return mm._float_onnx_model("attention", nodes, inits, [1, 3, 8, 8], [1, 16, 16])


ONNX = {
    "channel_shuffle_qdq": (channel_shuffle_float_onnx, (8, 8, 3), "ShuffleNetV2 unit, channel shuffle (rank-5 Reshape, Transpose)"),
    "ceil_pool_qdq": (ceil_pool_float_onnx, (16, 16, 3), "SqueezeNet-style MaxPool/AveragePool ceil_mode=1, fire module"),
    "grouped_conv_qdq": (grouped_conv_float_onnx, (8, 8, 3), "RegNet-X-style Conv group=2, 4 and C/2"),
    "pad_qdq": (pad_float_onnx, (16, 16, 3), "Pad (constant 0 before a ceil-mode MaxPool, 0.25 between convs)"),
    "layernorm_qdq": (layernorm_float_onnx, (8, 8, 3), "opset 17 LayerNormalization over 16 tokens"),
    "attention_qdq": (attention_float_onnx, (8, 8, 3), "self-attention: MatMul of two activations (Q·K^T, P·V)"),
}


def shuffle_unit_float_onnx():
    """torchvision's ShuffleNetV2 stride-1 unit after a normalizing stem: Mul by a [1, 3, 1, 1]
    initializer (1/std; a Sub before it would stay float: onnxruntime's QOperator format has no
    QLinearSub), stem conv, an Add of a [1, 1, 8, 8] initializer,
    ``x.chunk(2, dim=1)`` as torch exports it (two Slices), branch conv1x1 / dw 3x3 / conv1x1 on
    the second half, Concat, channel shuffle (Reshape rank 5, Transpose, Reshape), a second
    chunk whose halves feed the head conv. onnxruntime's QOperator quantizer gives each Slice
    the range of its half: a requantizing copy."""
    weight, node, nodes, inits = _onnx_builder(mm.SEED + 24)
    x = node("Mul", ["input", weight("inv_std", (1, 3, 1, 1), value=[[[[1.1]], [[0.9]], [[1.3]]]])], "normalize_mul")
    x = _conv(weight, node, x, "stem", 3, 16)
    x = node("Add", [x, weight("pixel_bias", (1, 1, 8, 8), 0.3)], "pixel_add")

    def chunk(x, name):
        starts = weight(f"{name}.starts", (1,), value=[0], dtype=np.int64)
        mid = weight(f"{name}.mid", (1,), value=[8], dtype=np.int64)
        end = weight(f"{name}.end", (1,), value=[16], dtype=np.int64)
        axes = weight(f"{name}.axes", (1,), value=[1], dtype=np.int64)
        return (node("Slice", [x, starts, mid, axes], f"{name}_slice"),
                node("Slice", [x, mid, end, axes], f"{name}_slice_1"))

    x1, x2 = chunk(x, "unit")
    b = _conv(weight, node, x2, "branch_pw1", 8, 8)
    b = _conv(weight, node, b, "branch_dw", 8, 8, k=3, group=8, relu=False)
    b = _conv(weight, node, b, "branch_pw2", 8, 8)
    y = node("Concat", [x1, b], "concat", axis=1)
    y = node("Reshape", [y, weight("shape5", (5,), value=[1, 2, 8, 8, 8], dtype=np.int64)], "shuffle_view")
    y = node("Transpose", [y], "shuffle_transpose", perm=[0, 2, 1, 3, 4])
    y = node("Reshape", [y, weight("shape4", (4,), value=[1, 16, 8, 8], dtype=np.int64)], "shuffle_flat")
    y1, y2 = chunk(y, "head")
    y = node("Concat", [_conv(weight, node, y1, "head_a", 8, 5), _conv(weight, node, y2, "head_b", 8, 5)], "output", axis=1)
    return mm._float_onnx_model("shuffle_unit", nodes, inits, [1, 3, 8, 8], [1, 10, 8, 8])


ONNX_QOP = {
    "shuffle_unit_qop": (shuffle_unit_float_onnx, (8, 8, 3), "ShuffleNetV2 unit, Slices quantized unlike their input, QLinearMul / QLinearAdd of initializers"),
}


def build_onnx(name: str, out: Path) -> Path:
    qop = name in ONNX_QOP
    make, hwc, what = ONNX_QOP[name] if qop else ONNX[name]
    fmt = "QOperator" if qop else "QDQ"
    calib = mm.nhwc_batch(mm.CALIB_SEEDS, *hwc).transpose(0, 3, 1, 2).copy()
    path = out / f"{name}.onnx"
    qmodel = mm._ort_quantize(make(), calib, fmt, "QInt8", path)
    mm._ort_references(path, qmodel, f"{name} ONNX {fmt} {what} (tools/make_transformer_models.py)", hwc, fmt, "QInt8")
    return path


BUILDERS = {**{n: (lambda out, n=n: build_keras(n, out)) for n in KERAS},
            **{n: (lambda out, n=n: build_onnx(n, out)) for n in (*ONNX, *ONNX_QOP)}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=mm.DEFAULT_OUT)
    ap.add_argument("--only", action="append", choices=list(BUILDERS))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or list(BUILDERS):
        print(f"== {name}")
        path = BUILDERS[name](args.out)
        counts = mm.onnx_op_counts(path) if path.suffix == ".onnx" else mm.tflite_op_counts(path)
        print(f"  ops: {counts}; {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
