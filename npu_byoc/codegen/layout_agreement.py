"""One layout per partition: the ops that share tensors must read them the same way round.

Most ops carry the layout their model gives them (a conv's data_layout) or have none (elementwise
ops follow the partition). Two kinds bind to a tensor's *logical* axes instead:

- a fully connected layer over a rank >= 3 tensor contracts its last axis, so that axis must be the
  channels the NPU stores innermost (NHWC; an NCHW partition stores it as pixels);
- a MEAN record that reads the last axis of a rank-3 tensor as an NCHW sequence's length
  ``[N, C, L]`` guesses: in a transformer's ``[N, L, C]`` it is LayerNorm's mean over the
  channels. (npu.mean's extraction no longer guesses: such a mean takes the partition's layout
  and reads the model's axes through a strided view, ops.mean.reduction_view.)

A partition that mixes them would read a tensor transposed (the keyword transformer was 103 LSB
off LiteRT). The op at fault is named, so the fallback keeps it on the CPU with the reason.
"""

from __future__ import annotations

from ..ops.fully_connected import contracts_pixels_in
from ..ops.mean import layout_is_guess


def layout_conflict(qops: list[tuple[str, object]]) -> tuple[str, str] | None:
    """(layer, reason) of the first op whose layout guess the partition's other ops contradict;
    ``qops`` are (layer, record) in partition order. (A fully connected layer fed by an NCHW
    conv is already refused where the reshape between them would reorder bytes.)"""
    guesses = [layer for layer, q in qops if layout_is_guess(q)]
    firm = {getattr(q, "layout", None) for _, q in qops if not layout_is_guess(q)} - {None}
    channel_last = any(contracts_pixels_in(q, "NCHW") for _, q in qops)
    if guesses and (channel_last or "NHWC" in firm):
        return guesses[0], ("mean over the last axis of a sequence whose other ops read that axis as "
                            "channels: the NPU's MEAN reduces spatial axes, not channels")  # fmt: skip
    return None


__all__ = ["layout_conflict"]
