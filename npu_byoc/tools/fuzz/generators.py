"""Random int8 models for the differential fuzzer, as JSON-able specs.

A case is a *spec* (plain dict, saved with every reproducer); npu_byoc.tools.fuzz.builder turns it
into a Relax module deterministically, so shrinking a spec (npu_byoc.tools.fuzz.reducer) and
replaying a saved one rebuild the same model::

    {"seed": 7, "layout": "NHWC", "input": {"shape": [1, 9, 9, 5], "scale": 0.5, "zp": 3},
     "ops": [{"kind": "conv2d", "convention": "qdq", "out_channels": 8, ...}, ...]}

Shapes flow: every op's output shape follows from its input's, so halving the input's
dimensions shrinks the whole chain. Each op kind has a generator (``GENERATORS``: random
parameters for the current tensor; npu_byoc.tools.fuzz.builder has its emitter). Most parameters
lie inside what the NPU accepts; a few per cent on purpose do not (ceil-mode averages counting padding, shifts past their
limits, ...): those cases must stay on the CPU with a reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


class InvalidSpec(ValueError):
    """The spec does not describe a well-formed model (a shrink went too far)."""


# ---------------------------------------------------------------------------------------------
# Scales near the edges


def _f32(x: float) -> float:
    return float(np.float32(x))


def activation_scale(rng: np.random.Generator) -> float:
    """Mostly ordinary scales; sometimes tiny, huge or exact powers of two."""
    kind = rng.choice(["normal", "pow2", "tiny", "huge"], p=[0.7, 0.14, 0.08, 0.08])
    if kind == "normal":
        return _f32(2.0 ** rng.uniform(-9, 1))
    if kind == "pow2":
        return _f32(2.0 ** int(rng.integers(-12, 4)))
    if kind == "tiny":
        return _f32(10.0 ** rng.uniform(-30, -12))
    return _f32(10.0 ** rng.uniform(6, 30))


def requant_output_scale(rng: np.random.Generator, acc_scale: float) -> float:
    """An output scale making acc_scale / out a chosen requantize real: ordinary, with a
    mantissa near 1 (multiplier near 2^31) or 0.5, or with a shift at (or past) [-31, 30]."""
    kind = rng.choice(["normal", "mant_hi", "mant_lo", "shift_edge", "wide"], p=[0.6, 0.1, 0.08, 0.1, 0.12])
    if kind == "normal":
        real = 2.0 ** rng.uniform(-12, 0)
    elif kind == "mant_hi":
        real = 2.0 ** int(rng.integers(-14, 2)) * (1 - 2.0 ** -int(rng.integers(20, 32)))
    elif kind == "mant_lo":
        real = 2.0 ** int(rng.integers(-14, 2)) * (0.5 + 2.0 ** -int(rng.integers(20, 32)))
    elif kind == "shift_edge":  # shift -31/-32/-33 (tiny) or 29/30/31 (huge)
        e = int(rng.choice([-33, -32, -31, -30, 28, 29, 30, 31]))
        real = 2.0**e * rng.uniform(0.5, 1.0)
    else:
        real = 2.0 ** rng.uniform(-30, 12)
    out = _f32(acc_scale / real)
    if not (math.isfinite(out) and out > 0):
        out = _f32(acc_scale)
    return out


def zero_point(rng: np.random.Generator) -> int:
    kind = rng.choice(["zero", "small", "edge", "any"], p=[0.3, 0.3, 0.15, 0.25])
    if kind == "zero":
        return 0
    if kind == "small":
        return int(rng.integers(-8, 9))
    if kind == "edge":
        return int(rng.choice([-128, -127, 126, 127]))
    return int(rng.integers(-128, 128))


def clamp(rng: np.random.Generator) -> dict:
    """The activation after a requantizing op: none, ReLU, a float clip (ReLU6) or an int clip."""
    kind = rng.choice(["none", "relu", "float_clip", "int_clip", "relu+int_clip"], p=[0.4, 0.2, 0.1, 0.2, 0.1])
    out: dict = {"kind": str(kind)}
    if "int_clip" in kind:
        lo = int(rng.integers(-128, 100))
        out["lo"], out["hi"] = lo, int(rng.integers(lo, 128))
    if kind == "float_clip":
        out["lo"], out["hi"] = 0.0, float(rng.choice([6.0, 1.0, 0.25]))
    return out


def _count(rng: np.random.Generator, edges: tuple[int, ...], rare: tuple[int, int]) -> int:
    """A channel / feature count: uniform within a random one of the ranges [edges[i],
    edges[i+1]), or, in 3 % of the draws, within ``rare`` (channel blocks, SRAM tiles, limits)."""
    if rng.random() < 0.03:
        return int(rng.integers(*rare))
    i = int(rng.integers(0, len(edges) - 1))
    return int(rng.integers(edges[i], edges[i + 1]))


def weights(rng: np.random.Generator, shape) -> np.ndarray:
    lo = -128 if rng.random() < 0.2 else -127
    hi = int(rng.choice([127, 127, 3, 1]))  # sometimes tiny weights: near-zero accumulators
    return rng.integers(max(lo, -hi - 1), hi + 1, size=tuple(shape)).astype(np.int8)


def _weight_scales(rng: np.random.Generator, n: int) -> list[float]:
    base = 2.0 ** rng.uniform(-10, -2)
    if rng.random() < 0.3:
        return [_f32(base)] * n
    return [_f32(base * 2.0 ** rng.uniform(-3, 3)) for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# Tensor state while generating / building


@dataclass
class Tensor:
    """The chain's current int8 tensor: its shape, quantization and (when building) its Var."""

    shape: tuple[int, ...]
    scale: float
    zp: int
    expr: object = None  # a relax.Expr

    def spatial(self, layout: str) -> tuple[int, int, int]:
        """(H, W, C) of a 4-D tensor in ``layout``."""
        if layout == "NHWC":
            _, h, w, c = self.shape
        else:
            _, c, h, w = self.shape
        return h, w, c


