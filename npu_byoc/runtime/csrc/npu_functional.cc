// npu_functional.cc -- the C functional model of the NPU behind the driver API (npu_driver.h).
//
// One source, two languages: it is C99 and C++17 at once (no C++ feature, every cast
// explicit), so that npu_byoc's model libraries compile it with g++ and an exported model
// (`npu-byoc export`, docs/export.md) compiles it as npu_functional.c with the system cc alone.
//
// Executes a command stream exactly as the golden model of the stream does
// (npu_byoc/runtime/machine.py, docs/isa.md): the same memory contents, the same status and
// the same failing word index for every stream, checks made in the same order. The
// arithmetic is integer-only and bit-exact with npu_byoc/arch/numerics.py (docs/numerics.md).
//
// Robustness: every register value is checked before it is used as a size or an address;
// sizes are multiplied with saturation and addresses compared in 64 (DMA: 128) bits, so no
// input stream can make it read or write outside the SRAM or a bound region, overflow a
// signed integer or loop without bound. Nothing is allocated but the machine state of a call,
// freed when it returns.
//
// Speed: per kick, the input tile is converted once to int16 (x - zero_point, so virtual
// padding contributes 0 and is simply skipped) and the weights to int16 with the output
// channel innermost (CONV [KH][KW][IC][OC], DWCONV [KH][KW][C]); then each input value updates
// a contiguous row of per-channel accumulators, in fixed-width blocks the compiler vectorizes
// at -O2. Accumulators are uint32: they wrap like the NPU's int32 accumulator, without signed
// overflow. MobileNetV2-0.35 at 96x96 (10.7 M MACs) runs in about 7 ms on one core.
//
// Build standalone: g++ -O2 -shared -fPIC -std=c++17 -I<npu_byoc/codegen/templates>
// (npu_byoc.runtime.functional does this), or link it into a model library; as C:
// cc -std=c99 -O2 -x c -c npu_functional.cc (the C99 check: -Wall -Wextra -Werror -pedantic).

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "npu_driver.h"

// The hardware configuration npu_submit() runs with; defaults from npu_isa.h (generated from
// npu_byoc.hwconfig). A model library built for another HwConfig overrides them with -D
// (npu_byoc.runtime.functional.compile_definitions).
// The work limit of npu_submit, in estimated cycles (the analytic model equal to the RTL's
// cycles): the RTL simulator's default budget (hw/sim/npu_verilator.h), so a stream that runs
// away (a 16 MB stream of kicks) stops with CYCLE_LIMIT on both. NPU_FUNCTIONAL_MAX_CYCLES in
// the environment overrides it at run time.
#ifndef NPU_FUNCTIONAL_DEFAULT_MAX_CYCLES
#define NPU_FUNCTIONAL_DEFAULT_MAX_CYCLES 200000000ull
#endif
#ifndef NPU_FUNCTIONAL_SRAM_BYTES
#define NPU_FUNCTIONAL_SRAM_BYTES NPU_SRAM_BYTES
#endif
#ifndef NPU_FUNCTIONAL_ARRAY_ROWS
#define NPU_FUNCTIONAL_ARRAY_ROWS NPU_ARRAY_ROWS
#endif
#ifndef NPU_FUNCTIONAL_ARRAY_COLS
#define NPU_FUNCTIONAL_ARRAY_COLS NPU_ARRAY_COLS
#endif
#ifndef NPU_FUNCTIONAL_MAX_KERNEL
#define NPU_FUNCTIONAL_MAX_KERNEL NPU_MAX_KERNEL
#endif
#ifndef NPU_FUNCTIONAL_MAX_STRIDE
#define NPU_FUNCTIONAL_MAX_STRIDE NPU_MAX_STRIDE
#endif
#ifndef NPU_FUNCTIONAL_MAX_CHANNELS
#define NPU_FUNCTIONAL_MAX_CHANNELS NPU_MAX_CHANNELS
#endif
#ifndef NPU_FUNCTIONAL_MAX_POOL_WINDOW
#define NPU_FUNCTIONAL_MAX_POOL_WINDOW NPU_MAX_POOL_WINDOW
#endif
#ifndef NPU_FUNCTIONAL_MAX_POOL_STRIDE
#define NPU_FUNCTIONAL_MAX_POOL_STRIDE NPU_MAX_POOL_STRIDE
#endif
#ifndef NPU_FUNCTIONAL_MAX_MEAN_ELEMENTS
#define NPU_FUNCTIONAL_MAX_MEAN_ELEMENTS NPU_MAX_MEAN_ELEMENTS
#endif
#ifndef NPU_FUNCTIONAL_MAX_FC_FEATURES
#define NPU_FUNCTIONAL_MAX_FC_FEATURES NPU_MAX_FC_FEATURES
#endif
#ifndef NPU_FUNCTIONAL_DMA_BYTES_PER_CYCLE
#define NPU_FUNCTIONAL_DMA_BYTES_PER_CYCLE NPU_DMA_BYTES_PER_CYCLE
#endif
#ifndef NPU_FUNCTIONAL_DMA_QUEUE_DEPTH
#define NPU_FUNCTIONAL_DMA_QUEUE_DEPTH NPU_DMA_QUEUE_DEPTH
#endif
#ifndef NPU_FUNCTIONAL_FM_MEM_BYTES_PER_CYCLE
#define NPU_FUNCTIONAL_FM_MEM_BYTES_PER_CYCLE NPU_FM_MEM_BYTES_PER_CYCLE
#endif
#ifndef NPU_FUNCTIONAL_FM_MEM_CLOCK_DIVIDER
#define NPU_FUNCTIONAL_FM_MEM_CLOCK_DIVIDER NPU_FM_MEM_CLOCK_DIVIDER
#endif
#ifndef NPU_FUNCTIONAL_FM_MEM_READ_LATENCY
#define NPU_FUNCTIONAL_FM_MEM_READ_LATENCY NPU_FM_MEM_READ_LATENCY
#endif
#ifndef NPU_FUNCTIONAL_FM_MEM_WRITE_LATENCY
#define NPU_FUNCTIONAL_FM_MEM_WRITE_LATENCY NPU_FM_MEM_WRITE_LATENCY
#endif
#ifndef NPU_FUNCTIONAL_FM_MEM_BURST_BYTES
#define NPU_FUNCTIONAL_FM_MEM_BURST_BYTES NPU_FM_MEM_BURST_BYTES
#endif
#ifndef NPU_FUNCTIONAL_FM_MEM_MAX_READS
#define NPU_FUNCTIONAL_FM_MEM_MAX_READS NPU_FM_MEM_MAX_READS
#endif
#ifndef NPU_FUNCTIONAL_FM_MEM_MAX_WRITES
#define NPU_FUNCTIONAL_FM_MEM_MAX_WRITES NPU_FM_MEM_MAX_WRITES
#endif
#ifndef NPU_FUNCTIONAL_CONST_MEM_BYTES_PER_CYCLE
#define NPU_FUNCTIONAL_CONST_MEM_BYTES_PER_CYCLE NPU_CONST_MEM_BYTES_PER_CYCLE
#endif
#ifndef NPU_FUNCTIONAL_CONST_MEM_CLOCK_DIVIDER
#define NPU_FUNCTIONAL_CONST_MEM_CLOCK_DIVIDER NPU_CONST_MEM_CLOCK_DIVIDER
#endif
#ifndef NPU_FUNCTIONAL_CONST_MEM_READ_LATENCY
#define NPU_FUNCTIONAL_CONST_MEM_READ_LATENCY NPU_CONST_MEM_READ_LATENCY
#endif
#ifndef NPU_FUNCTIONAL_CONST_MEM_WRITE_LATENCY
#define NPU_FUNCTIONAL_CONST_MEM_WRITE_LATENCY NPU_CONST_MEM_WRITE_LATENCY
#endif
#ifndef NPU_FUNCTIONAL_CONST_MEM_BURST_BYTES
#define NPU_FUNCTIONAL_CONST_MEM_BURST_BYTES NPU_CONST_MEM_BURST_BYTES
#endif
#ifndef NPU_FUNCTIONAL_CONST_MEM_MAX_READS
#define NPU_FUNCTIONAL_CONST_MEM_MAX_READS NPU_CONST_MEM_MAX_READS
#endif
#ifndef NPU_FUNCTIONAL_CONST_MEM_MAX_WRITES
#define NPU_FUNCTIONAL_CONST_MEM_MAX_WRITES NPU_CONST_MEM_MAX_WRITES
#endif
#ifndef NPU_FUNCTIONAL_WEIGHT_DECODER_BYTES_PER_CYCLE
#define NPU_FUNCTIONAL_WEIGHT_DECODER_BYTES_PER_CYCLE NPU_WEIGHT_DECODER_BYTES_PER_CYCLE
#endif
#ifndef NPU_FUNCTIONAL_LAYERNORM_UNIT
#define NPU_FUNCTIONAL_LAYERNORM_UNIT NPU_LAYERNORM_UNIT
#endif

#ifdef __cplusplus
extern "C" {
#endif

// The functional model's own entry point, beyond the driver API: any hardware
// configuration (npu_byoc.hwconfig.HwConfig), the command and cycle budgets, and the number of
// kicks executed per opcode. npu_byoc.runtime.functional binds it with ctypes; npu_submit()
// calls it with the configuration of npu_isa.h. Keep in sync with _Config in functional.py.
// One external memory's timing (npu_byoc.arch.memory.Memory; HwConfig's <memory>_<field>).
typedef struct npu_memory {
    uint32_t bytes_per_cycle;  // bytes per memory clock cycle
    uint32_t clock_divider;    // core cycles per memory clock cycle
    uint32_t read_latency;     // core cycles before a read burst's data
    uint32_t write_latency;    // core cycles a write burst waits, as a read's latency
    uint32_t burst_bytes;      // a shorter contiguous run costs a whole burst
    uint32_t max_reads;        // read bursts in flight at most (1 .. 64)
    uint32_t max_writes;       // write bursts in flight at most (1 .. 64)
} npu_memory_t;

typedef struct npu_functional_config {
    uint64_t sram_bytes;  // 1 .. 2^32
    uint32_t array_rows;
    uint32_t array_cols;
    uint32_t max_kernel;
    uint32_t max_stride;
    uint32_t max_channels;
    uint32_t max_pool_window;
    uint32_t max_pool_stride;
    uint32_t max_mean_elements;
    uint32_t max_fc_features;
    uint32_t dma_bytes_per_cycle;  // 1 .. 64: bytes per DMA request (cycle) on a contiguous row
    uint32_t dma_queue_depth;      // 1 .. 16: background DMA transfers outstanding at most
    npu_memory_t fm_mem;           // the feature maps' memory (SCRATCH, IO*)
    npu_memory_t const_mem;        // the weights' memory (CONST)
    uint32_t weight_decoder_bytes_per_cycle;  // 0 .. 64: SRAM bytes the weight decoder writes a cycle (0: none)
    uint32_t layernorm_unit;  // 1: the LAYERNORM unit is present (0: LAYERNORM is an invalid opcode)
    uint64_t max_commands;    // CYCLE_LIMIT before the command after this many (golden model: 2^22)
    uint64_t max_cycles;      // CYCLE_LIMIT before the first command once the cycles exceed this
} npu_functional_config_t;

// As npu_submit() with configuration *config. kicks, if not NULL, receives 256 counters: the
// kicks executed per opcode (the golden model's RunStatus.kicks). A configuration the model
// cannot run (sram_bytes 0 or above 2^32, dma_bytes_per_cycle 0) gives NPU_STATUS_CYCLE_LIMIT at
// word 0 without executing anything. Host memory follows the stream's operands, not sram_bytes;
// when the host has none left for a kick, the run stops there with NPU_STATUS_OUT_OF_MEMORY.
uint32_t npu_functional_submit(const npu_functional_config_t *config, const uint32_t *stream, size_t n_words,
                               const npu_buffer_t *regions, size_t n_regions, npu_result_t *result,
                               uint64_t *kicks);

#ifdef __cplusplus
}  // extern "C"
#endif

// ---------------------------------------------------------------------------------------------
// Cycle model: npu_byoc/runtime/cycles.py states these formulas; tests check both agree.

// They are the RTL's cycles (hw/rtl, docs/cosim.md §5), exact.

