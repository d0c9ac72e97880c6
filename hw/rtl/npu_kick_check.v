// npu_kick_check.v -- the check stage of the compute kicks (docs/isa.md §3): before a unit may
// touch SRAM, the registers are checked in the order every implementation uses
// (npu_byoc.runtime.machine):
//
//   1. register values an operation cannot run with          -> INVALID_PARAMETER
//   2. the SRAM range of each operand (addr + bytes <= SRAM)   -> ADDRESS_OUT_OF_RANGE
//   3. the output overlapping an input operand                 -> INVALID_PARAMETER
//
// (4., the requantize table's shifts, is checked by the MAC engine, which reads the table.)
// The operand ranges stay on span_addr / span_len after done (the DMA interlock reads them).
// Two cycles: cycle 1 evaluates the register checks and the operand spans, cycle 2 the ranges
// and overlaps. Sizes are products of 32-bit registers; they saturate at SAT (> SRAM_BYTES),
// which keeps the range comparison exact without 96-bit arithmetic.
`default_nettype none
`include "npu_config.vh"

module npu_kick_check #(
    parameter longint SRAM_BYTES = `NPU_SRAM_BYTES,
    parameter int MAX_KERNEL = `NPU_MAX_KERNEL,
    parameter int MAX_STRIDE = `NPU_MAX_STRIDE,
    parameter int MAX_CHANNELS = `NPU_MAX_CHANNELS,
    parameter int MAX_POOL_WINDOW = `NPU_MAX_POOL_WINDOW,
    parameter int MAX_POOL_STRIDE = `NPU_MAX_POOL_STRIDE,
    parameter longint MAX_MEAN_ELEMENTS = `NPU_MAX_MEAN_ELEMENTS,
    parameter int MAX_FC_FEATURES = `NPU_MAX_FC_FEATURES
) (
    input  wire        clk,
    input  wire        rst_n,
    input  wire        start,
    input  wire [7:0]  opcode,
    output reg         done,    // pulse, with status
    output reg  [`NPU_STATUS_BITS-1:0] status,
    // the checked kick's SRAM operands: inputs 0..2 then the output (length 0: no operand)
    output wire [4*64-1:0] span_addr,
    output wire [4*64-1:0] span_len,
    // registers
    input  wire [31:0] ifm_addr,
    input  wire [31:0] ifm_h,
    input  wire [31:0] ifm_w,
    input  wire [31:0] ifm_c,
    input  wire [31:0] ifm_zero_point,
    input  wire [31:0] ifm2_addr,
    input  wire [31:0] ifm2_zero_point,
    input  wire [31:0] ifm2_broadcast,
    input  wire [31:0] ofm_addr,
    input  wire [31:0] ofm_h,
    input  wire [31:0] ofm_w,
    input  wire [31:0] ofm_c,
    input  wire [31:0] ofm_zero_point,
    input  wire [31:0] act_min,
    input  wire [31:0] act_max,
    input  wire [31:0] kernel_h,
    input  wire [31:0] kernel_w,
    input  wire [31:0] stride_h,
    input  wire [31:0] stride_w,
    input  wire [31:0] pad_top,
    input  wire [31:0] pad_left,
    input  wire [31:0] pad_bottom,
    input  wire [31:0] pad_right,
    input  wire [31:0] weight_addr,
    input  wire [31:0] requant_addr,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [31:0] ifm_multiplier,  // LAYERNORM: only its sign is checked
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire [31:0] ifm_shift,
    input  wire [31:0] ifm2_shift,
    input  wire [31:0] ofm_shift,
    input  wire [31:0] left_shift,
    input  wire [31:0] lut_addr
);
`include "npu_numerics.vh"

  localparam longint SAT = 2 * SRAM_BYTES;  // any size above SRAM_BYTES fails the range check

  // min(a * b, SAT); a, b <= 2^34
  function automatic logic [63:0] smul(input logic [63:0] fn_a, input logic [63:0] fn_b);
    logic [71:0] p;
    begin
      p = 72'(fn_a) * 72'(fn_b);
      smul = (p > 72'(SAT)) ? 64'(SAT) : 64'(p);
    end
  endfunction

  function automatic logic window_ok(input int fn_max_kernel, input int fn_max_stride,
                                     input logic [31:0] fn_kh, input logic [31:0] fn_kw,
                                     input logic [31:0] fn_sh, input logic [31:0] fn_sw,
                                     input logic [31:0] fn_pt, input logic [31:0] fn_pl,
                                     input logic [31:0] fn_pb, input logic [31:0] fn_pr);
    begin
      window_ok = fn_kh >= 32'd1 && fn_kw >= 32'd1 && fn_kh <= 32'(fn_max_kernel) && fn_kw <= 32'(fn_max_kernel)
               && fn_sh >= 32'd1 && fn_sw >= 32'd1 && fn_sh <= 32'(fn_max_stride) && fn_sw <= 32'(fn_max_stride)
               && fn_pt < fn_kh && fn_pb < fn_kh && fn_pl < fn_kw && fn_pr < fn_kw;
    end
  endfunction

  // out == (in + pad_a + pad_b - kernel) // stride + 1 (Python floor division), for out >= 1
  function automatic logic out_size_ok(input logic [31:0] fn_in, input logic [31:0] fn_pad_a,
                                       input logic [31:0] fn_pad_b, input logic [31:0] fn_kernel,
                                       input logic [31:0] fn_stride, input logic [31:0] fn_out);
    logic signed [67:0] n;
    logic signed [67:0] lo;
    logic signed [67:0] hi;
    begin
      n = 68'(fn_in) + 68'(fn_pad_a) + 68'(fn_pad_b) - 68'(fn_kernel);
      lo = (68'(fn_out) - 68'sd1) * 68'(fn_stride);
      hi = 68'(fn_out) * 68'(fn_stride);
      out_size_ok = n >= 0 && lo <= n && n < hi;
    end
  endfunction

  function automatic logic nonzero3(input logic [31:0] fn_a, input logic [31:0] fn_b, input logic [31:0] fn_c);
    begin
      nonzero3 = fn_a != 32'd0 && fn_b != 32'd0 && fn_c != 32'd0;
    end
  endfunction

  // stage 1 results
  reg        s1_valid;
  reg        s1_param_ok;
  reg [63:0] s1_in_addr [0:2];
  reg [63:0] s1_in_len  [0:2];  // 0: operand absent
  reg [63:0] s1_out_addr;
  reg [63:0] s1_out_len;

  assign span_addr = {s1_out_addr, s1_in_addr[2], s1_in_addr[1], s1_in_addr[0]};
  assign span_len  = {s1_out_len, s1_in_len[2], s1_in_len[1], s1_in_len[0]};

  wire is_mac  = opcode == `NPU_OP_CONV || opcode == `NPU_OP_DWCONV || opcode == `NPU_OP_FC;
  wire is_pool = opcode == `NPU_OP_AVGPOOL || opcode == `NPU_OP_MAXPOOL;

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      s1_valid <= 1'b0;
      done <= 1'b0;
      status <= `NPU_STATUS_OK;
    end else begin
      done <= 1'b0;
      s1_valid <= 1'b0;
      if (start) begin : stage1
        logic ok;
        logic clamp_ok;
        logic [63:0] ifm_bytes;
        logic [63:0] ofm_bytes;
        logic [63:0] weight_bytes;
        logic [63:0] in_addr [0:2];
        logic [63:0] in_len [0:2];
        clamp_ok = $signed(act_min) >= -32'sd128 && $signed(act_min) <= $signed(act_max)
                && $signed(act_max) <= 32'sd127;
        ifm_bytes = smul(smul(64'(ifm_h), 64'(ifm_w)), 64'(ifm_c));
        ofm_bytes = smul(smul(64'(ofm_h), 64'(ofm_w)), 64'(ofm_c));
        ok = 1'b1;
        for (int k = 0; k < 3; k++) begin
          in_addr[k] = 64'd0;
          in_len[k] = 64'd0;
        end
        s1_out_addr <= 64'(ofm_addr);
        s1_out_len <= ofm_bytes;
        if (is_mac) begin
          ok = nonzero3(ifm_h, ifm_w, ifm_c) && nonzero3(ofm_h, ofm_w, ofm_c)
            && is_int8(ifm_zero_point) && is_int8(ofm_zero_point) && clamp_ok
            && ifm_c <= 32'(MAX_CHANNELS) && ofm_c <= 32'(MAX_CHANNELS);
          if (opcode == `NPU_OP_FC) begin
            ok = ok && ifm_h == 32'd1 && ofm_h == 32'd1 && ifm_w == ofm_w
              && ifm_c <= 32'(MAX_FC_FEATURES) && ofm_c <= 32'(MAX_FC_FEATURES);
            weight_bytes = smul(64'(ofm_c), 64'(ifm_c));
          end else begin
            ok = ok && window_ok(MAX_KERNEL, MAX_STRIDE, kernel_h, kernel_w, stride_h, stride_w,
                                 pad_top, pad_left, pad_bottom, pad_right)
              && out_size_ok(ifm_h, pad_top, pad_bottom, kernel_h, stride_h, ofm_h)
              && out_size_ok(ifm_w, pad_left, pad_right, kernel_w, stride_w, ofm_w);
            weight_bytes = smul(smul(64'(ofm_c), 64'(kernel_h)), 64'(kernel_w));
            if (opcode == `NPU_OP_DWCONV) ok = ok && ifm_c == ofm_c;
            else weight_bytes = smul(weight_bytes, 64'(ifm_c));
          end
          ok = ok && requant_addr[1:0] == 2'd0;
          in_addr[0] = 64'(ifm_addr);
          in_len[0] = ifm_bytes;
          in_addr[1] = 64'(weight_addr);
          in_len[1] = weight_bytes;
          in_addr[2] = 64'(requant_addr);
          in_len[2] = smul(64'(ofm_c), 64'(`NPU_REQUANT_RECORD_BYTES));
        end else if (is_pool) begin
          ok = nonzero3(ifm_h, ifm_w, ifm_c) && nonzero3(ofm_h, ofm_w, ofm_c) && clamp_ok
            && window_ok(MAX_POOL_WINDOW, MAX_POOL_STRIDE, kernel_h, kernel_w, stride_h, stride_w,
                         pad_top, pad_left, pad_bottom, pad_right)
            && out_size_ok(ifm_h, pad_top, pad_bottom, kernel_h, stride_h, ofm_h)
            && out_size_ok(ifm_w, pad_left, pad_right, kernel_w, stride_w, ofm_w)
            && ifm_c == ofm_c;
          in_addr[0] = 64'(ifm_addr);
          in_len[0] = ifm_bytes;
        end else if (opcode == `NPU_OP_MEAN) begin
          ok = nonzero3(ifm_h, ifm_w, ifm_c) && is_int8(ifm_zero_point) && is_int8(ofm_zero_point) && clamp_ok
            && shift_ok(ofm_shift) && 64'(ifm_h) * 64'(ifm_w) <= 64'(MAX_MEAN_ELEMENTS);
          in_addr[0] = 64'(ifm_addr);
          in_len[0] = ifm_bytes;
          s1_out_len <= 64'(ifm_c);
        end else if (opcode == `NPU_OP_ADD || opcode == `NPU_OP_MUL || opcode == `NPU_OP_SQDIFF) begin
          ok = nonzero3(ofm_h, ofm_w, ofm_c) && is_int8(ifm_zero_point) && is_int8(ifm2_zero_point)
            && is_int8(ofm_zero_point) && clamp_ok && shift_ok(ofm_shift) && ifm2_broadcast <= 32'd1;
          if (opcode != `NPU_OP_MUL)  // ADD's datapath (ADD, SQDIFF): the input rescaling
            ok = ok && $signed(left_shift) >= 0 && $signed(left_shift) <= 31
              && shift_ok(ifm_shift) && shift_ok(ifm2_shift);
          in_addr[0] = 64'(ifm_addr);
          in_len[0] = ofm_bytes;
          in_addr[1] = 64'(ifm2_addr);
          in_len[1] = ifm2_broadcast != 32'd0 ? 64'(ofm_c) : ofm_bytes;  // broadcast: one channel vector
        end else if (opcode == `NPU_OP_SOFTMAX) begin
          ok = nonzero3(ofm_h, ofm_w, ofm_c) && ofm_c <= 32'(`NPU_SOFTMAX_MAX_CHANNELS) && lut_addr[1:0] == 2'd0;
          in_addr[0] = 64'(ifm_addr);
          in_len[0] = ofm_bytes;
          in_addr[1] = 64'(lut_addr);
          in_len[1] = 64'(`NPU_SOFTMAX_TABLE_BYTES);
        end else if (opcode == `NPU_OP_LAYERNORM) begin  // the epsilon term: IFM_MULTIPLIER >= 0, IFM_SHIFT even
          ok = nonzero3(ofm_h, ofm_w, ofm_c) && is_int8(ifm_zero_point) && is_int8(ofm_zero_point) && clamp_ok
            && ofm_c <= 32'(`NPU_LAYERNORM_MAX_CHANNELS)
            && ifm_shift <= 32'(`NPU_LAYERNORM_MAX_FRAC_BITS) && !ifm_shift[0] && !ifm_multiplier[31]
            && requant_addr[1:0] == 2'd0;
          in_addr[0] = 64'(ifm_addr);
          in_len[0] = ofm_bytes;
          in_addr[1] = 64'(requant_addr);
          in_len[1] = smul(64'(ofm_c), 64'(`NPU_REQUANT_RECORD_BYTES));
        end else begin  // LUT
          ok = nonzero3(ofm_h, ofm_w, ofm_c);
          in_addr[0] = 64'(ifm_addr);
          in_len[0] = ofm_bytes;
          in_addr[1] = 64'(lut_addr);
          in_len[1] = 64'd256;
        end
        s1_in_addr <= in_addr;
        s1_in_len <= in_len;
        s1_param_ok <= ok;
        s1_valid <= 1'b1;
      end
      if (s1_valid) begin : stage2
        logic range_ok;
        logic overlap_ok;
        range_ok = s1_out_addr + s1_out_len <= 64'(SRAM_BYTES);
        overlap_ok = 1'b1;
        for (int k = 0; k < 3; k++) begin
          if (s1_in_len[k] != 64'd0) begin
            range_ok = range_ok && s1_in_addr[k] + s1_in_len[k] <= 64'(SRAM_BYTES);
            overlap_ok = overlap_ok && (s1_out_addr + s1_out_len <= s1_in_addr[k]
                                        || s1_in_addr[k] + s1_in_len[k] <= s1_out_addr);
          end
        end
        done <= 1'b1;
        status <= !s1_param_ok ? `NPU_STATUS_INVALID_PARAMETER
                : !range_ok ? `NPU_STATUS_ADDRESS_OUT_OF_RANGE
                : !overlap_ok ? `NPU_STATUS_INVALID_PARAMETER
                : `NPU_STATUS_OK;
      end
    end
  end
endmodule

`default_nettype wire
