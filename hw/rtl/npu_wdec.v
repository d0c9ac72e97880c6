// npu_wdec.v -- the weight decoder of DMA_IN_DECODE (docs/isa.md, "DMA_IN_DECODE"), between the
// DMA's read data and its SRAM write port (npu_dma).
//
// Load, then decode. The code's header, palette and zero bitmap come before its values, so no
// output byte is known before most of the code is in: the decoder first loads the whole code
// (DMA_N0 <= B bytes, the DMA's checks) into its buffer as the reads return, then checks the
// header (one cycle, cycles.DECODE_HEADER_CYCLES), then writes W decoded bytes of SRAM a cycle,
// ceil(N / W) cycles for N = DMA_DECODE_BYTES whatever the data, and pulses done with `bad`.
//
// `bad` is the weight codec's verdict (npu_byoc.arch.weight_codec.decode): reserved mode bits,
// k > 8, a palette larger than 2^k, a bitmap or values beyond DMA_N0, a palette index beyond
// the palette, padding bits set, or a code shorter or longer than DMA_N0. The checks run beside
// the writes, so a bad code leaves its N bytes of SRAM undefined (docs/isa.md says so).
`default_nettype none
`include "npu_config.vh"

module npu_wdec #(
    parameter int W = 16,                          // decoded bytes written a cycle
    parameter int D = 8,                           // bytes of a DMA read
    parameter int B = `NPU_DECODE_BUFFER_BYTES,    // the buffer: DMA_N0 at most
    parameter int AW = 19,                         // SRAM address bits
    parameter int LD = $clog2(D + 1),
    parameter int LW = $clog2(W + 1)
) (
    input  wire          clk,
    input  wire          rst_n,
    // a transfer: its encoded bytes (n0), decoded bytes (n) and SRAM destination
    input  wire          start,
    input  wire [31:0]   n0,
    input  wire [31:0]   n,
    input  wire [AW-1:0] sram_addr,
    // the DMA's read data, in order; in_last marks the transfer's last read
    input  wire          in_valid,
    input  wire          in_last,
    input  wire [LD-1:0] in_len,
    input  wire [8*D-1:0] in_data,
    // SRAM writes
    output reg           wr_en,
    output reg  [AW-1:0] wr_addr,
    output reg  [LW-1:0] wr_len,
    output reg  [8*W-1:0] wr_data,
    output reg           done,  // pulse: the transfer's last write is presented with it
    output reg           bad
);
  localparam int BB = $clog2(B);
  localparam [1:0] IDLE = 2'd0, LOAD = 2'd1, HEAD = 2'd2, DEC = 2'd3;

  reg [7:0]  buffer [0:B-1];
  reg [1:0]  phase;
  reg [31:0] n0_r, n_r, i;
  reg [BB:0] loaded;
  reg [AW-1:0] addr;
  reg [34:0] value_bit, bitmap_bit, end_bit;  // bit positions in the code
  reg [3:0]  k, index_bits;
  reg        has_bitmap;
  reg [8:0]  palette_size;
  reg        err;

  // A byte of the loaded code (0 past the buffer: a bad code's reads only).
  function automatic [7:0] byte_at(input [34:0] a);
    byte_at = (a < 35'(B)) ? buffer[a[BB-1:0]] : 8'd0;
  endfunction
  // nb (<= 15) bits of the code from bit `pos`, LSB first (the low 8 kept).
  function automatic [7:0] bits_at(input [34:0] pos, input [3:0] nb);
    logic [15:0] two;
    two = {byte_at((pos >> 3) + 35'd1), byte_at(pos >> 3)};
    bits_at = 8'(two >> pos[2:0]) & 8'((16'd1 << 16'(nb)) - 16'd1);
  endfunction

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      phase <= IDLE;
      done <= 1'b0;
      bad <= 1'b0;
      wr_en <= 1'b0;
    end else begin
      done <= 1'b0;
      wr_en <= 1'b0;
      case (phase)
        IDLE: if (start) begin
          n0_r <= n0;
          n_r <= n;
          addr <= sram_addr;
          loaded <= '0;
          phase <= LOAD;
        end
        LOAD: if (in_valid) begin
          for (int j = 0; j < D; j++)
            if (LD'(j) < in_len) buffer[BB'(loaded + (BB + 1)'(j))] <= in_data[8*j +: 8];
          loaded <= loaded + (BB + 1)'(in_len);
          if (in_last) phase <= HEAD;
        end
        HEAD: begin : head
          logic [7:0] mode, p1;
          logic [3:0] kn;
          logic [34:0] palette_end, bitmap_bytes;
          mode = byte_at(35'd0);
          p1 = byte_at(35'd1);
          kn = mode[7:4];
          k <= kn;
          index_bits <= kn != 4'd0 ? kn : 4'd8;  // k = 0: raw bytes
          has_bitmap <= mode[0];
          palette_size <= kn != 4'd0 ? 9'(p1) + 9'd1 : 9'd0;
          palette_end = 35'd2 + (kn != 4'd0 ? 35'(p1) + 35'd1 : 35'd0);
          bitmap_bytes = mode[0] ? (35'(n_r) + 35'd7) >> 3 : 35'd0;
          bitmap_bit <= palette_end << 3;
          value_bit <= (palette_end + bitmap_bytes) << 3;
          end_bit <= 35'(n0_r) << 3;
          err <= mode[3:1] != 3'd0 || kn > 4'd8 || (kn == 4'd0 && p1 != 8'd0)
                 || (kn != 4'd0 && 9'(p1) >= (9'd1 << kn)) || 35'(n0_r) < palette_end + bitmap_bytes;
          i <= 32'd0;
          phase <= DEC;
        end
        DEC: begin : dec
          logic [34:0] v;
          logic [7:0] x;
          logic e, nonzero;
          v = value_bit;
          e = err;
          for (int j = 0; j < W; j++) begin
            x = 8'd0;
            if (i + 32'(j) < n_r) begin
              nonzero = has_bitmap ? byte_at((bitmap_bit + 35'(i) + 35'(j)) >> 3)[3'(i + 32'(j))] : 1'b1;
              if (nonzero) begin
                x = bits_at(v, index_bits);
                if (v + 35'(index_bits) > end_bit) e = 1'b1;            // values beyond DMA_N0
                if (k != 4'd0 && 9'(x) >= palette_size) e = 1'b1;       // an index beyond the palette
                if (k != 4'd0) x = byte_at(35'd2 + 35'(x));
                v = v + 35'(index_bits);
              end
            end
            wr_data[8*j +: 8] <= x;
          end
          wr_en <= 1'b1;
          wr_addr <= addr;
          wr_len <= (n_r - i >= 32'(W)) ? LW'(W) : LW'(n_r - i);
          addr <= addr + AW'(W);
          value_bit <= v;
          i <= i + 32'(W);
          if (i + 32'(W) >= n_r) begin : last
            // the code ends exactly at DMA_N0 with its index and bitmap padding bits 0
            logic [7:0] last_value, last_bitmap;
            last_value = byte_at((v - 35'd1) >> 3);
            if (((v + 35'd7) >> 3) != 35'(n0_r)) e = 1'b1;
            if (v[2:0] != 3'd0 && (last_value >> v[2:0]) != 8'd0) e = 1'b1;
            last_bitmap = byte_at((bitmap_bit + 35'(n_r) - 35'd1) >> 3);
            if (has_bitmap && n_r[2:0] != 3'd0 && (last_bitmap >> n_r[2:0]) != 8'd0) e = 1'b1;
            done <= 1'b1;
            bad <= e;
            phase <= IDLE;
          end
          err <= e;
        end
        default: phase <= IDLE;
      endcase
    end
  end
endmodule

`default_nettype wire
