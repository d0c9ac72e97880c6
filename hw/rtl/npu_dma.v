// npu_dma.v -- the DMA unit: the region table, the DMA checks, and the 3-D strided copy between
// SRAM (dense) and an external region (docs/isa.md §1 and §3 DMA_IN / DMA_OUT).
//
// Region table: the driver binds each region before the run (region_we: bound flag and size in
// bytes). The external memory port names a region and a byte offset inside it; the driver
// maps that to its buffer. The port moves up to DMA_BYTES contiguous bytes per request; a read
// returns its data on the next clock edge (mem_rdata), a write carries its data with it
// (mem_wdata). One request per cycle at most: the memory paces them with mem_grant (the mover
// issues its next request, described by mem_req*, only at an edge where mem_grant is high; the
// harness's memory model, npu_byoc.arch.memory, decides), so latency, bursts and bandwidth
// stretch the copy while the data path stays as it is. With each request the mover says how
// long its transfer waited in the queue (mem_req_wait): the engine looks ahead into its queue,
// so a queued transfer's first requests may go out while the one before it still streams (up
// to the memory's reads or writes in flight), and the memory model times them from then.
//
// Checks (two cycles, nothing moves before they pass), in the ISA's order:
//   region bound, and not CONST for DMA_OUT          -> INVALID_REGION
//   N0, N1, N2 >= 1                                  -> INVALID_PARAMETER
//   DMA_SRAM_ADDR + N2*N1*N0 <= SRAM_BYTES            -> ADDRESS_OUT_OF_RANGE
//   lowest and highest external byte in [0, size)    -> ADDRESS_OUT_OF_RANGE
// then the copy in (i2, i1, i0) order. When DMA_STRIDE0 == 1 a row of N0 bytes is contiguous
// on both sides and moves DMA_BYTES per cycle; otherwise one byte per cycle.
//
// Descriptor queue (docs/isa.md, concurrency): the checker and the mover are separate. A
// transfer that passes its checks becomes a descriptor (the nine registers, latched); the
// mover copies descriptors one at a time in order. With the mover idle and nothing queued the
// checked descriptor goes straight to it (the same cycle a one-transfer engine would start);
// otherwise it waits in a FIFO and the mover takes it the cycle after the previous copy's done.
// `outstanding` counts accepted transfers not yet complete; the command processor keeps it
// <= QD (a background DMA waits for room) and WAIT_DMA waits for it to fall to DMA_WAIT_PENDING.
//
// DMA_IN_DECODE (a weight decoder, WDEC > 0): the checks read DMA_N0 (<= the decoder's buffer,
// else INVALID_PARAMETER) and DMA_DECODE_BYTES (the SRAM block); the mover reads the DMA_N0
// encoded bytes as one contiguous row into npu_wdec, which then writes the decoded bytes
// through the SRAM write port (WRB = max(DMA_BYTES, WDEC) bytes wide). A bad code completes
// like a good one (the queue and interlock do not care) and sets `bad_code` with the
// transfer's command word (`bad_index`), the first one of the run: the command processor
// reports BAD_ENCODING at it when the run ends (a synchronous DMA_IN_DECODE ends it at once).
//
// Interlock (docs/isa.md, concurrency): each descriptor keeps its SRAM range until its copy
// completes. `sram_hazard` says whether an outstanding DMA_IN writes bytes of one of the kick's
// operands (query_*) or an outstanding DMA_OUT reads bytes of its output (the last query); the
// command processor holds the kick until neither holds, so
// a kick sees every earlier DMA complete, as if DMAs copied at issue (the stream machine).
// Transfers among themselves need no interlock: the mover copies them one at a time, in order.
`default_nettype none
`include "npu_config.vh"