static const uint64_t kDmaSetupCycles = 5;
static const uint64_t kAsyncIssueCycles = 3;  // cycles.ASYNC_ISSUE_CYCLES: a background DMA's start and checks
static const uint64_t kQueueHandoffCycles = 2;  // cycles.QUEUE_HANDOFF_CYCLES: a queued transfer's checks, done
static const uint64_t kDecodeHeaderCycles = 1;  // cycles.DECODE_HEADER_CYCLES: the decoder's header check
#define NPU_FUNCTIONAL_MAX_QUEUE_DEPTH 16  // hwconfig.FIELD_RANGES["dma_queue_depth"]
static const uint64_t kMacSetupCycles = 14;
static const uint64_t kMacWeightLanes = 4;
static const uint64_t kVectorSetupCycles = 8;
static const uint64_t kLutBytes = 256;
static const uint64_t kSoftmaxRecipCycles = 4;  // cycles.SOFTMAX_RECIP_CYCLES
static const uint64_t kLayernormRsqrtCycles = 100;  // cycles.LAYERNORM_RSQRT_CYCLES

static inline uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static inline uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// The cycles of `rows` rows of `row_bytes` contiguous bytes on memory `mem` through a DMA port
// of `port` bytes per request: d_N of npu_byoc.arch.memory (a row in bursts of up to
// kMaxBurstBeats requests, the first of a row charged at least burst_bytes, at most max_reads / max_writes in flight,
// the latency before each burst's data). The harness grants the RTL's requests at these cycles.
#define NPU_FUNCTIONAL_MAX_IN_FLIGHT 64  // config.FIELD_RANGES["*_max_reads"]
static const uint64_t kMaxBurstBeats = 256;  // memory.MAX_BURST_BEATS: requests of one burst at most

// T of a burst of `b` bytes: the port's requests, or the memory's cycles for the bytes charged
// (the first burst of a row at least burst_bytes).
static uint64_t burst_occupancy(const npu_memory_t *mem, uint64_t port, uint64_t b, bool first) {
    const uint64_t charged = first ? max_u64(b, mem->burst_bytes) : b;
    return max_u64(ceil_div(b, port), ceil_div((uint64_t)mem->clock_divider * charged, mem->bytes_per_cycle));
}

// The bursts in flight of one memory and direction over a run (memory.InFlight): d of the last
// `window` bursts, absolute cycles, a ring (ends[count % window] is the oldest once full).
typedef struct in_flight {
    uint64_t ends[NPU_FUNCTIONAL_MAX_IN_FLIGHT];
    uint64_t count;
} in_flight_t;

// d_{count-back}: a burst `back` before the next one (0 before the run's first)
static uint64_t ring_at(const in_flight_t *f, uint64_t window, uint64_t back) {  // d_{count-back}
    return back > f->count ? 0 : f->ends[(f->count - back) % window];
}

// The absolute end d_N of a transfer of `rows` rows of `row_bytes` contiguous bytes on `mem`
// through a port of `port` bytes per request (memory.run_bursts): a row in bursts of up to
// kMaxBurstBeats requests, the first charged at least burst_bytes; burst i starts at
// max(d_{i-1}, max(ready, d_{i-O}) + L), the first at max(origin, ...), with d_{i-O} from `f`
// (earlier transfers' bursts on this memory and direction: the engine issues a queued
// transfer's requests from `ready`, while the one before it streams). `f` is updated.
static uint64_t memory_end(in_flight_t *f, uint64_t rows, uint64_t row_bytes, uint64_t port, const npu_memory_t *mem,
                           bool write, uint64_t ready, uint64_t origin) {
    const uint64_t per_burst = kMaxBurstBeats * port;
    const uint64_t bursts = ceil_div(row_bytes, per_burst);
    const uint64_t t_first = burst_occupancy(mem, port, min_u64(per_burst, row_bytes), true);
    const uint64_t t_mid = burst_occupancy(mem, port, per_burst, false);
    const uint64_t t_last = bursts > 1 ? burst_occupancy(mem, port, row_bytes - (bursts - 1) * per_burst, false) : t_first;
    const uint64_t row = bursts > 1 ? t_first + (bursts - 2) * t_mid + t_last : t_first;
    const uint64_t t_min = bursts > 2 ? min_u64(t_first, min_u64(t_mid, t_last)) : min_u64(t_first, t_last);
    const uint64_t latency = write ? mem->write_latency : mem->read_latency;
    const uint64_t window = min_u64(max_u64(1, write ? mem->max_writes : mem->max_reads), NPU_FUNCTIONAL_MAX_IN_FLIGHT);
    const uint64_t n = rows * bursts;
    if (latency == 0) return origin + rows * row;  // nothing to hide: back to back
    const bool streaming = (window - 1) * t_min >= latency;
    uint64_t prev = origin, i = 0, periodic = 0;
#define T_OF(k) ((k) % bursts == 0 ? t_first : ((k) % bursts + 1 == bursts ? t_last : t_mid))
    while (i < n) {
        if (i >= window && streaming) {  // d_{i-1} >= d_{i-O} + L: back to back from here
            // d_k = prev + T_i + ... + T_k; only the last `window` are kept
            const uint64_t keep = n - window > i ? n - window : i;
            uint64_t k = i, d = prev;
            while (k < keep && k % bursts != 0) d += T_OF(k), ++k;  // the bursts before the kept
            d += (keep - k) / bursts * row;                            // ones: whole rows at once
            k += (keep - k) / bursts * bursts;
            while (k < keep) d += T_OF(k), ++k;
            for (; k < n; ++k) {
                d += T_OF(k);
                f->ends[f->count % window] = d;
                f->count += 1;
            }
            return d;
        }
        if (i >= window && periodic >= window) {  // d_j = d_{j-O} + L + T from here (one T)
            uint64_t snapshot[NPU_FUNCTIONAL_MAX_IN_FLIGHT], k, d = prev;
            for (k = 0; k < window; ++k) snapshot[k] = ring_at(f, window, window - k);  // d_{i-O+k}
            for (k = (n - window > i ? n - window : i); k < n; ++k) {
                const uint64_t p = k - (i - window);
                d = snapshot[p % window] + p / window * (latency + t_first);
                f->ends[f->count % window] = d;
                f->count += 1;
            }
            return d;
        }
        const uint64_t t = T_OF(i);
        const uint64_t oldest = ring_at(f, window, window);  // d_{i-O}
        const uint64_t d = max_u64(prev, max_u64(ready, oldest) + latency) + t;
        periodic = bursts == 1 && i >= window && d - oldest == latency + t ? periodic + 1 : 0;
        f->ends[f->count % window] = d;
        f->count += 1;
        prev = d;
        ++i;
    }
#undef T_OF
    return prev;
}

static bool memory_ok(const npu_memory_t *m) {
    return m->bytes_per_cycle != 0 && m->clock_divider != 0 && m->max_reads != 0 &&
           m->max_reads <= NPU_FUNCTIONAL_MAX_IN_FLIGHT && m->max_writes != 0 && m->max_writes <= NPU_FUNCTIONAL_MAX_IN_FLIGHT;
}

// Blocks of a MAC kick: `cols` columns of (pixel, channel block) items, pixel-major, at most
// kMacWeightLanes channel blocks per block (cycles.mac_blocks).
static uint64_t mac_blocks(uint64_t pixels, uint64_t channel_blocks, uint64_t cols) {
    if (pixels == 0 || channel_blocks == 0) return 0;
    uint64_t blocks = 0, p = 0, cb = 0;
    while (cb < channel_blocks) {
        uint64_t n = 0, used = 0;
        while (n < cols && cb < channel_blocks && used < kMacWeightLanes) {
            used += 1;
            const uint64_t take = min_u64(cols - n, pixels - p);
            n += take;
            p += take;
            if (p == pixels) {
                p = 0;
                cb += 1;
            }
        }
        blocks += 1;
    }
    return blocks;
}

// ---------------------------------------------------------------------------------------------
// Integer helpers: exact, no undefined or implementation-defined behaviour.

static const int64_t kInt32Min = -2147483647LL - 1;
static const int64_t kInt32Max = 2147483647LL;

// Two's-complement wrap of the low 32 bits to int32 (numerics._wrap_i32).
static inline int32_t wrap_i32(uint64_t bits) {
    const uint32_t u = ((uint32_t)bits);
    return u >= 0x80000000u ? ((int32_t)(((int64_t)u) - 0x100000000LL))
                            : ((int32_t)u);
}

static inline int32_t wrap_i32_signed(int64_t v) { return wrap_i32(((uint64_t)v)); }

// Arithmetic shift right (floor division by 2^e) of a signed value, 0 <= e <= 62.
static inline int64_t asr(int64_t x, int e) { return x >= 0 ? (x >> e) : ~((~x) >> e); }

// gemmlowp SaturatingRoundingDoublingHighMul (fixed_point.saturating_rounding_doubling_high_mul).
static inline int32_t srdhm(int32_t a, int32_t b) {
    if (a == kInt32Min && b == kInt32Min) return ((int32_t)kInt32Max);
    const int64_t p = ((int64_t)a) * ((int64_t)b);
    const int64_t nudge = p >= 0 ? (((int64_t)1) << 30) : (1 - (((int64_t)1) << 30));
    return ((int32_t)((p + nudge) / (((int64_t)1) << 31)));  // C division: toward zero
}

// gemmlowp RoundingDivideByPOT, 0 <= e <= 31 (fixed_point.rounding_divide_by_pot).
static inline int32_t rdbpot(int32_t x, int e) {
    const int64_t mask = (((int64_t)1) << e) - 1;
    const int64_t remainder = ((int64_t)(((uint64_t)(((int64_t)x))) &
                                                   ((uint64_t)mask)));
    const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return ((int32_t)(asr(x, e) + (remainder > threshold ? 1 : 0)));
}

// TFLite MultiplyByQuantizedMultiplier, double rounding; shift in [-31, 30], positive = left.
static inline int32_t mbqm(int32_t x, int32_t multiplier, int32_t shift) {
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    const int32_t shifted = wrap_i32(((uint64_t)(((int64_t)x))) << left);
    return rdbpot(srdhm(shifted, multiplier), right);
}

// An FC requantize record's output scale, mantissa * 2^exponent (numerics.pack_fc_scale):
// word1 = mantissa[31:0], word2 = mantissa[52:32] | exponent << 24. False when malformed.
static inline bool fc_record(int32_t word1, int32_t word2, uint64_t *mantissa, int *exponent) {
    const uint32_t hi = ((uint32_t)word2);
    *mantissa = ((uint64_t)(((uint32_t)word1))) | (((uint64_t)(hi & 0x1FFFFF)) << 32);
    *exponent = ((int8_t)(hi >> 24));
    return ((hi >> 21) & 7) == 0 && *exponent <= -53;
}

// round_half_away(fl64(x * mantissa * 2^exponent)): LiteRT's reference FULLY_CONNECTED output
// scaling in integers (numerics.fc_scale). exponent <= -53, mantissa < 2^53.
// 128-bit integers: a GCC / Clang extension (__extension__ keeps -pedantic quiet).
__extension__ typedef unsigned __int128 npu_u128;
__extension__ typedef __int128 npu_i128;

static inline int32_t fc_scale(int32_t x, uint64_t mantissa, int exponent) {
    const uint64_t a = x < 0 ? ((uint64_t)(-((int64_t)x))) : ((uint64_t)x);
    npu_u128 p = ((npu_u128)a) * mantissa;  // < 2^84
    if (p == 0) return 0;
    int bits = 0;
    for (npu_u128 t = p; t != 0; t >>= 1) ++bits;
    const int drop = bits - 53;
    if (drop > 0) {  // the double product: 53 significant bits, ties to even
        const npu_u128 q = p >> drop, rem = p & ((((npu_u128)1) << drop) - 1);
        const npu_u128 half = ((npu_u128)1) << (drop - 1);
        p = q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
        exponent += drop;
    }
    const int k = -exponent;  // >= 22; p < 2^54
    const uint64_t r = k >= 64 ? 0 : ((uint64_t)((p >> k) + ((p >> (k - 1)) & 1)));
    return ((int32_t)(x < 0 ? -((int64_t)r) : ((int64_t)r)));
}

static inline int32_t clamp_i32(int64_t v, int64_t lo, int64_t hi) {
    return ((int32_t)(v < lo ? lo : (v > hi ? hi : v)));
}

static inline uint64_t sat_mul(uint64_t a, uint64_t b) {
    if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
    return a * b;
}

