// npu_vec.v -- the vector unit: AVGPOOL, MAXPOOL, MEAN, ADD, SQDIFF, MUL, LUT, SOFTMAX and LAYERNORM
// on VEC_BYTES lanes (docs/isa.md §3, docs/numerics.md §4-8e).
//
// A three-stage pipeline: the issue stage walks the operation's loops and reads VEC_BYTES
// consecutive bytes of SRAM per cycle (ADD, SQDIFF, MUL: two operands), the SRAM registers the data, and
// the consume stage computes every lane and writes up to VEC_BYTES output bytes.
//
//   ADD, MUL,  the tiles are dense and of one shape: 32 bytes per cycle, flat
//   SQDIFF,    (LUT first loads its 256-entry table into registers: 8 cycles)
//   LUT
//   ADD, MUL,  with IFM2_BROADCAST: per output pixel and group of 32 channels, one cycle; the
//   SQDIFF     second operand is the group of the OFM_C-byte channel vector
//   broadcast
//   MEAN       per group of 32 channels, one pixel per cycle; the last pixel's cycle
//              requantizes the lanes (MBQM) and writes the group
//   AVGPOOL,   per output pixel and group of 32 channels, one window tap per cycle (taps in the
//   MAXPOOL    padding are skipped: no read, not counted); the last tap divides (round half
//              away from zero) or takes the max, clamps and writes the group
//   SOFTMAX    loads its 256 int32 exp entries (1024 bytes, 32 cycles), then per row of OFM_C
//              bytes: a max pass, a sum pass (the table entry of max - x, divided by 2^12), four
//              reciprocal steps (gemmlowp's GetReciprocal: the initial estimate, then one
//              Newton-Raphson step per cycle) and an output pass (entry x reciprocal, rounded
//              down by 2^(23 + bits over unit), minus 128); each pass reads 32 bytes per cycle
//   LAYERNORM  per pixel of OFM_C bytes: a sum pass (S1 = sum of x - zp, S2 = sum of squares, 32
//   (with the  bytes per cycle), 100 reciprocal-square-root steps (V and the normalized A, then the
//   unit)      quotient 2^124 / A' one bit per cycle (65), its integer square root one bit per cycle
//              (33), the output exponent), and an output pass: per group of 32 channels, its
//              12-byte (g, b) records 32 bytes per cycle, the last record cycle reading x too
//              and writing the group (x_hat * g + b rounded from Q40); npu_byoc.arch.numerics_layernorm
//
// The registers were checked by npu_kick_check before `start`.
`default_nettype none
`include "npu_config.vh"

