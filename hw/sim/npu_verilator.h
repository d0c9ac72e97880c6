/* npu_verilator.h -- the Verilator co-simulation backend of the driver API.
 *
 * The library built from hw/sim/npu_verilator.cc and the verilated hw/rtl implements
 * npu_submit() of npu_driver.h by running the RTL (npu_top) clock by clock: the harness is the
 * NPU's driver and its external memory. result->cycles are the RTL's clock cycles from the
 * start pulse to `done`.
 *
 * npu_verilator_submit() is npu_submit() with a cycle and a command budget, a per-opcode count
 * of the commands executed and an optional trace of the commands (for per-layer cycles).
 * Hand-written; C99 and C++ compatible.
 */
#ifndef NPU_VERILATOR_H
#define NPU_VERILATOR_H

#include <stddef.h>
#include <stdint.h>

#include "npu_driver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Cycle budget of npu_submit() (override: environment variable NPU_VERILATOR_MAX_CYCLES). */
#define NPU_VERILATOR_DEFAULT_MAX_CYCLES 200000000ull
/* Command budget of npu_submit(): the golden model's max_commands. */
#define NPU_VERILATOR_DEFAULT_MAX_COMMANDS (1ull << 22)

/* One executed command other than SET_REG and NOP: its word, its opcode, and the clock
 * cycles from the previous command's completion (or the end of the header) to its own. */
typedef struct npu_trace_entry {
    uint32_t word_index;
    uint32_t opcode;
    uint64_t start_cycle;
    uint64_t end_cycle;
} npu_trace_entry_t;

typedef struct npu_verilator_options {
    uint64_t max_cycles;          /* in: stop with NPU_STATUS_CYCLE_LIMIT after this many cycles (0: default) */
    uint64_t max_commands;        /* in: the RTL's command budget: CYCLE_LIMIT at the next command once reached */
    npu_trace_entry_t *trace;     /* in: NULL, or room for trace_capacity entries */
    size_t trace_capacity;        /* in */
    size_t trace_count;           /* out: entries written (at most trace_capacity) */
    uint64_t kicks[256];          /* out: commands executed per opcode */
    uint32_t harness_fault;       /* out: 1 if the RTL made a request outside a bound region (an RTL bug) */
    /* Waveforms (a library built with tracing only): dump every signal to this VCD / FST file
     * while the word being executed is in [waveform_from_word, waveform_to_word). */
    const char *waveform_path;    /* in: NULL for no waveform */
    uint64_t waveform_from_word;  /* in */
    uint64_t waveform_to_word;    /* in */
    uint32_t waveform_error;      /* out: 1 if this build has no tracing or the file cannot be written */
    /* The external memories' timing of this run (docs/memory.md), so that one build serves
     * every memory configuration: 0 = the build's own (npu_isa.h's NPU_*_MEM_*), 1 = fm_mem and
     * const_mem below, in npu_byoc.arch.memory.FIELDS order (bytes_per_cycle, clock_divider,
     * read_latency, write_latency, burst_bytes, max_reads, max_writes). */
    uint32_t memory_given;        /* in */
    uint64_t fm_mem[7];           /* in */
    uint64_t const_mem[7];        /* in */
} npu_verilator_options_t;

uint32_t npu_verilator_submit(npu_verilator_options_t *options, const uint32_t *stream, size_t n_words,
                              const npu_buffer_t *regions, size_t n_regions, npu_result_t *result);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NPU_VERILATOR_H */
