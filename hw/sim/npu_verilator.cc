// npu_verilator.cc -- the Verilator harness: the driver API (npu_driver.h) on the RTL.
//
// Each call builds a fresh model of npu_top (registers reset, SRAM zero-filled), binds the
// regions, pulses start and runs the clock. Between clock edges it serves the NPU's two
// request ports:
//   fetch port   fetch_word <- stream[fetch_index], sampled by the NPU on the next edge
//   memory port  a granted read returns region bytes on the next edge; a write is done at
//                once; MemoryModel grants the DMA's requests at the cycles of the configured
//                memories (with the defaults: every cycle, a zero-wait-state memory)
// until `done` (status, word index) or the cycle budget (NPU_STATUS_CYCLE_LIMIT at the
// command being executed). Single-threaded model (verilated with --threads 1).
//
// Waveforms: built with VM_TRACE (Verilator --trace or --trace-fst, a separate cached library),
// a run given options->waveform_path dumps every signal, but only while the word being
// executed (cur_index) is in [waveform_from_word, waveform_to_word): a window of the stream
// costs its own cycles, not the whole run's. One sample per cycle, after its rising edge, at
// 10*c ns (every register changes there; a second sample per cycle would only show clk fall).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "Vnpu_top.h"
#include "verilated.h"
#if VM_TRACE_FST
#include "verilated_fst_c.h"
using WaveformFile = VerilatedFstC;
#elif VM_TRACE
#include "verilated_vcd_c.h"
using WaveformFile = VerilatedVcdC;
#endif

#include "npu_verilator.h"

namespace {

constexpr size_t kDmaBytes = NPU_DMA_BYTES_PER_CYCLE;  // npu_top's DMA_BYTES: mem_rdata / mem_wdata width

// mem_rdata / mem_wdata are 8 * kDmaBytes bits: Verilator makes that an integer up to 64 bits
// and a VlWide (32-bit words, least significant first) beyond. Bytes are little-endian in both.
template <std::size_t N>
void to_bytes(const VlWide<N> &signal, uint8_t *bytes) {
    std::memcpy(bytes, signal.data(), kDmaBytes);
}
template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
void to_bytes(T signal, uint8_t *bytes) {
    for (size_t i = 0; i < kDmaBytes; ++i) bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(signal) >> (8 * i));
}
template <std::size_t N>
void from_bytes(VlWide<N> &signal, const uint8_t *bytes) {
    std::memcpy(signal.data(), bytes, kDmaBytes);
}
template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
void from_bytes(T &signal, const uint8_t *bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < kDmaBytes; ++i) v |= static_cast<uint64_t>(bytes[i]) << (8 * i);
    signal = static_cast<T>(v);
}

// ---- The external memories' timing (npu_byoc.arch.memory, docs/memory.md) -----------------
// The DMA presents its next request (mem_req, with its row and direction); the memory grants
// it (mem_grant) at the cycle the model says. A burst is up to kMaxBurstBeats requests of one
// row; burst i starts at max(d_{i-1}, max(ready, d_{i-O}) + latency) and occupies T_i cycles
// (its requests one per cycle, the last held until T_i is spent), the first burst of a transfer
// no earlier than its first request; d_{i-O} is the O-th burst before it on the same memory and
// direction, earlier transfers' included, and ready the cycle its transfer was queued
// (mem_req_wait before its first request): the engine issues a queued transfer's requests while
// the one before it streams. The C model's memory_end() and memory.InFlight compute the same d.
struct MemoryTiming {
    uint64_t bytes_per_cycle, clock_divider, read_latency, write_latency, burst_bytes, max_reads, max_writes;
};
constexpr MemoryTiming kFmMem = {NPU_FM_MEM_BYTES_PER_CYCLE, NPU_FM_MEM_CLOCK_DIVIDER, NPU_FM_MEM_READ_LATENCY,
                                 NPU_FM_MEM_WRITE_LATENCY,   NPU_FM_MEM_BURST_BYTES,   NPU_FM_MEM_MAX_READS,
                                 NPU_FM_MEM_MAX_WRITES};
