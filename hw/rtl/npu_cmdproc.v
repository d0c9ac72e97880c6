// npu_cmdproc.v -- the command processor: fetches the stream word by word, checks the header,
// decodes and executes the commands in order, and reports a status and a word index
// (docs/isa.md §2 and §4; npu_byoc.runtime.machine.Machine.run is the reference).
//
//   header:   MAGIC (word 0), VERSION (word 1), length (word 2) == the submitted word count
//   SET_REG:  register address checked, value word fetched, register written
//   NOP:      nothing;  STOP: status OK at the STOP word
//   DMA_IN/OUT:         the DMA unit checks its registers, then moves the data
//   DMA_*_ASYNC:        once fewer than NPU_DMA_QUEUE_DEPTH transfers are outstanding, the DMA
//                       unit checks its registers and queues the copy, which runs in the
//                       background while the next commands execute
//   DMA_IN/OUT, STOP:   first wait until no transfer is outstanding
//   DMA_IN_DECODE(_ASYNC): as DMA_IN(_ASYNC), through the weight decoder (npu_wdec; without
//                       one, WEIGHT_DECODER_BYTES_PER_CYCLE 0, INVALID_OPCODE); a bad code
//                       is reported when its transfer completes: the run ends with
//                       BAD_ENCODING at that transfer's word (the synchronous one at once)
//   WAIT_DMA:           waits until at most DMA_WAIT_PENDING transfers are outstanding
//   compute kicks:      npu_kick_check checks registers / SRAM ranges / overlaps, then (the
//                       DMA interlock) waits while an outstanding transfer's SRAM range meets
//                       one of the kick's operands, then the MAC engine (CONV, DWCONV, FC: it also checks the requantize table) or the
//                       vector unit (AVGPOOL, MAXPOOL, MEAN, ADD, LUT) runs
//
// The first error ends the run: status and the offending word's index; the failing command
// has no effect (a bad background code, found later, overrides: docs/isa.md). The fetch port returns the word at fetch_index on the clock edge after the
// request (fetch_valid). cmd_budget bounds the commands executed (the golden model's
// max_commands): when it is reached, the next command stops the run with CYCLE_LIMIT.
// Timing: one cycle per fetched word (NOP 1, SET_REG 2), a kick 1 + the unit's cycles.
`default_nettype none
`include "npu_config.vh"

