// npu_numerics.vh -- the NPU's integer arithmetic as Verilog functions (docs/numerics.md).
//
// Bit-exact with npu_byoc/numerics.py: SaturatingRoundingDoublingHighMul (srdhm),
// RoundingDivideByPOT (rdbpot), MultiplyByQuantizedMultiplier (mbqm, TFLite's double-rounding
// build), the per-channel requantize of CONV/DWCONV/FC and the clamp to an int8 range.
//
// Functions rather than modules: a unit calls them inside its clocked datapath, so a
// synthesis tool builds one instance per call site (one requantize unit per MAC-array column,
// one MBQM datapath per vector lane) while Verilator evaluates them only on the cycles that
// use them. npu_requant.v wraps `requantize` as a module for its unit testbench.
//
// Include inside a module body (the functions are automatic and module-local). Argument names
// carry an fn_ prefix so that they never hide a signal of the including module.

// gemmlowp SaturatingRoundingDoublingHighMul: round(a * b / 2^31), ties toward +infinity;
// INT32_MIN * INT32_MIN saturates to INT32_MAX.
function automatic logic signed [31:0] srdhm(input logic signed [31:0] fn_a, input logic signed [31:0] fn_b);
  logic signed [63:0] p;
  logic signed [63:0] s;
  begin
    p = 64'(fn_a) * 64'(fn_b);
    s = p + ((p >= 0) ? 64'sd1073741824 : -64'sd1073741823);  // nudge: 2^30 or 1 - 2^30
    // C division by 2^31 (truncation toward zero) of s
    if (fn_a == 32'sh80000000 && fn_b == 32'sh80000000) srdhm = 32'sh7FFFFFFF;
    else srdhm = 32'((s >= 0) ? (s >>> 31) : -((-s) >>> 31));
  end
endfunction

// gemmlowp RoundingDivideByPOT: x / 2^e rounded half away from zero, 0 <= e <= 31.
function automatic logic signed [31:0] rdbpot(input logic signed [31:0] fn_x, input logic [4:0] fn_e);
  logic [31:0] mask;
  logic [31:0] remainder;
  logic [31:0] threshold;
  begin
    mask = (32'd1 << fn_e) - 32'd1;
    remainder = fn_x & mask;
    threshold = (mask >> 1) + {31'd0, fn_x[31]};
    rdbpot = (fn_x >>> fn_e) + ((remainder > threshold) ? 32'sd1 : 32'sd0);
  end
endfunction

// TFLite MultiplyByQuantizedMultiplier (double rounding): shift in [-31, 30], positive = left.
function automatic logic signed [31:0] mbqm(input logic signed [31:0] fn_x, input logic signed [31:0] fn_multiplier,
                                             input logic signed [31:0] fn_shift);
  logic [4:0] left;
  logic [4:0] right;
  begin
    left = (fn_shift > 0) ? 5'(fn_shift) : 5'd0;
    right = (fn_shift > 0) ? 5'd0 : 5'(-fn_shift);
    mbqm = rdbpot(srdhm(fn_x << left, fn_multiplier), right);
  end
endfunction

// v + zero_point (exact, no wrap), clamped to [lo, hi] (both int8): the output stage of every op.
function automatic logic [7:0] add_zero_point_clamp(input logic signed [31:0] fn_v, input logic signed [31:0] fn_zero_point,
                                                    input logic signed [31:0] fn_lo, input logic signed [31:0] fn_hi);
  logic signed [33:0] s;
  begin
    s = 34'(fn_v) + 34'(fn_zero_point);
    if (s < 34'(fn_lo)) s = 34'(fn_lo);
    if (s > 34'(fn_hi)) s = 34'(fn_hi);
    add_zero_point_clamp = 8'(s);
  end
endfunction

// Per-channel requantize of CONV/DWCONV/FC (numerics.requantize):
//   clamp(MBQM(wrap32(acc + bias), multiplier, shift) + zero_point, act_min, act_max)
function automatic logic [7:0] requantize(input logic signed [31:0] fn_acc, input logic signed [31:0] fn_bias,
                                          input logic signed [31:0] fn_multiplier, input logic signed [31:0] fn_shift,
                                          input logic signed [31:0] fn_zero_point, input logic signed [31:0] fn_act_min,
                                          input logic signed [31:0] fn_act_max);
  begin
    requantize = add_zero_point_clamp(mbqm(fn_acc + fn_bias, fn_multiplier, fn_shift), fn_zero_point, fn_act_min,
                                      fn_act_max);
  end
endfunction

// int8 value of a signed 32-bit register in -128..127 (the checks guarantee it before use)
function automatic logic is_int8(input logic [31:0] fn_v);
  begin
    is_int8 = ($signed(fn_v) >= -32'sd128) && ($signed(fn_v) <= 32'sd127);
  end
endfunction

// a shift register value in [-31, 30]
function automatic logic shift_ok(input logic [31:0] fn_v);
  begin
    shift_ok = ($signed(fn_v) >= -32'sd31) && ($signed(fn_v) <= 32'sd30);
  end
endfunction