static inline int64_t floor_div(int64_t a, int64_t b) {  // b > 0
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// The multiply-accumulate kernels. Products of int16 operands (x - zero_point in [-255, 255],
// weights in [-128, 127]) are exact in int32; sums are taken modulo 2^32 in uint32 (the NPU's
// wrapping int32 accumulator). The fixed-width inner blocks let the compiler use vector
// instructions at -O2.
#define kBlock 8

// Σ x[k]·w[k] for k < n, modulo 2^32.
static inline uint32_t dot(const int16_t *x, const int16_t *w, uint64_t n) {
    uint32_t lanes[kBlock] = {0};
    uint64_t k = 0;
    for (; k + kBlock <= n; k += kBlock)
        for (uint64_t j = 0; j < kBlock; ++j) lanes[j] += ((uint32_t)(x[k + j] * w[k + j]));
    uint32_t sum = 0;
    for (uint64_t j = 0; j < kBlock; ++j) sum += lanes[j];
    for (; k < n; ++k) sum += ((uint32_t)(x[k] * w[k]));
    return sum;
}

// acc[k] += x·w[k] for k < n, modulo 2^32.
static inline void scale_add(uint32_t *acc, int32_t x, const int16_t *w, uint64_t n) {
    uint64_t k = 0;
    for (; k + kBlock <= n; k += kBlock)
        for (uint64_t j = 0; j < kBlock; ++j) acc[k + j] += ((uint32_t)(x * w[k + j]));
    for (; k < n; ++k) acc[k] += ((uint32_t)(x * w[k]));
}

// acc[k] += x[k]·w[k] for k < n, modulo 2^32.
static inline void multiply_add(uint32_t *acc, const int16_t *x, const int16_t *w, uint64_t n) {
    uint64_t k = 0;
    for (; k + kBlock <= n; k += kBlock)
        for (uint64_t j = 0; j < kBlock; ++j) acc[k + j] += ((uint32_t)(x[k + j] * w[k + j]));
    for (; k < n; ++k) acc[k] += ((uint32_t)(x[k] * w[k]));
}

static inline int32_t read_le_i32(const uint8_t *p) {
    const uint32_t u = ((uint32_t)p[0]) | (((uint32_t)p[1]) << 8) |
                       (((uint32_t)p[2]) << 16) | (((uint32_t)p[3]) << 24);
    return wrap_i32(u);
}

// ---------------------------------------------------------------------------------------------
// SOFTMAX (npu_byoc/softmax.py): gemmlowp's fixed-point steps of TFLite's int8 reference kernel.
// The row sum is in [2^19, 2^31) (entry 0 reads as exp(0), bit 31 of every entry is ignored,
// OFM_C <= NPU_SOFTMAX_MAX_CHANNELS), so every step stays in the domain gemmlowp asserts.

// SaturatingRoundingMultiplyByPOT with a positive exponent: x * 2^e, saturated to int32.
static inline int32_t sat_left(int32_t x, int e) {
    const int64_t threshold = (((int64_t)1) << (31 - e)) - 1;
    if (x > threshold) return ((int32_t)kInt32Max);
    if (x < -threshold) return ((int32_t)kInt32Min);
    return ((int32_t)(((int64_t)x) * (((int64_t)1) << e)));
}

// The table entry of the difference k = max - x as the datapath reads it.
static inline int32_t softmax_entry(const uint8_t *table, uint32_t k) {
    if (k == 0) return ((int32_t)kInt32Max);
    return ((int32_t)(((uint32_t)(read_le_i32(table + 4 * k))) & 0x7FFFFFFFu));
}

// TFLite GetReciprocal of a Q12.19 sum in [2^19, 2^31): the Q0.31 scale and the output's
// rounding exponent 23 + (12 - clz(sum)).
static inline void softmax_reciprocal(int32_t sum, int32_t *scale, int *exponent) {
    int clz = 0;
    while (clz < 32 && !((((uint32_t)sum) << clz) & 0x80000000u)) ++clz;
    const uint32_t shifted = ((uint32_t)sum) << clz;  // in [2^31, 2^32)
    const int32_t half = ((int32_t)(shifted >> 1));        // RoundingHalfSum(shifted - 2^31, One)
    int32_t x = 1515870810 + srdhm(half, -1010580540);               // 48/17 - 32/17 * d, Q2.29
    for (int step = 0; step < 3; ++step) x = x + sat_left(srdhm(x, (((int32_t)1) << 29) - srdhm(half, x)), 2);
    *scale = sat_left(x, 1);
    *exponent = 35 - clz;
}

// RoundingDivideByPOT of a non-negative int32 by 2^e, 0 <= e <= 62.
static inline int64_t rdbpot_wide(int32_t x, int e) {
    const int64_t mask = (((int64_t)1) << e) - 1;
    return (((int64_t)x) >> e) + ((((int64_t)x) & mask) > (mask >> 1) ? 1 : 0);
}

static inline int8_t as_i8(uint8_t b) { return ((int8_t)(b >= 128 ? ((int)b) - 256 : b)); }
static inline uint8_t as_u8(int32_t v) { return ((uint8_t)(((uint32_t)v) & 0xFFu)); }

// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// The machine

typedef struct span {
    uint64_t lo;
    uint64_t hi;  // exclusive
} Span;

typedef struct shape {
    uint64_t h, w, c;
} Shape;

static inline uint64_t shape_elements(const Shape *s) { return sat_mul(sat_mul(s->h, s->w), s->c); }

typedef struct window {
    uint64_t kh, kw, sh, sw, pt, pl, pb, pr;
} Window;

typedef struct region {
    uint8_t *data;
    uint64_t size;
} Region;

// Host memory that grows to what the stream touches, never to sram_bytes up front: a 4 GiB SRAM
// whose stream uses 1 KiB costs about 1 KiB. New bytes are zero (the SRAM is zero-filled at the
// start of a stream, like the golden model's). grown_grow() is false when the host has no memory
// for n elements (the run then stops with OUT_OF_MEMORY).
typedef struct grown {
    void *data;
    uint64_t size;  // elements
    size_t elem;    // bytes per element
} Grown;

static bool grown_grow(Grown *g, uint64_t n, uint64_t cap) {
    if (n <= g->size) return true;
    // doubling (up to cap) keeps a stream that touches ever higher addresses linear
    const uint64_t want = max_u64(n, min_u64(cap, g->size * 2));
    if (want > SIZE_MAX / g->elem) return false;
    void *p = realloc(g->data, (size_t)want * g->elem);
    if (p == NULL) return false;
    g->data = p;
    memset((char *)p + (size_t)g->size * g->elem, 0, (size_t)(want - g->size) * g->elem);
    g->size = want;
    return true;
}

// The memory of one machine: the SRAM and the host-side scratch of the kernels, each as large
// as the operands of the stream's kicks so far (the SRAM: its highest byte touched).
typedef struct scratch {
    Grown sram;   // uint8_t: the SRAM bytes touched
    Grown x16;    // int16_t: an input operand as int16 (x - zero_point)
    Grown w16;    // int16_t: a weight operand as int16, output channel innermost
    Grown table;  // int32_t: requantize records (bias, multiplier, shift) per output channel
    Grown acc32;  // uint32_t: per-channel accumulators (CONV, DWCONV, FC)
    Grown acc64;  // int64_t: per-channel sums (pools, MEAN)
} Scratch;

static void scratch_init(Scratch *m) {
    const Grown none = {NULL, 0, 1};
    m->sram = none;
    m->x16 = none;
    m->x16.elem = sizeof(int16_t);
    m->w16 = none;
    m->w16.elem = sizeof(int16_t);
    m->table = none;
    m->table.elem = sizeof(int32_t);
    m->acc32 = none;
    m->acc32.elem = sizeof(uint32_t);
    m->acc64 = none;
    m->acc64.elem = sizeof(int64_t);
}

static void scratch_free(Scratch *m) {
    free(m->sram.data);
    free(m->x16.data);
    free(m->w16.data);
    free(m->table.data);
    free(m->acc32.data);
    free(m->acc64.data);
}

#define kOk ((uint32_t)NPU_STATUS_OK)
#define kOutOfMemory ((uint32_t)NPU_STATUS_OUT_OF_MEMORY)
#define kInvalidParameter ((uint32_t)NPU_STATUS_INVALID_PARAMETER)

static inline uint32_t param_check(bool ok) { return ok ? kOk : kInvalidParameter; }

// One machine: its configuration, memory, register file and bound regions.
typedef struct machine {
    const npu_functional_config_t *cfg;
    Scratch *m;
    uint32_t regs[256];
    Region regions[NPU_MAX_REGIONS];
    size_t at;          // the word of the command executing
    bool bad_code;      // a DMA_IN_DECODE's code was bad: the run ends with BAD_ENCODING at bad_index
    size_t bad_index;   // (the first one: the engine completes transfers in order)
} machine_t;

static void machine_bind(machine_t *mc, const npu_buffer_t *regions, size_t n_regions) {
    for (size_t r = 0; r < n_regions && r < NPU_MAX_REGIONS; ++r) {
        mc->regions[r].data = (uint8_t *)regions[r].data;
        mc->regions[r].size = regions[r].data != NULL ? (uint64_t)regions[r].size : 0;
    }
}

// Register file: 32-bit words, read unsigned or sign-extended.
static inline uint64_t reg_u(const machine_t *mc, uint32_t reg) { return mc->regs[reg]; }
static inline int64_t reg_s(const machine_t *mc, uint32_t reg) {
    const uint32_t v = mc->regs[reg];
    return v >= 0x80000000u ? (int64_t)v - 0x100000000LL : (int64_t)v;
}

// Checks (machine.py's helpers, same order). A span in range is backed by host memory
// from here on (pointers into the SRAM are taken after a kick's last sram_span).
static uint32_t sram_span(machine_t *mc, uint64_t addr, uint64_t nbytes, Span *out) {
    const uint64_t size = mc->cfg->sram_bytes;
    if (nbytes > size || addr > size - nbytes) return NPU_STATUS_ADDRESS_OUT_OF_RANGE;
    out->lo = addr;
    out->hi = addr + nbytes;
    return grown_grow(&mc->m->sram, out->hi, size) ? kOk : kOutOfMemory;
}
// Host scratch for a kick's operands of n elements (n <= sram_bytes: each is an SRAM operand).
static uint32_t scratch_for(machine_t *mc, Grown *buf, uint64_t n) {
    return grown_grow(buf, max_u64(n, 1), mc->cfg->sram_bytes) ? kOk : kOutOfMemory;
}
static inline bool overlaps(const Span *out, const Span *in) { return !(out->hi <= in->lo || in->hi <= out->lo); }
static uint32_t check_int8(const machine_t *mc, uint32_t reg) {
    return param_check(reg_s(mc, reg) >= -128 && reg_s(mc, reg) <= 127);
}
static uint32_t check_clamp(const machine_t *mc) {
    const int64_t lo = reg_s(mc, NPU_REG_ACT_MIN), hi = reg_s(mc, NPU_REG_ACT_MAX);
    return param_check(-128 <= lo && lo <= hi && hi <= 127);
}
static uint32_t check_shift(const machine_t *mc, uint32_t reg) {
    return param_check(reg_s(mc, reg) >= -31 && reg_s(mc, reg) <= 30);
}
static uint32_t read_shape(const machine_t *mc, uint32_t reg_h, Shape *out) {
    out->h = reg_u(mc, reg_h);
    out->w = reg_u(mc, reg_h + 1);
    out->c = reg_u(mc, reg_h + 2);
    return param_check(out->h >= 1 && out->w >= 1 && out->c >= 1);
}

static uint32_t execute(machine_t *mc, uint32_t op);
static uint32_t kick_dma(machine_t *mc, bool to_sram);
static uint32_t kick_dma_decode(machine_t *mc, bool background);
static uint32_t kick_mac(machine_t *mc, uint32_t opcode);
static uint32_t kick_pool(machine_t *mc, bool average);
static uint32_t kick_mean(machine_t *mc);
static uint32_t kick_rescaled(machine_t *mc, bool sqdiff);
static uint32_t kick_mul(machine_t *mc);
static uint32_t kick_lut(machine_t *mc);
static uint32_t kick_softmax(machine_t *mc);
static uint32_t kick_layernorm(machine_t *mc);
static uint32_t binary_registers(const machine_t *mc, Shape *out);
static uint32_t binary_operands(machine_t *mc, uint64_t nbytes, uint64_t channels, Span *a, Span *b, Span *out);
static uint64_t kick_cycles(const machine_t *mc, uint32_t opcode);

// ---------------------------------------------------------------------------------------------
// The command loop (Machine.run / Machine._command)

static void finish(npu_result_t *res, uint32_t status, size_t index) {
    res->status = status;
    res->word_index = (uint32_t)index;
}

// When each DMA transfer issued completes, in order (cycles.Timeline's e_j); only the last
// dma_queue_depth + 1 matter (at most dma_queue_depth are ever outstanding), kept in a ring.
#define kRing (NPU_FUNCTIONAL_MAX_QUEUE_DEPTH + 1)
typedef struct dma_ends {
    uint64_t ends[kRing];
    uint64_t issued;
} dma_ends_t;

// Timeline.drained: when at most `pending` transfers are outstanding.
static uint64_t drained(const dma_ends_t *q, uint64_t depth, uint64_t pending) {
    pending = min_u64(pending, depth);
    return q->issued > pending ? q->ends[(q->issued - 1 - pending) % kRing] : 0;
}

static uint32_t command(machine_t *mc, const uint32_t *w, size_t n, size_t i, uint32_t *op_out, size_t *fault_index);

static const uint64_t kDmaReadyCycles = 3;  // cycles.DMA_READY_CYCLES: a DMA's start and checks, then queued
static const uint64_t kDmaDoneCycles = kDmaSetupCycles - kDmaReadyCycles;  // the last write, done

// cycles.Timeline._copy: when the transfer of the DMA acting at `a` completes, `last` the
// completion of the transfer before it. Its requests may be issued once it is queued (`ready`);
// its copy starts when the mover takes it (`origin`: at once, or the cycle after `last`);
// flights[2 * const + write]: the bursts in flight of each memory and direction.
static uint64_t copy_end(const machine_t *mc, in_flight_t flights[4], uint32_t op, uint64_t a, uint64_t last) {
    const uint64_t ready = a + kDmaReadyCycles;
    const uint64_t origin = max_u64(ready, last + kDmaReadyCycles - kQueueHandoffCycles);
    const bool in_const = reg_u(mc, NPU_REG_DMA_EXT_REGION) == NPU_REGION_CONST;
    const npu_memory_t *mem = in_const ? &mc->cfg->const_mem : &mc->cfg->fm_mem;
    const uint64_t port = mc->cfg->dma_bytes_per_cycle;
    const uint64_t n0 = reg_u(mc, NPU_REG_DMA_N0), n1 = reg_u(mc, NPU_REG_DMA_N1), n2 = reg_u(mc, NPU_REG_DMA_N2);
    if (op == NPU_OP_DMA_IN_DECODE || op == NPU_OP_DMA_IN_DECODE_ASYNC) {  // load the code, check its header, then decode
        const uint64_t end = memory_end(&flights[2 * in_const], 1, n0, port, mem, false, ready, origin);
        const uint64_t rate = mc->cfg->weight_decoder_bytes_per_cycle ? mc->cfg->weight_decoder_bytes_per_cycle : 1;
        return end + kDecodeHeaderCycles + ceil_div(reg_u(mc, NPU_REG_DMA_DECODE_BYTES), rate) + kDmaDoneCycles;
    }
    const bool write = op == NPU_OP_DMA_OUT || op == NPU_OP_DMA_OUT_ASYNC;
    in_flight_t *f = &flights[2 * in_const + write];
    if (reg_s(mc, NPU_REG_DMA_STRIDE0) == 1) return memory_end(f, n1 * n2, n0, port, mem, write, ready, origin) + kDmaDoneCycles;
    return memory_end(f, n0 * n1 * n2, 1, port, mem, write, ready, origin) + kDmaDoneCycles;
}

static void machine_run_commands(machine_t *mc, const uint32_t *w, size_t n, npu_result_t *res, uint64_t *kicks);

// A run; a bad DMA_IN_DECODE code ends it with BAD_ENCODING at that transfer's word, whatever
// else happened after it (Machine._ended).
static void machine_run(machine_t *mc, const uint32_t *w, size_t n, npu_result_t *res, uint64_t *kicks) {
    machine_run_commands(mc, w, n, res, kicks);
    if (mc->bad_code) finish(res, NPU_STATUS_BAD_ENCODING, mc->bad_index);
}

static void machine_run_commands(machine_t *mc, const uint32_t *w, size_t n, npu_result_t *res, uint64_t *kicks) {
    res->status = kOk;
    res->word_index = 0;
    res->cycles = 0;
    res->commands = 0;
    // Header
    if (n >= 1 && w[0] != NPU_MAGIC) {
        finish(res, NPU_STATUS_BAD_MAGIC, 0);
        return;
    }
    if (n >= 2 && !((w[1] >> 16) == NPU_VERSION_MAJOR && (w[1] & 0xFFFFu) <= NPU_VERSION_MINOR)) {
        finish(res, NPU_STATUS_BAD_VERSION, 1);
        return;
    }
    if (n < NPU_HEADER_WORDS) {
        finish(res, NPU_STATUS_BAD_LENGTH, n);
        return;
    }
    if ((uint64_t)w[2] != (uint64_t)n) {
        finish(res, NPU_STATUS_BAD_LENGTH, 2);
        return;
    }
    uint64_t cycles = NPU_HEADER_WORDS;
    const uint64_t depth = mc->cfg->dma_queue_depth;
    dma_ends_t q;
    memset(&q, 0, sizeof q);
    in_flight_t flights[4];
    memset(flights, 0, sizeof flights);
    uint64_t commands = 0;
    size_t i = NPU_HEADER_WORDS;
    for (;;) {
        res->cycles = cycles;
        res->commands = commands;
        if (i >= n) {
            finish(res, NPU_STATUS_MISSING_STOP, n);
            return;
        }
        if (commands >= mc->cfg->max_commands || cycles > mc->cfg->max_cycles) {
            finish(res, NPU_STATUS_CYCLE_LIMIT, i);
            return;
        }
        uint32_t op = 0;
        size_t fault_index = i;
        const uint32_t status = command(mc, w, n, i, &op, &fault_index);
        if (status != kOk) {
            finish(res, status, fault_index);
            return;
        }
        commands += 1;
        const size_t words = op == NPU_OP_SET_REG ? 2 : 1;
        const bool async = op == NPU_OP_DMA_IN_ASYNC || op == NPU_OP_DMA_OUT_ASYNC || op == NPU_OP_DMA_IN_DECODE_ASYNC;
        const bool engine = async || op == NPU_OP_DMA_IN || op == NPU_OP_DMA_OUT || op == NPU_OP_DMA_IN_DECODE;
        // Commands that need the DMA queue wait for it (docs/isa.md, concurrency): a background
        // DMA for room, WAIT_DMA for DMA_WAIT_PENDING outstanding at most, the rest for none.
        if (async) cycles = max_u64(cycles, drained(&q, depth, depth - 1));
        else if (op == NPU_OP_WAIT_DMA) cycles = max_u64(cycles, drained(&q, depth, reg_u(mc, NPU_REG_DMA_WAIT_PENDING)));
        else if (engine || op == NPU_OP_STOP) cycles = max_u64(cycles, drained(&q, depth, 0));
        cycles += words;
        if (op == NPU_OP_STOP) {
            res->cycles = cycles;
            res->commands = commands;
            finish(res, kOk, i);
            return;
        }
        if (op != NPU_OP_SET_REG && op != NPU_OP_NOP) {
            if (engine) {  // queued behind a copy, it starts when that one completes
                const uint64_t end = copy_end(mc, flights, op, cycles - 1, drained(&q, depth, 0));
                q.ends[q.issued % kRing] = end;
                q.issued += 1;
                cycles = async ? cycles + kAsyncIssueCycles : end + 1;
            } else {
                cycles += kick_cycles(mc, op);
            }
            if (kicks != NULL) kicks[op] += 1;
        }
        i += words;
    }
}

static uint32_t command(machine_t *mc, const uint32_t *w, size_t n, size_t i, uint32_t *op_out, size_t *fault_index) {
    const uint32_t word = w[i];
    const uint32_t op = npu_opcode_of(word);
    const uint32_t reserved = word & (op == NPU_OP_SET_REG ? NPU_SET_REG_RESERVED_MASK : NPU_KICK_RESERVED_MASK);
    if (!npu_opcode_valid(op) || reserved != 0) return NPU_STATUS_INVALID_OPCODE;
    // the decode DMAs exist only on an NPU with a weight decoder
    if ((op == NPU_OP_DMA_IN_DECODE || op == NPU_OP_DMA_IN_DECODE_ASYNC) && mc->cfg->weight_decoder_bytes_per_cycle == 0)
        return NPU_STATUS_INVALID_OPCODE;
    if (op == NPU_OP_LAYERNORM && mc->cfg->layernorm_unit == 0) return NPU_STATUS_INVALID_OPCODE;  // no LAYERNORM unit
    *op_out = op;
    if (op == NPU_OP_SET_REG) {
        const uint32_t reg = npu_reg_of(word);
        if (!npu_reg_valid(reg)) return NPU_STATUS_INVALID_REGISTER;
        if (i + 1 >= n) {
            *fault_index = n;
            return NPU_STATUS_MISSING_STOP;
        }
        mc->regs[reg] = w[i + 1];
        return kOk;
    }
    if (op == NPU_OP_NOP || op == NPU_OP_STOP) return kOk;
    mc->at = i;
    return execute(mc, op);
}

static uint32_t execute(machine_t *mc, uint32_t op) {
    switch (op) {
    // Background DMAs copy at issue: the hardware's interlock holds a kick whose SRAM operands
    // meet a DMA in flight (docs/isa.md), which gives the same bytes for any stream.
    case NPU_OP_DMA_IN:
    case NPU_OP_DMA_IN_ASYNC: return kick_dma(mc, true);
    case NPU_OP_DMA_OUT:
    case NPU_OP_DMA_OUT_ASYNC: return kick_dma(mc, false);
    case NPU_OP_DMA_IN_DECODE: return kick_dma_decode(mc, false);
    case NPU_OP_DMA_IN_DECODE_ASYNC: return kick_dma_decode(mc, true);
    case NPU_OP_WAIT_DMA: return kOk;  // ordering only
    case NPU_OP_CONV:
    case NPU_OP_DWCONV:
    case NPU_OP_FC: return kick_mac(mc, op);
    case NPU_OP_AVGPOOL: return kick_pool(mc, true);
    case NPU_OP_MAXPOOL: return kick_pool(mc, false);
    case NPU_OP_MEAN: return kick_mean(mc);
    case NPU_OP_ADD: return kick_rescaled(mc, false);
    case NPU_OP_SQDIFF: return kick_rescaled(mc, true);
    case NPU_OP_MUL: return kick_mul(mc);
    case NPU_OP_LUT: return kick_lut(mc);
    case NPU_OP_SOFTMAX: return kick_softmax(mc);
    case NPU_OP_LAYERNORM: return kick_layernorm(mc);
    default: return NPU_STATUS_INVALID_OPCODE;  // not reached: command(mc) checked the opcode
    }
}

// ---------------------------------------------------------------------------------------------
// Shared checks

static uint32_t read_window(machine_t *mc, uint64_t max_kernel, uint64_t max_stride, Window *win) {
    win->kh = reg_u(mc, NPU_REG_KERNEL_H);
    win->kw = reg_u(mc, NPU_REG_KERNEL_W);
    win->sh = reg_u(mc, NPU_REG_STRIDE_H);
    win->sw = reg_u(mc, NPU_REG_STRIDE_W);
    win->pt = reg_u(mc, NPU_REG_PAD_TOP);
    win->pl = reg_u(mc, NPU_REG_PAD_LEFT);
    win->pb = reg_u(mc, NPU_REG_PAD_BOTTOM);
    win->pr = reg_u(mc, NPU_REG_PAD_RIGHT);
    if (!(win->kh >= 1 && win->kw >= 1 && win->kh <= max_kernel && win->kw <= max_kernel))
        return NPU_STATUS_INVALID_PARAMETER;
    if (!(win->sh >= 1 && win->sw >= 1 && win->sh <= max_stride && win->sw <= max_stride))
        return NPU_STATUS_INVALID_PARAMETER;
    if (!(win->pt < win->kh && win->pb < win->kh && win->pl < win->kw && win->pr < win->kw))
        return NPU_STATUS_INVALID_PARAMETER;
    return kOk;
}

static uint32_t check_ofm_size(const Shape *ifm, const Shape *ofm, const Window *win) {
    // Every term is below 2^33 here (shape registers are 32-bit, pads < kernel <= 2^32).
    const int64_t span_h = ((int64_t)(ifm->h + win->pt + win->pb)) - ((int64_t)win->kh);
    const int64_t span_w = ((int64_t)(ifm->w + win->pl + win->pr)) - ((int64_t)win->kw);
    const int64_t expect_h = floor_div(span_h, ((int64_t)win->sh)) + 1;
    const int64_t expect_w = floor_div(span_w, ((int64_t)win->sw)) + 1;
    if (((int64_t)ofm->h) != expect_h || ((int64_t)ofm->w) != expect_w)
        return NPU_STATUS_INVALID_PARAMETER;
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// DMA_IN, DMA_OUT

static uint32_t kick_dma(machine_t *mc, bool to_sram) {
    const uint64_t region = reg_u(mc, NPU_REG_DMA_EXT_REGION);
    if (region >= NPU_MAX_REGIONS || mc->regions[region].data == NULL) return NPU_STATUS_INVALID_REGION;
    if (!to_sram && region == NPU_REGION_CONST) return NPU_STATUS_INVALID_REGION;
    const uint64_t n2 = reg_u(mc, NPU_REG_DMA_N2), n1 = reg_u(mc, NPU_REG_DMA_N1), n0 = reg_u(mc, NPU_REG_DMA_N0);
    const int64_t s2 = reg_s(mc, NPU_REG_DMA_STRIDE2), s1 = reg_s(mc, NPU_REG_DMA_STRIDE1), s0 = reg_s(mc, NPU_REG_DMA_STRIDE0);
    if (n0 == 0 || n1 == 0 || n2 == 0) return NPU_STATUS_INVALID_PARAMETER;
    Span block;
    const uint32_t st = sram_span(mc, reg_u(mc, NPU_REG_DMA_SRAM_ADDR), sat_mul(sat_mul(n2, n1), n0), &block);
    if (st != kOk) return st;
    // Lowest and highest external byte touched, exactly (counts <= 2^32, |strides| <= 2^31).
    const uint64_t counts[3] = {n2, n1, n0};
    const int64_t strides[3] = {s2, s1, s0};
    const int64_t base = ((int64_t)(reg_u(mc, NPU_REG_DMA_EXT_ADDR)));
    npu_i128 first = base, last = base;
    for (int k = 0; k < 3; ++k) {
        const npu_i128 reach = ((npu_i128)(counts[k] - 1)) * ((npu_i128)strides[k]);
        if (reach < 0) first += reach;
        else last += reach;
    }
    const Region *buf = &mc->regions[region];
    if (first < 0 || last >= ((npu_i128)buf->size)) return NPU_STATUS_ADDRESS_OUT_OF_RANGE;
    // Every partial address lies in [first, last]: plain int64 arithmetic from here on.
    uint8_t *sram = ((uint8_t *)mc->m->sram.data) + block.lo;
    for (uint64_t i2 = 0; i2 < n2; ++i2) {
        for (uint64_t i1 = 0; i1 < n1; ++i1) {
            const int64_t row = base + ((int64_t)i2) * s2 + ((int64_t)i1) * s1;
            if (s0 == 1) {
                uint8_t *ext = buf->data + row;
                if (to_sram) memcpy(sram, ext, n0);
                else memcpy(ext, sram, n0);
                sram += n0;
            } else {
                for (uint64_t i0 = 0; i0 < n0; ++i0) {
                    uint8_t *ext = buf->data + (row + ((int64_t)i0) * s0);
                    if (to_sram) *sram = *ext;
                    else *ext = *sram;  // repeated addresses: the last write wins
                    ++sram;
                }
            }
        }
    }
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// DMA_IN_DECODE: the weight codec (npu_byoc/arch/weight_codec.py, docs/isa.md). The code is
// checked at the end of the transfer: a bad one leaves the transfer's SRAM bytes undefined (here
// unwritten) and ends the run with BAD_ENCODING at its word (machine_run), a synchronous
// transfer at once, a background one when the run ends.

// Bit `i` of the little-endian bit string at `p`.
static inline uint32_t bit_at(const uint8_t *p, uint64_t i) { return (p[i >> 3] >> (i & 7)) & 1u; }

static uint32_t decode_code(machine_t *mc, const uint8_t *enc, uint64_t n0, uint64_t n, const Span *block);

static uint32_t kick_dma_decode(machine_t *mc, bool background) {
    const uint64_t region = reg_u(mc, NPU_REG_DMA_EXT_REGION);
    if (region >= NPU_MAX_REGIONS || mc->regions[region].data == NULL) return NPU_STATUS_INVALID_REGION;
    const uint64_t n0 = reg_u(mc, NPU_REG_DMA_N0), n = reg_u(mc, NPU_REG_DMA_DECODE_BYTES);
    if (n0 == 0 || n == 0 || n0 > NPU_DECODE_BUFFER_BYTES) return NPU_STATUS_INVALID_PARAMETER;
    Span block;
    const uint32_t st = sram_span(mc, reg_u(mc, NPU_REG_DMA_SRAM_ADDR), n, &block);
    if (st != kOk) return st;
    const uint64_t base = reg_u(mc, NPU_REG_DMA_EXT_ADDR);
    const Region *buf = &mc->regions[region];
    if (base + n0 > buf->size) return NPU_STATUS_ADDRESS_OUT_OF_RANGE;  // both below 2^33
    if (decode_code(mc, buf->data + base, n0, n, &block) == kOk) return kOk;
    if (!mc->bad_code) {
        mc->bad_code = true;
        mc->bad_index = mc->at;
    }
    return background ? kOk : (uint32_t)NPU_STATUS_BAD_ENCODING;
}

// Decode the n0-byte code at `enc` into the n bytes of `block`: kOk or NPU_STATUS_BAD_ENCODING.
static uint32_t decode_code(machine_t *mc, const uint8_t *enc, uint64_t n0, uint64_t n, const Span *block) {
    if (n0 < 2) return NPU_STATUS_BAD_ENCODING;
    const uint32_t mode = enc[0], k = mode >> 4;
    const bool bitmap = (mode & 1u) != 0;
    if ((mode & 0x0Eu) != 0 || k > 8) return NPU_STATUS_BAD_ENCODING;
    const uint64_t palette = k ? ((uint64_t)enc[1]) + 1 : 0;
    if ((k == 0 && enc[1] != 0) || palette > (((uint64_t)1) << k)) return NPU_STATUS_BAD_ENCODING;
    uint64_t pos = 2;
    if (n0 < pos + palette) return NPU_STATUS_BAD_ENCODING;
    const uint8_t *table = enc + pos;
    pos += palette;
    const uint8_t *mask = NULL;
    uint64_t m = n;  // values: the bytes the bitmap marks non-zero
    if (bitmap) {
        const uint64_t nbm = ceil_div(n, 8);
        if (n0 < pos + nbm) return NPU_STATUS_BAD_ENCODING;
        mask = enc + pos;
        m = 0;
        for (uint64_t i = 0; i < nbm * 8; ++i) {
            if (bit_at(mask, i) && i >= n) return NPU_STATUS_BAD_ENCODING;  // padding bits set
            m += bit_at(mask, i);
        }
        pos += nbm;
    }
    const uint64_t nvalues = k ? ceil_div(m * k, 8) : m;
    if (n0 != pos + nvalues) return NPU_STATUS_BAD_ENCODING;  // too short (an overrun) or too long
    const uint8_t *values = enc + pos;
    for (uint64_t i = m * k; k && i < nvalues * 8; ++i)
        if (bit_at(values, i)) return NPU_STATUS_BAD_ENCODING;  // index padding bits set
    for (uint64_t j = 0; k && j < m; ++j) {
        uint64_t idx = 0;
        for (uint32_t b = 0; b < k; ++b) idx |= ((uint64_t)bit_at(values, j * k + b)) << b;
        if (idx >= palette) return NPU_STATUS_BAD_ENCODING;
    }
    uint8_t *sram = ((uint8_t *)mc->m->sram.data) + block->lo;
    for (uint64_t i = 0, j = 0; i < n; ++i) {
        if (mask != NULL && !bit_at(mask, i)) {
            sram[i] = 0;
            continue;
        }
        if (k == 0) {
            sram[i] = values[j];
        } else {
            uint64_t idx = 0;
            for (uint32_t b = 0; b < k; ++b) idx |= ((uint64_t)bit_at(values, j * k + b)) << b;
            sram[i] = table[idx];
        }
        ++j;
    }
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// CONV, DWCONV, FC: multiply-accumulate + per-channel requantize

// The per-channel requantize of a MAC kick's accumulators.
typedef struct requant {
    uint64_t channels;
    const int32_t *table;  // (bias, multiplier, shift) per channel, checked
    bool fc;               // FC records: LiteRT's double output scale (fc_record)
    int32_t zp_out;
    int64_t act_min, act_max;
} Requant;

// acc + bias, MBQM, + zero point, clamp: one output row of `channels` values.
static inline void requantize(const Requant *rq, const uint32_t *acc, uint8_t *out) {
    for (uint64_t c = 0; c < rq->channels; ++c) {
        const int32_t *rec = rq->table + 3 * c;
        const int32_t biased = wrap_i32((uint64_t)acc[c] + (uint32_t)rec[0]);
        int32_t scaled;
        if (rq->fc) {
            uint64_t mantissa;
            int exponent;
            fc_record(rec[1], rec[2], &mantissa, &exponent);
            scaled = fc_scale(biased, mantissa, exponent);
        } else {
            scaled = mbqm(biased, rec[1], rec[2]);
        }
        const int64_t v = (int64_t)scaled + rq->zp_out;
        out[c] = as_u8(clamp_i32(v, rq->act_min, rq->act_max));
    }
}

static uint32_t kick_mac(machine_t *mc, uint32_t opcode) {
    Shape ifm, ofm;
    uint32_t st;
    if ((st = read_shape(mc, NPU_REG_IFM_H, &ifm)) != kOk) return st;
    if ((st = read_shape(mc, NPU_REG_OFM_H, &ofm)) != kOk) return st;
    if ((st = check_int8(mc, NPU_REG_IFM_ZERO_POINT)) != kOk) return st;
    if ((st = check_int8(mc, NPU_REG_OFM_ZERO_POINT)) != kOk) return st;
    if ((st = check_clamp(mc)) != kOk) return st;
    if (ifm.c > mc->cfg->max_channels || ofm.c > mc->cfg->max_channels) return NPU_STATUS_INVALID_PARAMETER;
    Window win;
    uint64_t weight_bytes;
    if (opcode == NPU_OP_FC) {
        win.kh = win.kw = win.sh = win.sw = 1;
        if (!(ifm.h == 1 && ofm.h == 1 && ifm.w == ofm.w)) return NPU_STATUS_INVALID_PARAMETER;
        if (ifm.c > mc->cfg->max_fc_features || ofm.c > mc->cfg->max_fc_features) return NPU_STATUS_INVALID_PARAMETER;
        weight_bytes = sat_mul(ofm.c, ifm.c);
    } else {
        if ((st = read_window(mc, mc->cfg->max_kernel, mc->cfg->max_stride, &win)) != kOk) return st;
        if ((st = check_ofm_size(&ifm, &ofm, &win)) != kOk) return st;
        if (opcode == NPU_OP_DWCONV) {
            if (ifm.c != ofm.c) return NPU_STATUS_INVALID_PARAMETER;
            weight_bytes = sat_mul(sat_mul(ofm.c, win.kh), win.kw);
        } else {
            weight_bytes = sat_mul(sat_mul(sat_mul(ofm.c, win.kh), win.kw), ifm.c);
        }
    }
    if (reg_u(mc, NPU_REG_REQUANT_ADDR) % 4 != 0) return NPU_STATUS_INVALID_PARAMETER;
    Span in_span, w_span, rq_span, out_span;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_IFM_ADDR), shape_elements(&ifm), &in_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_WEIGHT_ADDR), weight_bytes, &w_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_REQUANT_ADDR), sat_mul(ofm.c, NPU_REQUANT_RECORD_BYTES), &rq_span)) != kOk)
        return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_OFM_ADDR), shape_elements(&ofm), &out_span)) != kOk) return st;
    if (overlaps(&out_span, &in_span) || overlaps(&out_span, &w_span) || overlaps(&out_span, &rq_span))
        return NPU_STATUS_INVALID_PARAMETER;
    if ((st = scratch_for(mc, &mc->m->table, 3 * ofm.c)) != kOk || (st = scratch_for(mc, &mc->m->x16, in_span.hi - in_span.lo)) != kOk ||
        (st = scratch_for(mc, &mc->m->w16, w_span.hi - w_span.lo)) != kOk || (st = scratch_for(mc, &mc->m->acc32, ofm.c)) != kOk)
        return st;
    // The requantize table: (bias, multiplier, shift) per output channel; every shift checked
    // before anything is written.
    const uint64_t channels = ofm.c;  // <= sram_bytes / 12: the table fits the SRAM
    int32_t *const table = ((int32_t *)mc->m->table.data);
    for (uint64_t c = 0; c < channels; ++c) {
        const uint8_t *rec = ((uint8_t *)mc->m->sram.data) + rq_span.lo + c * NPU_REQUANT_RECORD_BYTES;
        table[3 * c + 0] = read_le_i32(rec);
        table[3 * c + 1] = read_le_i32(rec + 4);
        table[3 * c + 2] = read_le_i32(rec + 8);
        uint64_t mantissa;
        int exponent;
        if (opcode == NPU_OP_FC ? !fc_record(table[3 * c + 1], table[3 * c + 2], &mantissa, &exponent)
                                : (table[3 * c + 2] < -31 || table[3 * c + 2] > 30))
            return NPU_STATUS_INVALID_PARAMETER;
    }

    // Operands as int16: x - zero_point (padding then contributes 0 and is skipped), weights.
    const int32_t zp_in = ((int32_t)(reg_s(mc, NPU_REG_IFM_ZERO_POINT)));
    const int32_t zp_out = ((int32_t)(reg_s(mc, NPU_REG_OFM_ZERO_POINT)));
    const int64_t act_min = reg_s(mc, NPU_REG_ACT_MIN), act_max = reg_s(mc, NPU_REG_ACT_MAX);
    const uint8_t *x8 = ((uint8_t *)mc->m->sram.data) + in_span.lo;
    for (uint64_t k = 0, n = in_span.hi - in_span.lo; k < n; ++k)
        ((int16_t *)mc->m->x16.data)[k] = ((int16_t)(as_i8(x8[k]) - zp_in));
    // Weights with the output channel innermost, so that one input value updates a contiguous
    // run of accumulators: CONV [OC][KH][KW][IC] -> [KH][KW][IC][OC], DWCONV [C][KH][KW] ->
    // [KH][KW][C]. FC keeps [OC][IC] (long dot products along IC).
    const uint8_t *w8 = ((uint8_t *)mc->m->sram.data) + w_span.lo;
    const uint64_t per_channel = (w_span.hi - w_span.lo) / channels;  // KH·KW·IC, KH·KW or IC
    if (opcode == NPU_OP_FC) {
        for (uint64_t k = 0, n = w_span.hi - w_span.lo; k < n; ++k) ((int16_t *)mc->m->w16.data)[k] = as_i8(w8[k]);
    } else {
        for (uint64_t c = 0; c < channels; ++c)
            for (uint64_t t = 0; t < per_channel; ++t) ((int16_t *)mc->m->w16.data)[t * channels + c] = as_i8(w8[c * per_channel + t]);
    }
    const Requant rq = {channels, table, opcode == NPU_OP_FC, zp_out, act_min, act_max};
    uint8_t *out = ((uint8_t *)mc->m->sram.data) + out_span.lo;
    const int16_t *x16 = ((int16_t *)mc->m->x16.data);
    const int16_t *w16 = ((int16_t *)mc->m->w16.data);
    uint32_t *acc = ((uint32_t *)mc->m->acc32.data);  // one accumulator per output channel

    if (opcode == NPU_OP_FC) {
        const uint64_t rows = ofm.w, depth = ifm.c;
        for (uint64_t r = 0; r < rows; ++r, out += channels) {
            for (uint64_t c = 0; c < channels; ++c) acc[c] = dot(x16 + r * depth, w16 + c * depth, depth);
            requantize(&rq, acc, out);
        }
        return kOk;
    }

    // CONV / DWCONV: the valid taps of output (oy, ox) are ky in [ky0, ky1), kx in [kx0, kx1).
    const int64_t H = ((int64_t)ifm.h), W = ((int64_t)ifm.w);
    const int64_t KW = ((int64_t)win.kw);
    const uint64_t C = ifm.c;
    for (uint64_t oy = 0; oy < ofm.h; ++oy) {
        const int64_t y0 = ((int64_t)(oy * win.sh)) - ((int64_t)win.pt);
        const int64_t ky0 = y0 < 0 ? -y0 : 0;
        const int64_t ky1 = (H - y0 < ((int64_t)win.kh)) ? H - y0 : ((int64_t)win.kh);
        for (uint64_t ox = 0; ox < ofm.w; ++ox, out += channels) {
            const int64_t x0 = ((int64_t)(ox * win.sw)) - ((int64_t)win.pl);
            const int64_t kx0 = x0 < 0 ? -x0 : 0, kx1 = (W - x0 < KW) ? W - x0 : KW;
            for (uint64_t c = 0; c < channels; ++c) acc[c] = 0;
            for (int64_t ky = ky0; ky < ky1; ++ky) {
                for (int64_t kx = kx0; kx < kx1; ++kx) {
                    const int16_t *xr = x16 + ((uint64_t)((y0 + ky) * W + x0 + kx)) * C;
                    const uint64_t tap = ((uint64_t)(ky * KW + kx));
                    if (opcode == NPU_OP_CONV) {
                        const int16_t *wr = w16 + tap * C * channels;
                        for (uint64_t ic = 0; ic < C; ++ic) scale_add(acc, xr[ic], wr + ic * channels, channels);
                    } else {
                        multiply_add(acc, xr, w16 + tap * channels, channels);
                    }
                }
            }
            requantize(&rq, acc, out);
        }
    }
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// AVGPOOL, MAXPOOL