constexpr MemoryTiming kConstMem = {NPU_CONST_MEM_BYTES_PER_CYCLE, NPU_CONST_MEM_CLOCK_DIVIDER,
                                    NPU_CONST_MEM_READ_LATENCY,    NPU_CONST_MEM_WRITE_LATENCY,
                                    NPU_CONST_MEM_BURST_BYTES,     NPU_CONST_MEM_MAX_READS,
                                    NPU_CONST_MEM_MAX_WRITES};
constexpr size_t kMaxInFlight = 64;  // config.FIELD_RANGES["*_max_reads"]
constexpr uint64_t kMaxBurstBeats = 256;  // memory.MAX_BURST_BEATS: requests of one burst at most

class MemoryModel {
  public:
    // The memories of this run: the build's (kFmMem, kConstMem) unless the caller gives others.
    void configure(const MemoryTiming &fm, const MemoryTiming &constants) {
        fm_ = fm;
        const_ = constants;
    }

    // Whether the request the DMA presents at cycle `now` (of the run) is granted at this edge;
    // `wait`: the cycles its transfer waited queued before the mover took it.
    bool grant(uint64_t now, bool req, bool write, unsigned region, uint64_t row_left, bool row_first, uint64_t wait) {
        if (!req) {
            active_ = false;  // between transfers (the mover drains and idles at least a cycle)
            return true;
        }
        if (!active_) {  // a transfer's first request: its first burst starts no earlier
            active_ = true;
            ready_ = now - wait;
            last_ = now;
            k_ = 0;
        }
        if (k_ == 0) {  // a burst begins: when, and for how long
            const bool in_const = region == NPU_REGION_CONST;
            const MemoryTiming &m = in_const ? const_ : fm_;
            const uint64_t per_burst = kMaxBurstBeats * kDmaBytes;
            const uint64_t bytes = std::min(row_left, per_burst);
            const uint64_t charged = row_first ? std::max(bytes, m.burst_bytes) : bytes;
            window_ = std::min<uint64_t>(std::max<uint64_t>(1, write ? m.max_writes : m.max_reads), kMaxInFlight);
            const uint64_t latency = write ? m.write_latency : m.read_latency;
            flight_ = &flights_[2 * in_const + write];
            const uint64_t oldest = flight_->count >= window_ ? flight_->ends[flight_->count % window_] : 0;  // d_{i-O}
            requests_ = ceil_div(bytes, kDmaBytes);
            occupancy_ = std::max(requests_, ceil_div(m.clock_divider * charged, m.bytes_per_cycle));
            start_ = std::max(last_, std::max(ready_, oldest) + latency);
        }
        const uint64_t due = k_ + 1 == requests_ ? start_ + occupancy_ - 1 : start_ + k_;
        if (now < due) return false;
        if (++k_ == requests_) {  // the burst is done: d_i
            last_ = start_ + occupancy_;
            flight_->ends[flight_->count % window_] = last_;
            flight_->count += 1;
            k_ = 0;
        }
        return true;
    }

  private:
    static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }
    // the last bursts of one memory and direction: d, absolute, a ring (the oldest at count % window)
    struct Flight {
        uint64_t ends[kMaxInFlight] = {0};
        uint64_t count = 0;
    };
    MemoryTiming fm_ = kFmMem, const_ = kConstMem;
    bool active_ = false;
    uint64_t ready_ = 0, k_ = 0, last_ = 0;
    uint64_t window_ = 1, requests_ = 1, occupancy_ = 1, start_ = 0;
    Flight flights_[4];  // [2 * const + write]
    Flight *flight_ = &flights_[0];
};

// A memory's seven fields as the caller gives them (npu_verilator_options_t), kept in range:
// a zero bandwidth, divider or window would never grant (the Python side checks the ranges).
MemoryTiming timing(const uint64_t f[7]) {
    auto at_least_1 = [](uint64_t v) { return v ? v : uint64_t{1}; };
    return MemoryTiming{at_least_1(f[0]), at_least_1(f[1]), f[2], f[3], at_least_1(f[4]), at_least_1(f[5]),
                        at_least_1(f[6])};
}

struct Region {
    uint8_t *data = nullptr;
    uint64_t size = 0;
    bool bound = false;
};

