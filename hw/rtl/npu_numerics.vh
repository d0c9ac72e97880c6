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

// An FC requantize record's scale words (numerics.pack_fc_scale): word1 = mantissa[31:0],
// word2 = mantissa[52:32] | exponent << 24. Well formed: word2[23:21] zero, exponent <= -53
// (the argument is word2[31:21]).
function automatic logic fc_record_ok(input logic [10:0] fn_word2_hi);
  begin
    fc_record_ok = (fn_word2_hi[2:0] == 3'd0) && ($signed(fn_word2_hi[10:3]) <= -8'sd53);
  end
endfunction

// LiteRT's reference FULLY_CONNECTED output scaling (numerics.fc_scale):
//   round_half_away(fl64(x * mantissa * 2^exponent))
// the exact 85-bit product rounded to 53 significant bits (ties to even, the double product),
// then rounded half away from zero to an integer. The record is checked (fc_record_ok).
function automatic logic signed [31:0] fc_scale(input logic signed [31:0] fn_x, input logic [52:0] fn_mantissa,
                                                input logic signed [7:0] fn_exponent);
  logic [31:0] a;
  logic [84:0] p;
  logic [84:0] rem;
  logic [84:0] half;
  logic [53:0] q;
  logic [31:0] r;
  int bits;
  int drop;
  int k;
  begin
    a = fn_x[31] ? 32'(-fn_x) : 32'(fn_x);  // |x|; 2^31 for INT32_MIN
    p = 85'(a) * 85'(fn_mantissa);
    bits = 0;
    for (int i = 0; i < 85; i++) if (p[i]) bits = i + 1;
    k = -int'(fn_exponent);
    q = 54'(p);
    if (bits > 53) begin
      drop = bits - 53;
      q = 54'(p >> drop);
      rem = p & ((85'd1 << drop) - 85'd1);
      half = 85'd1 << (drop - 1);
      if (rem > half || (rem == half && q[0])) q = q + 54'd1;
      k = k - drop;
    end
    r = (k >= 55) ? 32'd0 : 32'((q >> k) + ((q >> (k - 1)) & 54'd1));
    fc_scale = fn_x[31] ? -$signed(r) : $signed(r);
  end
endfunction

// FC's requantize: clamp(fc_scale(wrap32(acc + bias), mantissa, exponent) + zero_point, act_min, act_max)
function automatic logic [7:0] fc_requantize(input logic signed [31:0] fn_acc, input logic signed [31:0] fn_bias,
                                             input logic [52:0] fn_mantissa, input logic signed [7:0] fn_exponent,
                                             input logic signed [31:0] fn_zero_point, input logic signed [31:0] fn_act_min,
                                             input logic signed [31:0] fn_act_max);
  begin
    fc_requantize = add_zero_point_clamp(fc_scale(fn_acc + fn_bias, fn_mantissa, fn_exponent), fn_zero_point, fn_act_min,
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

// ---- SOFTMAX (npu_byoc/softmax.py): gemmlowp's fixed-point steps of TFLite's reference kernel.
// Every step stays in the domain gemmlowp asserts: the row sum is in [2^19, 2^31) because the
// max element's entry is exp(0) (entry 0 is read as 0x7FFFFFFF) and OFM_C <= SOFTMAX_MAX_CHANNELS.

// gemmlowp SaturatingRoundingMultiplyByPOT with a positive exponent (1 or 2): x * 2^e, saturated.
function automatic logic signed [31:0] sat_left(input logic signed [31:0] fn_x, input int fn_e);
  logic signed [31:0] threshold;
  begin
    threshold = 32'((64'sd1 <<< (31 - fn_e)) - 64'sd1);
    if (fn_x > threshold) sat_left = 32'sh7FFFFFFF;
    else if (fn_x < -threshold) sat_left = 32'sh80000000;
    else sat_left = fn_x <<< fn_e;
  end
endfunction

// One Newton-Raphson step of one_over_one_plus_x_for_x_in_0_1 (Q2.29): x + x * (1 - d * x)
function automatic logic signed [31:0] recip_step(input logic signed [31:0] fn_half_denominator,
                                                  input logic signed [31:0] fn_x);
  begin
    recip_step = fn_x + sat_left(srdhm(fn_x, 32'sd536870912 - srdhm(fn_half_denominator, fn_x)), 2);
  end
endfunction

// RoundingDivideByPOT of a non-negative int32 by 2^e, 0 <= e <= 63 (SOFTMAX's output: e = 23..34)
function automatic logic [31:0] rdbpot_wide(input logic [31:0] fn_x, input logic [5:0] fn_e);
  logic [63:0] mask;
  begin
    mask = (64'd1 << fn_e) - 64'd1;
    rdbpot_wide = 32'((64'(fn_x) >> fn_e) + (((64'(fn_x) & mask) > (mask >> 1)) ? 64'd1 : 64'd0));
  end
endfunction