static uint32_t kick_pool(machine_t *mc, bool average) {
    Shape ifm, ofm;
    Window win;
    uint32_t st;
    if ((st = read_shape(mc, NPU_REG_IFM_H, &ifm)) != kOk) return st;
    if ((st = read_shape(mc, NPU_REG_OFM_H, &ofm)) != kOk) return st;
    if ((st = check_clamp(mc)) != kOk) return st;
    if ((st = read_window(mc, mc->cfg->max_pool_window, mc->cfg->max_pool_stride, &win)) != kOk) return st;
    if ((st = check_ofm_size(&ifm, &ofm, &win)) != kOk) return st;
    if (ifm.c != ofm.c) return NPU_STATUS_INVALID_PARAMETER;
    Span in_span, out_span;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_IFM_ADDR), shape_elements(&ifm), &in_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_OFM_ADDR), shape_elements(&ofm), &out_span)) != kOk) return st;
    if (overlaps(&out_span, &in_span)) return NPU_STATUS_INVALID_PARAMETER;
    if ((st = scratch_for(mc, &mc->m->acc64, ifm.c)) != kOk) return st;

    const int64_t act_min = reg_s(mc, NPU_REG_ACT_MIN), act_max = reg_s(mc, NPU_REG_ACT_MAX);
    const int64_t H = ((int64_t)ifm.h), W = ((int64_t)ifm.w);
    const int64_t KH = ((int64_t)win.kh), KW = ((int64_t)win.kw);
    const uint64_t C = ifm.c;
    const uint8_t *x = ((uint8_t *)mc->m->sram.data) + in_span.lo;
    uint8_t *out = ((uint8_t *)mc->m->sram.data) + out_span.lo;
    int64_t *acc = ((int64_t *)mc->m->acc64.data);  // one per channel
    for (uint64_t oy = 0; oy < ofm.h; ++oy) {
        const int64_t y0 = ((int64_t)(oy * win.sh)) - ((int64_t)win.pt);
        const int64_t ky0 = y0 < 0 ? -y0 : 0, ky1 = (H - y0 < KH) ? H - y0 : KH;
        for (uint64_t ox = 0; ox < ofm.w; ++ox) {
            const int64_t x0 = ((int64_t)(ox * win.sw)) - ((int64_t)win.pl);
            const int64_t kx0 = x0 < 0 ? -x0 : 0, kx1 = (W - x0 < KW) ? W - x0 : KW;
            // The window is never empty (pads < kernel and the OFM size formula hold); n >= 1
            // is kept explicit all the same, so that no division by zero can exist.
            const int64_t n = ky1 > ky0 && kx1 > kx0 ? (ky1 - ky0) * (kx1 - kx0) : 1;
            for (uint64_t c = 0; c < C; ++c) acc[c] = average ? 0 : -128;
            for (int64_t ky = ky0; ky < ky1; ++ky) {
                for (int64_t kx = kx0; kx < kx1; ++kx) {
                    const uint8_t *xr = x + ((uint64_t)((y0 + ky) * W + x0 + kx)) * C;
                    if (average) {
                        for (uint64_t c = 0; c < C; ++c) acc[c] += as_i8(xr[c]);  // |sum| <= 128 * 256
                    } else {
                        for (uint64_t c = 0; c < C; ++c) {
                            const int32_t v = as_i8(xr[c]);
                            acc[c] = v > acc[c] ? v : acc[c];
                        }
                    }
                }
            }
            for (uint64_t c = 0; c < C; ++c) {
                int64_t v = acc[c];
                if (average) {  // round half away from zero
                    const int64_t half = n / 2;
                    v = v > 0 ? (v + half) / n : -((-v + half) / n);  // C division
                }
                *out++ = as_u8(clamp_i32(v, act_min, act_max));
            }
        }
    }
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// MEAN