uint64_t default_max_cycles() {
    const char *env = std::getenv("NPU_VERILATOR_MAX_CYCLES");
    if (env && *env) {
        char *end = nullptr;
        unsigned long long v = std::strtoull(env, &end, 10);
        if (end && *end == '\0' && v > 0) return v;
    }
    return NPU_VERILATOR_DEFAULT_MAX_CYCLES;
}

class Harness {
  public:
    Harness() : ctx_(make_context()), top_(new Vnpu_top(ctx_.get(), "npu")) {
        ctx_->fatalOnError(false);
        top_->clk = 0;
        top_->rst_n = 0;
        top_->region_we = 0;
        top_->start = 0;
        top_->mem_grant = 1;
        top_->eval();
    }
    ~Harness() {
        top_->final();
#if VM_TRACE
        if (waveform_) waveform_->close();
#endif
    }

    static VerilatedContext *make_context() {
        auto *ctx = new VerilatedContext;
#if VM_TRACE
        ctx->traceEverOn(true);  // before the model is made
#endif
        return ctx;
    }

    // Open the waveform file; false if this build has no tracing or the file cannot be written.
    bool open_waveform(const char *path) {
#if VM_TRACE
        waveform_.reset(new WaveformFile);
        top_->trace(waveform_.get(), 99);
        waveform_->open(path);
        return waveform_->isOpen();
#else
        (void)path;
        return false;
#endif
    }

    void tick() {
        top_->clk = 1;
        top_->eval();
#if VM_TRACE
        if (dumping_) waveform_->dump(10 * cycle_);
#endif
        top_->clk = 0;
        top_->eval();
    }

    uint32_t run(npu_verilator_options_t *opt, const uint32_t *stream, size_t n_words, const npu_buffer_t *regions,
                 size_t n_regions, npu_result_t *result) {
        const uint64_t max_cycles = opt->max_cycles ? opt->max_cycles : default_max_cycles();
        const uint64_t max_commands = opt->max_commands;
        if (opt->memory_given) memory_.configure(timing(opt->fm_mem), timing(opt->const_mem));
        Region table[NPU_MAX_REGIONS];
        for (size_t r = 0; r < n_regions && r < NPU_MAX_REGIONS; ++r) {
            if (regions[r].data) table[r] = Region{static_cast<uint8_t *>(regions[r].data), regions[r].size, true};
        }
        // reset, bind the regions, start
        tick();
        tick();
        top_->rst_n = 1;
        for (unsigned r = 0; r < NPU_MAX_REGIONS; ++r) {
            top_->region_we = 1;
            top_->region_idx = r;
            top_->region_bound = table[r].bound;
            top_->region_size = table[r].size;
            tick();
        }
        top_->region_we = 0;
        top_->stream_words = n_words;
        top_->cmd_budget = max_commands;
        top_->start = 1;
        tick();
        top_->start = 0;

        if (opt->waveform_path && !open_waveform(opt->waveform_path)) {
            opt->waveform_error = 1;
            if (result) *result = npu_result_t{NPU_STATUS_CYCLE_LIMIT, 0, 0, 0};
            return NPU_STATUS_CYCLE_LIMIT;
        }
        const bool window = opt->waveform_path != nullptr;
        uint64_t &cycles = cycle_;
        uint64_t last_retire = 0;
        uint32_t status = NPU_STATUS_OK;
        uint32_t index = 0;
        while (true) {
            // outputs of the last edge
            if (top_->cmd_done) {
                uint32_t op = top_->cmd_opcode;
                opt->kicks[op & 0xFF] += 1;
                if (op != NPU_OP_SET_REG && op != NPU_OP_NOP && opt->trace && opt->trace_count < opt->trace_capacity) {
                    opt->trace[opt->trace_count++] = npu_trace_entry_t{top_->cmd_index, op, last_retire, cycles};
                }
                last_retire = cycles;
            }
            if (top_->done) {
                status = top_->status;
                index = top_->word_index;
                break;
            }
            if (cycles >= max_cycles) {
                status = NPU_STATUS_CYCLE_LIMIT;
                index = top_->cur_index;
                break;
            }
            if (top_->fetch_valid) {
                uint32_t i = top_->fetch_index;
                top_->fetch_word = i < n_words ? stream[i] : 0u;
            }
            top_->mem_grant = memory_.grant(cycles, top_->mem_req, top_->mem_req_write, top_->mem_req_region,
                                            top_->mem_req_row_left, top_->mem_req_row_first, top_->mem_req_wait);
            if (top_->mem_valid && !serve_memory(table)) {
                opt->harness_fault = 1;
                status = NPU_STATUS_CYCLE_LIMIT;
                index = top_->cur_index;
                break;
            }
            dumping_ = window && top_->cur_index >= opt->waveform_from_word && top_->cur_index < opt->waveform_to_word;
            tick();
            ++cycles;
        }
        if (result) {
            result->status = status;
            result->word_index = index;
            result->cycles = cycles;
            result->commands = top_->commands;
        }
        return status;
    }

