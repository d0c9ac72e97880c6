// npu_requant_tb.cc -- unit testbench of the requantize unit (hw/rtl/npu_requant.v).
//
// npu_requant_tb() drives the verilated npu_requant with n input vectors and returns its
// outputs, so that tests/test_rtl_units.py can compare them with npu_byoc.numerics.
#include <cstddef>
#include <cstdint>

#include "Vnpu_requant.h"
#include "verilated.h"

extern "C" void npu_requant_tb(size_t n, const int32_t *acc, const int32_t *bias, const int32_t *multiplier,
                               const int32_t *shift, const int32_t *zero_point, const int32_t *act_min,
                               const int32_t *act_max, int32_t *scaled, int8_t *out) {
    VerilatedContext ctx;
    Vnpu_requant unit(&ctx, "requant");
    for (size_t i = 0; i < n; ++i) {
        unit.acc = static_cast<uint32_t>(acc[i]);
        unit.bias = static_cast<uint32_t>(bias[i]);
        unit.multiplier = static_cast<uint32_t>(multiplier[i]);
        unit.shift = static_cast<uint32_t>(shift[i]);
        unit.zero_point = static_cast<uint32_t>(zero_point[i]);
        unit.act_min = static_cast<uint32_t>(act_min[i]);
        unit.act_max = static_cast<uint32_t>(act_max[i]);
        unit.eval();
        scaled[i] = static_cast<int32_t>(unit.scaled);
        out[i] = static_cast<int8_t>(unit.out);
    }
    unit.final();
}