static uint32_t kick_mean(machine_t *mc) {
    Shape ifm;
    uint32_t st;
    if ((st = read_shape(mc, NPU_REG_IFM_H, &ifm)) != kOk) return st;
    if ((st = check_int8(mc, NPU_REG_IFM_ZERO_POINT)) != kOk) return st;
    if ((st = check_int8(mc, NPU_REG_OFM_ZERO_POINT)) != kOk) return st;
    if ((st = check_clamp(mc)) != kOk) return st;
    if ((st = check_shift(mc, NPU_REG_OFM_SHIFT)) != kOk) return st;
    const uint64_t n = sat_mul(ifm.h, ifm.w);
    if (n > mc->cfg->max_mean_elements) return NPU_STATUS_INVALID_PARAMETER;
    Span in_span, out_span;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_IFM_ADDR), shape_elements(&ifm), &in_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_OFM_ADDR), ifm.c, &out_span)) != kOk) return st;
    if (overlaps(&out_span, &in_span)) return NPU_STATUS_INVALID_PARAMETER;
    if ((st = scratch_for(mc, &mc->m->acc64, ifm.c)) != kOk) return st;

    const int64_t zp_in = reg_s(mc, NPU_REG_IFM_ZERO_POINT), zp_out = reg_s(mc, NPU_REG_OFM_ZERO_POINT);
    const int32_t multiplier = ((int32_t)(reg_s(mc, NPU_REG_OFM_MULTIPLIER)));
    const int32_t shift = ((int32_t)(reg_s(mc, NPU_REG_OFM_SHIFT)));
    const int64_t act_min = reg_s(mc, NPU_REG_ACT_MIN), act_max = reg_s(mc, NPU_REG_ACT_MAX);
    const uint64_t C = ifm.c;
    const uint8_t *x = ((uint8_t *)mc->m->sram.data) + in_span.lo;
    int64_t *total = ((int64_t *)mc->m->acc64.data);  // one per channel; n * C <= 2^32 elements: |total| < 2^39
    for (uint64_t c = 0; c < C; ++c) total[c] = 0;
    for (uint64_t p = 0; p < n; ++p) {
        const uint8_t *xr = x + p * C;
        for (uint64_t c = 0; c < C; ++c) total[c] += as_i8(xr[c]);
    }
    uint8_t *out = ((uint8_t *)mc->m->sram.data) + out_span.lo;
    for (uint64_t c = 0; c < C; ++c) {
        const int32_t acc = wrap_i32_signed(((int64_t)(wrap_i32_signed(total[c]))) -
                                            zp_in * ((int64_t)n));
        int64_t v = ((int64_t)(mbqm(acc, multiplier, shift))) + zp_out;
        v = clamp_i32(v, -128, 127);
        out[c] = as_u8(clamp_i32(v, act_min, act_max));
    }
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// ADD (reference_integer_ops::AddFunc) and SQDIFF (LiteRT's int8 SquaredDifference): one datapath,
// both inputs shifted and rescaled; ADD sums them, SQDIFF squares their difference.

