// npu_mac.v -- the MAC engine: CONV, DWCONV and FC on the R x C array with one requantize unit
// per column (docs/isa.md §3, docs/architecture.md §2, docs/cosim.md).
//
// Mapping (output-stationary): rows are output channels, columns are output pixels (FC: the
// FC's rows). The output tile is a list of *items*, (pixel, channel block of R channels),
// pixel-major within a channel block. A block fills the C columns with consecutive items, so
// when a tile has fewer than C pixels the columns take several channel blocks at once
// (column folding); the items of one block span at most LANES channel blocks (weight lanes:
// the weight port delivers LANES x R bytes per cycle). Per block the engine streams the K
// taps of the reduction, one per cycle:
//   CONV  K = KERNEL_H*KERNEL_W*IFM_C taps (ky, kx, ic); each column reads 1 activation byte
//   DWCONV K = KERNEL_H*KERNEL_W taps (ky, kx); each column reads its pixel's R channels
//   FC    CONV with a 1x1 kernel over the (1, rows, IFM_C) input
// Taps in the padding read nothing and contribute 0 (x = IFM_ZERO_POINT).
//
// Pipeline: A (addresses) -> SRAM -> B (the array). The last tap of a block moves the sums to
// the drain buffer; the drain takes R cycles (one row per cycle through the C requantize
// units, the records fetched per column), overlapped with the next block. A block therefore
// takes max(K, R) cycles.
//
// Before computing, the engine checks the requantize table (C records per cycle): a shift
// outside [-31, 30] ends the kick with `error` (INVALID_PARAMETER) and nothing written.
`default_nettype none
`include "npu_config.vh"

