/* npu_hal.h -- the hardware-abstraction interface an exported model runs through.
 *
 * An exported model (`npu-byoc export`, docs/export.md) knows nothing of the NPU it runs on:
 * npu_model_run() binds the memory regions of its command stream, submits the stream and
 * waits for its end through the three functions below. Port it to a board by implementing
 * them (program the NPU's region base registers, write the stream's address and start it,
 * poll or wait for the done interrupt and read the status register); npu_hal_driver.c
 * implements them on the driver API of npu_driver.h, which the C functional model and the
 * Verilated RTL provide.
 *
 * Hand-written; C99 and C++ compatible.
 */
#ifndef NPU_HAL_H
#define NPU_HAL_H

#include <stddef.h>
#include <stdint.h>

#include "npu_isa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a stream ended: status is an npu_status_t (NPU_STATUS_OK when STOP was reached),
 * word_index the STOP word or the failing one (docs/isa.md §4), cycles the NPU's clock cycles
 * if the HAL knows them (0 otherwise). */
typedef struct npu_hal_result {
    uint32_t status;
    uint32_t word_index;
    uint64_t cycles;
} npu_hal_result_t;

typedef struct npu_hal {
    void *context; /* passed to every function: the HAL's own state */
    /* Bind external region `region` (NPU_REGION_CONST = 0, NPU_REGION_SCRATCH = 1, IO0 = 2, ...)
     * to the `size` bytes at `data` for the next submission. The NPU never writes CONST, nor
     * the input regions. Returns NPU_STATUS_OK or an error status. */
    uint32_t (*bind)(void *context, uint32_t region, const void *data, size_t size);
    /* Start the command stream stream[0 .. n_words) with the regions bound so far. max_cycles
     * is the stream's cycle budget (its estimate with a margin): a HAL may use it as a timeout.
     * Returns NPU_STATUS_OK or an error status. */
    uint32_t (*submit)(void *context, const uint32_t *stream, size_t n_words, uint64_t max_cycles);
    /* Wait until the submitted stream has stopped; fills *result and returns result->status. */
    uint32_t (*wait)(void *context, npu_hal_result_t *result);
} npu_hal_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NPU_HAL_H */