module npu_dma #(
    parameter longint SRAM_BYTES = `NPU_SRAM_BYTES,
    parameter int AW = 19,         // SRAM address bits (npu_sram)
    parameter int DMA_BYTES = `NPU_DMA_BYTES_PER_CYCLE,  // bytes per external memory request
    parameter int LW = $clog2(DMA_BYTES + 1),            // bits of a request's byte count
    parameter int QD = `NPU_DMA_QUEUE_DEPTH,              // transfers outstanding at most
    parameter int NQ = 4,                                  // operand ranges a kick names at most
    parameter int WDEC = `NPU_WEIGHT_DECODER_BYTES_PER_CYCLE,  // decoded bytes a cycle (0: no decoder)
    parameter int WRB = WDEC > DMA_BYTES ? WDEC : DMA_BYTES,  // SRAM write port bytes
    parameter int LWR = $clog2(WRB + 1)
) (
    input  wire        clk,
    input  wire        rst_n,
    // region table
    input  wire        region_we,
    input  wire [`NPU_REGION_BITS-1:0] region_idx,
    input  wire        region_bound,
    input  wire [63:0] region_size,
    // control
    input  wire        start,
    input  wire        to_sram,   // 1: DMA_IN (region -> SRAM), 0: DMA_OUT
    input  wire        decode,    // DMA_IN_DECODE (with to_sram)
    input  wire [31:0] cmd_index, // the command's word (a bad code's bad_index)
    input  wire        clear,     // a run starts: bad_code cleared
    output reg         bad_code,  // a DMA_IN_DECODE of this run had a bad code
    output reg  [31:0] bad_index, // the first one's command word
    output reg         done,      // pulse, with status
    output reg         accepted,  // pulse: the checks passed, the transfer is queued (a background DMA retires)
    output wire        busy,      // a transfer is outstanding (queued or being copied)
    output reg  [7:0]  outstanding,  // transfers accepted and not yet complete (0 .. QD)
    // interlock: the SRAM operands of the kick about to run (byte address, length; length 0:
    // no operand; the last one is its output) and whether an outstanding transfer conflicts:
    // a DMA_IN writing bytes of any operand, a DMA_OUT reading bytes of the output
    input  wire [64*NQ-1:0] query_addr,
    input  wire [64*NQ-1:0] query_len,
    input  wire        query_on,   // the command processor holds a checked kick (S_CHECK, S_INTERLOCK)
    output wire        sram_hazard,

    output reg  [`NPU_STATUS_BITS-1:0] status,
    // registers
    input  wire [31:0] reg_ext_region,
    input  wire [31:0] reg_ext_addr,
    input  wire [31:0] reg_sram_addr,
    input  wire [31:0] reg_n0,
    input  wire [31:0] reg_n1,
    input  wire [31:0] reg_n2,
    input  wire [31:0] reg_stride0,
    input  wire [31:0] reg_stride1,
    input  wire [31:0] reg_stride2,
    input  wire [31:0] reg_decode_bytes,
    // external memory port
    output reg         mem_valid,
    output reg         mem_write,
    output reg  [`NPU_REGION_BITS-1:0] mem_region,
    output reg  [63:0] mem_addr,
    output reg  [LW-1:0] mem_len,
    output wire [8*DMA_BYTES-1:0] mem_wdata,
    input  wire [8*DMA_BYTES-1:0] mem_rdata,
    // memory timing (the external memory paces the requests): the mover issues its next
    // request at an edge only with mem_grant; mem_req* describe that request for the memory
    input  wire        mem_grant,
    output wire        mem_req,            // a request is ready to issue
    output wire        mem_req_write,      // DMA_OUT
    output wire [3:0]  mem_req_region,
    output wire [31:0] mem_req_row_left,   // bytes left in its contiguous row, this request's included
    output wire        mem_req_row_first,  // the first request of its row
    output wire [31:0] mem_req_wait,       // cycles its transfer waited queued before the mover took it
    // SRAM ports
    output reg           sram_rd_en,
    output reg  [AW-1:0] sram_rd_addr,
    input  wire [8*DMA_BYTES-1:0] sram_rd_data,
    output wire          sram_wr_en,
    output wire [AW-1:0] sram_wr_addr,
    output wire [LWR-1:0] sram_wr_len,
    output wire [8*WRB-1:0] sram_wr_data
);
  localparam longint SAT = 2 * SRAM_BYTES;
  localparam int FD = QD > 1 ? QD - 1 : 1;  // FIFO entries: the mover holds one more
  localparam int FB = $clog2(FD + 1);       // FIFO index / count bits

  reg        bound [0:`NPU_MAX_REGIONS-1];
  reg [63:0] size  [0:`NPU_MAX_REGIONS-1];

  // A transfer: direction and its nine registers (the region and SRAM address narrowed to the
  // bits used once checked).
  typedef struct packed {
    logic        dir_in;
    logic        decode;     // DMA_IN_DECODE: n0 encoded bytes (n1 = n2 = stride0 = 1) into dbytes
    logic [31:0] dbytes;
    logic [31:0] index;
    logic [3:0]  region;
    logic [31:0] ext_addr;
    logic [AW-1:0] sram_addr;
    logic [31:0] n0, n1, n2;
    logic [31:0] stride0, stride1, stride2;
  } desc_t;

  // A transfer's SRAM bytes [lo, hi) for the interlock, beside its descriptor (narrow: the
  // simulation compares these every cycle)
  typedef struct packed {
    logic        dir_in;
    logic [AW:0] lo, hi;
  } range_t;

  // checker
  reg        checking;
  desc_t     c_desc;
  range_t    c_range;
  reg        c_region_ok;
  reg        c_counts_ok;
  reg        c_sram_ok;
  reg signed [71:0] c_first;
  reg signed [71:0] c_last;
  reg [63:0] c_size;
  wire       c_pass = c_region_ok && c_counts_ok && c_sram_ok && c_first >= 0 && c_last < $signed({8'd0, c_size});
  wire       c_accept = checking && c_pass;

  // FIFO of checked descriptors waiting for the mover
  desc_t     fifo [0:FD-1];
  range_t    fifo_range [0:FD-1];
  reg [FB-1:0] f_rd, f_wr, f_count;
  // request look-ahead: the cycle each transfer was queued (a free-running count), so the memory
  // model can issue its first requests from then (mem_req_wait)
  reg [31:0] now;
  reg [31:0] fifo_ready [0:FD-1];
  reg [31:0] m_ready;

  // mover
  localparam [1:0] M_IDLE = 2'd0, M_DECODE = 2'd1, M_MOVE = 2'd2, M_DRAIN = 2'd3;
  reg [1:0]  state;
  /* verilator lint_off UNUSEDSIGNAL */
  desc_t     m;  // the descriptor being copied (its addresses seed the generator at take)
  /* verilator lint_on UNUSEDSIGNAL */
  range_t    m_range;
  wire       take_fifo = state == M_IDLE && f_count != '0;
  wire       take_new  = state == M_IDLE && f_count == '0 && c_accept;
  wire       push      = c_accept && !take_new;
  wire       pop_done;  // the mover completes a transfer this cycle
  // address generator
  reg [31:0] i0, i1, i2;
  reg signed [63:0] ext_cur, row_base, plane_base;
  reg [AW-1:0] sram_cur;
  // pipeline: DMA_IN read in flight (its SRAM destination), DMA_OUT SRAM read in flight
  reg          in_valid;
  reg [AW-1:0] in_sram_addr;
  reg [LW-1:0] in_len;
  reg          out_valid;
  reg [63:0]   out_addr;
  reg [LW-1:0] out_len;
  reg [1:0]    tail;  // cycles left after the last request

  wire signed [63:0] s0 = 64'($signed(m.stride0));
  wire signed [63:0] s1 = 64'($signed(m.stride1));
  wire signed [63:0] s2 = 64'($signed(m.stride2));
  wire contiguous = m.stride0 == 32'd1;
  wire [31:0] row_left = m.n0 - i0;
  wire [LW-1:0] chunk = !contiguous ? LW'(1) : (row_left >= 32'(DMA_BYTES)) ? LW'(DMA_BYTES) : LW'(row_left);

  // the weight decoder (M_DECODE: the mover waits for its last write)
  wire          wdec_wr_en, wdec_done, wdec_bad;
  wire [AW-1:0] wdec_wr_addr;
  wire [LWR-1:0] wdec_wr_len;
  wire [8*WRB-1:0] wdec_wr_data;
  wire          in_raw = in_valid && !m.decode;  // a DMA_IN read's data goes to SRAM
  assign sram_wr_en = in_raw || wdec_wr_en;
  assign sram_wr_addr = in_raw ? in_sram_addr : wdec_wr_addr;
  assign sram_wr_len = in_raw ? LWR'(in_len) : wdec_wr_len;
  assign sram_wr_data = in_raw ? (8*WRB)'(mem_rdata) : wdec_wr_data;
  generate
    if (WDEC > 0) begin : g_wdec
      reg in_last;  // the read in flight is the transfer's last
      wire [$clog2(WDEC + 1)-1:0] len;
      wire [8*WDEC-1:0] data;
      always_ff @(posedge clk) in_last <= state == M_MOVE && mem_grant && 32'(chunk) == row_left;
      npu_wdec #(.W(WDEC), .D(DMA_BYTES), .AW(AW)) wdec (
          .clk(clk), .rst_n(rst_n),
          .start((take_fifo || take_new) && (take_fifo ? fifo[f_rd].decode : c_desc.decode)),
          .n0(take_fifo ? fifo[f_rd].n0 : c_desc.n0),
          .n(take_fifo ? fifo[f_rd].dbytes : c_desc.dbytes),
          .sram_addr(take_fifo ? fifo[f_rd].sram_addr : c_desc.sram_addr),
          .in_valid(in_valid && m.decode), .in_last(in_last), .in_len(in_len), .in_data(mem_rdata),
          .wr_en(wdec_wr_en), .wr_addr(wdec_wr_addr), .wr_len(len), .wr_data(data),
          .done(wdec_done), .bad(wdec_bad));
      assign wdec_wr_len = LWR'(len);
      assign wdec_wr_data = (8*WRB)'(data);
    end else begin : g_no_wdec
      assign wdec_wr_en = 1'b0;
      assign wdec_wr_addr = '0;
      assign wdec_wr_len = '0;
      assign wdec_wr_data = '0;
      assign wdec_done = 1'b0;
      assign wdec_bad = 1'b0;
    end
  endgenerate

  assign mem_wdata = sram_rd_data;
  assign busy = outstanding != 8'd0;
  assign mem_req = state == M_MOVE;
  assign mem_req_write = !m.dir_in;
  assign mem_req_region = m.region;
  assign mem_req_row_left = contiguous ? row_left : 32'd1;  // a strided byte is a row of its own
  assign mem_req_row_first = !contiguous || i0 == 32'd0;
  assign mem_req_wait = now - m_ready;
  assign pop_done = (state == M_DRAIN && tail == 2'd1) || (state == M_DECODE && wdec_done);

  // min(a * b, SAT)
  function automatic logic [63:0] smul(input logic [63:0] fn_a, input logic [63:0] fn_b);
    logic [71:0] p;
    begin
      p = 72'(fn_a) * 72'(fn_b);
      smul = (p > 72'(SAT)) ? 64'(SAT) : 64'(p);
    end
  endfunction

  // (count - 1) * stride, exact
  function automatic logic signed [71:0] span(input logic [31:0] fn_count, input logic signed [63:0] fn_stride);
    begin
      span = (72'(fn_count) - 72'sd1) * 72'(fn_stride);
    end
  endfunction

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      for (int k = 0; k < `NPU_MAX_REGIONS; k++) begin
        bound[k] <= 1'b0;
        size[k] <= 64'd0;
      end
    end else if (region_we) begin
      bound[region_idx] <= region_bound;
      size[region_idx] <= region_size;
    end
  end

  // checker: start latches the registers and computes the checks; the next cycle rejects
  // (done with the status) or accepts (the descriptor goes to the mover or the FIFO)
  always_ff @(posedge clk) begin
    if (!rst_n) begin
      checking <= 1'b0;
      accepted <= 1'b0;
      f_rd <= '0;
      f_wr <= '0;
      f_count <= '0;
      outstanding <= 8'd0;
    end else begin
      accepted <= 1'b0;
      checking <= 1'b0;
      if (start) begin : check1
        logic [3:0] r;
        logic signed [71:0] a0, a1, a2;
        logic [31:0] d_n1, d_n2, d_s0;
        logic [63:0] sram_n;
        r = reg_ext_region[3:0];
        checking <= 1'b1;
        // a decode transfer: one contiguous row of DMA_N0 bytes, DMA_DECODE_BYTES in SRAM
        d_n1 = decode ? 32'd1 : reg_n1;
        d_n2 = decode ? 32'd1 : reg_n2;
        d_s0 = decode ? 32'd1 : reg_stride0;
        sram_n = decode ? 64'(reg_decode_bytes) : smul(smul(64'(reg_n0), 64'(d_n1)), 64'(d_n2));
        c_region_ok <= reg_ext_region < 32'(`NPU_MAX_REGIONS) && bound[r] && (to_sram || r != `NPU_REGION_CONST);
        c_counts_ok <= reg_n0 != 32'd0 && d_n1 != 32'd0 && d_n2 != 32'd0
                       && (!decode || (reg_decode_bytes != 32'd0 && reg_n0 <= 32'(`NPU_DECODE_BUFFER_BYTES)));
        c_sram_ok <= 64'(reg_sram_addr) + sram_n <= 64'(SRAM_BYTES);
        a0 = span(reg_n0, 64'($signed(d_s0)));
        a1 = decode ? 72'sd0 : span(reg_n1, 64'($signed(reg_stride1)));
        a2 = decode ? 72'sd0 : span(reg_n2, 64'($signed(reg_stride2)));
        c_first <= 72'(reg_ext_addr) + (a0 < 0 ? a0 : 72'sd0) + (a1 < 0 ? a1 : 72'sd0) + (a2 < 0 ? a2 : 72'sd0);
        c_last <= 72'(reg_ext_addr) + (a0 > 0 ? a0 : 72'sd0) + (a1 > 0 ? a1 : 72'sd0) + (a2 > 0 ? a2 : 72'sd0);
        c_size <= size[r];
        // (exact once the checks pass: the block ends within SRAM)
        c_range <= '{dir_in: to_sram, lo: (AW + 1)'(reg_sram_addr), hi: (AW + 1)'(64'(reg_sram_addr) + sram_n)};
        c_desc <= '{dir_in: to_sram, decode: decode, dbytes: reg_decode_bytes, index: cmd_index,
                    region: r, ext_addr: reg_ext_addr, sram_addr: AW'(reg_sram_addr),
                    n0: reg_n0, n1: d_n1, n2: d_n2, stride0: d_s0, stride1: reg_stride1, stride2: reg_stride2};
      end
      if (c_accept) accepted <= 1'b1;
      if (push) begin
        fifo[f_wr] <= c_desc;
        fifo_range[f_wr] <= c_range;
        fifo_ready[f_wr] <= now + 32'd1;  // in the FIFO from the next cycle
        f_wr <= (f_wr == FB'(FD - 1)) ? '0 : f_wr + 1'b1;
      end
      if (take_fifo) f_rd <= (f_rd == FB'(FD - 1)) ? '0 : f_rd + 1'b1;
      f_count <= f_count + FB'(push) - FB'(take_fifo);
      outstanding <= outstanding + 8'(c_accept) - 8'(pop_done);
    end
  end

  // a bad code: the run's first
  always_ff @(posedge clk) begin
    if (!rst_n || clear) begin
      bad_code <= 1'b0;
      bad_index <= 32'd0;
    end else if (state == M_DECODE && wdec_done && wdec_bad && !bad_code) begin
      bad_code <= 1'b1;
      bad_index <= m.index;
    end
  end

  // status / done: a rejected check (its status), or a completed copy (OK)
  always_ff @(posedge clk) begin
    if (!rst_n) begin
      done <= 1'b0;
      status <= `NPU_STATUS_OK;
    end else begin
      done <= 1'b0;
      if (checking && !c_pass) begin
        if (!c_region_ok) status <= `NPU_STATUS_INVALID_REGION;
        else if (!c_counts_ok) status <= `NPU_STATUS_INVALID_PARAMETER;
        else status <= `NPU_STATUS_ADDRESS_OUT_OF_RANGE;
        done <= 1'b1;
      end else if (pop_done) begin
        status <= `NPU_STATUS_OK;
        done <= 1'b1;
      end
    end
  end

  // interlock: whether a transfer's range meets one of the kick's operands (narrowed to SRAM
  // addresses: exact once its checks pass, which is when the command processor asks): a DMA_IN
  // writes its range, so every operand; a DMA_OUT reads it, so only the output (the last)
  function automatic logic meets(input range_t fn_r);
    logic hit;
    logic [AW:0] lo, hi;
    begin
      hit = 1'b0;
      for (int q = 0; q < NQ; q++) begin
        lo = query_addr[64*q +: AW + 1];
        hi = lo + query_len[64*q +: AW + 1];
        if (query_len[64*q +: 64] != 64'd0 && (fn_r.dir_in || q == NQ - 1) && fn_r.lo < hi && lo < fn_r.hi)
          hit = 1'b1;
      end
      meets = hit;
    end
  endfunction

  // the outstanding transfers: the mover's (M_MOVE, M_DRAIN) and the FIFO's f_count entries
  // from f_rd; compared only while the command processor asks (query_on), which keeps the
  // simulation's per-cycle work as it was
  logic hazard_r;
  always_comb begin : interlock
    logic hit;
    hit = 1'b0;
    if (query_on) begin
      hit = state != M_IDLE && meets(m_range);
      for (int k = 0; k < FD; k++)
        if (FB'(k) < f_count && meets(fifo_range[(32'(f_rd) + k) % FD])) hit = 1'b1;
    end
    hazard_r = hit;
  end
  assign sram_hazard = hazard_r;

  // mover
  always_ff @(posedge clk) begin
    if (!rst_n) begin
      state <= M_IDLE;
      mem_valid <= 1'b0;
      mem_write <= 1'b0;
      sram_rd_en <= 1'b0;
      in_valid <= 1'b0;
      out_valid <= 1'b0;
      now <= 32'd0;
    end else begin
      now <= now + 32'd1;
      mem_valid <= 1'b0;
      sram_rd_en <= 1'b0;
      in_valid <= 1'b0;
      out_valid <= 1'b0;
      case (state)
        M_IDLE: begin
          if (take_fifo || take_new) begin : take
            desc_t d;
            d = take_fifo ? fifo[f_rd] : c_desc;
            m <= d;
            m_range <= take_fifo ? fifo_range[f_rd] : c_range;
            m_ready <= take_fifo ? fifo_ready[f_rd] : now + 32'd1;  // taken at once: it never waited
            i0 <= 32'd0;
            i1 <= 32'd0;
            i2 <= 32'd0;
            ext_cur <= 64'(d.ext_addr);
            row_base <= 64'(d.ext_addr);
            plane_base <= 64'(d.ext_addr);
            sram_cur <= d.sram_addr;
            state <= M_MOVE;
          end
        end
        M_MOVE: if (mem_grant) begin
          // one request: `chunk` bytes of row (i2, i1) from i0
          if (m.dir_in) begin
            mem_valid <= 1'b1;
            mem_write <= 1'b0;
            mem_region <= m.region;
            mem_addr <= ext_cur;
            mem_len <= chunk;
            in_valid <= 1'b1;
            in_sram_addr <= sram_cur;
            in_len <= chunk;
          end else begin
            sram_rd_en <= 1'b1;
            sram_rd_addr <= sram_cur;
            out_valid <= 1'b1;
            out_addr <= ext_cur;
            out_len <= chunk;
          end
          sram_cur <= sram_cur + AW'(chunk);
          if (32'(chunk) == row_left) begin  // end of row
            i0 <= 32'd0;
            if (i1 + 32'd1 != m.n1) begin
              i1 <= i1 + 32'd1;
              row_base <= row_base + s1;
              ext_cur <= row_base + s1;
            end else begin
              i1 <= 32'd0;
              plane_base <= plane_base + s2;
              row_base <= plane_base + s2;
              ext_cur <= plane_base + s2;
              if (i2 + 32'd1 != m.n2) i2 <= i2 + 32'd1;
              else if (m.decode) state <= M_DECODE;
              else begin
                state <= M_DRAIN;
                tail <= 2'd2;
              end
            end
          end else begin
            i0 <= i0 + 32'(chunk);
            ext_cur <= ext_cur + (contiguous ? 64'(chunk) : s0);
          end
        end
        M_DECODE: if (wdec_done) state <= M_IDLE;  // its last write is presented now
        M_DRAIN: begin
          // DMA_IN: the last read's data is written this edge; DMA_OUT: the last write request
          // is presented the cycle after its SRAM read.
          tail <= tail - 2'd1;
          if (tail == 2'd1) state <= M_IDLE;
        end
        default: state <= M_IDLE;
      endcase
      // DMA_OUT: the SRAM read of the previous cycle becomes a write request
      if (out_valid) begin
        mem_valid <= 1'b1;
        mem_write <= 1'b1;
        mem_region <= m.region;
        mem_addr <= out_addr;
        mem_len <= out_len;
      end
    end
  end
endmodule

`default_nettype wire
