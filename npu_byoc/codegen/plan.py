"""A partition lowered: its typed NPU ops, its inputs and outputs in their regions, its scratch
and constants (npu_byoc.codegen.lower makes it; the scheduler, the runtimes and the reports read it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ops.npu_ops import NpuOp, TensorRef


@dataclass
class IoTensor:
    """A partition input or output as the caller passes it (model shape and layout)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    ref: TensorRef


@dataclass
class PartitionPlan:
    name: str
    inputs: list[IoTensor]
    outputs: list[IoTensor]
    ops: list[NpuOp]
    scratch_bytes: int = 0
    layers: list[str] = field(default_factory=list)
    # Images per call: the ops, refs and scratch are one image's; the IO tensors hold `batch`
    # images back to back and the runner executes the ops once per image (docs/codegen.md).
    batch: int = 1
    # The start of the CONST region: the model constants ops read as operands (a constant
    # channel vector of ADD / MUL), at 16-byte aligned offsets. The scheduler appends the
    # weights, requantize records and LUTs after them.
    constants: bytes = b""
    # The copies a concatenation adds (an input copied or rescaled into its channel slice), as
    # (index into ops, the concatenation's input): NPU work no composite stands for.
    copy_ops: tuple[tuple[int, int], ...] = ()
    # The interleaves the compiler added (npu_byoc.codegen.interleave), as (index into ops, the
    # partition input it lays out NHWC): NPU work no composite stands for.
    interleaves: tuple[tuple[int, int], ...] = ()
    # ... and their deinterleaves, as (index into ops, the partition output it writes as planes).
    deinterleaves: tuple[tuple[int, int], ...] = ()
    # Ops whose output features are stored in another order than the model lists them (a fully
    # connected layer feeding an NCHW unflatten computes them in HWC order), as (index into ops,
    # the model index of each stored feature). Never a partition output.
    feature_orders: tuple[tuple[int, np.ndarray], ...] = ()
    # The layout of the rank-3 tensors when not the images' (an NCHW ViT's tokens: "NHWC",
    # npu_byoc.codegen.tokens); "" the same.
    sequence_layout: str = ""

    def nchw_sequences(self, nchw: bool) -> bool:
        """Whether this partition of NCHW (``nchw``) or NHWC images holds its sequences [N, C, L]."""
        return nchw and self.sequence_layout != "NHWC"

    @property
    def macs(self) -> int:
        return sum(op.macs for op in self.ops)

    def model_order(self, op: NpuOp, value: np.ndarray) -> np.ndarray:
        """``op``'s output value (as the NPU stores it) with its features in the model's order."""
        order = next((o for k, o in self.feature_orders if self.ops[k] is op), None)
        if order is None:
            return value
        features = np.empty(value.size, value.dtype)
        features[order] = value.reshape(-1)
        return features.reshape(value.shape)


__all__ = ["IoTensor", "PartitionPlan"]
