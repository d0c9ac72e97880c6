// npu_regfile.v -- the register file (docs/isa.md §2, isa.Reg): one 32-bit register per
// address of the register table, cleared when a stream starts, written by SET_REG.
//
// Every register is an output of its own, named as in isa.Reg (lower case). Signed registers
// (isa.SIGNED_REGS) hold two's complement values; the units read them with $signed().
// An address that is not in the table is never written: the command processor rejects it
// with INVALID_REGISTER before it reaches this block.
`default_nettype none
`include "npu_config.vh"

module npu_regfile (
    input  wire        clk,
    input  wire        rst_n,
    input  wire        clear,  // start of a stream: every register <- 0
    input  wire        we,     // SET_REG
    input  wire [7:0]  addr,
    input  wire [31:0] wdata,
    output reg  [31:0] dma_ext_region,
    output reg  [31:0] dma_ext_addr,
    output reg  [31:0] dma_sram_addr,
    output reg  [31:0] dma_n0,
    output reg  [31:0] dma_n1,
    output reg  [31:0] dma_n2,
    output reg  [31:0] dma_stride0,
    output reg  [31:0] dma_stride1,
    output reg  [31:0] dma_stride2,
    output reg  [31:0] dma_wait_pending,
    output reg  [31:0] dma_decode_bytes,
    output reg  [31:0] ifm_addr,
    output reg  [31:0] ifm_h,
    output reg  [31:0] ifm_w,
    output reg  [31:0] ifm_c,
    output reg  [31:0] ifm_zero_point,
    output reg  [31:0] ifm2_addr,
    output reg  [31:0] ifm2_zero_point,
    output reg  [31:0] ifm2_broadcast,
    output reg  [31:0] ofm_addr,
    output reg  [31:0] ofm_h,
    output reg  [31:0] ofm_w,
    output reg  [31:0] ofm_c,
    output reg  [31:0] ofm_zero_point,
    output reg  [31:0] act_min,
    output reg  [31:0] act_max,
    output reg  [31:0] kernel_h,
    output reg  [31:0] kernel_w,
    output reg  [31:0] stride_h,
    output reg  [31:0] stride_w,
    output reg  [31:0] pad_top,
    output reg  [31:0] pad_left,
    output reg  [31:0] pad_bottom,
    output reg  [31:0] pad_right,
    output reg  [31:0] weight_addr,
    output reg  [31:0] requant_addr,
    output reg  [31:0] ifm_multiplier,
    output reg  [31:0] ifm_shift,
    output reg  [31:0] ifm2_multiplier,
    output reg  [31:0] ifm2_shift,
    output reg  [31:0] ofm_multiplier,
    output reg  [31:0] ofm_shift,
    output reg  [31:0] left_shift,
    output reg  [31:0] lut_addr
);

  always_ff @(posedge clk) begin
    if (!rst_n || clear) begin
      dma_ext_region <= 32'd0;
      dma_ext_addr <= 32'd0;
      dma_sram_addr <= 32'd0;
      dma_n0 <= 32'd0;
      dma_n1 <= 32'd0;
      dma_n2 <= 32'd0;
      dma_stride0 <= 32'd0;
      dma_stride1 <= 32'd0;
      dma_stride2 <= 32'd0;
      dma_wait_pending <= 32'd0;
      dma_decode_bytes <= 32'd0;
      ifm_addr <= 32'd0;
      ifm_h <= 32'd0;
      ifm_w <= 32'd0;
      ifm_c <= 32'd0;
      ifm_zero_point <= 32'd0;
      ifm2_addr <= 32'd0;
      ifm2_zero_point <= 32'd0;
      ifm2_broadcast <= 32'd0;
      ofm_addr <= 32'd0;
      ofm_h <= 32'd0;
      ofm_w <= 32'd0;
      ofm_c <= 32'd0;
      ofm_zero_point <= 32'd0;
      act_min <= 32'd0;
      act_max <= 32'd0;
      kernel_h <= 32'd0;
      kernel_w <= 32'd0;
      stride_h <= 32'd0;
      stride_w <= 32'd0;
      pad_top <= 32'd0;
      pad_left <= 32'd0;
      pad_bottom <= 32'd0;
      pad_right <= 32'd0;
      weight_addr <= 32'd0;
      requant_addr <= 32'd0;
      ifm_multiplier <= 32'd0;
      ifm_shift <= 32'd0;
      ifm2_multiplier <= 32'd0;
      ifm2_shift <= 32'd0;
      ofm_multiplier <= 32'd0;
      ofm_shift <= 32'd0;
      left_shift <= 32'd0;
      lut_addr <= 32'd0;
    end else if (we) begin
      case (addr)
        `NPU_REG_DMA_EXT_REGION: dma_ext_region <= wdata;
        `NPU_REG_DMA_EXT_ADDR: dma_ext_addr <= wdata;
        `NPU_REG_DMA_SRAM_ADDR: dma_sram_addr <= wdata;
        `NPU_REG_DMA_N0: dma_n0 <= wdata;
        `NPU_REG_DMA_N1: dma_n1 <= wdata;
        `NPU_REG_DMA_N2: dma_n2 <= wdata;
        `NPU_REG_DMA_STRIDE0: dma_stride0 <= wdata;
        `NPU_REG_DMA_STRIDE1: dma_stride1 <= wdata;
        `NPU_REG_DMA_STRIDE2: dma_stride2 <= wdata;
        `NPU_REG_DMA_WAIT_PENDING: dma_wait_pending <= wdata;
        `NPU_REG_DMA_DECODE_BYTES: dma_decode_bytes <= wdata;
        `NPU_REG_IFM_ADDR: ifm_addr <= wdata;
        `NPU_REG_IFM_H: ifm_h <= wdata;
        `NPU_REG_IFM_W: ifm_w <= wdata;
        `NPU_REG_IFM_C: ifm_c <= wdata;
        `NPU_REG_IFM_ZERO_POINT: ifm_zero_point <= wdata;
        `NPU_REG_IFM2_ADDR: ifm2_addr <= wdata;
        `NPU_REG_IFM2_ZERO_POINT: ifm2_zero_point <= wdata;
        `NPU_REG_IFM2_BROADCAST: ifm2_broadcast <= wdata;
        `NPU_REG_OFM_ADDR: ofm_addr <= wdata;
        `NPU_REG_OFM_H: ofm_h <= wdata;
        `NPU_REG_OFM_W: ofm_w <= wdata;
        `NPU_REG_OFM_C: ofm_c <= wdata;
        `NPU_REG_OFM_ZERO_POINT: ofm_zero_point <= wdata;
        `NPU_REG_ACT_MIN: act_min <= wdata;
        `NPU_REG_ACT_MAX: act_max <= wdata;
        `NPU_REG_KERNEL_H: kernel_h <= wdata;
        `NPU_REG_KERNEL_W: kernel_w <= wdata;
        `NPU_REG_STRIDE_H: stride_h <= wdata;
        `NPU_REG_STRIDE_W: stride_w <= wdata;
        `NPU_REG_PAD_TOP: pad_top <= wdata;
        `NPU_REG_PAD_LEFT: pad_left <= wdata;
        `NPU_REG_PAD_BOTTOM: pad_bottom <= wdata;
        `NPU_REG_PAD_RIGHT: pad_right <= wdata;
        `NPU_REG_WEIGHT_ADDR: weight_addr <= wdata;
        `NPU_REG_REQUANT_ADDR: requant_addr <= wdata;
        `NPU_REG_IFM_MULTIPLIER: ifm_multiplier <= wdata;
        `NPU_REG_IFM_SHIFT: ifm_shift <= wdata;
        `NPU_REG_IFM2_MULTIPLIER: ifm2_multiplier <= wdata;
        `NPU_REG_IFM2_SHIFT: ifm2_shift <= wdata;
        `NPU_REG_OFM_MULTIPLIER: ofm_multiplier <= wdata;
        `NPU_REG_OFM_SHIFT: ofm_shift <= wdata;
        `NPU_REG_LEFT_SHIFT: left_shift <= wdata;
        `NPU_REG_LUT_ADDR: lut_addr <= wdata;
        default: ;
      endcase
    end
  end
endmodule

`default_nettype wire