module npu_mac #(
    parameter int AW = 19,
    parameter int R = `NPU_ARRAY_ROWS,
    parameter int C = `NPU_ARRAY_COLS,
    parameter int LANES = 4,
    parameter int LB = (LANES > 1) ? $clog2(LANES) : 1  // bits of a lane index
) (
    input  wire        clk,
    input  wire        rst_n,
    input  wire        start,
    input  wire [7:0]  opcode,
    output reg         done,
    output reg         error,
    // registers
    input  wire [31:0] ifm_addr,
    input  wire [31:0] ifm_h,
    input  wire [31:0] ifm_w,
    input  wire [31:0] ifm_c,
    input  wire [8:0]  ifm_zero_point,  // IFM_ZERO_POINT[8:0] (checked to be int8)
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
    input  wire [31:0] weight_addr,
    input  wire [31:0] requant_addr,
    // SRAM: activation gather
    output reg           act_any,
    output reg           act_en   [0:C-1],
    output reg  [AW-1:0] act_addr [0:C-1],
    output wire          act_wide,
    input  wire [7:0]    act_data [0:C*R-1],
    // SRAM: weight gather
    output reg           w_any,
    output reg           w_en     [0:LANES*R-1],
    output reg  [AW-1:0] w_addr   [0:LANES*R-1],
    input  wire [7:0]    w_data   [0:LANES*R-1],
    // SRAM: requantize records
    output reg           rq_any,
    output reg           rq_en    [0:C-1],
    output reg  [AW-1:0] rq_addr  [0:C-1],
    input  wire [31:0]   rq_bias  [0:C-1],
    input  wire [31:0]   rq_multiplier [0:C-1],
    input  wire [31:0]   rq_shift [0:C-1],
    // SRAM: output scatter
    output reg           out_any,
    output reg           out_en   [0:C-1],
    output reg  [AW-1:0] out_addr [0:C-1],
    output reg  [7:0]    out_data [0:C-1]
);
`include "npu_numerics.vh"

  localparam [2:0] M_IDLE = 3'd0, M_SCAN = 3'd1, M_SCAN_WAIT = 3'd2, M_WALK = 3'd3, M_RUN = 3'd4, M_GAP = 3'd5,
                   M_END = 3'd6;

  reg [2:0] state;

  // ---- geometry of the kick (FC: a 1x1 convolution over (1, rows, IFM_C))
  reg        dw;
  reg        is_fc;    // FC: the requantize records hold a double scale (fc_requantize)
  reg [31:0] ih, iw, oc, ow, kw, sh, sw;
  reg signed [31:0] pt, pl;
  reg [31:0] taps;         // K: taps of the reduction
  reg [31:0] taps_per_kx;  // CONV: IFM_C, DWCONV: 1
  reg signed [31:0] tap_step;   // CONV: 1, DWCONV: IFM_C (activation offset per tap in a kernel row)
  reg signed [31:0] row_jump;   // activation offset from a kernel row's last tap to the next row
  reg signed [31:0] dx_step;    // activation offset per output pixel along x: STRIDE_W * IFM_C
  reg signed [31:0] dy_step;    // per output row: STRIDE_H * IFM_W * IFM_C
  reg signed [31:0] abase0;     // activation address of pixel (0, 0)'s window origin (may be < 0)
  reg [31:0] n_pixels;     // OFM_H * OFM_W
  reg [31:0] n_blocks;     // channel blocks: ceil(OFM_C / R)
  reg [31:0] row_k [0:R-1];  // r * K: weight offset of row r in a channel block
  reg [31:0] gap;          // idle cycles between blocks when K < R
  reg [31:0] gap_left;

  // ---- requantize table scan
  reg [31:0] scan_k;            // first record of the group being issued
  reg [C-1:0] sc1, sc2;         // columns of the group in the SRAM / check stage
  reg         scan_bad;
  reg [1:0]   scan_wait;

  // ---- walker: the next item (pixel, channel block)
  reg        wk_done;
  reg [31:0] wk_p, wk_ox, wk_cb;
  reg signed [31:0] wk_iy0, wk_ix0, wk_row_abase, wk_pix_abase;
  reg [31:0] wk_obase, wk_ch0, wk_wbase;

  // ---- stage A descriptor of the current block
  reg              col_valid [0:C-1];
  reg [LB-1:0]     col_lane  [0:C-1];
  reg signed [31:0] col_iy0  [0:C-1];
  reg signed [31:0] col_ix0  [0:C-1];
  reg signed [31:0] col_abase [0:C-1];
  reg [31:0]       col_obase [0:C-1];
  reg [31:0]       col_ch0   [0:C-1];
  reg [31:0]       lane_wbase [0:LANES-1];
  reg [31:0]       lane_ch0   [0:LANES-1];
  reg [LB:0]       lanes_used;
  // tap counters
  reg [31:0] t, kx_i, ky_i, icx;
  reg signed [31:0] toff;

  // ---- the block in flight: lanes and drain metadata, copied at its first tap (fl_) and when
  // that tap leaves the SRAM stage (b_); the drain's copy (d_) is taken at the last tap
  reg        fl_valid [0:C-1];
  reg [LB-1:0] fl_lane  [0:C-1];
  reg [31:0] fl_obase [0:C-1];
  reg [31:0] fl_ch0   [0:C-1];
  reg        b_valid  [0:C-1];
  reg [LB-1:0] b_lane   [0:C-1];
  reg [31:0] b_obase  [0:C-1];
  reg [31:0] b_ch0    [0:C-1];
  reg        d_valid  [0:C-1];
  reg [31:0] d_obase  [0:C-1];
  reg [31:0] d_ch0    [0:C-1];

  // ---- tap pipeline tokens
  reg         s1_valid, s1_first, s1_last;
  reg [C-1:0] s1_av;
  reg         s2_valid, s2_first, s2_last;
  reg [C-1:0] s2_av;

  // ---- drain: D1 (record address, accumulator) -> SRAM -> D2 (requantize, write)
  reg         d_active;
  reg [31:0]  d_row;
  reg         p1_valid, p2_valid;
  reg         p1_en [0:C-1];
  reg         p2_en [0:C-1];
  reg [31:0]  p1_acc [0:C-1];
  reg [31:0]  p2_acc [0:C-1];
  reg [AW-1:0] p1_oaddr [0:C-1];
  reg [AW-1:0] p2_oaddr [0:C-1];

  wire [31:0] drain_acc [0:R*C-1];

  assign act_wide = dw;

  npu_mac_array #(.R(R), .C(C), .LANES(LANES), .LB(LB)) array (
      .clk(clk),
      .en(s2_valid),
      .first(s2_first),
      .last(s2_last),
      .dw(dw),
      .ifm_zero_point($signed(ifm_zero_point)),
      .act_valid(s2_av),
      .act(act_data),
      .lane(b_lane),
      .w(w_data),
      .drain_acc(drain_acc)
  );

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      state <= M_IDLE;
      done <= 1'b0;
      error <= 1'b0;
      s1_valid <= 1'b0;
      s2_valid <= 1'b0;
      d_active <= 1'b0;
      p1_valid <= 1'b0;
      p2_valid <= 1'b0;
      sc1 <= '0;
      sc2 <= '0;
      scan_bad <= 1'b0;
      act_any <= 1'b0;
      w_any <= 1'b0;
      rq_any <= 1'b0;
      out_any <= 1'b0;
    end else begin : engine
      // SRAM requests of this cycle, assigned as whole arrays at the end
      logic          l_act_en   [0:C-1];
      logic [AW-1:0] l_act_addr [0:C-1];
      logic          l_w_en     [0:LANES*R-1];
      logic [AW-1:0] l_w_addr   [0:LANES*R-1];
      logic          l_rq_en    [0:C-1];
      logic [AW-1:0] l_rq_addr  [0:C-1];
      logic          l_out_en   [0:C-1];
      logic [AW-1:0] l_out_addr [0:C-1];
      logic [7:0]    l_out_data [0:C-1];
      logic          issue, gather, scan, drain_row, write_out, do_walk;
      issue = 1'b0;
      scan = 1'b0;
      do_walk = 1'b0;
      done <= 1'b0;
      s1_valid <= 1'b0;

      // ---------------------------------------------------------------- stage A: sequencer
      case (state)
        M_IDLE: begin
          if (start) begin : setup
            logic fc;
            logic [31:0] k;
            logic [31:0] rk [0:R-1];
            fc = opcode == `NPU_OP_FC;
            dw <= opcode == `NPU_OP_DWCONV;
            is_fc <= fc;
            ih <= fc ? 32'd1 : ifm_h;
            iw <= ifm_w;
            oc <= ofm_c;
            ow <= ofm_w;
            kw <= fc ? 32'd1 : kernel_w;
            sh <= fc ? 32'd1 : stride_h;
            sw <= fc ? 32'd1 : stride_w;
            pt <= fc ? 32'sd0 : $signed(pad_top);
            pl <= fc ? 32'sd0 : $signed(pad_left);
            k = fc ? ifm_c : kernel_h * kernel_w * (opcode == `NPU_OP_DWCONV ? 32'd1 : ifm_c);
            taps <= k;
            taps_per_kx <= opcode == `NPU_OP_DWCONV ? 32'd1 : ifm_c;
            tap_step <= opcode == `NPU_OP_DWCONV ? $signed(ifm_c) : 32'sd1;
            row_jump <= opcode == `NPU_OP_DWCONV ? $signed((ifm_w - kernel_w + 32'd1) * ifm_c)
                                                 : $signed((ifm_w - (fc ? 32'd1 : kernel_w)) * ifm_c + 32'd1);
            dx_step <= $signed((fc ? 32'd1 : stride_w) * ifm_c);
            dy_step <= $signed((fc ? 32'd1 : stride_h) * ifm_w * ifm_c);
            abase0 <= $signed(ifm_addr) - $signed(((fc ? 32'd0 : pad_top) * ifm_w + (fc ? 32'd0 : pad_left)) * ifm_c);
            n_pixels <= (fc ? 32'd1 : ofm_h) * ofm_w;
            n_blocks <= (ofm_c + 32'(R - 1)) / 32'(R);
            for (int r = 0; r < R; r++) rk[r] = 32'(r) * k;
            row_k <= rk;
            gap <= (k < 32'(R)) ? 32'(R) - k : 32'd0;
            scan_k <= 32'd0;
            scan_bad <= 1'b0;
            error <= 1'b0;
            state <= M_SCAN;
          end
        end
        M_SCAN: begin  // C requantize records per cycle: their shifts must lie in [-31, 30]
          scan = 1'b1;
          if (scan_k + 32'(C) >= oc) begin
            state <= M_SCAN_WAIT;
            scan_wait <= 2'd3;
          end else scan_k <= scan_k + 32'(C);
        end
        M_SCAN_WAIT: begin
          scan_wait <= scan_wait - 2'd1;
          if (scan_wait == 2'd1) begin
            if (scan_bad) begin
              error <= 1'b1;
              done <= 1'b1;
              state <= M_IDLE;
            end else begin
              // the walker starts at item (pixel 0, channel block 0)
              wk_done <= 1'b0;
              wk_p <= 32'd0;
              wk_ox <= 32'd0;
              wk_cb <= 32'd0;
              wk_iy0 <= -pt;
              wk_ix0 <= -pl;
              wk_row_abase <= abase0;
              wk_pix_abase <= abase0;
              wk_obase <= ofm_addr;
              wk_ch0 <= 32'd0;
              wk_wbase <= weight_addr;
              state <= M_WALK;
            end
          end
        end
        M_WALK: begin
          do_walk = 1'b1;
          state <= M_RUN;
        end
        M_RUN: begin  // issue tap t of the block
          issue = 1'b1;
          if (t + 32'd1 == taps) begin
            if (wk_done) state <= M_END;
            else begin
              do_walk = 1'b1;
              if (gap != 32'd0) begin
                gap_left <= gap;
                state <= M_GAP;
              end
            end
          end
        end
        M_GAP: begin  // K < R: the drain of R rows sets the pace
          gap_left <= gap_left - 32'd1;
          if (gap_left == 32'd1) state <= M_RUN;
        end
        M_END: begin
          if (!s1_valid && !s2_valid && !d_active && !p1_valid && !p2_valid) begin
            done <= 1'b1;
            state <= M_IDLE;
          end
        end
        default: state <= M_IDLE;
      endcase

      for (int c = 0; c < C; c++) begin
        l_act_en[c] = 1'b0;
        l_rq_en[c] = 1'b0;
        l_out_en[c] = 1'b0;
      end
      for (int k = 0; k < LANES*R; k++) l_w_en[k] = 1'b0;

      // ---------------------------------------------------------------- requantize table scan
      if (scan) begin : scan_issue
        logic [C-1:0] m;
        for (int c = 0; c < C; c++) begin
          m[c] = scan_k + 32'(c) < oc;
          l_rq_en[c] = m[c];
          l_rq_addr[c] = AW'(requant_addr + (scan_k + 32'(c)) * 32'(`NPU_REQUANT_RECORD_BYTES));
        end
        sc1 <= m;
      end else sc1 <= '0;
      sc2 <= sc1;
      if (sc2 != '0)
        for (int c = 0; c < C; c++)
          if (sc2[c] && !(is_fc ? fc_record_ok(rq_shift[c][31:21]) : shift_ok(rq_shift[c]))) scan_bad <= 1'b1;

      // ---------------------------------------------------------------- tap issue
      if (issue) begin : tap_issue
        logic [C-1:0] av;
        for (int c = 0; c < C; c++) begin
          logic signed [31:0] iy;
          logic signed [31:0] ix;
          iy = col_iy0[c] + $signed(ky_i);
          ix = col_ix0[c] + $signed(kx_i);
          av[c] = col_valid[c] && iy >= 0 && iy < $signed(ih) && ix >= 0 && ix < $signed(iw);
          l_act_en[c] = av[c];
          l_act_addr[c] = AW'(col_abase[c] + toff);
        end
        for (int l = 0; l < LANES; l++)
          for (int r = 0; r < R; r++) begin
            l_w_en[l*R + r] = 32'(l) < 32'(lanes_used) && lane_ch0[l] + 32'(r) < oc;
            l_w_addr[l*R + r] = AW'(lane_wbase[l] + row_k[r] + t);
          end
        act_addr <= l_act_addr;
        w_addr <= l_w_addr;
        s1_valid <= 1'b1;
        s1_first <= t == 32'd0;
        s1_last <= t + 32'd1 == taps;
        s1_av <= av;
        if (t == 32'd0) begin
          fl_valid <= col_valid;
          fl_lane <= col_lane;
          fl_obase <= col_obase;
          fl_ch0 <= col_ch0;
        end
        // next tap: ic fastest (CONV), then kx, then ky
        if (t + 32'd1 == taps) begin
          t <= 32'd0;
          kx_i <= 32'd0;
          ky_i <= 32'd0;
          icx <= 32'd0;
          toff <= 32'sd0;
        end else begin
          t <= t + 32'd1;
          if (icx + 32'd1 != taps_per_kx) begin
            icx <= icx + 32'd1;
            toff <= toff + tap_step;
          end else begin
            icx <= 32'd0;
            if (kx_i + 32'd1 != kw) begin
              kx_i <= kx_i + 32'd1;
              toff <= toff + tap_step;
            end else begin
              kx_i <= 32'd0;
              ky_i <= ky_i + 32'd1;
              toff <= toff + row_jump;
            end
          end
        end
      end

      // ---------------------------------------------------------------- walker: next block
      // Fill the C columns with consecutive items (pixel-major, then channel block), at most
      // LANES channel blocks per block.
      if (do_walk) begin : walker
        logic              v_valid [0:C-1];
        logic [LB-1:0]     v_lane  [0:C-1];
        logic signed [31:0] v_iy0  [0:C-1];
        logic signed [31:0] v_ix0  [0:C-1];
        logic signed [31:0] v_abase [0:C-1];
        logic [31:0]       v_obase [0:C-1];
        logic [31:0]       v_ch0   [0:C-1];
        logic [31:0]       v_lane_wbase [0:LANES-1];
        logic [31:0]       v_lane_ch0   [0:LANES-1];
        logic need;
        logic [LB:0] nl;
        logic [31:0] lane_cb;
        logic done_w;
        logic [31:0] p, ox, cb, obase, ch0, wbase;
        logic signed [31:0] iy0, ix0, row_abase, pix_abase;
        done_w = wk_done; p = wk_p; ox = wk_ox; cb = wk_cb; obase = wk_obase; ch0 = wk_ch0; wbase = wk_wbase;
        iy0 = wk_iy0; ix0 = wk_ix0; row_abase = wk_row_abase; pix_abase = wk_pix_abase;
        nl = '0;
        lane_cb = 32'd0;
        for (int l = 0; l < LANES; l++) begin
          v_lane_wbase[l] = 32'd0;
          v_lane_ch0[l] = 32'd0;
        end
        for (int c = 0; c < C; c++) begin
          need = nl == '0 || cb != lane_cb;
          v_valid[c] = 1'b0;
          v_lane[c] = '0;
          v_iy0[c] = iy0;
          v_ix0[c] = ix0;
          v_abase[c] = pix_abase;
          v_obase[c] = obase;
          v_ch0[c] = ch0;
          if (!done_w && (!need || 32'(nl) < 32'(LANES))) begin
            if (need) begin
              v_lane_wbase[nl[LB-1:0]] = wbase;
              v_lane_ch0[nl[LB-1:0]] = ch0;
              lane_cb = cb;
              nl = nl + 1'b1;
            end
            v_valid[c] = 1'b1;
            v_lane[c] = LB'(nl - 1'b1);
            v_abase[c] = pix_abase + (dw ? $signed(ch0) : 32'sd0);
            v_obase[c] = obase + ch0;
            // next item
            p = p + 32'd1;
            obase = obase + oc;
            if (ox + 32'd1 == ow) begin
              ox = 32'd0;
              ix0 = -pl;
              iy0 = iy0 + $signed(sh);
              row_abase = row_abase + dy_step;
              pix_abase = row_abase;
            end else begin
              ox = ox + 32'd1;
              ix0 = ix0 + $signed(sw);
              pix_abase = pix_abase + dx_step;
            end
            if (p == n_pixels) begin
              p = 32'd0;
              ox = 32'd0;
              iy0 = -pt;
              ix0 = -pl;
              row_abase = abase0;
              pix_abase = abase0;
              obase = ofm_addr;
              cb = cb + 32'd1;
              ch0 = ch0 + 32'(R);
              wbase = wbase + 32'(R) * taps;
              if (cb == n_blocks) done_w = 1'b1;
            end
          end
        end
        col_valid <= v_valid;
        col_lane <= v_lane;
        col_iy0 <= v_iy0;
        col_ix0 <= v_ix0;
        col_abase <= v_abase;
        col_obase <= v_obase;
        col_ch0 <= v_ch0;
        lane_wbase <= v_lane_wbase;
        lane_ch0 <= v_lane_ch0;
        lanes_used <= nl;
        wk_done <= done_w; wk_p <= p; wk_ox <= ox; wk_cb <= cb; wk_obase <= obase; wk_ch0 <= ch0;
        wk_wbase <= wbase; wk_iy0 <= iy0; wk_ix0 <= ix0; wk_row_abase <= row_abase; wk_pix_abase <= pix_abase;
      end

      // ---------------------------------------------------------------- SRAM stage
      s2_valid <= s1_valid;
      s2_first <= s1_first;
      s2_last <= s1_last;
      s2_av <= s1_av;
      if (s1_valid && s1_first) begin
        b_valid <= fl_valid;
        b_lane <= fl_lane;
        b_obase <= fl_obase;
        b_ch0 <= fl_ch0;
      end

      // ---------------------------------------------------------------- drain D1: row d_row
      drain_row = d_active;
      p1_valid <= drain_row;
      if (drain_row) begin : drain1
        logic        e   [0:C-1];
        logic [31:0] a   [0:C-1];
        logic [AW-1:0] o [0:C-1];
        for (int c = 0; c < C; c++) begin
          e[c] = d_valid[c] && d_ch0[c] + d_row < oc;
          l_rq_en[c] = e[c];
          l_rq_addr[c] = AW'(requant_addr + (d_ch0[c] + d_row) * 32'(`NPU_REQUANT_RECORD_BYTES));
          a[c] = drain_acc[d_row*C + c];
          o[c] = AW'(d_obase[c] + d_row);
        end
        p1_en <= e;
        p1_acc <= a;
        p1_oaddr <= o;
        if (d_row + 32'd1 == 32'(R)) d_active <= 1'b0;
        else d_row <= d_row + 32'd1;
      end
      // stage B is the array (npu_mac_array); a block's last tap hands it to the drain (after
      // D1 above: the previous block's last row may be read at this very edge)
      if (s2_valid && s2_last) begin
        d_valid <= b_valid;
        d_obase <= b_obase;
        d_ch0 <= b_ch0;
        d_active <= 1'b1;
        d_row <= 32'd0;
      end
      // SRAM stage of the drain
      p2_valid <= p1_valid;
      if (p1_valid) begin
        p2_en <= p1_en;
        p2_acc <= p1_acc;
        p2_oaddr <= p1_oaddr;
      end
      // D2: the C requantize units
      write_out = p2_valid;
      if (write_out) begin
        for (int c = 0; c < C; c++) begin
          l_out_en[c] = p2_en[c];
          l_out_addr[c] = p2_oaddr[c];
          if (!p2_en[c]) l_out_data[c] = 8'd0;
          else if (is_fc) l_out_data[c] = fc_requantize(p2_acc[c], rq_bias[c], {rq_shift[c][20:0], rq_multiplier[c]},
                                                        rq_shift[c][31:24], ofm_zero_point, act_min, act_max);
          else l_out_data[c] = requantize(p2_acc[c], rq_bias[c], rq_multiplier[c], rq_shift[c], ofm_zero_point,
                                          act_min, act_max);
        end
        out_addr <= l_out_addr;
        out_data <= l_out_data;
      end

      gather = scan || drain_row;
      if (gather) rq_addr <= l_rq_addr;
      act_en <= l_act_en;
      w_en <= l_w_en;
      rq_en <= l_rq_en;
      out_en <= l_out_en;
      act_any <= issue;
      w_any <= issue;
      rq_any <= gather;
      out_any <= write_out;
    end
  end
endmodule

`default_nettype wire
