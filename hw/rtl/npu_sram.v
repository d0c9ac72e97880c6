// npu_sram.v -- the on-chip SRAM: SRAM_BYTES bytes, byte-addressed from 0 (docs/isa.md §1).
//
// One port per client, so the ports never compete and need no arbiter: the command processor
// runs one compute unit at a time, and the DMA (which may run in the background beside it,
// docs/isa.md "Concurrency") has its own port; the DMA interlock (npu_dma.v) holds a kick
// whose operands meet a DMA in flight, so same-edge writes to one byte never meet. Every read
// is synchronous: the client registers an address and enable, the data is registered here on
// the next clock edge.
//
//   DMA      DMA_BYTES-byte read and write (any byte address; a write stores `len` bytes)
//   vector   two VEC_BYTES-byte reads (A, B) and one VEC_BYTES-byte write (pools, MEAN, ADD, LUT)
//   MAC      activation gather: one read per array column, R consecutive bytes (DWCONV: the
//            R channels of a pixel) or 1 byte (CONV, FC; `act_wide` = 0)
//            weight gather: one byte per (weight lane, array row)
//            requantize gather: one 12-byte record (bias, multiplier, shift) per column
//            output scatter: one byte write per column (the drain of the requantize units)
//
// The MAC ports are a model of a banked SRAM: the simulation assumes the banks deliver these
// bytes every cycle (docs/cosim.md states the bandwidth this implies). GUARD bytes after the
// end absorb the over-read of wide reads at the end of the SRAM (their data is never used).
`default_nettype none
`include "npu_config.vh"

module npu_sram #(
    parameter longint SRAM_BYTES = `NPU_SRAM_BYTES,
    parameter longint GUARD = 64,
    parameter int AW = 19,
    parameter int DMA_BYTES = `NPU_DMA_BYTES_PER_CYCLE,
    parameter int VEC_BYTES = 32,
    parameter int R = `NPU_ARRAY_ROWS,
    parameter int C = `NPU_ARRAY_COLS,
    parameter int LANES = 4,
    parameter int VEC_LW = $clog2(VEC_BYTES + 1),
    parameter int DMA_WR_BYTES = DMA_BYTES,  // the DMA's write: a read's bytes or the weight decoder's
    parameter int DMA_WR_LW = $clog2(DMA_WR_BYTES + 1)
) (
    input  wire          clk,
    // DMA
    input  wire          dma_rd_en,
    input  wire [AW-1:0] dma_rd_addr,
    output reg  [8*DMA_BYTES-1:0] dma_rd_data,
    input  wire          dma_wr_en,
    input  wire [AW-1:0] dma_wr_addr,
    input  wire [DMA_WR_LW-1:0] dma_wr_len,
    input  wire [8*DMA_WR_BYTES-1:0] dma_wr_data,
    // vector unit
    input  wire          vec_rd_a_en,
    input  wire [AW-1:0] vec_rd_a_addr,
    output reg  [7:0]    vec_rd_a_data [0:VEC_BYTES-1],
    input  wire          vec_rd_b_en,
    input  wire [AW-1:0] vec_rd_b_addr,
    output reg  [7:0]    vec_rd_b_data [0:VEC_BYTES-1],
    input  wire          vec_wr_en,
    input  wire [AW-1:0] vec_wr_addr,
    input  wire [VEC_LW-1:0] vec_wr_len,
    input  wire [7:0]    vec_wr_data [0:VEC_BYTES-1],
    // MAC engine
    input  wire          act_any,                   // some act_en is set
    input  wire          act_en   [0:C-1],
    input  wire [AW-1:0] act_addr [0:C-1],
    input  wire          act_wide,
    output reg  [7:0]    act_data [0:C*R-1],        // [c*R + r]
    input  wire          w_any,
    input  wire          w_en     [0:LANES*R-1],    // [lane*R + r]
    input  wire [AW-1:0] w_addr   [0:LANES*R-1],
    output reg  [7:0]    w_data   [0:LANES*R-1],
    input  wire          rq_any,
    input  wire          rq_en    [0:C-1],
    input  wire [AW-1:0] rq_addr  [0:C-1],
    output reg  [31:0]   rq_bias  [0:C-1],
    output reg  [31:0]   rq_multiplier [0:C-1],
    output reg  [31:0]   rq_shift [0:C-1],
    input  wire          out_any,
    input  wire          out_en   [0:C-1],
    input  wire [AW-1:0] out_addr [0:C-1],
    input  wire [7:0]    out_data [0:C-1]
);
  reg [7:0] mem [0:SRAM_BYTES+GUARD-1];

  function automatic logic [31:0] word_at(input logic [AW-1:0] fn_a);
    begin
      word_at = {mem[fn_a + AW'(3)], mem[fn_a + AW'(2)], mem[fn_a + AW'(1)], mem[fn_a]};
    end
  endfunction

  // Reads are assembled in local arrays and assigned as whole arrays (cheaper in Verilator
  // than one tracked write per element); the bytes of lanes not enabled are don't-care.
  always_ff @(posedge clk) begin
    // reads (before the writes of the same edge: a read sees the old contents)
    if (dma_rd_en)
      for (int i = 0; i < DMA_BYTES; i++) dma_rd_data[8*i +: 8] <= mem[dma_rd_addr + AW'(i)];
    if (vec_rd_a_en) begin : rd_a
      logic [7:0] v [0:VEC_BYTES-1];
      for (int i = 0; i < VEC_BYTES; i++) v[i] = mem[vec_rd_a_addr + AW'(i)];
      vec_rd_a_data <= v;
    end
    if (vec_rd_b_en) begin : rd_b
      logic [7:0] v [0:VEC_BYTES-1];
      for (int i = 0; i < VEC_BYTES; i++) v[i] = mem[vec_rd_b_addr + AW'(i)];
      vec_rd_b_data <= v;
    end
    if (act_any) begin : act_gather
      logic [7:0] v [0:C*R-1];
      for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
          v[c*R + r] = (act_en[c] && (act_wide || r == 0)) ? mem[act_addr[c] + AW'(r)] : 8'd0;
      act_data <= v;
    end
    if (w_any) begin : w_gather
      logic [7:0] v [0:LANES*R-1];
      for (int k = 0; k < LANES*R; k++) v[k] = w_en[k] ? mem[w_addr[k]] : 8'd0;
      w_data <= v;
    end
    if (rq_any) begin : rq_gather
      logic [31:0] b [0:C-1];
      logic [31:0] m [0:C-1];
      logic [31:0] s [0:C-1];
      for (int c = 0; c < C; c++) begin
        b[c] = rq_en[c] ? word_at(rq_addr[c]) : 32'd0;
        m[c] = rq_en[c] ? word_at(rq_addr[c] + AW'(4)) : 32'd0;
        s[c] = rq_en[c] ? word_at(rq_addr[c] + AW'(8)) : 32'd0;
      end
      rq_bias <= b;
      rq_multiplier <= m;
      rq_shift <= s;
    end
    // writes
    if (dma_wr_en)
      for (int i = 0; i < DMA_WR_BYTES; i++) if (DMA_WR_LW'(i) < dma_wr_len) mem[dma_wr_addr + AW'(i)] <= dma_wr_data[8*i +: 8];
    if (vec_wr_en)
      for (int i = 0; i < VEC_BYTES; i++) if (VEC_LW'(i) < vec_wr_len) mem[vec_wr_addr + AW'(i)] <= vec_wr_data[i];
    if (out_any)
      for (int c = 0; c < C; c++) if (out_en[c]) mem[out_addr[c]] <= out_data[c];
  end
endmodule

`default_nettype wire