static uint32_t kick_rescaled(machine_t *mc, bool sqdiff) {
    Shape shp;
    uint32_t st;
    if ((st = binary_registers(mc, &shp)) != kOk) return st;
    const int64_t left_shift = reg_s(mc, NPU_REG_LEFT_SHIFT);
    if (!(left_shift >= 0 && left_shift <= 31)) return NPU_STATUS_INVALID_PARAMETER;
    if ((st = check_shift(mc, NPU_REG_IFM_SHIFT)) != kOk) return st;
    if ((st = check_shift(mc, NPU_REG_IFM2_SHIFT)) != kOk) return st;
    if ((st = check_shift(mc, NPU_REG_OFM_SHIFT)) != kOk) return st;
    const uint64_t nbytes = shape_elements(&shp);
    Span a_span, b_span, out_span;
    if ((st = binary_operands(mc, nbytes, shp.c, &a_span, &b_span, &out_span)) != kOk) return st;
    const uint64_t b_mod = reg_u(mc, NPU_REG_IFM2_BROADCAST) ? shp.c : nbytes;  // broadcast: channel k % C

    const int64_t zp1 = reg_s(mc, NPU_REG_IFM_ZERO_POINT), zp2 = reg_s(mc, NPU_REG_IFM2_ZERO_POINT);
    const int64_t zp_out = reg_s(mc, NPU_REG_OFM_ZERO_POINT);
    const int32_t m1 = ((int32_t)(reg_s(mc, NPU_REG_IFM_MULTIPLIER)));
    const int32_t s1 = ((int32_t)(reg_s(mc, NPU_REG_IFM_SHIFT)));
    const int32_t m2 = ((int32_t)(reg_s(mc, NPU_REG_IFM2_MULTIPLIER)));
    const int32_t s2 = ((int32_t)(reg_s(mc, NPU_REG_IFM2_SHIFT)));
    const int32_t mo = ((int32_t)(reg_s(mc, NPU_REG_OFM_MULTIPLIER)));
    const int32_t so = ((int32_t)(reg_s(mc, NPU_REG_OFM_SHIFT)));
    const int ls = ((int)left_shift);
    const int64_t act_min = reg_s(mc, NPU_REG_ACT_MIN), act_max = reg_s(mc, NPU_REG_ACT_MAX);
    const uint8_t *a = ((uint8_t *)mc->m->sram.data) + a_span.lo;
    const uint8_t *b = ((uint8_t *)mc->m->sram.data) + b_span.lo;
    uint8_t *out = ((uint8_t *)mc->m->sram.data) + out_span.lo;
    for (uint64_t k = 0; k < nbytes; ++k) {
        const int32_t sa = wrap_i32(((uint64_t)(as_i8(a[k]) - zp1)) << ls);
        const int32_t sb = wrap_i32(((uint64_t)(as_i8(b[k % b_mod]) - zp2)) << ls);
        const int32_t ra = mbqm(sa, m1, s1);
        const int32_t rb = mbqm(sb, m2, s2);
        const int32_t diff = wrap_i32_signed(((int64_t)ra) - rb);
        const int32_t raw = sqdiff ? wrap_i32_signed(((int64_t)diff) * diff) : wrap_i32_signed(((int64_t)ra) + rb);
        const int64_t v = ((int64_t)(mbqm(raw, mo, so))) + zp_out;
        out[k] = as_u8(clamp_i32(v, act_min, act_max));
    }
    return kOk;
}

