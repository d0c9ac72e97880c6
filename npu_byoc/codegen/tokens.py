"""An NCHW ViT's patches to tokens inside one partition: Reshape [N, C, H, W] -> [N, C, H*W]
then Transpose(0, 2, 1) -> [N, H*W, C].

The NPU stores the patch conv's map NHWC, H*W pixels of C channels: the tokens [N, L, C]
byte for byte. So a partition holding that pair keeps its sequences (rank 3) as tokens, a row
of L pixels of C channels (the "NHWC" sequence layout, as a TFLite transformer's), while its
images stay NCHW. The reshape is then a view of the conv's bytes through transposed strides
([1, C, L] read as the model says), and the transpose reads them back in storage order: one
contiguous copy. A reshape not read only by such transposes keeps its NCHW rule
(ops.reshape.view_reshape): an NCHW partition's sequence [N, C, L] is no view of the map, and
its fully connected layers would contract the wrong axis.
"""

from __future__ import annotations

from ..ops.npu_ops import TensorRef
from ..ops.records import QReshape, Reject
from ..ops.transpose import QTranspose


def pixels_to_sequence(op) -> bool:
    """A reshape [N, C, H, W] -> [N, C, H*W] (the patches' channels kept, their pixels in a row)."""
    if type(op) is not QReshape:
        return False
    a, b = op.input.shape, op.output.shape
    return len(a) == 4 and len(b) == 3 and a[0] == b[0] and a[1] == b[1] and a[2] * a[3] == b[2]


def _to_tokens(op) -> bool:
    return type(op) is QTranspose and op.axes == (0, 2, 1)


def sequence_layout(extracted: list, model_layout: str) -> str:
    """The layout of the partition's rank-3 tensors: NHWC (tokens) in an NCHW partition whose
    patches-to-tokens reshapes are each read by Transpose(0, 2, 1) only; else the partition's."""
    reshapes = [b.var for b, _, q in extracted if pixels_to_sequence(q)]
    if model_layout != "NCHW" or not reshapes:
        return model_layout
    readers: dict = {}
    for b, _, q in extracted:
        for a in b.value.args:
            readers.setdefault(a, []).append(q)
    if all(readers.get(v) and all(_to_tokens(r) for r in readers[v]) for v in reshapes):
        return "NHWC"
    return model_layout


def channels_in_a_row(op: QReshape, ifm: TensorRef) -> TensorRef:
    """The reshape's output [1, C, L] as its sequence layout maps it (H 1, W C, C L), seen in
    the conv's NHWC bytes: model element (c, l) is byte l*C + c."""
    c, l = int(op.output.shape[1]), int(op.output.shape[2])
    if ifm.layout != "NHWC" or ifm.is_slice or ifm.nbytes != c * l:
        raise Reject(f"{ifm.name}: cannot view {ifm.shape} {ifm.layout} as the tokens' [1, {c}, {l}]")
    return TensorRef(ifm.name, ifm.region, ifm.offset, (1, c, l), "NHWC", box_strides=(c * l, 1, c))
