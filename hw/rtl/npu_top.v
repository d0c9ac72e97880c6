// npu_top.v -- the NPU: command processor, register file, DMA, SRAM, MAC engine and vector unit
// (docs/architecture.md §1, docs/cosim.md). The harness (hw/sim/npu_verilator.cc) is its
// driver and its external memory.
//
// Driver protocol:
//   1. reset (rst_n low for a cycle);
//   2. bind the regions: one region_we cycle per region (bound flag, size in bytes);
//   3. start (one cycle) with stream_words = the submitted length and cmd_budget;
//   4. every cycle, serve the fetch port (fetch_word <= stream[fetch_index] for the next edge)
//      and the memory port (mem_rdata <= region bytes for the next edge; writes at once);
//   5. done rises when the run ends: status and word_index as docs/isa.md §4 says.
// cmd_done pulses once per command executed (cmd_opcode, cmd_index): the harness's trace.
`default_nettype none
`include "npu_config.vh"

module npu_top #(
    parameter longint SRAM_BYTES = `NPU_SRAM_BYTES,
    parameter int R = `NPU_ARRAY_ROWS,
    parameter int C = `NPU_ARRAY_COLS,
    parameter int LANES = 4,        // weight lanes of the MAC engine
    parameter int DMA_BYTES = `NPU_DMA_BYTES_PER_CYCLE,  // external memory bytes per request
    parameter longint GUARD = 64 + longint'(C) + longint'(R),  // SRAM bytes after the end, for the over-read of wide reads
    parameter int AW = $clog2(SRAM_BYTES + GUARD)
) (
    input  wire        clk,
    input  wire        rst_n,
    // region table
    input  wire        region_we,
    input  wire [`NPU_REGION_BITS-1:0] region_idx,
    input  wire        region_bound,
    input  wire [63:0] region_size,
    // run control
    input  wire        start,
    input  wire [63:0] stream_words,
    input  wire [63:0] cmd_budget,
    output wire        busy,
    output wire        done,
    output wire [`NPU_STATUS_BITS-1:0] status,
    output wire [31:0] word_index,
    output wire [31:0] cur_index,
    output wire [63:0] commands,
    // command fetch
    output wire        fetch_valid,
    output wire [31:0] fetch_index,
    input  wire [31:0] fetch_word,
    // external memory
    output wire        mem_valid,
    output wire        mem_write,
    output wire [`NPU_REGION_BITS-1:0] mem_region,
    output wire [63:0] mem_addr,
    output wire [$clog2(DMA_BYTES + 1)-1:0] mem_len,
    output wire [8*DMA_BYTES-1:0] mem_wdata,
    input  wire [8*DMA_BYTES-1:0] mem_rdata,
    // memory timing (npu_dma): the harness's memory model grants the DMA's requests
    input  wire        mem_grant,
    output wire        mem_req,
    output wire        mem_req_write,
    output wire [3:0]  mem_req_region,
    output wire [31:0] mem_req_row_left,
    output wire        mem_req_row_first,
    output wire [31:0] mem_req_wait,
    // trace
    output wire        cmd_done,
    output wire [7:0]  cmd_opcode,
    output wire [31:0] cmd_index
);
  // ---- register file
  wire [31:0] dma_ext_region;
  wire [31:0] dma_ext_addr;
  wire [31:0] dma_sram_addr;
  wire [31:0] dma_n0;
  wire [31:0] dma_n1;
  wire [31:0] dma_n2;
  wire [31:0] dma_stride0;
  wire [31:0] dma_stride1;
  wire [31:0] dma_stride2;
  wire [31:0] dma_wait_pending;
  wire [31:0] dma_decode_bytes;
  wire [7:0]  dma_outstanding;
  wire [31:0] ifm_addr;
  wire [31:0] ifm_h;
  wire [31:0] ifm_w;
  wire [31:0] ifm_c;
  wire [31:0] ifm_zero_point;
  wire [31:0] ifm2_addr;
  wire [31:0] ifm2_zero_point;
  wire [31:0] ifm2_broadcast;
  wire [31:0] ofm_addr;
  wire [31:0] ofm_h;
  wire [31:0] ofm_w;
  wire [31:0] ofm_c;
  wire [31:0] ofm_zero_point;
  wire [31:0] act_min;
  wire [31:0] act_max;
  wire [31:0] kernel_h;
  wire [31:0] kernel_w;
  wire [31:0] stride_h;
  wire [31:0] stride_w;
  wire [31:0] pad_top;
  wire [31:0] pad_left;
  wire [31:0] pad_bottom;
  wire [31:0] pad_right;
  wire [31:0] weight_addr;
  wire [31:0] requant_addr;
  wire [31:0] ifm_multiplier;
  wire [31:0] ifm_shift;
  wire [31:0] ifm2_multiplier;
  wire [31:0] ifm2_shift;
  wire [31:0] ofm_multiplier;
  wire [31:0] ofm_shift;
  wire [31:0] left_shift;
  wire [31:0] lut_addr;
  wire        rf_clear, rf_we;
  wire [7:0]  rf_addr;
  wire [31:0] rf_wdata;

  npu_regfile regfile (
      .clk(clk),
      .rst_n(rst_n),
      .clear(rf_clear),
      .we(rf_we),
      .addr(rf_addr),
      .wdata(rf_wdata),
      .dma_ext_region(dma_ext_region),
      .dma_ext_addr(dma_ext_addr),
      .dma_sram_addr(dma_sram_addr),
      .dma_n0(dma_n0),
      .dma_n1(dma_n1),
      .dma_n2(dma_n2),
      .dma_stride0(dma_stride0),
      .dma_stride1(dma_stride1),
      .dma_stride2(dma_stride2),
      .dma_wait_pending(dma_wait_pending),
      .dma_decode_bytes(dma_decode_bytes),
      .ifm_addr(ifm_addr),
      .ifm_h(ifm_h),
      .ifm_w(ifm_w),
      .ifm_c(ifm_c),
      .ifm_zero_point(ifm_zero_point),
      .ifm2_addr(ifm2_addr),
      .ifm2_zero_point(ifm2_zero_point),
      .ifm2_broadcast(ifm2_broadcast),
      .ofm_addr(ofm_addr),
      .ofm_h(ofm_h),
      .ofm_w(ofm_w),
      .ofm_c(ofm_c),
      .ofm_zero_point(ofm_zero_point),
      .act_min(act_min),
      .act_max(act_max),
      .kernel_h(kernel_h),
      .kernel_w(kernel_w),
      .stride_h(stride_h),
      .stride_w(stride_w),
      .pad_top(pad_top),
      .pad_left(pad_left),
      .pad_bottom(pad_bottom),
      .pad_right(pad_right),
      .weight_addr(weight_addr),
      .requant_addr(requant_addr),
      .ifm_multiplier(ifm_multiplier),
      .ifm_shift(ifm_shift),
      .ifm2_multiplier(ifm2_multiplier),
      .ifm2_shift(ifm2_shift),
      .ofm_multiplier(ofm_multiplier),
      .ofm_shift(ofm_shift),
      .left_shift(left_shift),
      .lut_addr(lut_addr)
  );

  // ---- command processor
  wire [7:0] kick_op;
  wire [4*64-1:0] kick_span_addr, kick_span_len;  // the checked kick's SRAM operands (DMA interlock)
  wire dma_hazard, dma_hazard_query;
  wire dma_start, dma_done, dma_accepted, dma_busy, check_start, check_done, mac_start, mac_done, mac_error, vec_start, vec_done;
  wire [`NPU_STATUS_BITS-1:0] dma_status, check_status;
  wire dma_bad_code;       // a DMA_IN_DECODE of this run had a bad code (npu_dma)
  wire [31:0] dma_bad_index;

  npu_cmdproc cmdproc (
      .clk(clk),
      .rst_n(rst_n),
      .start(start),
      .stream_words(stream_words),
      .cmd_budget(cmd_budget),
      .busy(busy),
      .done(done),
      .status(status),
      .word_index(word_index),
      .cur_index(cur_index),
      .commands(commands),
      .fetch_valid(fetch_valid),
      .fetch_index(fetch_index),
      .fetch_word(fetch_word),
      .rf_clear(rf_clear),
      .rf_we(rf_we),
      .rf_addr(rf_addr),
      .rf_wdata(rf_wdata),
      .kick_op(kick_op),
      .dma_start(dma_start),
      .dma_done(dma_done),
      .dma_accepted(dma_accepted),
      .dma_busy(dma_busy),
      .dma_outstanding(dma_outstanding),
      .dma_wait_pending(dma_wait_pending),
      .dma_status(dma_status),
      .dma_bad_code(dma_bad_code),
      .dma_bad_index(dma_bad_index),
      .dma_hazard(dma_hazard),
      .dma_hazard_query(dma_hazard_query),
      .check_start(check_start),
      .check_done(check_done),
      .check_status(check_status),
      .mac_start(mac_start),
      .mac_done(mac_done),
      .mac_error(mac_error),
      .vec_start(vec_start),
      .vec_done(vec_done),
      .cmd_done(cmd_done),
      .cmd_opcode(cmd_opcode),
      .cmd_index(cmd_index)
  );

  // ---- check stage of the compute kicks
  npu_kick_check #(.SRAM_BYTES(SRAM_BYTES)) kick_check (
      .clk(clk),
      .rst_n(rst_n),
      .start(check_start),
      .opcode(kick_op),
      .done(check_done),
      .status(check_status),
      .span_addr(kick_span_addr),
      .span_len(kick_span_len),
      .ifm_addr(ifm_addr),
      .ifm_h(ifm_h),
      .ifm_w(ifm_w),
      .ifm_c(ifm_c),
      .ifm_zero_point(ifm_zero_point),
      .ifm2_addr(ifm2_addr),
      .ifm2_zero_point(ifm2_zero_point),
      .ifm2_broadcast(ifm2_broadcast),
      .ofm_addr(ofm_addr),
      .ofm_h(ofm_h),
      .ofm_w(ofm_w),
      .ofm_c(ofm_c),
      .ofm_zero_point(ofm_zero_point),
      .act_min(act_min),
      .act_max(act_max),
      .kernel_h(kernel_h),
      .kernel_w(kernel_w),
      .stride_h(stride_h),
      .stride_w(stride_w),
      .pad_top(pad_top),
      .pad_left(pad_left),
      .pad_bottom(pad_bottom),
      .pad_right(pad_right),
      .weight_addr(weight_addr),
      .requant_addr(requant_addr),
      .ifm_multiplier(ifm_multiplier),
      .ifm_shift(ifm_shift),
      .ifm2_shift(ifm2_shift),
      .ofm_shift(ofm_shift),
      .left_shift(left_shift),
      .lut_addr(lut_addr)
  );

  // ---- SRAM ports
  wire          dma_rd_en, dma_wr_en;
  wire [AW-1:0] dma_rd_addr, dma_wr_addr;
  // the DMA's SRAM writes: a read's bytes, or the weight decoder's (npu_dma)
  localparam int WDEC = `NPU_WEIGHT_DECODER_BYTES_PER_CYCLE;
  localparam int DMA_WR_BYTES = WDEC > DMA_BYTES ? WDEC : DMA_BYTES;
  wire [$clog2(DMA_WR_BYTES + 1)-1:0] dma_wr_len;
  wire [8*DMA_BYTES-1:0] dma_rd_data;
  wire [8*DMA_WR_BYTES-1:0] dma_wr_data;
  wire          vec_rd_a_en, vec_rd_b_en, vec_wr_en;
  wire [AW-1:0] vec_rd_a_addr, vec_rd_b_addr, vec_wr_addr;
  wire [$clog2(C + 1)-1:0] vec_wr_len;
  wire [7:0]    vec_rd_a_data [0:C-1];
  wire [7:0]    vec_rd_b_data [0:C-1];
  wire [7:0]    vec_wr_data [0:C-1];
  wire          act_any;
  wire          act_en   [0:C-1];
  wire [AW-1:0] act_addr [0:C-1];
  wire          act_wide;
  wire [7:0]    act_data [0:C*R-1];
  wire          w_any;
  wire          w_en     [0:LANES*R-1];
  wire [AW-1:0] w_addr   [0:LANES*R-1];
  wire [7:0]    w_data   [0:LANES*R-1];
  wire          rq_any;
  wire          rq_en    [0:C-1];
  wire [AW-1:0] rq_addr  [0:C-1];
  wire [31:0]   rq_bias  [0:C-1];
  wire [31:0]   rq_multiplier [0:C-1];
  wire [31:0]   rq_shift [0:C-1];
  wire          out_any;
  wire          out_en   [0:C-1];
  wire [AW-1:0] out_addr [0:C-1];
  wire [7:0]    out_data [0:C-1];

  npu_sram #(.SRAM_BYTES(SRAM_BYTES), .GUARD(GUARD), .AW(AW), .DMA_BYTES(DMA_BYTES), .VEC_BYTES(C), .R(R), .C(C),
             .LANES(LANES), .DMA_WR_BYTES(DMA_WR_BYTES)) sram (
      .clk(clk),
      .dma_rd_en(dma_rd_en),
      .dma_rd_addr(dma_rd_addr),
      .dma_rd_data(dma_rd_data),
      .dma_wr_en(dma_wr_en),
      .dma_wr_addr(dma_wr_addr),
      .dma_wr_len(dma_wr_len),
      .dma_wr_data(dma_wr_data),
      .vec_rd_a_en(vec_rd_a_en),
      .vec_rd_a_addr(vec_rd_a_addr),
      .vec_rd_a_data(vec_rd_a_data),
      .vec_rd_b_en(vec_rd_b_en),
      .vec_rd_b_addr(vec_rd_b_addr),
      .vec_rd_b_data(vec_rd_b_data),
      .vec_wr_en(vec_wr_en),
      .vec_wr_addr(vec_wr_addr),
      .vec_wr_len(vec_wr_len),
      .vec_wr_data(vec_wr_data),
      .act_any(act_any),
      .act_en(act_en),
      .act_addr(act_addr),
      .act_wide(act_wide),
      .act_data(act_data),
      .w_any(w_any),
      .w_en(w_en),
      .w_addr(w_addr),
      .w_data(w_data),
      .rq_any(rq_any),
      .rq_en(rq_en),
      .rq_addr(rq_addr),
      .rq_bias(rq_bias),
      .rq_multiplier(rq_multiplier),
      .rq_shift(rq_shift),
      .out_any(out_any),
      .out_en(out_en),
      .out_addr(out_addr),
      .out_data(out_data)
  );

  // ---- DMA
  wire dma_decode = kick_op == `NPU_OP_DMA_IN_DECODE || kick_op == `NPU_OP_DMA_IN_DECODE_ASYNC;
  npu_dma #(.SRAM_BYTES(SRAM_BYTES), .AW(AW), .DMA_BYTES(DMA_BYTES), .WDEC(WDEC)) dma (
      .clk(clk),
      .rst_n(rst_n),
      .region_we(region_we),
      .region_idx(region_idx),
      .region_bound(region_bound),
      .region_size(region_size),
      .start(dma_start),
      .to_sram(kick_op == `NPU_OP_DMA_IN || kick_op == `NPU_OP_DMA_IN_ASYNC || dma_decode),
      .decode(dma_decode),
      .cmd_index(cur_index),
      .clear(rf_clear),
      .bad_code(dma_bad_code),
      .bad_index(dma_bad_index),
      .done(dma_done),
      .accepted(dma_accepted),
      .busy(dma_busy),
      .outstanding(dma_outstanding),
      .query_addr(kick_span_addr),
      .query_len(kick_span_len),
      .query_on(dma_hazard_query),
      .sram_hazard(dma_hazard),
      .status(dma_status),
      .reg_ext_region(dma_ext_region),
      .reg_ext_addr(dma_ext_addr),
      .reg_sram_addr(dma_sram_addr),
      .reg_n0(dma_n0),
      .reg_n1(dma_n1),
      .reg_n2(dma_n2),
      .reg_stride0(dma_stride0),
      .reg_stride1(dma_stride1),
      .reg_stride2(dma_stride2),
      .reg_decode_bytes(dma_decode_bytes),
      .mem_valid(mem_valid),
      .mem_write(mem_write),
      .mem_region(mem_region),
      .mem_addr(mem_addr),
      .mem_len(mem_len),
      .mem_grant(mem_grant),
      .mem_req(mem_req),
      .mem_req_write(mem_req_write),
      .mem_req_region(mem_req_region),
      .mem_req_row_left(mem_req_row_left),
      .mem_req_row_first(mem_req_row_first),
      .mem_req_wait(mem_req_wait),
      .mem_wdata(mem_wdata),
      .mem_rdata(mem_rdata),
      .sram_rd_en(dma_rd_en),
      .sram_rd_addr(dma_rd_addr),
      .sram_rd_data(dma_rd_data),
      .sram_wr_en(dma_wr_en),
      .sram_wr_addr(dma_wr_addr),
      .sram_wr_len(dma_wr_len),
      .sram_wr_data(dma_wr_data)
  );

  // ---- MAC engine: CONV, DWCONV, FC
  npu_mac #(.AW(AW), .R(R), .C(C), .LANES(LANES)) mac (
      .clk(clk),
      .rst_n(rst_n),
      .start(mac_start),
      .opcode(kick_op),
      .done(mac_done),
      .error(mac_error),
      .ifm_addr(ifm_addr),
      .ifm_h(ifm_h),
      .ifm_w(ifm_w),
      .ifm_c(ifm_c),
      .ifm_zero_point(ifm_zero_point[8:0]),
      .ofm_addr(ofm_addr),
      .ofm_h(ofm_h),
      .ofm_w(ofm_w),
      .ofm_c(ofm_c),
      .ofm_zero_point(ofm_zero_point),
      .act_min(act_min),
      .act_max(act_max),
      .kernel_h(kernel_h),
      .kernel_w(kernel_w),
      .stride_h(stride_h),
      .stride_w(stride_w),
      .pad_top(pad_top),
      .pad_left(pad_left),
      .weight_addr(weight_addr),
      .requant_addr(requant_addr),
      .act_any(act_any),
      .act_en(act_en),
      .act_addr(act_addr),
      .act_wide(act_wide),
      .act_data(act_data),
      .w_any(w_any),
      .w_en(w_en),
      .w_addr(w_addr),
      .w_data(w_data),
      .rq_any(rq_any),
      .rq_en(rq_en),
      .rq_addr(rq_addr),
      .rq_bias(rq_bias),
      .rq_multiplier(rq_multiplier),
      .rq_shift(rq_shift),
      .out_any(out_any),
      .out_en(out_en),
      .out_addr(out_addr),
      .out_data(out_data)
  );

  // ---- vector unit: AVGPOOL, MAXPOOL, MEAN, ADD, SQDIFF, MUL, LUT, SOFTMAX, LAYERNORM
  npu_vec #(.AW(AW), .V(C)) vec (
      .clk(clk),
      .rst_n(rst_n),
      .start(vec_start),
      .opcode(kick_op),
      .done(vec_done),
      .ifm_addr(ifm_addr),
      .ifm_h(ifm_h),
      .ifm_w(ifm_w),
      .ifm_c(ifm_c),
      .ifm_zero_point(ifm_zero_point),
      .ifm2_addr(ifm2_addr),
      .ifm2_zero_point(ifm2_zero_point),
      .ifm2_broadcast(ifm2_broadcast),
      .ofm_addr(ofm_addr),
      .ofm_h(ofm_h),
      .ofm_w(ofm_w),
      .ofm_c(ofm_c),
      .ofm_zero_point(ofm_zero_point),
      .act_min(act_min),
      .act_max(act_max),
      .kernel_h(kernel_h),
      .kernel_w(kernel_w),
      .stride_h(stride_h),
      .stride_w(stride_w),
      .pad_top(pad_top),
      .pad_left(pad_left),
      .ifm_multiplier(ifm_multiplier),
      .ifm_shift(ifm_shift),
      .ifm2_multiplier(ifm2_multiplier),
      .ifm2_shift(ifm2_shift),
      .ofm_multiplier(ofm_multiplier),
      .ofm_shift(ofm_shift),
      .left_shift(left_shift[4:0]),
      .lut_addr(lut_addr),
      .requant_addr(requant_addr),
      .rd_a_en(vec_rd_a_en),
      .rd_a_addr(vec_rd_a_addr),
      .rd_a_data(vec_rd_a_data),
      .rd_b_en(vec_rd_b_en),
      .rd_b_addr(vec_rd_b_addr),
      .rd_b_data(vec_rd_b_data),
      .wr_en(vec_wr_en),
      .wr_addr(vec_wr_addr),
      .wr_len(vec_wr_len),
      .wr_data(vec_wr_data)
  );
endmodule

`default_nettype wire