  private:
    // One memory request; false if it falls outside a bound region (the RTL checks first).
    bool serve_memory(const Region *table) {
        const unsigned r = top_->mem_region;
        const uint64_t addr = top_->mem_addr;
        const unsigned len = top_->mem_len;
        if (r >= NPU_MAX_REGIONS || !table[r].bound || len == 0 || len > kDmaBytes || addr > table[r].size ||
            len > table[r].size - addr) {
            return false;
        }
        uint8_t bytes[kDmaBytes] = {0};
        if (top_->mem_write) {
            to_bytes(top_->mem_wdata, bytes);
            std::memcpy(table[r].data + addr, bytes, len);
        } else {
            std::memcpy(bytes, table[r].data + addr, len);
            from_bytes(top_->mem_rdata, bytes);
        }
        return true;
    }

    std::unique_ptr<VerilatedContext> ctx_;
    std::unique_ptr<Vnpu_top> top_;
    uint64_t cycle_ = 0;    // clock cycles since the start pulse
    bool dumping_ = false;  // inside the waveform window
#if VM_TRACE
    std::unique_ptr<WaveformFile> waveform_;
#endif
    MemoryModel memory_;
};

static_assert(sizeof(Vnpu_top::mem_rdata) * 8 >= 8 * kDmaBytes, "mem_rdata holds a request");

}  // namespace

extern "C" uint32_t npu_verilator_submit(npu_verilator_options_t *options, const uint32_t *stream, size_t n_words,
                                         const npu_buffer_t *regions, size_t n_regions, npu_result_t *result) {
    npu_verilator_options_t defaults;
    std::memset(&defaults, 0, sizeof defaults);
    defaults.max_commands = NPU_VERILATOR_DEFAULT_MAX_COMMANDS;
    npu_verilator_options_t *opt = options ? options : &defaults;
    opt->trace_count = 0;
    opt->harness_fault = 0;
    opt->waveform_error = 0;
    std::memset(opt->kicks, 0, sizeof opt->kicks);
    try {  // the model holds the whole SRAM: a host without the memory says so
        Harness harness;
        return harness.run(opt, stream, n_words, regions, n_regions, result);
    } catch (const std::bad_alloc &) {
        if (result) *result = npu_result_t{NPU_STATUS_OUT_OF_MEMORY, 0, 0, 0};
        return NPU_STATUS_OUT_OF_MEMORY;
    }
}

extern "C" uint32_t npu_submit(const uint32_t *stream, size_t n_words, const npu_buffer_t *regions, size_t n_regions,
                               npu_result_t *result) {
    return npu_verilator_submit(nullptr, stream, n_words, regions, n_regions, result);
}

extern "C" uint32_t npu_submit_budget(const uint32_t *stream, size_t n_words, const npu_buffer_t *regions,
                                      size_t n_regions, uint64_t max_cycles, npu_result_t *result) {
    npu_verilator_options_t opt;
    std::memset(&opt, 0, sizeof opt);
    opt.max_commands = NPU_VERILATOR_DEFAULT_MAX_COMMANDS;
    const char *env = std::getenv("NPU_VERILATOR_MAX_CYCLES");
    opt.max_cycles = env && *env ? 0 : max_cycles;  // 0: default_max_cycles(), the environment's
    return npu_verilator_submit(&opt, stream, n_words, regions, n_regions, result);
}
