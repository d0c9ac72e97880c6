// npu_mac_array.v -- the R x C MAC array: int8 x int8 multiplies into int32 accumulators
// (output-stationary; docs/architecture.md §2).
//
// Processing element (r, c) owns output channel (row) r of output pixel (column) c of the
// current block. On every tap it adds (x - IFM_ZERO_POINT) * w to its accumulator:
//   x  column c's activation: byte 0 of the column's operand (CONV, FC: broadcast down the
//      column), or byte r (DWCONV: the per-row activation port, channel r of the pixel); a
//      tap in the padding (act_valid = 0) contributes 0;
//   w  the weight of row r in the column's weight lane (lane[c]; a block holds up to LANES
//      channel blocks side by side, see npu_mac.v).
// The accumulators are double-buffered: the block's last tap moves the sums to drain_acc,
// which the requantize units read over the next R cycles while the next block accumulates.
// Sums wrap at 32 bits, as the ISA's int32 accumulator does.
`default_nettype none
`include "npu_config.vh"

module npu_mac_array #(
    parameter int R = `NPU_ARRAY_ROWS,
    parameter int C = `NPU_ARRAY_COLS,
    parameter int LANES = 4,
    parameter int LB = (LANES > 1) ? $clog2(LANES) : 1
) (
    input  wire        clk,
    input  wire        en,               // a tap this cycle
    input  wire        first,            // first tap of a block: accumulators restart from 0
    input  wire        last,             // last tap of a block: sums -> drain_acc
    input  wire        dw,               // DWCONV: per-row activations
    input  wire signed [8:0] ifm_zero_point,
    input  wire [C-1:0] act_valid,       // the column's tap is inside the input
    input  wire [7:0]  act [0:C*R-1],    // [c*R + r]
    input  wire [LB-1:0] lane [0:C-1],   // weight lane of each column
    input  wire [7:0]  w [0:LANES*R-1],  // [lane*R + r]
    output reg  [31:0] drain_acc [0:R*C-1]  // [r*C + c]
);
  reg [31:0] acc [0:R*C-1];

  // (whole-array assignments: Verilator then copies the array once instead of tracking 2*R*C
  // element writes)
  always_ff @(posedge clk) begin
    if (en) begin : taps
      logic [31:0] sums [0:R*C-1];
      for (int c = 0; c < C; c++) begin
        for (int r = 0; r < R; r++) begin : pe
          logic signed [8:0] x;
          logic signed [16:0] p;
          x = act_valid[c] ? $signed({act[c*R + (dw ? r : 0)][7], act[c*R + (dw ? r : 0)]}) - ifm_zero_point : 9'sd0;
          p = 17'(x) * 17'($signed(w[32'(lane[c])*R + r]));
          sums[r*C + c] = (first ? 32'd0 : acc[r*C + c]) + 32'(p);
        end
      end
      acc <= sums;
      if (last) drain_acc <= sums;
    end
  end
endmodule

`default_nettype wire
