"""Quantized operator descriptions: what a matched pattern means, whatever convention it came in.

Extraction (each op module's, npu_byoc.ops.<op>) turns a match into one of these records, once; the NPU checks,
the coverage report and the lowering to integer NPU operations all read them. They still hold
the model's real-valued scales: the integer-only NPU operations are derived from them.

Canonical layouts, independent of the model's own layout:
- conv weights ``[out_channels, kh, kw, in_channels_per_group]`` (OHWI), int8;
- fully-connected weights ``[out_features, in_features]``, int8;
- per-channel arrays (weight scale, weight zero point, bias) have one entry per output channel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

# Whose arithmetic a record replicates where the model's runtimes differ (LUT tables, SOFTMAX,
# a concatenation's rescale): the numerics of the model's source format (frontend.ModelInfo.format).
NUMERICS = ("tflite", "onnx")
FORMAT_NUMERICS = {"tflite": "tflite", "onnx": "onnx", "relax": "tflite"}
DEFAULT_NUMERICS = "tflite"


def numerics_for(model_format: str | None) -> str:
    """The numerics a model's source format implies (unknown formats: TFLite's)."""
    return FORMAT_NUMERICS.get(model_format or "", DEFAULT_NUMERICS)


class QOp:
    """Base of the quantized-op records. What the shared code reads from a record is by its
    fields' names, not its type: ``input`` / ``output`` (``input_a`` and ``input_b`` for a
    binary op, ``inputs`` for a concatenation) as QTensor, and optionally ``layout``,
    ``act_min`` / ``act_max``, ``numerics``, ``left_shift_overflow``, ``constant``, ``macs``.
    A new op's record may live in its own module (npu_byoc.ops.<op>): a frozen dataclass
    subclassing this one."""

    # A record whose ``layout`` field may be None, the partition's: lowering fills it in and
    # refuses a 4-D op laid out unlike its partition. The op's word in that reason ("gather").
    takes_partition_layout: ClassVar[str] = ""
    # Such a record lowered alone (a check's dry run, ops.kick_limits.lower_alone) takes this
    # layout; "" leaves it None (the op's own lowering reads None).
    layout_alone: ClassVar[str] = ""
    # An op over the model's last axis (softmax, layer norm): lowering reads that axis as the
    # channels in a partition held NCHW too (ops.softmax.last_axis_as_channels).
    reduces_last_axis: ClassVar[bool] = False


@dataclass(frozen=True)
class QTensor:
    """A per-tensor quantized activation: real = scale * (q - zero_point).

    ``scale`` is None for an integer tensor whose quantization an op carries through
    unchanged (TFLite's cast-wrapped avg_pool, max_pool on int8): the op does not need it.
    """

    shape: tuple[int, ...]
    dtype: str
    scale: float | None
    zero_point: int
    # "uint8": the model stores this tensor as uint8 and the record holds its int8 equivalent
    # (zero point - 128; npu_byoc.ops.uint8). None: the model's dtype is ``dtype``.
    source_dtype: str | None = None


@dataclass(frozen=True, eq=False)
class QConvolution(QOp):
    """The fields of a convolution record (QConv2D, QTransposeConv2D): int8 OHWI weights with
    per-output-channel scales, an int32 bias and the output clamp."""

    layout: str  # activation layout of the model: "NHWC" or "NCHW"
    input: QTensor
    output: QTensor
    weight: np.ndarray  # int8 OHWI (O: output channels)
    weight_scale: np.ndarray  # float64 [out]; for the int32-accumulate form: input_scale * s_w[c]
    weight_zero_point: np.ndarray  # int [out]
    bias: np.ndarray  # int32 [out], in accumulator units (scale input_scale * weight_scale[c])
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]  # top, left, bottom, right
    dilation: tuple[int, int]
    groups: int
    act_min: int  # output clamp (quantized), folded from clip and the output dtype
    act_max: int
    convention: str = ""
    # The Relax expressions of the quantized inputs, in the order of the record's inputs
    # (lowering maps them to the composite's arguments). Not part of the op's meaning.
    operands: tuple = field(default=(), compare=False, repr=False)
    # The model gives one weight scale: TFLite's uint8 conv kernels then take the per-tensor
    # multiplier of GetQuantizedConvolutionMultipler (s_in * s_w in float32).
    weight_per_tensor: bool = False
    # "uint8": the model's weights are uint8 with zero point 128, held here as int8 (zero point 0).
    weight_source_dtype: str | None = None
    # What the model's own runtime does when the requantize left shift overflows int32
    # (requant.LEFT_SHIFT_OVERFLOW): "wrap" (TFLite, as the NPU) or "saturate" (onnxruntime, TVM).
    left_shift_overflow: str = "wrap"

    @property
    def in_channels(self) -> int:
        return self.input.shape[3] if self.layout == "NHWC" else self.input.shape[1]

    @property
    def out_channels(self) -> int:
        return int(self.weight.shape[0])

    @property
    def kernel(self) -> tuple[int, int]:
        return int(self.weight.shape[1]), int(self.weight.shape[2])


@dataclass(frozen=True, eq=False)
class QConv2D(QConvolution):
    # A zero-point PAD folded into ``padding`` (top, left, bottom, right), for the reasons.
    folded_pad: tuple | None = field(default=None, compare=False)

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.in_channels

    @property
    def dilated_kernel(self) -> tuple[int, int]:
        """The window a dilated kernel covers: (k - 1) * d + 1 (the NPU runs it zero-inserted)."""
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilation))

    @property
    def accumulator_scale(self) -> np.ndarray:
        """s_x * s_w[c]: the real value of one accumulator LSB per output channel."""
        return self.input.scale * self.weight_scale

    @property
    def macs(self) -> int:
        n = int(np.prod(self.output.shape))
        return n * self.kernel[0] * self.kernel[1] * int(self.weight.shape[3])


@dataclass(frozen=True, eq=False)
class QFullyConnected(QOp):
    input: QTensor
    output: QTensor
    weight: np.ndarray  # int8 [out, in]
    weight_scale: np.ndarray  # float64 [out] (a per-tensor scale is broadcast)
    weight_zero_point: np.ndarray
    bias: np.ndarray  # int32 [out]
    act_min: int
    act_max: int
    convention: str = ""
    # The model gives one weight scale (per-tensor): TFLite then forms s_in * s_w in float32
    # (GetQuantizedConvolutionMultipler), not in double as for per-channel weights.
    weight_per_tensor: bool = False
    # The Relax expressions of the quantized inputs, in the order of the record's inputs
    # (lowering maps them to the composite's arguments). Not part of the op's meaning.
    operands: tuple = field(default=(), compare=False, repr=False)
    # "uint8": the model's weights are uint8 with zero point 128, held here as int8 (zero point 0).
    weight_source_dtype: str | None = None

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    @property
    def accumulator_scale(self) -> np.ndarray:
        return self.input.scale * self.weight_scale

    @property
    def macs(self) -> int:
        rows = int(np.prod(self.output.shape)) // self.out_features
        return rows * self.out_features * self.in_features


@dataclass(frozen=True, eq=False)
class QPool2D(QOp):
    kind: str  # "avg" | "max"
    layout: str
    input: QTensor
    output: QTensor
    pool_size: tuple[int, int]
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]
    dilation: tuple[int, int]
    ceil_mode: bool
    count_include_pad: bool
    act_min: int
    act_max: int
    convention: str = ""
    # The Relax expressions of the quantized inputs, in the order of the record's inputs
    # (lowering maps them to the composite's arguments). Not part of the op's meaning.
    operands: tuple = field(default=(), compare=False, repr=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class QMean(QOp):
    input: QTensor
    output: QTensor
    axes: tuple[int, ...]
    keepdims: bool
    # The layout the axes name spatial dims in; None (a channel mean): the partition's
    layout: str | None
    act_min: int
    act_max: int
    convention: str = ""
    left_shift_overflow: str = "wrap"  # as QConvolution's
    # The Relax expressions of the quantized inputs, in the order of the record's inputs
    # (lowering maps them to the composite's arguments). Not part of the op's meaning.
    operands: tuple = field(default=(), compare=False, repr=False)
    takes_partition_layout: ClassVar[str] = "mean"
    layout_alone: ClassVar[str] = "NHWC"  # the default partition's

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class _QBinary(QOp):
    """An elementwise op of two int8 activations; one may be a channel vector broadcast over
    the other (squeeze-excite)."""

    input_a: QTensor
    input_b: QTensor
    output: QTensor
    act_min: int
    act_max: int
    convention: str = ""
    # input_b's integer values when it is a constant of the model (shape: input_b.shape), which
    # lowering places in the CONST region; None when it is an activation.
    constant: np.ndarray | None = field(default=None, repr=False)
    # The Relax expressions of the quantized inputs, in the order of the record's inputs
    # (lowering maps them to the composite's arguments). Not part of the op's meaning.
    operands: tuple = field(default=(), compare=False, repr=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class QAdd(_QBinary):
    """TFLite int8 ADD."""


@dataclass(frozen=True, eq=False)
class QMul(_QBinary):
    """TFLite int8 MUL."""


@dataclass(frozen=True, eq=False)
class QSub(_QBinary):
    """TFLite int8 SUB: ``input_a − input_b``, or ``input_b − input_a`` when ``reverse`` (the
    model's constant came first and was moved to ``input_b``, where a constant always is)."""

    reverse: bool = False


@dataclass(frozen=True, eq=False)
class QLut(QOp):
    """An elementwise function of one int8 input, computed through a 256-entry table."""

    function: str  # a key of npu_byoc.ops.lut.FUNCTIONS ("sigmoid", "hard_swish", ...)
    input: QTensor
    output: QTensor
    act_min: int
    act_max: int
    convention: str = ""
    params: tuple = ()  # the function's parameters as sorted (name, value) pairs (alpha, ...)
    numerics: str = "tflite"  # whose arithmetic the table replicates (NUMERICS)
    # The Relax expressions of the quantized inputs, in the order of the record's inputs
    # (lowering maps them to the composite's arguments). Not part of the op's meaning.
    operands: tuple = field(default=(), compare=False, repr=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class QReshape(QOp):
    """RESHAPE / SQUEEZE / FLATTEN of an int8 tensor: the same bytes seen with another shape.
    No NPU work: lowering makes the output a view of the input (npu_byoc.ops.reshape.VIEWS)."""

    input: QTensor
    output: QTensor
    convention: str = ""
    operands: tuple = field(default=(), compare=False, repr=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class QGather(QOp):
    """A constant-index gather of an int8 tensor (TFLite RESIZE_NEAREST_NEIGHBOR, STRIDED_SLICE,
    SPLIT, TILE, GATHER as npu_byoc.frontends.tflite_ops imports them; ONNX Resize nearest, Slice and
    Split): ``index`` holds, per output element, the flat input element it copies."""

    input: QTensor
    output: QTensor
    index: np.ndarray  # int64, the output's shape
    convention: str = ""
    # The layout the index map's 4-D shapes are in, when the op says (a resize's attribute,
    # TFLite's NHWC); None: the partition's (a strided slice has no layout of its own).
    layout: str | None = None
    operands: tuple = field(default=(), compare=False, repr=False)
    # whose arithmetic a requantizing copy replicates (an ONNX Slice quantized unlike its input)
    numerics: str = DEFAULT_NUMERICS
    takes_partition_layout: ClassVar[str] = "gather"

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class QResizeBilinear(QOp):
    """RESIZE_BILINEAR of an int8 NHWC tensor, LiteRT's integer kernel (npu_byoc.ops.resize)."""

    input: QTensor
    output: QTensor
    align_corners: bool
    half_pixel: bool
    layout: str = "NHWC"
    convention: str = ""
    operands: tuple = field(default=(), compare=False, repr=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class QConcat(QOp):
    """CONCATENATION of int8 tensors along the channel axis. Lowering has each input's producer
    write its channel slice of the output in place (npu_byoc.ops.concat.IN_PLACE); an
    input that cannot be written in place (a partition input, an input quantized unlike the
    output, ...) is copied into its slice by a requantize LUT op."""

    inputs: tuple[QTensor, ...]
    output: QTensor
    axis: int  # non-negative
    convention: str = ""
    # whose arithmetic rescales an input quantized unlike the output (NUMERICS)
    numerics: str = "tflite"
    # per input: its int8 value when it is a model constant (a transformer's class token), else
    # None; () when none is. Constants are not operands: lowering copies them in from CONST.
    constants: tuple = ()
    operands: tuple = field(default=(), compare=False, repr=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class QSoftmax(QOp):
    """SOFTMAX over the last axis of an int8 tensor, as TFLite's integer reference kernel
    computes it (npu_byoc.ops.softmax): exp(beta · input_scale · (x − max)) normalised, output
    scale 1/256 and zero point −128."""

    input: QTensor
    output: QTensor
    axis: int  # non-negative: the softmax axis of the model's tensor
    reduces_last_axis: ClassVar[bool] = True
    beta: float = 1.0
    act_min: int = -128
    act_max: int = 127
    convention: str = ""
    numerics: str = "tflite"  # whose kernel the model's runtime runs (NUMERICS)
    operands: tuple = field(default=(), compare=False, repr=False)

    @property
    def macs(self) -> int:
        return 0


@dataclass(frozen=True, eq=False)
class QTransposeConv2D(QConvolution):
    """TRANSPOSE_CONV (relax.nn.conv2d_transpose) with per-channel requantize: every input
    pixel times the kernel, scattered to i·stride + k − pad (npu_byoc.ops.transpose_conv). The
    padding is cropped from the full scatter; the output's shape carries any output padding."""

    @property
    def macs(self) -> int:
        n = int(np.prod(self.input.shape))
        return n * self.kernel[0] * self.kernel[1] * self.out_channels


class Reject(Exception):
    """A match that the NPU cannot run; the message is the user-facing reason."""


# ---------------------------------------------------------------------------------------------
# Table types