module npu_vec #(
    parameter int AW = 19,
    parameter int V = 32,  // lanes (bytes per cycle)
    parameter int LW = $clog2(V + 1)
) (
    input  wire        clk,
    input  wire        rst_n,
    input  wire        start,
    input  wire [7:0]  opcode,
    output reg         done,
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
    input  wire [31:0] ifm_multiplier,
    input  wire [31:0] ifm_shift,
    input  wire [31:0] ifm2_multiplier,
    input  wire [31:0] ifm2_shift,
    input  wire [31:0] ofm_multiplier,
    input  wire [31:0] ofm_shift,
    input  wire [4:0]  left_shift,   // LEFT_SHIFT[4:0] (checked to be 0..31)
    input  wire [31:0] lut_addr,
    input  wire [31:0] requant_addr,  // LAYERNORM: the (g, b) records
    // SRAM
    output reg           rd_a_en,
    output reg  [AW-1:0] rd_a_addr,
    input  wire [7:0]    rd_a_data [0:V-1],
    output reg           rd_b_en,
    output reg  [AW-1:0] rd_b_addr,
    input  wire [7:0]    rd_b_data [0:V-1],
    output reg           wr_en,
    output reg  [AW-1:0] wr_addr,
    output reg  [LW-1:0] wr_len,
    output reg  [7:0]    wr_data [0:V-1]
);
`include "npu_numerics.vh"

  localparam [1:0] V_IDLE = 2'd0, V_TABLE = 2'd1, V_RUN = 2'd2, V_FLUSH = 2'd3;
  localparam int LUT_CHUNKS = (256 + V - 1) / V;
  localparam int SM_CHUNKS = (`NPU_SOFTMAX_TABLE_BYTES + V - 1) / V;
  localparam int SM_RECIP_STEPS = 4;  // the initial estimate, three Newton-Raphson steps
  // SOFTMAX passes over a row
  localparam [1:0] SM_MAX = 2'd0, SM_SUM = 2'd1, SM_RECIP = 2'd2, SM_OUT = 2'd3;
  // LAYERNORM passes over a pixel, and its reciprocal square root's steps
  localparam [1:0] LN_SUM = 2'd0, LN_RSQRT = 2'd1, LN_OUT = 2'd2;
  localparam int LN_DIV_STEPS = 65;   // quotient bits 64..0 of 2^124 / A'
  localparam int LN_SQRT_STEPS = 33;  // root bits 32..0
  localparam int LN_RSQRT_STEPS = 1 + LN_DIV_STEPS + LN_SQRT_STEPS + 1;  // cycles.LAYERNORM_RSQRT_CYCLES
  localparam int LN_REC_BYTES = `NPU_REQUANT_RECORD_BYTES * V;  // the records of one channel group
  // a window's valid taps: up to max_pool_window^2 (the count an AVGPOOL divides by)
  localparam int TAPS_W = $clog2(`NPU_MAX_POOL_WINDOW * `NPU_MAX_POOL_WINDOW + 1);

  reg [1:0]  state;
  reg [7:0]  op;
  reg [1:0]  tail;
  // loop counters
  reg [31:0] j;              // ADD/LUT: chunk; LUT table: chunk; SOFTMAX: chunk of the row, reciprocal step
  reg [31:0] n_table;        // LUT, SOFTMAX: table chunks
  reg [1:0]  ph;             // SOFTMAX: pass over the row (q)
  reg [31:0] n_chunks;       // ADD/LUT
  reg [31:0] n_bytes;        // ADD/LUT: OFM_H * OFM_W * OFM_C
  reg [31:0] g, n_groups;    // MEAN/POOL: channel group
  reg [31:0] q, n_pixels;    // MEAN: pixel of the group
  reg [31:0] oy, ox, ky, kx; // POOL
  reg [31:0] n_window;       // MEAN: IFM_H * IFM_W (elements per output)
  // pipeline tokens: t1 = SRAM stage, t2 = consume stage
  reg          t1_valid, t2_valid;
  reg          t1_table, t2_table;   // LUT table load
  reg          t1_first, t2_first;   // first tap / pixel of an output group
  reg          t1_last,  t2_last;    // last tap / pixel: write
  reg          t1_tap,   t2_tap;     // the tap is in_ifm the input (pools)
  reg [AW-1:0] t1_waddr, t2_waddr;
  reg [LW-1:0] t1_wlen,  t2_wlen;
  reg [15:0]   t1_chunk, t2_chunk;   // LUT/SOFTMAX table chunk; SOFTMAX reciprocal step
  reg [1:0]    t1_ph,    t2_ph;      // SOFTMAX pass
  // lanes
  reg [7:0]         table_q [0:255];
  reg signed [31:0] sum  [0:V-1];
  reg signed [7:0]  vmax [0:V-1];
  reg [TAPS_W-1:0]  taps;           // valid taps of the window so far
  // SOFTMAX: the exp table (entry k = exp(-k) in Q0.31) and the row's state
  reg [31:0]        sm_table [0:255];
  reg signed [7:0]  sm_max;          // max of the row
  reg signed [31:0] sm_sum;          // sum of the entries / 2^12 (Q12.19)
  reg signed [31:0] sm_half;         // the reciprocal's half denominator (Q0.31)
  reg signed [31:0] sm_x;            // the reciprocal estimate (Q2.29), then the scale (Q0.31)
  reg [5:0]         sm_exponent;     // 23 + bits over unit: the output's rounding shift

  // LAYERNORM: the pixel's sums, the reciprocal square root's state, a group's records
  reg signed [63:0] ln_s1, ln_s2;    // sum of d = x - zp, of d^2 (|S1| < 2^21, S2 < 2^28)
  reg signed [63:0] ln_v;            // C * S2 - S1^2, in [0, 2^38)
  reg [63:0]        ln_den;          // A' = A * 4^s, in [2^60, 2^62) (0 when A = 0)
  reg [63:0]        ln_rem;          // the division's remainder, < A'
  reg [64:0]        ln_quot;         // floor(2^124 / A') <= 2^64
  reg [32:0]        ln_root;         // floor(sqrt(quotient)) <= 2^32
  reg [5:0]         ln_s;            // the normalizing shift s (A' = A << 2s)
  reg [5:0]         ln_exponent;     // 38 - F/2 - s: x_hat = RDBPOT(n * inv, this)
  reg [31:0]        ln_chunk;        // output pass: record chunk of the group
  reg [7:0]         ln_rec [0:LN_REC_BYTES-1];

  // x / 2^e rounded half away from zero (numerics_layernorm.rdbpot), 0 <= e <= 62
  function automatic logic signed [63:0] rdbpot64(input logic signed [63:0] fn_x, input logic [5:0] fn_e);
    logic signed [63:0] mask;
    logic signed [63:0] threshold;
    begin
      mask = (64'sd1 <<< fn_e) - 64'sd1;
      threshold = (mask >>> 1) + ((fn_x < 0) ? 64'sd1 : 64'sd0);
      rdbpot64 = (fn_x >>> fn_e) + (((fn_x & mask) > threshold) ? 64'sd1 : 64'sd0);
    end
  endfunction

  // entry k as the datapath reads it: entry 0 is exp(0) and bit 31 is ignored, so the row sum
  // stays in [2^19, 2^31) whatever the table holds
  function automatic logic signed [31:0] sm_entry(input logic [7:0] fn_k);
    begin
      sm_entry = (fn_k == 8'd0) ? 32'sh7FFFFFFF : $signed({1'b0, sm_table[fn_k][30:0]});
    end
  endfunction

  wire is_pool = op == `NPU_OP_AVGPOOL || op == `NPU_OP_MAXPOOL;
  wire is_binary = op == `NPU_OP_ADD || op == `NPU_OP_MUL || op == `NPU_OP_SQDIFF;
  wire bcast = ifm2_broadcast != 32'd0;  // checked to be 0 or 1; stable during the kick

  // ADD/SQDIFF/MUL (broadcast) and SOFTMAX loop over OFM pixels and channel groups, MEAN and the pools over the IFM's
  function automatic logic ofm_walk(input logic [7:0] fn_op);
    begin
      ofm_walk = fn_op == `NPU_OP_ADD || fn_op == `NPU_OP_MUL || fn_op == `NPU_OP_SQDIFF || fn_op == `NPU_OP_SOFTMAX
              || fn_op == `NPU_OP_LAYERNORM;
    end
  endfunction

  function automatic logic [LW-1:0] lanes_left(input logic [31:0] fn_total, input logic [31:0] fn_done);
    begin
      lanes_left = (fn_total - fn_done >= 32'(V)) ? LW'(V) : LW'(fn_total - fn_done);
    end
  endfunction

  // AVGPOOL: sum / n rounded half away from zero (C: (sum +- n/2) / n)
  function automatic logic signed [31:0] avg_round(input logic signed [31:0] fn_sum, input logic [TAPS_W-1:0] fn_n);
    logic [31:0] mag;
    begin
      mag = (fn_sum < 0) ? 32'(-fn_sum) : 32'(fn_sum);
      mag = (mag + 32'(fn_n >> 1)) / 32'(fn_n);
      avg_round = (fn_sum < 0) ? -$signed(mag) : $signed(mag);
    end
  endfunction

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      state <= V_IDLE;
      done <= 1'b0;
      rd_a_en <= 1'b0;
      rd_b_en <= 1'b0;
      wr_en <= 1'b0;
      t1_valid <= 1'b0;
      t2_valid <= 1'b0;
    end else begin
      done <= 1'b0;
      rd_a_en <= 1'b0;
      rd_b_en <= 1'b0;
      wr_en <= 1'b0;
      t1_valid <= 1'b0;

      // ---- issue stage
      case (state)
        V_IDLE: begin
          if (start) begin
            op <= opcode;
            j <= 32'd0;
            ph <= SM_MAX;  // LAYERNORM: LN_SUM
            ln_chunk <= 32'd0;
            g <= 32'd0;
            q <= 32'd0;
            oy <= 32'd0;
            ox <= 32'd0;
            ky <= 32'd0;
            kx <= 32'd0;
            n_bytes <= ofm_h * ofm_w * ofm_c;
            n_chunks <= (ofm_h * ofm_w * ofm_c + 32'(V - 1)) / 32'(V);
            // ADD/MUL broadcast and SOFTMAX walk the OFM; MEAN and the pools the IFM (IFM_C == OFM_C)
            n_groups <= ((ofm_walk(opcode) ? ofm_c : ifm_c) + 32'(V - 1)) / 32'(V);
            n_pixels <= ofm_walk(opcode) ? ofm_h * ofm_w : ifm_h * ifm_w;
            n_window <= ifm_h * ifm_w;
            n_table <= (opcode == `NPU_OP_SOFTMAX) ? 32'(SM_CHUNKS) : 32'(LUT_CHUNKS);
            state <= (opcode == `NPU_OP_LUT || opcode == `NPU_OP_SOFTMAX) ? V_TABLE : V_RUN;
          end
        end
        V_TABLE: begin  // LUT, SOFTMAX: the table, V bytes per cycle
          rd_a_en <= 1'b1;
          rd_a_addr <= AW'(lut_addr + j * 32'(V));
          t1_valid <= 1'b1;
          t1_table <= 1'b1;
          t1_chunk <= 16'(j);
          t1_last <= 1'b0;
          if (j + 32'd1 == n_table) begin
            j <= 32'd0;
            state <= V_RUN;
          end else j <= j + 32'd1;
        end
        V_RUN: begin
          t1_valid <= 1'b1;
          t1_table <= 1'b0;
          if (is_binary && bcast) begin
            rd_a_en <= 1'b1;
            rd_a_addr <= AW'(ifm_addr + q * ofm_c + g * 32'(V));
            rd_b_en <= 1'b1;
            rd_b_addr <= AW'(ifm2_addr + g * 32'(V));
            t1_first <= 1'b1;
            t1_last <= 1'b1;
            t1_tap <= 1'b1;
            t1_waddr <= AW'(ofm_addr + q * ofm_c + g * 32'(V));
            t1_wlen <= lanes_left(ofm_c, g * 32'(V));
            // loops: q (pixel), g (channel group, innermost)
            if (g + 32'd1 != n_groups) g <= g + 32'd1;
            else begin
              g <= 32'd0;
              if (q + 32'd1 != n_pixels) q <= q + 32'd1;
              else begin
                state <= V_FLUSH;
                tail <= 2'd3;
              end
            end
          end else if (is_binary || op == `NPU_OP_LUT) begin
            rd_a_en <= 1'b1;
            rd_a_addr <= AW'(ifm_addr + j * 32'(V));
            rd_b_en <= is_binary;
            rd_b_addr <= AW'(ifm2_addr + j * 32'(V));
            t1_first <= 1'b1;
            t1_last <= 1'b1;
            t1_tap <= 1'b1;
            t1_waddr <= AW'(ofm_addr + j * 32'(V));
            t1_wlen <= lanes_left(n_bytes, j * 32'(V));
            if (j + 32'd1 == n_chunks) begin
              state <= V_FLUSH;
              tail <= 2'd3;
            end else j <= j + 32'd1;
          end else if (op == `NPU_OP_SOFTMAX) begin
            // row q, pass ph, chunk (or reciprocal step) j
            rd_a_en <= ph != SM_RECIP;
            rd_a_addr <= AW'(ifm_addr + q * ofm_c + j * 32'(V));
            t1_ph <= ph;
            t1_chunk <= 16'(j);
            t1_first <= j == 32'd0;
            t1_last <= ph == SM_OUT;
            t1_tap <= 1'b1;
            t1_waddr <= AW'(ofm_addr + q * ofm_c + j * 32'(V));
            t1_wlen <= lanes_left(ofm_c, j * 32'(V));
            if (j + 32'd1 != (ph == SM_RECIP ? 32'(SM_RECIP_STEPS) : n_groups)) j <= j + 32'd1;
            else begin
              j <= 32'd0;
              ph <= ph + 2'd1;  // SM_OUT wraps to SM_MAX: the next row
              if (ph == SM_OUT) begin
                if (q + 32'd1 != n_pixels) q <= q + 32'd1;
                else begin
                  state <= V_FLUSH;
                  tail <= 2'd3;
                end
              end
            end
          end else if (op == `NPU_OP_LAYERNORM) begin : layernorm_issue
            // pixel q, pass ph: sum chunk j; reciprocal step j; output group j, record chunk ln_chunk
            logic [31:0] group_bytes;
            logic [31:0] chunks;
            group_bytes = 32'(`NPU_REQUANT_RECORD_BYTES) * 32'(lanes_left(ofm_c, j * 32'(V)));
            chunks = (group_bytes + 32'(V - 1)) / 32'(V);
            rd_a_en <= ph == LN_SUM || (ph == LN_OUT && ln_chunk + 32'd1 == chunks);
            rd_a_addr <= AW'(ifm_addr + q * ofm_c + j * 32'(V));
            rd_b_en <= ph == LN_OUT;
            rd_b_addr <= AW'(requant_addr + j * 32'(LN_REC_BYTES) + ln_chunk * 32'(V));
            t1_ph <= ph;
            t1_chunk <= 16'(ph == LN_OUT ? ln_chunk : j);
            t1_first <= j == 32'd0;
            t1_last <= ph == LN_OUT && ln_chunk + 32'd1 == chunks;
            t1_tap <= 1'b1;
            t1_waddr <= AW'(ofm_addr + q * ofm_c + j * 32'(V));
            t1_wlen <= lanes_left(ofm_c, j * 32'(V));
            if (ph == LN_OUT && ln_chunk + 32'd1 != chunks) ln_chunk <= ln_chunk + 32'd1;
            else if (j + 32'd1 != (ph == LN_RSQRT ? 32'(LN_RSQRT_STEPS) : n_groups)) begin
              ln_chunk <= 32'd0;
              j <= j + 32'd1;
            end else begin
              ln_chunk <= 32'd0;
              j <= 32'd0;
              ph <= (ph == LN_OUT) ? LN_SUM : ph + 2'd1;
              if (ph == LN_OUT) begin
                if (q + 32'd1 != n_pixels) q <= q + 32'd1;
                else begin
                  state <= V_FLUSH;
                  tail <= 2'd3;
                end
              end
            end
          end else if (op == `NPU_OP_MEAN) begin
            rd_a_en <= 1'b1;
            rd_a_addr <= AW'(ifm_addr + q * ifm_c + g * 32'(V));
            t1_first <= q == 32'd0;
            t1_last <= q + 32'd1 == n_pixels;
            t1_tap <= 1'b1;
            t1_waddr <= AW'(ofm_addr + g * 32'(V));
            t1_wlen <= lanes_left(ifm_c, g * 32'(V));
            if (q + 32'd1 != n_pixels) q <= q + 32'd1;
            else begin
              q <= 32'd0;
              if (g + 32'd1 != n_groups) g <= g + 32'd1;
              else begin
                state <= V_FLUSH;
                tail <= 2'd3;
              end
            end
          end else begin : pool_issue  // AVGPOOL, MAXPOOL
            logic signed [33:0] iy;
            logic signed [33:0] ix;
            logic in_ifm;
            iy = 34'(oy * stride_h) + 34'(ky) - 34'(pad_top);
            ix = 34'(ox * stride_w) + 34'(kx) - 34'(pad_left);
            in_ifm = iy >= 0 && iy < 34'(ifm_h) && ix >= 0 && ix < 34'(ifm_w);
            rd_a_en <= in_ifm;
            rd_a_addr <= AW'((32'(iy) * ifm_w + 32'(ix)) * ifm_c + g * 32'(V) + ifm_addr);
            t1_first <= ky == 32'd0 && kx == 32'd0;
            t1_last <= ky + 32'd1 == kernel_h && kx + 32'd1 == kernel_w;
            t1_tap <= in_ifm;
            t1_waddr <= AW'(ofm_addr + (oy * ofm_w + ox) * ofm_c + g * 32'(V));
            t1_wlen <= lanes_left(ofm_c, g * 32'(V));
            // loops: oy, ox, g, ky, kx (kx innermost)
            if (kx + 32'd1 != kernel_w) kx <= kx + 32'd1;
            else begin
              kx <= 32'd0;
              if (ky + 32'd1 != kernel_h) ky <= ky + 32'd1;
              else begin
                ky <= 32'd0;
                if (g + 32'd1 != n_groups) g <= g + 32'd1;
                else begin
                  g <= 32'd0;
                  if (ox + 32'd1 != ofm_w) ox <= ox + 32'd1;
                  else begin
                    ox <= 32'd0;
                    if (oy + 32'd1 != ofm_h) oy <= oy + 32'd1;
                    else begin
                      state <= V_FLUSH;
                      tail <= 2'd3;
                    end
                  end
                end
              end
            end
          end
        end
        V_FLUSH: begin
          t1_valid <= 1'b0;
          tail <= tail - 2'd1;
          if (tail == 2'd1) begin
            done <= 1'b1;
            state <= V_IDLE;
          end
        end
        default: state <= V_IDLE;
      endcase

      // ---- SRAM stage
      t2_valid <= t1_valid;
      t2_table <= t1_table;
      t2_first <= t1_first;
      t2_last <= t1_last;
      t2_tap <= t1_tap;
      t2_waddr <= t1_waddr;
      t2_wlen <= t1_wlen;
      t2_chunk <= t1_chunk;
      t2_ph <= t1_ph;

      // ---- consume stage (lanes computed in local arrays, assigned as whole arrays)
      if (t2_valid) begin : consume
        logic [7:0]        l_out  [0:V-1];
        logic signed [31:0] l_sum [0:V-1];
        logic signed [7:0]  l_max [0:V-1];
        for (int i = 0; i < V; i++) l_out[i] = 8'd0;
        if (t2_table && op == `NPU_OP_SOFTMAX) begin : softmax_table_load  // little-endian int32 entries
          logic [31:0] l_entries [0:255];
          logic [31:0] b;
          l_entries = sm_table;
          for (int i = 0; i < V; i++) begin
            b = 32'(t2_chunk) * 32'(V) + 32'(i);
            if (b < 32'(`NPU_SOFTMAX_TABLE_BYTES)) l_entries[8'(b >> 2)][8 * b[1:0] +: 8] = rd_a_data[i];
          end
          sm_table <= l_entries;
        end else if (t2_table) begin : table_load
          logic [7:0] l_table [0:255];
          l_table = table_q;
          for (int i = 0; i < V; i++) if (32'(t2_chunk) * 32'(V) + 32'(i) < 32'd256) l_table[8'(32'(t2_chunk) * 32'(V) + 32'(i))] = rd_a_data[i];
          table_q <= l_table;
        end else if (op == `NPU_OP_SOFTMAX) begin : softmax_lanes
          case (t2_ph)
            SM_MAX: begin : row_max
              logic signed [7:0] m;
              m = t2_first ? -8'sd128 : sm_max;
              for (int i = 0; i < V; i++) if (LW'(i) < t2_wlen && $signed(rd_a_data[i]) > m) m = $signed(rd_a_data[i]);
              sm_max <= m;
            end
            SM_SUM: begin : row_sum  // < 2^31: at most SOFTMAX_MAX_CHANNELS terms of at most 2^19
              logic signed [31:0] acc;
              acc = t2_first ? 32'sd0 : sm_sum;
              for (int i = 0; i < V; i++)
                if (LW'(i) < t2_wlen) acc = acc + rdbpot(sm_entry(8'(sm_max - $signed(rd_a_data[i]))), 5'd12);
              sm_sum <= acc;
            end
            SM_RECIP: begin : reciprocal  // GetReciprocal(sum): one step per cycle
              if (t2_chunk == 16'd0) begin : estimate
                int clz;
                logic [31:0] shifted;  // sum << clz, in [2^31, 2^32): the Q0.31 x of 1/(1 + x) is this - 2^31
                logic signed [31:0] half;
                clz = 32;
                for (int b = 0; b < 32; b++) if (sm_sum[b]) clz = 31 - b;  // the highest set bit wins
                shifted = 32'(sm_sum) << clz;
                half = $signed(shifted >> 1);  // RoundingHalfSum(x, 1): (x + 2^31 - 1 + 1) / 2
                sm_half <= half;
                sm_x <= 32'sd1515870810 + srdhm(half, -32'sd1010580540);  // 48/17 - 32/17 * d
                sm_exponent <= 6'(35 - clz);  // 31 - 8 + (12 - clz)
              end else if (t2_chunk == 16'(SM_RECIP_STEPS - 1)) sm_x <= sat_left(recip_step(sm_half, sm_x), 1);
              else sm_x <= recip_step(sm_half, sm_x);
            end
            default: begin : row_out  // SM_OUT
              for (int i = 0; i < V; i++)
                l_out[i] = add_zero_point_clamp($signed(rdbpot_wide(32'(srdhm(sm_x, sm_entry(8'(sm_max - $signed(rd_a_data[i]))))),
                                                                    sm_exponent)), -32'sd128, -32'sd128, 32'sd127);
            end
          endcase
        end else if (op == `NPU_OP_LAYERNORM) begin : layernorm_lanes
          case (t2_ph)
            LN_SUM: begin : pixel_sums
              logic signed [63:0] s1;
              logic signed [63:0] s2;
              logic signed [63:0] d;
              s1 = t2_first ? 64'sd0 : ln_s1;
              s2 = t2_first ? 64'sd0 : ln_s2;
              for (int i = 0; i < V; i++)
                if (LW'(i) < t2_wlen) begin
                  d = 64'($signed(rd_a_data[i])) - 64'($signed(ifm_zero_point));
                  s1 = s1 + d;
                  s2 = s2 + d * d;
                end
              ln_s1 <= s1;
              ln_s2 <= s2;
            end
            LN_RSQRT: begin : rsqrt_step
              if (t2_chunk == 16'd0) begin : normalize  // V, A = V * 2^F + E, s, A' = A << 2s
                logic signed [63:0] v;
                logic [63:0] a;
                int bits;
                logic [5:0] s;
                v = 64'(ofm_c) * ln_s2 - ln_s1 * ln_s1;
                a = (64'(v) << ifm_shift[4:0]) + 64'(ifm_multiplier);
                bits = 0;
                for (int b = 0; b < 64; b++) if (a[b]) bits = b + 1;
                s = 6'((62 - bits) / 2);
                ln_v <= v;
                ln_s <= s;
                ln_den <= a << (2 * s);
                ln_rem <= 64'd1 << 59;  // the remainder once the dividend's bits 124..65 are in (all 0 quotient bits)
                ln_quot <= 65'd0;
                ln_root <= 33'd0;
              end else if (t2_chunk <= 16'(LN_DIV_STEPS)) begin : divide  // one quotient bit
                logic [63:0] r;
                r = ln_rem << 1;
                if (r >= ln_den) begin
                  ln_rem <= r - ln_den;
                  ln_quot <= {ln_quot[63:0], 1'b1};
                end else begin
                  ln_rem <= r;
                  ln_quot <= {ln_quot[63:0], 1'b0};
                end
              end else if (t2_chunk <= 16'(LN_DIV_STEPS + LN_SQRT_STEPS)) begin : square_root  // one root bit
                logic [32:0] trial;
                logic [65:0] square;
                trial = ln_root | (33'd1 << (32 - (int'(t2_chunk) - LN_DIV_STEPS - 1)));
                square = 66'(trial) * 66'(trial);
                if (square <= 66'(ln_quot)) ln_root <= trial;
              end else ln_exponent <= 6'(38 - int'(ifm_shift[4:1]) - int'(ln_s));
            end
            default: begin : pixel_out  // LN_OUT: a record chunk; the last one writes the group
              logic [7:0] rec [0:LN_REC_BYTES-1];
              logic signed [63:0] n;
              logic signed [63:0] x_hat;
              logic signed [63:0] gain;
              logic signed [63:0] b;
              logic signed [63:0] y;
              rec = ln_rec;
              for (int i = 0; i < V; i++)
                if (int'(t2_chunk) * V + i < LN_REC_BYTES) rec[int'(t2_chunk) * V + i] = rd_b_data[i];
              ln_rec <= rec;
              if (t2_last)
                for (int i = 0; i < V; i++) begin
                  n = 64'(ofm_c) * (64'($signed(rd_a_data[i])) - 64'($signed(ifm_zero_point))) - ln_s1;
                  x_hat = (ln_v != 0) ? rdbpot64(n * $signed({31'd0, ln_root}), ln_exponent) : 64'sd0;
                  gain = 64'($signed({rec[12 * i + 3], rec[12 * i + 2], rec[12 * i + 1], rec[12 * i]}));
                  b = $signed({rec[12 * i + 11], rec[12 * i + 10], rec[12 * i + 9], rec[12 * i + 8],
                               rec[12 * i + 7], rec[12 * i + 6], rec[12 * i + 5], rec[12 * i + 4]});
                  y = rdbpot64(x_hat * gain + b, 6'd40) + 64'($signed(ofm_zero_point));
                  l_out[i] = (y < 64'($signed(act_min))) ? act_min[7:0]
                           : (y > 64'($signed(act_max))) ? act_max[7:0] : y[7:0];
                end
            end
          endcase
        end else if (op == `NPU_OP_LUT) begin
          for (int i = 0; i < V; i++) l_out[i] = table_q[rd_a_data[i] ^ 8'h80];  // index x + 128
        end else if (op == `NPU_OP_ADD || op == `NPU_OP_SQDIFF) begin
          for (int i = 0; i < V; i++) begin : add_lane  // ADD: a + b; SQDIFF: (a - b)^2, int32 wrapping
            logic signed [31:0] a;
            logic signed [31:0] b;
            logic signed [31:0] d;
            a = mbqm((32'($signed(rd_a_data[i])) - $signed(ifm_zero_point)) << left_shift, ifm_multiplier, ifm_shift);
            b = mbqm((32'($signed(rd_b_data[i])) - $signed(ifm2_zero_point)) << left_shift, ifm2_multiplier, ifm2_shift);
            d = a - b;
            l_out[i] = add_zero_point_clamp(mbqm(op == `NPU_OP_SQDIFF ? d * d : a + b, ofm_multiplier, ofm_shift),
                                            ofm_zero_point, act_min, act_max);
          end
        end else if (op == `NPU_OP_MUL) begin
          for (int i = 0; i < V; i++) begin : mul_lane
            logic signed [31:0] p;  // |(x - zp1)(y - zp2)| <= 255^2
            p = (32'($signed(rd_a_data[i])) - $signed(ifm_zero_point)) * (32'($signed(rd_b_data[i])) - $signed(ifm2_zero_point));
            l_out[i] = add_zero_point_clamp(mbqm(p, ofm_multiplier, ofm_shift), ofm_zero_point, act_min, act_max);
          end
        end else if (op == `NPU_OP_MEAN) begin
          for (int i = 0; i < V; i++) begin
            l_sum[i] = (t2_first ? 32'sd0 : sum[i]) + 32'($signed(rd_a_data[i]));
            if (t2_last)
              l_out[i] = add_zero_point_clamp(mbqm(l_sum[i] - $signed(ifm_zero_point) * $signed(n_window),
                                                   ofm_multiplier, ofm_shift), ofm_zero_point, act_min, act_max);
          end
          sum <= l_sum;
        end else if (is_pool) begin
          logic [TAPS_W-1:0] n;
          n = (t2_first ? TAPS_W'(0) : taps) + TAPS_W'(t2_tap);
          taps <= n;
          for (int i = 0; i < V; i++) begin
            l_sum[i] = t2_first ? 32'sd0 : sum[i];
            l_max[i] = t2_first ? -8'sd128 : vmax[i];
            if (t2_tap) begin
              l_sum[i] = l_sum[i] + 32'($signed(rd_a_data[i]));
              if ($signed(rd_a_data[i]) > l_max[i]) l_max[i] = $signed(rd_a_data[i]);
            end
            if (t2_last) begin
              if (op == `NPU_OP_AVGPOOL) l_out[i] = add_zero_point_clamp(avg_round(l_sum[i], n), 32'sd0, act_min, act_max);
              else l_out[i] = add_zero_point_clamp(32'(l_max[i]), 32'sd0, act_min, act_max);
            end
          end
          sum <= l_sum;
          vmax <= l_max;
        end
        if (!t2_table && t2_last) begin
          wr_en <= 1'b1;
          wr_addr <= t2_waddr;
          wr_len <= t2_wlen;
          wr_data <= l_out;
        end
      end
    end
  end
endmodule

`default_nettype wire