// ADD, SQDIFF, MUL: the OFM shape, the three zero points and the clamp.
static uint32_t binary_registers(const machine_t *mc, Shape *out) {
    uint32_t st;
    if ((st = read_shape(mc, NPU_REG_OFM_H, out)) != kOk) return st;
    if ((st = check_int8(mc, NPU_REG_IFM_ZERO_POINT)) != kOk) return st;
    if ((st = check_int8(mc, NPU_REG_IFM2_ZERO_POINT)) != kOk) return st;
    if ((st = check_int8(mc, NPU_REG_OFM_ZERO_POINT)) != kOk) return st;
    return check_clamp(mc);
}

// ADD, SQDIFF, MUL: IFM2_BROADCAST is 0 (IFM2 has the OFM shape) or 1 (IFM2 is OFM_C bytes); then the
// operand ranges in order (IFM, IFM2, OFM) and the output overlapping an input.
static uint32_t binary_operands(machine_t *mc, uint64_t nbytes, uint64_t channels, Span *a, Span *b, Span *out) {
    const uint64_t broadcast = reg_u(mc, NPU_REG_IFM2_BROADCAST);
    if (broadcast > 1) return NPU_STATUS_INVALID_PARAMETER;
    uint32_t st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_IFM_ADDR), nbytes, a)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_IFM2_ADDR), broadcast ? channels : nbytes, b)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_OFM_ADDR), nbytes, out)) != kOk) return st;
    if (overlaps(out, a) || overlaps(out, b)) return NPU_STATUS_INVALID_PARAMETER;
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// MUL (reference_integer_ops::MulElementwise)

static uint32_t kick_mul(machine_t *mc) {
    Shape shp;
    uint32_t st;
    if ((st = binary_registers(mc, &shp)) != kOk) return st;
    if ((st = check_shift(mc, NPU_REG_OFM_SHIFT)) != kOk) return st;
    const uint64_t nbytes = shape_elements(&shp);
    Span a_span, b_span, out_span;
    if ((st = binary_operands(mc, nbytes, shp.c, &a_span, &b_span, &out_span)) != kOk) return st;
    const uint64_t b_mod = reg_u(mc, NPU_REG_IFM2_BROADCAST) ? shp.c : nbytes;

    const int64_t zp1 = reg_s(mc, NPU_REG_IFM_ZERO_POINT), zp2 = reg_s(mc, NPU_REG_IFM2_ZERO_POINT);
    const int64_t zp_out = reg_s(mc, NPU_REG_OFM_ZERO_POINT);
    const int32_t mo = ((int32_t)(reg_s(mc, NPU_REG_OFM_MULTIPLIER)));
    const int32_t so = ((int32_t)(reg_s(mc, NPU_REG_OFM_SHIFT)));
    const int64_t act_min = reg_s(mc, NPU_REG_ACT_MIN), act_max = reg_s(mc, NPU_REG_ACT_MAX);
    const uint8_t *a = ((uint8_t *)mc->m->sram.data) + a_span.lo;
    const uint8_t *b = ((uint8_t *)mc->m->sram.data) + b_span.lo;
    uint8_t *out = ((uint8_t *)mc->m->sram.data) + out_span.lo;
    for (uint64_t k = 0; k < nbytes; ++k) {
        // |(x - zp1)(y - zp2)| <= 255^2: exact in int32
        const int32_t prod = ((int32_t)((as_i8(a[k]) - zp1) * (as_i8(b[k % b_mod]) - zp2)));
        const int64_t v = ((int64_t)(mbqm(prod, mo, so))) + zp_out;
        out[k] = as_u8(clamp_i32(v, act_min, act_max));
    }
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// LUT

static uint32_t kick_lut(machine_t *mc) {
    Shape shp;
    uint32_t st;
    if ((st = read_shape(mc, NPU_REG_OFM_H, &shp)) != kOk) return st;
    const uint64_t nbytes = shape_elements(&shp);
    Span in_span, table_span, out_span;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_IFM_ADDR), nbytes, &in_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_LUT_ADDR), 256, &table_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_OFM_ADDR), nbytes, &out_span)) != kOk) return st;
    if (overlaps(&out_span, &in_span) || overlaps(&out_span, &table_span)) return NPU_STATUS_INVALID_PARAMETER;
    const uint8_t *x = ((uint8_t *)mc->m->sram.data) + in_span.lo;
    const uint8_t *table = ((uint8_t *)mc->m->sram.data) + table_span.lo;
    uint8_t *out = ((uint8_t *)mc->m->sram.data) + out_span.lo;
    for (uint64_t k = 0; k < nbytes; ++k) out[k] = table[x[k] ^ 0x80u];  // entry x + 128 of int8 x
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// SOFTMAX: per row of OFM_C bytes, max, sum of entries / 2^12, reciprocal, scaled entries

static uint32_t kick_softmax(machine_t *mc) {
    Shape shp;
    uint32_t st;
    if ((st = read_shape(mc, NPU_REG_OFM_H, &shp)) != kOk) return st;
    if (shp.c > NPU_SOFTMAX_MAX_CHANNELS || reg_u(mc, NPU_REG_LUT_ADDR) % 4 != 0) return NPU_STATUS_INVALID_PARAMETER;
    const uint64_t nbytes = shape_elements(&shp);
    Span in_span, table_span, out_span;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_IFM_ADDR), nbytes, &in_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_LUT_ADDR), NPU_SOFTMAX_TABLE_BYTES, &table_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_OFM_ADDR), nbytes, &out_span)) != kOk) return st;
    if (overlaps(&out_span, &in_span) || overlaps(&out_span, &table_span)) return NPU_STATUS_INVALID_PARAMETER;
    const uint8_t *table = ((uint8_t *)mc->m->sram.data) + table_span.lo;
    const uint64_t channels = shp.c;
    for (uint64_t row = 0; row < nbytes / channels; ++row) {
        const uint8_t *x = ((uint8_t *)mc->m->sram.data) + in_span.lo + row * channels;
        uint8_t *out = ((uint8_t *)mc->m->sram.data) + out_span.lo + row * channels;
        int32_t max = -128;
        for (uint64_t k = 0; k < channels; ++k) max = (as_i8(x[k]) > max ? as_i8(x[k]) : max);
        int32_t sum = 0;  // < 2^31: at most NPU_SOFTMAX_MAX_CHANNELS terms of at most 2^19
        for (uint64_t k = 0; k < channels; ++k)
            sum += rdbpot(softmax_entry(table, ((uint32_t)(max - as_i8(x[k])))), 12);
        int32_t scale;
        int exponent;
        softmax_reciprocal(sum, &scale, &exponent);
        for (uint64_t k = 0; k < channels; ++k) {
            const int32_t e = softmax_entry(table, ((uint32_t)(max - as_i8(x[k]))));
            out[k] = as_u8(clamp_i32(rdbpot_wide(srdhm(scale, e), exponent) - 128, -128, 127));
        }
    }
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// LAYERNORM (npu_byoc/arch/numerics_layernorm.py, docs/numerics.md §8e): per pixel of OFM_C
// bytes, exact sums of d = x - zp and d^2, V = C*S2 - S1^2, inv = floor(2^62 / sqrt(A')) of the
// normalized A = V*2^F + E, then per channel x_hat * g + b rounded from Q40.

// x / 2^e rounded half away from zero, 0 <= e <= 62.
static inline int64_t rdbpot64(int64_t x, int e) {
    const int64_t mask = (((int64_t)1) << e) - 1;
    const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return asr(x, e) + ((int64_t)(((uint64_t)x) & ((uint64_t)mask)) > threshold ? 1 : 0);
}

