// npu_requant.v -- the requantize unit: bias add, SRDHM by the channel's multiplier, RDBPOT by
// its shift, output zero point, clamp (docs/numerics.md §2-3, numerics.requantize).
//
// The MAC array has one of these per column; it calls the same function (npu_numerics.vh) in
// its drain stage. This module is the unit as a block of its own: combinational, for the unit
// testbench (tests/test_rtl_units.py) and for anyone who wants to instantiate it.
`default_nettype none

module npu_requant (
    input  wire signed [31:0] acc,         // the int32 accumulator (wrapping sum of products)
    input  wire signed [31:0] bias,        // requantize record: bias
    input  wire signed [31:0] multiplier,  // requantize record: multiplier
    input  wire signed [31:0] shift,       // requantize record: shift in [-31, 30], positive = left
    input  wire signed [31:0] zero_point,  // OFM_ZERO_POINT
    input  wire signed [31:0] act_min,     // ACT_MIN
    input  wire signed [31:0] act_max,     // ACT_MAX
    output wire signed [31:0] scaled,      // MBQM(wrap32(acc + bias), multiplier, shift)
    output wire        [7:0]  out          // the int8 output: clamp(scaled + zero_point)
);
`include "npu_numerics.vh"

  assign scaled = mbqm(acc + bias, multiplier, shift);
  assign out = add_zero_point_clamp(scaled, zero_point, act_min, act_max);
endmodule

`default_nettype wire