def _act_shape(layout: str, h: int, w: int, c: int) -> tuple[int, ...]:
    return (1, h, w, c) if layout == "NHWC" else (1, c, h, w)


def _ceil_out(size: int, k: int, s: int, p0: int, p1: int) -> int:
    """A ceil-mode pool's output size as TVM computes it: the last window must start inside the
    input or its leading padding (PyTorch's rule)."""
    out = -(-(size + p0 + p1 - k) // s) + 1
    return out - 1 if (out - 1) * s >= size + p0 else out


def _conv_out(size: int, k: int, s: int, d: int, p0: int, p1: int) -> int:
    return (size + p0 + p1 - d * (k - 1) - 1) // s + 1


# ---------------------------------------------------------------------------------------------
# Generators: random parameters of one op for the current tensor (None: not applicable)


def _gen_conv_common(rng, t: Tensor, layout: str, depthwise: bool) -> dict | None:
    if len(t.shape) != 4:
        return None
    h, w, c = t.spatial(layout)
    kh = int(rng.integers(1, min(h, 5) + 1)) if rng.random() < 0.9 else int(rng.integers(1, min(h, 11) + 1))
    kw = int(rng.integers(1, min(w, 5) + 1)) if rng.random() < 0.9 else int(rng.integers(1, min(w, 11) + 1))
    dil = [1, 1] if rng.random() < 0.95 else [2, 2]  # dilation 2: the NPU runs it zero-inserted
    if (kh - 1) * dil[0] + 1 > h or (kw - 1) * dil[1] + 1 > w:
        dil = [1, 1]
    strides = [int(rng.integers(1, 4)), int(rng.integers(1, 4))]
    if rng.random() < 0.03:
        strides[0] = 4  # past max_stride
    pad = [int(rng.integers(0, k)) for k in (kh, kw, kh, kw)]  # t, l, b, r < kernel
    if rng.random() < 0.03:
        pad[0] = kh  # padding as large as the kernel: refused
    spec = {
        "kind": "depthwise" if depthwise else "conv2d",
        "convention": str(rng.choice(["qdq", "int32"], p=[0.7, 0.3])),
        "out_channels": c if depthwise else _count(rng, (1, 17, 70), rare=(70, 520)),
        "kernel": [kh, kw],
        "strides": strides,
        "padding": pad,
        "dilation": dil,
        "bias": bool(rng.random() < 0.7),
        "bias_bound": int(rng.choice([100, 10_000, 1_000_000])),
        "wseed": int(rng.integers(0, 2**31)),
        "clamp": clamp(rng),
    }
    if rng.random() < 0.02:
        spec["weight_zp"] = 1  # asymmetric weights: refused
    return spec


def gen_conv2d(rng, t: Tensor, layout: str) -> dict | None:
    return _gen_conv_common(rng, t, layout, depthwise=False)


def gen_depthwise(rng, t: Tensor, layout: str) -> dict | None:
    return _gen_conv_common(rng, t, layout, depthwise=True)


def gen_transpose_conv(rng, t: Tensor, layout: str) -> dict | None:
    """TFLite TRANSPOSE_CONV (NHWC) / ONNX ConvTranspose (NCHW): kernels up to 5, strides up to
    the kernel (rarely past it: refused), padding below the kernel, output padding below the
    stride."""
    if len(t.shape) != 4:
        return None
    kernel = [int(rng.integers(1, 6)), int(rng.integers(1, 6))]
    strides = [int(rng.integers(1, k + 1)) for k in kernel]
    if rng.random() < 0.03:
        strides[0] = kernel[0] + 1  # outputs no input reaches: refused
    pad = [int(rng.integers(0, k)) for k in (*kernel, *kernel)]  # t, l, b, r
    return {
        "kind": "transpose_conv",
        "convention": "qdq",
        "out_channels": _count(rng, (1, 17, 48), rare=(48, 130)),
        "kernel": kernel,
        "strides": strides,
        "padding": pad,
        "output_padding": [int(rng.integers(0, s)) for s in strides],
        "bias": bool(rng.random() < 0.7),
        "bias_bound": int(rng.choice([100, 10_000, 1_000_000])),
        "wseed": int(rng.integers(0, 2**31)),
        "clamp": clamp(rng),
    }


def gen_fc(rng, t: Tensor, layout: str) -> dict | None:
    if len(t.shape) != 2:
        return None
    return {
        "kind": "fc",
        "convention": str(rng.choice(["qdq", "qdq_transposed", "int32"], p=[0.4, 0.3, 0.3])),
        "out_features": _count(rng, (1, 33, 300), rare=(300, 4200)),  # past 4096: refused
        "bias": bool(rng.random() < 0.7),
        "bias_bound": int(rng.choice([100, 10_000, 1_000_000])),
        "wseed": int(rng.integers(0, 2**31)),
        "clamp": clamp(rng),
    }


def _gen_pool(rng, t: Tensor, layout: str, kind: str) -> dict | None:
    if len(t.shape) != 4:
        return None
    h, w, _ = t.spatial(layout)
    ph = int(rng.integers(1, min(h, 16) + 1)) if rng.random() < 0.95 else min(h, 17)
    pw = int(rng.integers(1, min(w, 16) + 1))
    conventions = ["qdq", "cast"] if kind == "avg" else ["qdq", "integer"]
    spec = {
        "kind": f"{kind}_pool",
        "convention": str(rng.choice(conventions)),
        "pool": [ph, pw],
        "strides": [int(rng.integers(1, 9)), int(rng.integers(1, 9))],
        "padding": [int(rng.integers(0, k)) if rng.random() < 0.3 else 0 for k in (ph, pw, ph, pw)],
        "ceil_mode": bool(rng.random() < 0.03),
        "count_include_pad": bool(kind == "avg" and rng.random() < 0.03),
        "int_clip": clamp(rng) if rng.random() < 0.3 else {"kind": "none"},
    }
    if spec["int_clip"]["kind"] not in ("none", "int_clip"):
        spec["int_clip"] = {"kind": "none"}
    if rng.random() < 0.03:
        spec["requant_scale"] = 2.0  # output scale differs from the input's: refused
    return spec


def gen_avg_pool(rng, t: Tensor, layout: str) -> dict | None:
    return _gen_pool(rng, t, layout, "avg")


def gen_max_pool(rng, t: Tensor, layout: str) -> dict | None:
    return _gen_pool(rng, t, layout, "max")


def gen_mean(rng, t: Tensor, layout: str) -> dict | None:
    if len(t.shape) != 4:
        return None
    return {
        "kind": "mean",
        "convention": str(rng.choice(["qdq", "int32"])),
        "keepdims": bool(rng.random() < 0.6),
        "out_scale_ratio": float(2.0 ** rng.uniform(-4, 4)) if rng.random() < 0.9 else float(2.0 ** rng.uniform(-40, 40)),
        "out_zp": zero_point(rng),
        "clamp": clamp(rng) if rng.random() < 0.3 else {"kind": "none"},
    }


def gen_sigmoid(rng, t: Tensor, layout: str) -> dict | None:
    std = rng.random() < 0.6  # TFLite's fixed output quantization 1/256, -128
    return {
        "kind": "sigmoid",
        "out_scale": 1.0 / 256 if std else _f32(2.0 ** rng.uniform(-10, 0)),
        "out_zp": -128 if std else zero_point(rng),
        "clamp": {"kind": "int_clip", "lo": -100, "hi": 100} if rng.random() < 0.1 else {"kind": "none"},
    }


def gen_softmax(rng, t: Tensor, layout: str) -> dict | None:
    std = rng.random() < 0.85  # TFLite's fixed output quantization 1/256, -128
    return {
        "kind": "softmax",
        # beta 1 (the converter's), a temperature, or one that takes input scale x beta below 2^-26
        "beta": float(rng.choice([1.0, _f32(2.0 ** rng.uniform(-3, 3)), 1e-9], p=[0.6, 0.35, 0.05])),
        "axis": -1 if rng.random() < 0.95 else 1,  # axis 1 of a 4-D tensor: refused
        "out_scale": 1.0 / 256 if std else _f32(2.0 ** rng.uniform(-10, 0)),
        "out_zp": -128 if std else zero_point(rng),
    }


def gen_add(rng, t: Tensor, layout: str) -> dict | None:
    spec = {
        "kind": "add",
        "b_scale": activation_scale(rng) if rng.random() < 0.3 else _f32(t.scale * 2.0 ** rng.uniform(-3, 3)),
        "b_zp": zero_point(rng),
        "out_scale": _f32(t.scale * 2.0 ** rng.uniform(-2, 3)) if rng.random() < 0.85 else activation_scale(rng),
        "out_zp": zero_point(rng),
        "residual": bool(rng.random() < 0.4),  # add an earlier tensor of the chain, when one fits
        "broadcast": bool(rng.random() < 0.03),  # a last-axis vector: NHWC's channel vector, NCHW's row (stride-0 DMA)
        "clamp": clamp(rng) if rng.random() < 0.5 else {"kind": "none"},
    }
    if spec["clamp"]["kind"] == "float_clip":
        spec["clamp"] = {"kind": "relu"}
    return spec


GENERATORS: dict[str, Callable[..., dict | None]] = {
    "conv2d": gen_conv2d,
    "depthwise": gen_depthwise,
    "transpose_conv": gen_transpose_conv,
    "fc": gen_fc,
    "avg_pool": gen_avg_pool,
    "max_pool": gen_max_pool,
    "mean": gen_mean,
    "sigmoid": gen_sigmoid,
    "add": gen_add,
    "softmax": gen_softmax,
}
OP_KINDS = tuple(GENERATORS)


def random_spec(seed: int, kinds: tuple[str, ...] = OP_KINDS) -> dict:
    """One random case: a single op (half the cases) or a chain of 2-4 ops."""
    rng = np.random.default_rng(seed)
    layout = str(rng.choice(["NHWC", "NCHW"], p=[0.65, 0.35]))
    n_ops = 1 if rng.random() < 0.5 else int(rng.integers(2, 5))
    first = str(rng.choice(kinds))
    if first == "fc":
        shape = (int(rng.choice([1, 1, 1, 1, 2])), _count(rng, (1, 64, 600), rare=(600, 4200)))
    else:
        big = rng.random() < 0.08  # sometimes big enough to need row tiles in SRAM
        h = int(rng.integers(1, 17)) if not big else int(rng.integers(40, 97))
        w = int(rng.integers(1, 17)) if not big else int(rng.integers(40, 97))
        c = _count(rng, (1, 9, 48, 130), rare=(130, 520))
        shape = _act_shape(layout, h, w, c)
    spec = {
        "seed": int(seed),
        "layout": layout,
        "input": {"shape": list(shape), "scale": activation_scale(rng), "zp": zero_point(rng)},
        "input_mode": str(rng.choice(["uniform", "extremes", "zero_point"], p=[0.85, 0.1, 0.05])),
        "ops": [],
    }
    t = Tensor(tuple(shape), spec["input"]["scale"], spec["input"]["zp"])
    for k in range(n_ops):
        kind = first if k == 0 else str(rng.choice(kinds))
        op = None
        for _ in range(8):  # an op kind that applies to the current tensor
            op = GENERATORS[kind](rng, t, layout)
            if op is not None:
                break
            kind = str(rng.choice(kinds))
        if op is None:
            break
        try:
            t = _infer(op, t, layout, spec, rng)
        except InvalidSpec:
            break
        spec["ops"].append(op)
    if not spec["ops"]:
        return random_spec(seed + 1_000_003, kinds)
    # The model's source format decides what a requantize left shift does on overflow (TFLite
    # wraps, a Relax module's TVM saturates: requant.LEFT_SHIFT_OVERFLOW). Its own generator, so
    # the ops of a seed are the same as before the origin was drawn.
    spec["origin"] = str(np.random.default_rng([seed, 0x0816]).choice(ORIGINS))
    return spec


ORIGINS = ("relax", "tflite")  # builder.build marks a "tflite" case's module with that format


def _infer(op: dict, t: Tensor, layout: str, spec: dict, rng) -> Tensor:
    """Fill in the op's output quantization (needs the input's) and return its output tensor."""
    kind = op["kind"]
    if kind in ("conv2d", "depthwise", "transpose_conv", "fc"):
        n = op["out_channels"] if kind != "fc" else op["out_features"]
        op["weight_scales"] = _weight_scales(rng, n)
        acc = t.scale * op["weight_scales"][0]
        op["out_scale"] = requant_output_scale(rng, acc)
        op["out_zp"] = zero_point(rng)
    return infer_shape(op, t, layout, spec)


def infer_shape(op: dict, t: Tensor, layout: str, spec: dict | None = None) -> Tensor:
    """The output tensor (shape, scale, zero point) of ``op`` on ``t``; InvalidSpec if ill-formed."""
    kind = op["kind"]
    if kind in ("conv2d", "depthwise"):
        if len(t.shape) != 4:
            raise InvalidSpec("conv on a non-4-D tensor")
        h, w, c = t.spatial(layout)
        if kind == "depthwise":
            op["out_channels"] = c
        kh, kw = op["kernel"]
        pt, pl, pb, pr = op["padding"]
        oh = _conv_out(h, kh, op["strides"][0], op["dilation"][0], pt, pb)
        ow = _conv_out(w, kw, op["strides"][1], op["dilation"][1], pl, pr)
        if oh < 1 or ow < 1 or c < 1 or op["out_channels"] < 1:
            raise InvalidSpec("empty conv output")
        return Tensor(_act_shape(layout, oh, ow, op["out_channels"]), op["out_scale"], op["out_zp"])
    if kind == "transpose_conv":
        if len(t.shape) != 4:
            raise InvalidSpec("transposed conv on a non-4-D tensor")
        h, w, c = t.spatial(layout)
        (kh, kw), (sh, sw), (pt, pl, pb, pr) = op["kernel"], op["strides"], op["padding"]
        oh = (h - 1) * sh + kh - pt - pb + op["output_padding"][0]
        ow = (w - 1) * sw + kw - pl - pr + op["output_padding"][1]
        if oh < 1 or ow < 1 or op["out_channels"] < 1 or oh * ow > 1 << 12:
            raise InvalidSpec("empty or oversized transposed conv output")
        return Tensor(_act_shape(layout, oh, ow, op["out_channels"]), op["out_scale"], op["out_zp"])
    if kind == "fc":
        if len(t.shape) != 2 or op["out_features"] < 1:
            raise InvalidSpec("fc on a non-2-D tensor")
        return Tensor((t.shape[0], op["out_features"]), op["out_scale"], op["out_zp"])
    if kind in ("avg_pool", "max_pool"):
        if len(t.shape) != 4:
            raise InvalidSpec("pool on a non-4-D tensor")
        h, w, c = t.spatial(layout)
        ph, pw = op["pool"]
        pt, pl, pb, pr = op["padding"]
        if op["ceil_mode"]:
            oh = _ceil_out(h, ph, op["strides"][0], pt, pb)
            ow = _ceil_out(w, pw, op["strides"][1], pl, pr)
        else:
            oh = (h + pt + pb - ph) // op["strides"][0] + 1
            ow = (w + pl + pr - pw) // op["strides"][1] + 1
        if oh < 1 or ow < 1 or ph > h + pt + pb or pw > w + pl + pr:
            raise InvalidSpec("empty pool output")
        scale = t.scale * op.get("requant_scale", 1.0)
        return Tensor(_act_shape(layout, oh, ow, c), _f32(scale), t.zp)
    if kind == "mean":
        if len(t.shape) != 4:
            raise InvalidSpec("mean on a non-4-D tensor")
        _, _, c = t.spatial(layout)
        shape = _act_shape(layout, 1, 1, c) if op["keepdims"] else (1, c)
        scale = _f32(t.scale * op["out_scale_ratio"])
        if not (math.isfinite(scale) and scale > 0):
            raise InvalidSpec("mean output scale not finite")
        return Tensor(shape, scale, op["out_zp"])
    if kind == "sigmoid":
        return Tensor(t.shape, op["out_scale"], op["out_zp"])
    if kind in ("add", "softmax"):
        return Tensor(t.shape, op["out_scale"], op["out_zp"])
    raise InvalidSpec(f"unknown op kind {kind}")


# ---------------------------------------------------------------------------------------------
# Random hardware configurations (``npu-byoc fuzz --random-hw``)

# The largest SRAM drawn: inside the documented range (arch/config.FIELD_RANGES, up to 64 MiB)
# but small enough that the C model and the RTL harness (which zero the SRAM) stay fast.
RANDOM_HW_MAX_SRAM = 4 << 20
_HW_STREAM = 0x4857  # the configuration's own generator: a seed's ops do not depend on it


def _log_int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """An integer in [lo, hi], log-uniform (small values as likely as large ones)."""
    return int(min(hi, max(lo, round(2.0 ** rng.uniform(math.log2(lo), math.log2(hi))))))


def random_hw(seed: int) -> dict:
    """A random hardware configuration for case ``seed`` as the fields that differ from the
    default (JSON-able; arch.config.configure(**it) checks it): every field of HwConfig is kept
    at its default or drawn inside its documented range (FIELD_RANGES), SRAM at most
    RANDOM_HW_MAX_SRAM. The unit limits are drawn near the sizes the op generators produce half
    of the time (so that some ops are refused by them) and anywhere in the range otherwise."""
    from ...arch.config import DEFAULT_CONFIG, FIELD_RANGES, configure, overrides_of

    rng = np.random.default_rng([seed, _HW_STREAM])
    near = {  # limits near what the generators draw: kernels 1-5, strides 1-4, 1-520 channels ...
        "max_kernel": (1, 6), "max_stride": (1, 4), "max_channels": (1, 160), "max_pool_window": (1, 16),
        "max_pool_stride": (1, 5), "max_mean_elements": (1, 300), "max_fc_features": (1, 700),
    }  # fmt: skip
    fields: dict[str, int] = {}
    for name, (lo, hi) in FIELD_RANGES.items():
        if lo == hi or rng.random() < 0.35:  # keep the default
            continue
        if name == "sram_bytes":
            fields[name] = _log_int(rng, lo, RANDOM_HW_MAX_SRAM)
        elif name == "dma_overlap":
            fields[name] = int(rng.integers(0, 2))
        elif name in near and rng.random() < 0.5:
            fields[name] = int(rng.integers(near[name][0], near[name][1] + 1))
        elif lo == 0:  # a latency: none a quarter of the time, else log-uniform from 1
            fields[name] = 0 if rng.random() < 0.25 else _log_int(rng, 1, hi)
        else:
            fields[name] = _log_int(rng, lo, hi)
    return overrides_of(configure(DEFAULT_CONFIG, **fields))