// floor(sqrt(n)), digit by digit (exact).
static inline npu_u128 isqrt_u128(npu_u128 n) {
    npu_u128 root = 0, bit = ((npu_u128)1) << 126;
    while (bit > n) bit >>= 2;
    while (bit != 0) {
        if (n >= root + bit) {
            n -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    return root;
}

static uint32_t kick_layernorm(machine_t *mc) {
    Shape shp;
    uint32_t st;
    if ((st = read_shape(mc, NPU_REG_OFM_H, &shp)) != kOk) return st;
    if ((st = check_int8(mc, NPU_REG_IFM_ZERO_POINT)) != kOk) return st;
    if ((st = check_int8(mc, NPU_REG_OFM_ZERO_POINT)) != kOk) return st;
    if ((st = check_clamp(mc)) != kOk) return st;
    const int64_t frac_bits = reg_s(mc, NPU_REG_IFM_SHIFT), epsilon_fx = reg_s(mc, NPU_REG_IFM_MULTIPLIER);
    if (shp.c > NPU_LAYERNORM_MAX_CHANNELS || frac_bits < 0 || frac_bits > NPU_LAYERNORM_MAX_FRAC_BITS ||
        frac_bits % 2 != 0 || epsilon_fx < 0 || reg_u(mc, NPU_REG_REQUANT_ADDR) % 4 != 0)
        return NPU_STATUS_INVALID_PARAMETER;
    const uint64_t nbytes = shape_elements(&shp), channels = shp.c;
    Span in_span, rec_span, out_span;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_IFM_ADDR), nbytes, &in_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_REQUANT_ADDR), channels * NPU_REQUANT_RECORD_BYTES, &rec_span)) != kOk) return st;
    if ((st = sram_span(mc, reg_u(mc, NPU_REG_OFM_ADDR), nbytes, &out_span)) != kOk) return st;
    if (overlaps(&out_span, &in_span) || overlaps(&out_span, &rec_span)) return NPU_STATUS_INVALID_PARAMETER;
    const int64_t zp_in = reg_s(mc, NPU_REG_IFM_ZERO_POINT), zp_out = reg_s(mc, NPU_REG_OFM_ZERO_POINT);
    const int64_t act_min = reg_s(mc, NPU_REG_ACT_MIN), act_max = reg_s(mc, NPU_REG_ACT_MAX);
    const uint8_t *rec = ((uint8_t *)mc->m->sram.data) + rec_span.lo;
    const int64_t C = (int64_t)channels;
    for (uint64_t pixel = 0; pixel < nbytes / channels; ++pixel) {
        const uint8_t *x = ((uint8_t *)mc->m->sram.data) + in_span.lo + pixel * channels;
        uint8_t *out = ((uint8_t *)mc->m->sram.data) + out_span.lo + pixel * channels;
        int64_t s1 = 0, s2 = 0;
        for (uint64_t k = 0; k < channels; ++k) {
            const int64_t d = as_i8(x[k]) - zp_in;
            s1 += d;
            s2 += d * d;
        }
        const int64_t v = C * s2 - s1 * s1;  // in [0, 2^38)
        int64_t inv = 0;
        int exponent = 0;
        if (v != 0) {  // V = 0: every C*d - S1 is 0
            const uint64_t a = (((uint64_t)v) << frac_bits) + (uint64_t)epsilon_fx;  // < 2^61
            int bits = 0;
            while (bits < 64 && (a >> bits) != 0) ++bits;
            const int s = (62 - bits) / 2;
            const npu_u128 quotient = (((npu_u128)1) << 124) / (((npu_u128)a) << (2 * s));
            inv = (int64_t)isqrt_u128(quotient);  // in (2^31, 2^32]
            exponent = 38 - (int)(frac_bits / 2) - s;  // >= 8
        }
        for (uint64_t k = 0; k < channels; ++k) {
            const int64_t n = C * (as_i8(x[k]) - zp_in) - s1;  // |n| < 2^21
            const int64_t x_hat = v != 0 ? rdbpot64(n * inv, exponent) : 0;
            const uint8_t *r = rec + k * NPU_REQUANT_RECORD_BYTES;
            const int64_t g = read_le_i32(r);
            const int64_t b = (int64_t)(((uint64_t)(uint32_t)read_le_i32(r + 4)) | (((uint64_t)(int64_t)read_le_i32(r + 8)) << 32));
            const int64_t y = rdbpot64(x_hat * g + b, 40) + zp_out;
            out[k] = as_u8(clamp_i32(y, act_min, act_max));
        }
    }
    return kOk;
}

// ---------------------------------------------------------------------------------------------
// Cycle model of an executed kick (npu_byoc/runtime/cycles.py): the RTL's cycles, not counting
// the fetch of the kick word. The registers passed the kick's checks, so every operand is
// bounded by the SRAM size: with any SRAM up to 2^26 bytes no product comes near 2^64 (beyond,
// the estimate would wrap; it is never undefined).

static uint64_t kick_cycles(const machine_t *mc, uint32_t opcode) {
    const uint64_t rows = mc->cfg->array_rows ? mc->cfg->array_rows : 1;
    const uint64_t cols = mc->cfg->array_cols ? mc->cfg->array_cols : 1;
    const uint64_t lanes = cols;
    switch (opcode) {
    case NPU_OP_CONV:
    case NPU_OP_DWCONV:
    case NPU_OP_FC: {
        const uint64_t pixels = opcode == NPU_OP_FC ? reg_u(mc, NPU_REG_OFM_W) : reg_u(mc, NPU_REG_OFM_H) * reg_u(mc, NPU_REG_OFM_W);
        const uint64_t blocks = mac_blocks(pixels, ceil_div(reg_u(mc, NPU_REG_OFM_C), rows), cols);
        uint64_t k = reg_u(mc, NPU_REG_IFM_C);  // the reduction's taps
        if (opcode == NPU_OP_CONV) k = reg_u(mc, NPU_REG_KERNEL_H) * reg_u(mc, NPU_REG_KERNEL_W) * reg_u(mc, NPU_REG_IFM_C);
        if (opcode == NPU_OP_DWCONV) k = reg_u(mc, NPU_REG_KERNEL_H) * reg_u(mc, NPU_REG_KERNEL_W);
        return kMacSetupCycles + ceil_div(reg_u(mc, NPU_REG_OFM_C), cols) + rows + (blocks - 1) * max_u64(k, rows) + k;
    }
    case NPU_OP_AVGPOOL:
    case NPU_OP_MAXPOOL:
        return kVectorSetupCycles + reg_u(mc, NPU_REG_OFM_H) * reg_u(mc, NPU_REG_OFM_W) * ceil_div(reg_u(mc, NPU_REG_OFM_C), lanes) *
                                        reg_u(mc, NPU_REG_KERNEL_H) * reg_u(mc, NPU_REG_KERNEL_W);
    case NPU_OP_MEAN:
        return kVectorSetupCycles + reg_u(mc, NPU_REG_IFM_H) * reg_u(mc, NPU_REG_IFM_W) * ceil_div(reg_u(mc, NPU_REG_IFM_C), lanes);
    case NPU_OP_ADD:
    case NPU_OP_MUL:
    case NPU_OP_SQDIFF:
        if (reg_u(mc, NPU_REG_IFM2_BROADCAST))  // pixel by pixel, the channel vector read again at each
            return kVectorSetupCycles + reg_u(mc, NPU_REG_OFM_H) * reg_u(mc, NPU_REG_OFM_W) * ceil_div(reg_u(mc, NPU_REG_OFM_C), lanes);
        return kVectorSetupCycles + ceil_div(reg_u(mc, NPU_REG_OFM_H) * reg_u(mc, NPU_REG_OFM_W) * reg_u(mc, NPU_REG_OFM_C), lanes);
    case NPU_OP_LUT:
        return kVectorSetupCycles + ceil_div(kLutBytes, lanes) +
               ceil_div(reg_u(mc, NPU_REG_OFM_H) * reg_u(mc, NPU_REG_OFM_W) * reg_u(mc, NPU_REG_OFM_C), lanes);
    case NPU_OP_SOFTMAX:  // the table, then per row: max, sum, reciprocal, output
        return kVectorSetupCycles + ceil_div(NPU_SOFTMAX_TABLE_BYTES, lanes) +
               reg_u(mc, NPU_REG_OFM_H) * reg_u(mc, NPU_REG_OFM_W) * (3 * ceil_div(reg_u(mc, NPU_REG_OFM_C), lanes) + kSoftmaxRecipCycles);
    case NPU_OP_LAYERNORM:  // per pixel: the sum pass, the reciprocal square root, the record (and x) reads
        return kVectorSetupCycles + reg_u(mc, NPU_REG_OFM_H) * reg_u(mc, NPU_REG_OFM_W) *
                                        (ceil_div(reg_u(mc, NPU_REG_OFM_C), lanes) +
                                         ceil_div(NPU_REQUANT_RECORD_BYTES * reg_u(mc, NPU_REG_OFM_C), lanes) + kLayernormRsqrtCycles);
    default: return 0;
    }
}


// ---------------------------------------------------------------------------------------------
// Entry points

uint32_t npu_functional_submit(const npu_functional_config_t *config, const uint32_t *stream,
                                          size_t n_words, const npu_buffer_t *regions, size_t n_regions,
                                          npu_result_t *result, uint64_t *kicks) {
    npu_result_t local;
    npu_result_t *res = result != NULL ? result : &local;
    res->status = NPU_STATUS_CYCLE_LIMIT;
    res->word_index = 0;
    res->cycles = 0;
    res->commands = 0;
    if (config == NULL || config->sram_bytes == 0 || config->sram_bytes > (((uint64_t)1) << 32) ||
        config->dma_bytes_per_cycle == 0 || config->dma_queue_depth == 0 ||
        config->dma_queue_depth > NPU_FUNCTIONAL_MAX_QUEUE_DEPTH || !memory_ok(&config->fm_mem) ||
        !memory_ok(&config->const_mem))
        return res->status;
    if (stream == NULL) n_words = 0;
    if (regions == NULL) n_regions = 0;
    // The machine state of this call (so concurrent calls share nothing): the SRAM and the
    // kernels' scratch, allocated as the stream touches them (Grown).
    Scratch scratch;
    scratch_init(&scratch);
    machine_t machine;
    memset(&machine, 0, sizeof machine);
    machine.cfg = config;
    machine.m = &scratch;
    machine_bind(&machine, regions, n_regions);
    machine_run(&machine, stream, n_words, res, kicks);
    scratch_free(&scratch);
    return res->status;
}

// The run's cycle budget: $NPU_FUNCTIONAL_MAX_CYCLES if set, else the caller's (0: the default).
static uint64_t budget(uint64_t max_cycles) {
    const char *env = getenv("NPU_FUNCTIONAL_MAX_CYCLES");
    if (env && *env) {
        char *end = NULL;
        unsigned long long v = strtoull(env, &end, 10);
        if (end && *end == '\0' && v > 0) return v;
    }
    return max_cycles ? max_cycles : NPU_FUNCTIONAL_DEFAULT_MAX_CYCLES;
}

uint32_t npu_submit(const uint32_t *stream, size_t n_words, const npu_buffer_t *regions, size_t n_regions,
                               npu_result_t *result) {
    return npu_submit_budget(stream, n_words, regions, n_regions, 0, result);
}

uint32_t npu_submit_budget(const uint32_t *stream, size_t n_words, const npu_buffer_t *regions,
                                      size_t n_regions, uint64_t max_cycles, npu_result_t *result) {
    const npu_functional_config_t config = {
        NPU_FUNCTIONAL_SRAM_BYTES,
        NPU_FUNCTIONAL_ARRAY_ROWS,
        NPU_FUNCTIONAL_ARRAY_COLS,
        NPU_FUNCTIONAL_MAX_KERNEL,
        NPU_FUNCTIONAL_MAX_STRIDE,
        NPU_FUNCTIONAL_MAX_CHANNELS,
        NPU_FUNCTIONAL_MAX_POOL_WINDOW,
        NPU_FUNCTIONAL_MAX_POOL_STRIDE,
        NPU_FUNCTIONAL_MAX_MEAN_ELEMENTS,
        NPU_FUNCTIONAL_MAX_FC_FEATURES,
        NPU_FUNCTIONAL_DMA_BYTES_PER_CYCLE,
        NPU_FUNCTIONAL_DMA_QUEUE_DEPTH,
        {NPU_FUNCTIONAL_FM_MEM_BYTES_PER_CYCLE, NPU_FUNCTIONAL_FM_MEM_CLOCK_DIVIDER, NPU_FUNCTIONAL_FM_MEM_READ_LATENCY, NPU_FUNCTIONAL_FM_MEM_WRITE_LATENCY, NPU_FUNCTIONAL_FM_MEM_BURST_BYTES, NPU_FUNCTIONAL_FM_MEM_MAX_READS, NPU_FUNCTIONAL_FM_MEM_MAX_WRITES},
        {NPU_FUNCTIONAL_CONST_MEM_BYTES_PER_CYCLE, NPU_FUNCTIONAL_CONST_MEM_CLOCK_DIVIDER, NPU_FUNCTIONAL_CONST_MEM_READ_LATENCY, NPU_FUNCTIONAL_CONST_MEM_WRITE_LATENCY, NPU_FUNCTIONAL_CONST_MEM_BURST_BYTES, NPU_FUNCTIONAL_CONST_MEM_MAX_READS, NPU_FUNCTIONAL_CONST_MEM_MAX_WRITES},
        NPU_FUNCTIONAL_WEIGHT_DECODER_BYTES_PER_CYCLE,
        NPU_FUNCTIONAL_LAYERNORM_UNIT,
        ((uint64_t)1) << 22,  // the golden model's command budget
        budget(max_cycles),
    };
    return npu_functional_submit(&config, stream, n_words, regions, n_regions, result, NULL);
}
