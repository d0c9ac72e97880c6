"""The one hardware configuration of the NPU.

Everything that describes the hardware (array size, memories, the limits of each unit) lives
here; the supported-operator checks, and later the C header and the Verilog parameters, are
derived from it, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class HwConfig:
    # Compute array: rows x cols int8 MACs with int32 accumulators.
    array_rows: int = 8
    array_cols: int = 32
    # On-chip SRAM; layers that do not fit are tiled by the compiler.
    sram_bytes: int = 256 * 1024
    # External memory: bytes the DMA moves per cycle on a contiguous row (one request each).
    dma_bytes_per_cycle: int = 16
    # 1 (default): the compiler runs DMAs in the background while the array computes
    # (DMA_IN_ASYNC, DMA_OUT_ASYNC, WAIT_DMA; npu_byoc.codegen.overlap). The hardware always has
    # the background DMA engine (its own SRAM port); this chooses the schedule. 0: every
    # command in turn (the sequential schedule, DMA time added to compute time).
    dma_overlap: int = 1
    # Background DMA transfers outstanding at most (the DMA engine's descriptor queue, the one
    # being copied included); a background DMA waits for room.
    dma_queue_depth: int = 8
    # The weight decoder in the DMA's read path (DMA_IN_DECODE, npu_byoc.arch.weight_codec,
    # hw/rtl/npu_wdec.v): the bytes it writes to SRAM per cycle, 0 = no decoder (the compiler
    # keeps every weight raw; DMA_IN_DECODE is an invalid opcode). Off by default: it loads a
    # code before it decodes, so it pays only behind a memory much slower than itself.
    weight_decoder_bytes_per_cycle: int = 0
    # The LAYERNORM unit (ONNX LayerNormalization, npu_byoc.ops.layernorm; in the RTL's vector
    # unit): 1 = present, 0 = none (LAYERNORM is an invalid opcode and the compiler keeps
    # LayerNormalization on the CPU).
    layernorm_unit: int = 1
    # Core clock in Hz: reports give milliseconds and inferences per second beside cycles.
    core_clock_hz: int = 500_000_000
    # The external memories (npu_byoc.arch.memory, docs/memory.md): fm_mem serves the feature
    # maps (regions SCRATCH, IO*), const_mem the weights and constants (CONST); they may be
    # set alike. Bytes per memory cycle, core cycles per memory cycle (clock_divider), read and
    # write latency in core cycles, the burst length in bytes (a shorter contiguous run costs a
    # whole burst, as in Vela) and the bursts in flight at most. The defaults never bind the
    # DMA port: every cycle figure is the zero-wait-state memory's.
    fm_mem_bytes_per_cycle: int = 64
    fm_mem_clock_divider: int = 1
    fm_mem_read_latency: int = 0
    fm_mem_write_latency: int = 0
    fm_mem_burst_bytes: int = 1
    fm_mem_max_reads: int = 8
    fm_mem_max_writes: int = 8
    const_mem_bytes_per_cycle: int = 64
    const_mem_clock_divider: int = 1
    const_mem_read_latency: int = 0
    const_mem_write_latency: int = 0
    const_mem_burst_bytes: int = 1
    const_mem_max_reads: int = 8
    const_mem_max_writes: int = 8

    # Convolution unit limits (also used by depthwise).
    max_kernel: int = 11  # kh, kw <= max_kernel
    max_stride: int = 3
    max_channels: int = 4096
    # Pooling unit limits.
    max_pool_window: int = 32
    max_pool_stride: int = 8
    # Mean unit: number of elements reduced into one output.
    max_mean_elements: int = 65536
    # Fully connected.
    max_fc_features: int = 65536
    # Accumulators are int32.
    accumulator_bits: int = 32

    @property
    def fc_feature_limit(self) -> int:
        # FC features are the IFM_C / OFM_C registers, so the channel limit binds them too.
        return min(self.max_fc_features, self.max_channels)


# The values each field may take: what the RTL, the C model and the scheduler are built and
# tested for. A configuration outside them is refused with the field, value and range.
FIELD_RANGES: dict[str, tuple[int, int]] = {
    "array_rows": (1, 128),
    "array_cols": (1, 128),
    # 64 MiB: what the backends serve. The RTL harness holds the SRAM as one Verilog array in
    # host memory, zeroed for every run, and the C model's cycle arithmetic is exact up to 2^26
    # bytes; the C model's own host memory follows the stream's operands, not this.
    "sram_bytes": (1024, 1 << 26),
    "dma_bytes_per_cycle": (1, 64),
    "dma_overlap": (0, 1),
    "dma_queue_depth": (1, 16),
    "weight_decoder_bytes_per_cycle": (0, 64),
    "layernorm_unit": (0, 1),
    "core_clock_hz": (1_000, 4_000_000_000),
    **{f"{mem}_{name}": bounds for mem in ("fm_mem", "const_mem") for name, bounds in (
        ("bytes_per_cycle", (1, 256)),
        ("clock_divider", (1, 64)),
        ("read_latency", (0, 4096)),
        ("write_latency", (0, 4096)),
        ("burst_bytes", (1, 4096)),
        ("max_reads", (1, 64)),
        ("max_writes", (1, 64)),
    )},
    "max_kernel": (1, 32),
    "max_stride": (1, 16),
    "max_channels": (1, 65535),
    "max_pool_window": (1, 64),
    "max_pool_stride": (1, 64),
    "max_mean_elements": (1, 1 << 24),
    "max_fc_features": (1, 65536),
    "accumulator_bits": (32, 32),  # the numerics are int32 (numerics.py)
}


class HwConfigError(ValueError):
    """A hardware configuration field or value that the NPU cannot have."""


def field_names() -> list[str]:
    return [f.name for f in fields(HwConfig)]


def check_value(name: str, value: object) -> int:
    """``value`` as the integer field ``name``, or HwConfigError naming field, value and range."""
    if name not in FIELD_RANGES:
        raise HwConfigError(f"unknown hardware field '{name}' (fields: {', '.join(field_names())})")
    lo, hi = FIELD_RANGES[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise HwConfigError(f"{name}={value!r}: expected an integer in [{lo}, {hi}]")
    if not lo <= value <= hi:
        raise HwConfigError(f"{name}={value}: must be in [{lo}, {hi}]")
    return value


def configure(base: HwConfig | None = None, **overrides: int) -> HwConfig:
    """``base`` (default: the default configuration) with ``overrides``, every value checked."""
    return replace(base or DEFAULT_CONFIG, **{k: check_value(k, v) for k, v in overrides.items()})


def overrides_of(hw: HwConfig) -> dict[str, int]:
    """The fields where ``hw`` differs from the default configuration."""
    return {n: getattr(hw, n) for n in field_names() if getattr(hw, n) != getattr(DEFAULT_CONFIG, n)}


DEFAULT_CONFIG = HwConfig()
assert set(FIELD_RANGES) == set(field_names()), "every HwConfig field needs a range"