module npu_cmdproc (
    input  wire        clk,
    input  wire        rst_n,
    // run control (driver side)
    input  wire        start,         // pulse: run the stream (idle or after done)
    input  wire [63:0] stream_words,  // the submitted length in words
    input  wire [63:0] cmd_budget,    // the most commands to execute before CYCLE_LIMIT
    output reg         busy,
    output reg         done,          // level: the run ended; status / word_index are valid
    output reg  [`NPU_STATUS_BITS-1:0] status,
    output reg  [31:0] word_index,
    output wire [31:0] cur_index,     // the word of the command being executed
    output reg  [63:0] commands,      // commands executed so far
    // command fetch
    output reg         fetch_valid,
    output reg  [31:0] fetch_index,
    input  wire [31:0] fetch_word,
    // register file
    output reg         rf_clear,
    output reg         rf_we,
    output reg  [7:0]  rf_addr,
    output reg  [31:0] rf_wdata,
    // units
    output reg  [7:0]  kick_op,       // opcode of the current kick, held while it runs
    output reg         dma_start,
    input  wire        dma_done,
    input  wire        dma_accepted,  // a background DMA passed its checks
    input  wire        dma_busy,      // a transfer is outstanding (queued or being copied)
    input  wire [7:0]  dma_outstanding,  // transfers accepted and not yet complete
    input  wire [31:0] dma_wait_pending,  // the DMA_WAIT_PENDING register (WAIT_DMA)
    input  wire [`NPU_STATUS_BITS-1:0] dma_status,
    input  wire        dma_bad_code,  // a DMA_IN_DECODE's code was bad: the run ends with BAD_ENCODING
    input  wire [31:0] dma_bad_index, // at its word (whatever else ends the run)
    input  wire        dma_hazard,    // an outstanding transfer's SRAM range meets the checked kick's operands
    output wire        dma_hazard_query,  // dma_hazard is wanted (a kick in its checks or held)
    output reg         check_start,
    input  wire        check_done,
    input  wire [`NPU_STATUS_BITS-1:0] check_status,
    output reg         mac_start,
    input  wire        mac_done,
    input  wire        mac_error,     // the requantize table holds a shift outside [-31, 30]
    output reg         vec_start,
    input  wire        vec_done,
    // trace: one pulse per command executed (not for the failing one)
    output reg         cmd_done,
    output reg  [7:0]  cmd_opcode,
    output reg  [31:0] cmd_index
);
  localparam [3:0] S_IDLE = 4'd0, S_MAGIC = 4'd1, S_VERSION = 4'd2, S_LENGTH = 4'd3, S_DECODE = 4'd4,
                   S_VALUE = 4'd5, S_DMA = 4'd6, S_CHECK = 4'd7, S_MAC = 4'd8, S_VEC = 4'd9,
                   S_ENGINE = 4'd10,  // a DMA or WAIT_DMA waits for the DMA queue (engine_ready)
                   S_ACCEPT = 4'd11,  // a background DMA waits for its checks
                   S_DRAIN = 4'd12,   // the run ends once the DMA engine is idle
                   S_INTERLOCK = 4'd13;  // a checked kick waits for the DMAs in flight on its operands

  reg [3:0]  state;
  reg [63:0] idx;  // word index of the current command

  assign cur_index = idx[31:0];
  assign dma_hazard_query = state == S_CHECK || state == S_INTERLOCK;

  wire [7:0] opcode   = fetch_word[`NPU_OPCODE_SHIFT +: `NPU_OPCODE_BITS];
  wire [7:0] reg_addr = fetch_word[`NPU_REG_SHIFT +: `NPU_REG_BITS];
  wire       set_reg  = opcode == `NPU_OP_SET_REG;
  wire       reserved = set_reg ? |(fetch_word & `NPU_SET_REG_RESERVED_MASK)
                                : |(fetch_word & `NPU_KICK_RESERVED_MASK);
  wire       engine   = opcode == `NPU_OP_DMA_IN || opcode == `NPU_OP_DMA_OUT || opcode == `NPU_OP_WAIT_DMA ||
                        opcode == `NPU_OP_DMA_IN_ASYNC || opcode == `NPU_OP_DMA_OUT_ASYNC ||
                        opcode == `NPU_OP_DMA_IN_DECODE || opcode == `NPU_OP_DMA_IN_DECODE_ASYNC;
  wire       no_decoder = `NPU_WEIGHT_DECODER_BYTES_PER_CYCLE == 0;
  function automatic logic background(input [7:0] op);
    background = op == `NPU_OP_DMA_IN_ASYNC || op == `NPU_OP_DMA_OUT_ASYNC || op == `NPU_OP_DMA_IN_DECODE_ASYNC;
  endfunction
  wire       is_mac   = kick_op == `NPU_OP_CONV || kick_op == `NPU_OP_DWCONV || kick_op == `NPU_OP_FC;

  // End the run; done waits for a background DMA to complete (S_DRAIN). A bad DMA_IN_DECODE
  // code (complete once the engine is idle) is the run's status whatever ended it.
  task automatic finish(input [`NPU_STATUS_BITS-1:0] st, input [31:0] index);
    begin
      status <= st;
      word_index <= index;
      if (dma_busy) state <= S_DRAIN;
      else begin
        if (dma_bad_code) begin
          status <= `NPU_STATUS_BAD_ENCODING;
          word_index <= dma_bad_index;
        end
        done <= 1'b1;
        busy <= 1'b0;
        state <= S_IDLE;
      end
    end
  endtask

  // DMA_WAIT_PENDING as the WAIT_DMA decoded now sees it: a SET_REG just before it is written
  // into the register file on this very edge.
  wire [31:0] wait_pending = (rf_we && rf_addr == `NPU_REG_DMA_WAIT_PENDING) ? rf_wdata : dma_wait_pending;

  // May op (a DMA or WAIT_DMA) run now? A background DMA needs room in the queue, WAIT_DMA at
  // most DMA_WAIT_PENDING transfers outstanding, a synchronous DMA none.
  function automatic logic engine_ready(input [7:0] op);
    begin
      if (background(op)) engine_ready = dma_outstanding < 8'(`NPU_DMA_QUEUE_DEPTH);
      else if (op == `NPU_OP_WAIT_DMA) engine_ready = 32'(dma_outstanding) <= wait_pending;
      else engine_ready = !dma_busy;
    end
  endfunction

  // Run op (a DMA or WAIT_DMA; kick_op holds it from the next cycle) once engine_ready.
  task automatic engine_command(input [7:0] op);
    begin
      if (op == `NPU_OP_WAIT_DMA) begin
        retire(op);
        next_command(idx + 64'd1, commands + 64'd1);
      end else begin
        dma_start <= 1'b1;
        state <= background(op) ? S_ACCEPT : S_DMA;
      end
    end
  endtask

  // Start the checked kick's unit.
  task automatic start_unit();
    begin
      if (is_mac) begin
        mac_start <= 1'b1;
        state <= S_MAC;
      end else begin
        vec_start <= 1'b1;
        state <= S_VEC;
      end
    end
  endtask

  // Go to the command at word i (or end the run: no STOP, or the command budget is spent);
  // executed = the commands executed once this clock edge has retired the current one.
  task automatic next_command(input [63:0] i, input [63:0] executed);
    begin
      idx <= i;
      if (i >= stream_words) finish(`NPU_STATUS_MISSING_STOP, 32'(stream_words));
      else if (executed >= cmd_budget) finish(`NPU_STATUS_CYCLE_LIMIT, 32'(i));
      else begin
        fetch_valid <= 1'b1;
        fetch_index <= i[31:0];
        state <= S_DECODE;
      end
    end
  endtask

  // A command completed: count it and trace it.
  task automatic retire(input [7:0] op);
    begin
      commands <= commands + 64'd1;
      cmd_done <= 1'b1;
      cmd_opcode <= op;
      cmd_index <= idx[31:0];
    end
  endtask

  always_ff @(posedge clk) begin
    if (!rst_n) begin
      state <= S_IDLE;
      busy <= 1'b0;
      done <= 1'b0;
      status <= `NPU_STATUS_OK;
      word_index <= 32'd0;
      commands <= 64'd0;
      idx <= 64'd0;
      fetch_valid <= 1'b0;
      fetch_index <= 32'd0;
      rf_clear <= 1'b0;
      rf_we <= 1'b0;
      rf_addr <= 8'd0;
      rf_wdata <= 32'd0;
      kick_op <= `NPU_OP_NOP;
      dma_start <= 1'b0;
      check_start <= 1'b0;
      mac_start <= 1'b0;
      vec_start <= 1'b0;
      cmd_done <= 1'b0;
      cmd_opcode <= 8'd0;
      cmd_index <= 32'd0;
    end else begin
      // pulses
      fetch_valid <= 1'b0;
      rf_clear <= 1'b0;
      rf_we <= 1'b0;
      dma_start <= 1'b0;
      check_start <= 1'b0;
      mac_start <= 1'b0;
      vec_start <= 1'b0;
      cmd_done <= 1'b0;

      case (state)
        S_IDLE: begin
          if (start) begin
            busy <= 1'b1;
            done <= 1'b0;
            status <= `NPU_STATUS_OK;
            word_index <= 32'd0;
            commands <= 64'd0;
            idx <= 64'd0;
            rf_clear <= 1'b1;
            if (stream_words >= 64'd1) begin
              fetch_valid <= 1'b1;
              fetch_index <= 32'd0;
              state <= S_MAGIC;
            end else finish(`NPU_STATUS_BAD_LENGTH, 32'(stream_words));
          end
        end
        S_MAGIC: begin
          if (fetch_word != `NPU_MAGIC) finish(`NPU_STATUS_BAD_MAGIC, 32'd0);
          else if (stream_words >= 64'd2) begin
            fetch_valid <= 1'b1;
            fetch_index <= 32'd1;
            state <= S_VERSION;
          end else finish(`NPU_STATUS_BAD_LENGTH, 32'(stream_words));
        end
        S_VERSION: begin
          if (fetch_word[31:16] != `NPU_VERSION_MAJOR || fetch_word[15:0] > `NPU_VERSION_MINOR)
            finish(`NPU_STATUS_BAD_VERSION, 32'd1);
          else if (stream_words >= 64'd3) begin
            fetch_valid <= 1'b1;
            fetch_index <= 32'd2;
            state <= S_LENGTH;
          end else finish(`NPU_STATUS_BAD_LENGTH, 32'(stream_words));
        end
        S_LENGTH: begin
          if ({32'd0, fetch_word} != stream_words) finish(`NPU_STATUS_BAD_LENGTH, 32'd2);
          else next_command(64'(`NPU_HEADER_WORDS), commands);
        end
        S_DECODE: begin
          // without a weight decoder (weight_decoder_bytes_per_cycle 0) the decode DMAs are invalid;
          // LAYERNORM only with the LAYERNORM unit (layernorm_unit 1)
          if (!`NPU_OPCODE_VALID(opcode) || reserved || (no_decoder && (opcode == `NPU_OP_DMA_IN_DECODE
              || opcode == `NPU_OP_DMA_IN_DECODE_ASYNC)) || (opcode == `NPU_OP_LAYERNORM && `NPU_LAYERNORM_UNIT == 0))
            finish(`NPU_STATUS_INVALID_OPCODE, 32'(idx));
          else if (set_reg) begin
            if (!`NPU_REG_VALID(reg_addr)) finish(`NPU_STATUS_INVALID_REGISTER, 32'(idx));
            else if (idx + 64'd1 >= stream_words) finish(`NPU_STATUS_MISSING_STOP, 32'(stream_words));
            else begin
              rf_addr <= reg_addr;
              fetch_valid <= 1'b1;
              fetch_index <= 32'(idx + 64'd1);
              state <= S_VALUE;
            end
          end else if (opcode == `NPU_OP_NOP) begin
            retire(opcode);
            next_command(idx + 64'd1, commands + 64'd1);
          end else if (opcode == `NPU_OP_STOP) begin
            retire(opcode);
            finish(`NPU_STATUS_OK, 32'(idx));
          end else begin
            kick_op <= opcode;
            if (engine) begin
              if (!engine_ready(opcode)) state <= S_ENGINE;
              else engine_command(opcode);
            end else begin
              check_start <= 1'b1;
              state <= S_CHECK;
            end
          end
        end
        S_VALUE: begin
          rf_we <= 1'b1;
          rf_wdata <= fetch_word;
          retire(`NPU_OP_SET_REG);
          next_command(idx + 64'd2, commands + 64'd1);
        end
        S_DMA: begin
          if (dma_done) begin
            if (dma_status != `NPU_STATUS_OK) finish(dma_status, 32'(idx));
            else if (kick_op == `NPU_OP_DMA_IN_DECODE && dma_bad_code) finish(`NPU_STATUS_BAD_ENCODING, dma_bad_index);
            else begin
              retire(kick_op);
              next_command(idx + 64'd1, commands + 64'd1);
            end
          end
        end
        S_ENGINE: if (engine_ready(kick_op)) engine_command(kick_op);
        S_ACCEPT: begin
          // a failed check (an earlier transfer's completion is done with status OK)
          if (dma_done && dma_status != `NPU_STATUS_OK) finish(dma_status, 32'(idx));
          else if (dma_accepted) begin
            retire(kick_op);
            next_command(idx + 64'd1, commands + 64'd1);
          end
        end
        S_DRAIN: begin
          if (!dma_busy) begin
            if (dma_bad_code) begin
              status <= `NPU_STATUS_BAD_ENCODING;
              word_index <= dma_bad_index;
            end
            done <= 1'b1;
            busy <= 1'b0;
            state <= S_IDLE;
          end
        end
        S_CHECK: begin
          if (check_done) begin
            if (check_status != `NPU_STATUS_OK) finish(check_status, 32'(idx));
            else if (dma_hazard) state <= S_INTERLOCK;
            else start_unit();
          end
        end
        S_INTERLOCK: if (!dma_hazard) start_unit();
        S_MAC: begin
          if (mac_done) begin
            if (mac_error) finish(`NPU_STATUS_INVALID_PARAMETER, 32'(idx));
            else begin
              retire(kick_op);
              next_command(idx + 64'd1, commands + 64'd1);
            end
          end
        end
        S_VEC: begin
          if (vec_done) begin
            retire(kick_op);
            next_command(idx + 64'd1, commands + 64'd1);
          end
        end
        default: state <= S_IDLE;
      endcase
    end
  end
endmodule

`default_nettype wire
