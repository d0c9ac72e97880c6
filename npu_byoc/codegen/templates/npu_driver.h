/* npu_driver.h -- the driver API of the NPU: submit a command stream with its buffers.
 *
 * Every backend implements this one function: the C functional model
 * (npu_byoc/runtime/csrc/npu_functional.cc) and the Verilator co-simulation of hw/rtl. The
 * code generated for an NPU partition calls only npu_submit(), so it never knows which
 * backend executes it. The stream format, the registers and the status codes are in
 * npu_isa.h (generated from npu_byoc/isa.py) and docs/isa.md.
 *
 * Hand-written; C99 and C++ compatible.
 */
#ifndef NPU_DRIVER_H
#define NPU_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "npu_isa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One external memory region of a submission: region r of the stream (docs/isa.md §1) is
 * regions[r]. data == NULL means the region is not bound: a DMA to it fails with
 * NPU_STATUS_INVALID_REGION. size is the buffer's size in bytes; DMA outside [0, size) fails
 * with NPU_STATUS_ADDRESS_OUT_OF_RANGE. */
typedef struct npu_buffer {
    void *data;
    size_t size;
} npu_buffer_t;

/* What a submission did. */
typedef struct npu_result {
    uint32_t status;     /* an npu_status_t; NPU_STATUS_OK when STOP was reached */
    uint32_t word_index; /* OK: the STOP word; an error: the offending word (docs/isa.md §4) */
    uint64_t cycles;     /* NPU cycles of the commands executed (see below) */
    uint64_t commands;   /* commands executed (SET_REG, NOP, kicks and STOP; not the failing one) */
} npu_result_t;

/* Run the command stream stream[0 .. n_words) to its STOP or to the first error, with
 * regions[0 .. n_regions) bound as the external regions (CONST = 0, SCRATCH = 1, IO0 = 2, ...;
 * at most NPU_MAX_REGIONS are used, regions beyond that are ignored). Returns result->status
 * and fills *result (result may be NULL if only the status is wanted).
 *
 * Semantics (docs/isa.md, with the Python command-stream machine as the executable spec):
 *  - the registers are reset to 0 and the SRAM contents are undefined when a stream starts
 *    (a stream must not read SRAM it has not written); execution is strictly sequential;
 *  - the NPU only writes regions through DMA_OUT, and never writes CONST (region 0): a
 *    read-only buffer may be bound there;
 *  - on an error the failing command has no effect; the effects of earlier commands remain
 *    (a partly written output region is possible);
 *  - the call never hangs: the stream has no jumps, and a backend may stop a run that
 *    exceeds its command or cycle budget with NPU_STATUS_CYCLE_LIMIT (the functional model's
 *    budget is that of the golden model, 2^22 commands).
 *
 * The buffers must stay valid, and must not be accessed by anybody else, for the duration of
 * the call. The call is synchronous and thread-safe: each call uses its own machine state
 * (registers, SRAM), so concurrent calls on different buffers are independent.
 *
 * cycles: the functional model returns an *estimate* from a simple analytic model (one word
 * fetched per cycle, DMA bursts of 16 bytes per cycle, the MAC array's tile count times the
 * accumulation depth, ...; the formulas are in npu_byoc/runtime/cycles.py, which the
 * functional model matches exactly). The RTL co-simulation backend returns the cycles the
 * hardware took.
 *
 * stream may be NULL only when n_words is 0; regions may be NULL only when n_regions is 0.
 */
uint32_t npu_submit(const uint32_t *stream, size_t n_words, const npu_buffer_t *regions, size_t n_regions,
                    npu_result_t *result);

/* As npu_submit with the run's cycle budget max_cycles (0: the backend's default): a run past it
 * stops with NPU_STATUS_CYCLE_LIMIT. Generated partitions pass their stream's estimated cycles
 * with a margin (npu_byoc.runtime.cycles.stream_budget), so the budget follows the work; the
 * backend's environment override (NPU_FUNCTIONAL_MAX_CYCLES, NPU_VERILATOR_MAX_CYCLES) wins. */
uint32_t npu_submit_budget(const uint32_t *stream, size_t n_words, const npu_buffer_t *regions, size_t n_regions,
                           uint64_t max_cycles, npu_result_t *result);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NPU_DRIVER_H */
