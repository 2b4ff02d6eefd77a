// Generated from the contract2 section of pylib/dtpu/hw/contract.json by
// `python -m dtpu.hw.gen_header`. Do not edit: change the JSON and regenerate
// (tests/test_hw_contract.py checks drift). Contract 2.0: docs/contract2.md.
// Language: Verilog 2001 (localparams and functions; include inside a module body).

localparam integer DTPU_CL_VERSION_MAJOR = 2;
localparam integer DTPU_CL_VERSION_MINOR = 1;

// ---- memory model (the golden model's Timeline uses the same values) ----
localparam integer DTPU_CL_MEM_READ_LATENCY = 85;
localparam integer DTPU_CL_MEM_WRITE_LATENCY = 85;
localparam integer DTPU_CL_MEM_BEATS_PER_CYCLE = 1;
localparam integer DTPU_CL_MEM_BURST_BEATS = 16;
localparam integer DTPU_CL_MEM_READ_OUTSTANDING = 8;
localparam integer DTPU_CL_MEM_WRITE_OUTSTANDING = 8;
localparam integer DTPU_CL_DESC_FIFO_WORDS = 64;
localparam integer DTPU_CL_IRQ_LATENCY = 1;
localparam integer DTPU_CL_SEQ_FETCH_START = 4;
localparam integer DTPU_CL_SEQ_FETCH_NEXT = 4;
localparam integer DTPU_CL_SEQ_FETCH_ROOM = 3;
localparam integer DTPU_CL_SEQ_DECODE = 3;
localparam integer DTPU_CL_SEQ_DESC_GAP = 4;
localparam integer DTPU_CL_SEQ_REG_CYCLES = 2;
localparam integer DTPU_CL_SEQ_LOAD_REQ = 5;
localparam integer DTPU_CL_SEQ_LOAD_DONE = 11;
localparam integer DTPU_CL_SEQ_LOAD_EMPTY = 5;
localparam integer DTPU_CL_SEQ_END = 1;
localparam integer DTPU_CL_SEQ_RUN_START = 11;
localparam integer DTPU_CL_SEQ_RUN_WAIT = 3;
localparam integer DTPU_CL_SEQ_ACT_SETUP_WINDOWS = 27;
localparam integer DTPU_CL_SEQ_ACT_SETUP_CHANNELS = 42;
localparam integer DTPU_CL_SEQ_ACT_FIRST = 4;
localparam integer DTPU_CL_ACT_ELEM_FIFO = 256;
localparam integer DTPU_CL_ACT_REQ_FIFO = 4;
localparam integer DTPU_CL_ACT_READ_BUFFER = 128;
localparam integer DTPU_CL_STORE_WQ_WORDS = 32;
localparam integer DTPU_CL_SEQ_RUN_DONE = 1;
localparam integer DTPU_CL_SEQ_STORE_TAIL = 3;
localparam integer DTPU_CL_SEQ_STORE_GAP = 4;
localparam integer DTPU_CL_SEQ_ACC_READ = 4;
localparam integer DTPU_CL_SEQ_ACT_RQ = 5;
localparam integer DTPU_CL_SEQ_ACC_SUM = 2;
localparam integer DTPU_CL_SEQ_RD_ISSUE = 2;
localparam integer DTPU_CL_SEQ_RD_CREDIT = 128;
localparam integer DTPU_CL_SEQ_ACT_TAKE = 2;
localparam integer DTPU_CL_SEQ_ACC_TAIL = 5;
localparam integer DTPU_CL_SEQ_POST_READ = 7;
localparam integer DTPU_CL_SEQ_POST_DONE = 13;
localparam integer DTPU_CL_SEQ_POST_AW = 15;
localparam integer DTPU_CL_SEQ_WR_SLOT = 2;
localparam integer DTPU_CL_SEQ_STORE_AW = 5;
localparam integer DTPU_CL_SEQ_ACC_AW = 4;
localparam integer DTPU_CL_SEQ_POST_GO = 3;
localparam integer DTPU_CL_SEQ_RUN_RANGES = 4;
localparam integer DTPU_CL_SEQ_VEC_START = 10;
localparam integer DTPU_CL_SEQ_VEC_WAIT = 4;
localparam integer DTPU_CL_VEC_LANES = 8;
localparam integer DTPU_CL_LAT_VEC = 16;
localparam integer DTPU_CL_VEC_BCAST_WORDS = 256;
localparam integer DTPU_CL_VEC_ROW_WORDS = 1024;
localparam integer DTPU_CL_VEC_POOL_WORDS = 4096;
localparam integer DTPU_CL_VEC_AVG_AREA = 256;

// ---- descriptor opcodes and lengths (words including the header) ----
localparam [7:0] DTPU_CL_OP_END = 8'd0;  // HEADER
localparam [7:0] DTPU_CL_LEN_END = 8'd1;
localparam integer DTPU_CL_LEN_VAR_END = 0;
localparam [7:0] DTPU_CL_OP_LOAD = 8'd1;  // HEADER LOAD1 LOAD2
localparam [7:0] DTPU_CL_LEN_LOAD = 8'd3;
localparam integer DTPU_CL_LEN_VAR_LOAD = 0;
localparam [7:0] DTPU_CL_OP_REGS = 8'd2;  // HEADER REG*
localparam [7:0] DTPU_CL_LEN_REGS = 8'd2;  // at least: one or more words of the starred kind
localparam integer DTPU_CL_LEN_VAR_REGS = 1;
localparam [7:0] DTPU_CL_OP_RUN = 8'd3;  // HEADER ACT0 ACT1 ACT2 ACT3 ACT4 RES0 RES1 RES2
localparam [7:0] DTPU_CL_LEN_RUN = 8'd9;
localparam integer DTPU_CL_LEN_VAR_RUN = 0;
localparam [7:0] DTPU_CL_OP_POST = 8'd4;  // HEADER POST1 POST2 POST3
localparam [7:0] DTPU_CL_LEN_POST = 8'd4;
localparam integer DTPU_CL_LEN_VAR_POST = 0;
localparam [7:0] DTPU_CL_OP_VEC = 8'd5;  // HEADER VEC0 VEC1 VEC2 VEC3 VEC4 VEC5 VEC6 VEC7
localparam [7:0] DTPU_CL_LEN_VEC = 8'd9;
localparam integer DTPU_CL_LEN_VAR_VEC = 0;

// ---- descriptor word fields ----
localparam integer DTPU_CL_HEADER_OP_LSB = 0;
localparam integer DTPU_CL_HEADER_OP_WIDTH = 8;
localparam integer DTPU_CL_HEADER_LEN_LSB = 8;
localparam integer DTPU_CL_HEADER_LEN_WIDTH = 8;
localparam integer DTPU_CL_HEADER_FLAGS_LSB = 16;
localparam integer DTPU_CL_HEADER_FLAGS_WIDTH = 8;
localparam integer DTPU_CL_HEADER_TAG_LSB = 32;
localparam integer DTPU_CL_HEADER_TAG_WIDTH = 32;
localparam integer DTPU_CL_LOAD1_SRC_LSB = 0;
localparam integer DTPU_CL_LOAD1_SRC_WIDTH = 32;
localparam integer DTPU_CL_LOAD1_COUNT_LSB = 32;
localparam integer DTPU_CL_LOAD1_COUNT_WIDTH = 32;
localparam integer DTPU_CL_LOAD2_MEM_LSB = 0;
localparam integer DTPU_CL_LOAD2_MEM_WIDTH = 2;
localparam integer DTPU_CL_LOAD2_ADDR_LSB = 8;
localparam integer DTPU_CL_LOAD2_ADDR_WIDTH = 24;
localparam integer DTPU_CL_LOAD2_AFTER_LSB = 32;
localparam integer DTPU_CL_LOAD2_AFTER_WIDTH = 32;
localparam integer DTPU_CL_REG_OFFSET_LSB = 0;
localparam integer DTPU_CL_REG_OFFSET_WIDTH = 16;
localparam integer DTPU_CL_REG_VALUE_LSB = 32;
localparam integer DTPU_CL_REG_VALUE_WIDTH = 32;
localparam integer DTPU_CL_POST1_SRC_LSB = 0;
localparam integer DTPU_CL_POST1_SRC_WIDTH = 32;
localparam integer DTPU_CL_POST1_DST_LSB = 32;
localparam integer DTPU_CL_POST1_DST_WIDTH = 32;
localparam integer DTPU_CL_POST2_PIX_LSB = 0;
localparam integer DTPU_CL_POST2_PIX_WIDTH = 32;
localparam integer DTPU_CL_POST2_CH0_LSB = 32;
localparam integer DTPU_CL_POST2_CH0_WIDTH = 16;
localparam integer DTPU_CL_POST2_CH_LSB = 48;
localparam integer DTPU_CL_POST2_CH_WIDTH = 16;
localparam integer DTPU_CL_POST3_DSTC_LSB = 0;
localparam integer DTPU_CL_POST3_DSTC_WIDTH = 16;
localparam integer DTPU_CL_ACT0_MODE_LSB = 0;
localparam integer DTPU_CL_ACT0_MODE_WIDTH = 4;
localparam integer DTPU_CL_ACT0_LANES_LSB = 4;
localparam integer DTPU_CL_ACT0_LANES_WIDTH = 4;
localparam integer DTPU_CL_ACT0_ESIZE_LSB = 8;
localparam integer DTPU_CL_ACT0_ESIZE_WIDTH = 4;
localparam integer DTPU_CL_ACT0_PAD_LSB = 16;
localparam integer DTPU_CL_ACT0_PAD_WIDTH = 16;
localparam integer DTPU_CL_ACT0_SRC_LSB = 32;
localparam integer DTPU_CL_ACT0_SRC_WIDTH = 32;
localparam integer DTPU_CL_ACT1_N_LSB = 0;
localparam integer DTPU_CL_ACT1_N_WIDTH = 16;
localparam integer DTPU_CL_ACT1_H_LSB = 16;
localparam integer DTPU_CL_ACT1_H_WIDTH = 16;
localparam integer DTPU_CL_ACT1_W_LSB = 32;
localparam integer DTPU_CL_ACT1_W_WIDTH = 16;
localparam integer DTPU_CL_ACT1_C_LSB = 48;
localparam integer DTPU_CL_ACT1_C_WIDTH = 16;
localparam integer DTPU_CL_ACT2_KH_LSB = 0;
localparam integer DTPU_CL_ACT2_KH_WIDTH = 4;
localparam integer DTPU_CL_ACT2_KW_LSB = 4;
localparam integer DTPU_CL_ACT2_KW_WIDTH = 4;
localparam integer DTPU_CL_ACT2_SY_LSB = 8;
localparam integer DTPU_CL_ACT2_SY_WIDTH = 4;
localparam integer DTPU_CL_ACT2_SX_LSB = 12;
localparam integer DTPU_CL_ACT2_SX_WIDTH = 4;
localparam integer DTPU_CL_ACT2_DY_LSB = 16;
localparam integer DTPU_CL_ACT2_DY_WIDTH = 4;
localparam integer DTPU_CL_ACT2_DX_LSB = 20;
localparam integer DTPU_CL_ACT2_DX_WIDTH = 4;
localparam integer DTPU_CL_ACT2_PT_LSB = 24;
localparam integer DTPU_CL_ACT2_PT_WIDTH = 4;
localparam integer DTPU_CL_ACT2_PL_LSB = 28;
localparam integer DTPU_CL_ACT2_PL_WIDTH = 4;
localparam integer DTPU_CL_ACT2_OH_LSB = 32;
localparam integer DTPU_CL_ACT2_OH_WIDTH = 16;
localparam integer DTPU_CL_ACT2_OW_LSB = 48;
localparam integer DTPU_CL_ACT2_OW_WIDTH = 16;
localparam integer DTPU_CL_ACT3_KP_LSB = 0;
localparam integer DTPU_CL_ACT3_KP_WIDTH = 16;
localparam integer DTPU_CL_ACT3_K0_LSB = 16;
localparam integer DTPU_CL_ACT3_K0_WIDTH = 16;
localparam integer DTPU_CL_ACT3_K1_LSB = 32;
localparam integer DTPU_CL_ACT3_K1_WIDTH = 16;
localparam integer DTPU_CL_ACT3_NCHUNK_LSB = 48;
localparam integer DTPU_CL_ACT3_NCHUNK_WIDTH = 16;
localparam integer DTPU_CL_ACT4_CV_LSB = 0;
localparam integer DTPU_CL_ACT4_CV_WIDTH = 16;
localparam integer DTPU_CL_RES0_MODE_LSB = 0;
localparam integer DTPU_CL_RES0_MODE_WIDTH = 4;
localparam integer DTPU_CL_RES0_LANES_LSB = 4;
localparam integer DTPU_CL_RES0_LANES_WIDTH = 4;
localparam integer DTPU_CL_RES0_ESIZE_LSB = 8;
localparam integer DTPU_CL_RES0_ESIZE_WIDTH = 4;
localparam integer DTPU_CL_RES0_SIGNED_LSB = 12;
localparam integer DTPU_CL_RES0_SIGNED_WIDTH = 1;
localparam integer DTPU_CL_RES0_DST_LSB = 32;
localparam integer DTPU_CL_RES0_DST_WIDTH = 32;
localparam integer DTPU_CL_RES1_PIX_LSB = 0;
localparam integer DTPU_CL_RES1_PIX_WIDTH = 32;
localparam integer DTPU_CL_RES1_OUTER_LSB = 32;
localparam integer DTPU_CL_RES1_OUTER_WIDTH = 16;
localparam integer DTPU_CL_RES1_INNER_LSB = 48;
localparam integer DTPU_CL_RES1_INNER_WIDTH = 16;
localparam integer DTPU_CL_RES2_GW_LSB = 0;
localparam integer DTPU_CL_RES2_GW_WIDTH = 16;
localparam integer DTPU_CL_RES2_CH0_LSB = 16;
localparam integer DTPU_CL_RES2_CH0_WIDTH = 16;
localparam integer DTPU_CL_RES2_CH1_LSB = 32;
localparam integer DTPU_CL_RES2_CH1_WIDTH = 16;
localparam integer DTPU_CL_RES2_DSTC_LSB = 48;
localparam integer DTPU_CL_RES2_DSTC_WIDTH = 16;
localparam integer DTPU_CL_VEC0_KIND_LSB = 0;
localparam integer DTPU_CL_VEC0_KIND_WIDTH = 4;
localparam integer DTPU_CL_VEC0_SIGNED_LSB = 4;
localparam integer DTPU_CL_VEC0_SIGNED_WIDTH = 1;
localparam integer DTPU_CL_VEC0_BMODE_LSB = 8;
localparam integer DTPU_CL_VEC0_BMODE_WIDTH = 2;
localparam integer DTPU_CL_VEC0_ACT_MIN_LSB = 16;
localparam integer DTPU_CL_VEC0_ACT_MIN_WIDTH = 16;
localparam integer DTPU_CL_VEC0_ACT_MAX_LSB = 32;
localparam integer DTPU_CL_VEC0_ACT_MAX_WIDTH = 16;
localparam integer DTPU_CL_VEC0_OUT_OFF_LSB = 48;
localparam integer DTPU_CL_VEC0_OUT_OFF_WIDTH = 16;
localparam integer DTPU_CL_VEC1_SRC_A_LSB = 0;
localparam integer DTPU_CL_VEC1_SRC_A_WIDTH = 32;
localparam integer DTPU_CL_VEC1_SRC_B_LSB = 32;
localparam integer DTPU_CL_VEC1_SRC_B_WIDTH = 32;
localparam integer DTPU_CL_VEC2_DST_LSB = 0;
localparam integer DTPU_CL_VEC2_DST_WIDTH = 32;
localparam integer DTPU_CL_VEC2_N_LSB = 32;
localparam integer DTPU_CL_VEC2_N_WIDTH = 16;
localparam integer DTPU_CL_VEC3_H_LSB = 0;
localparam integer DTPU_CL_VEC3_H_WIDTH = 16;
localparam integer DTPU_CL_VEC3_W_LSB = 16;
localparam integer DTPU_CL_VEC3_W_WIDTH = 16;
localparam integer DTPU_CL_VEC3_C_LSB = 32;
localparam integer DTPU_CL_VEC3_C_WIDTH = 16;
localparam integer DTPU_CL_VEC4_FH_LSB = 0;
localparam integer DTPU_CL_VEC4_FH_WIDTH = 8;
localparam integer DTPU_CL_VEC4_FW_LSB = 8;
localparam integer DTPU_CL_VEC4_FW_WIDTH = 8;
localparam integer DTPU_CL_VEC4_SH_LSB = 16;
localparam integer DTPU_CL_VEC4_SH_WIDTH = 8;
localparam integer DTPU_CL_VEC4_SW_LSB = 24;
localparam integer DTPU_CL_VEC4_SW_WIDTH = 8;
localparam integer DTPU_CL_VEC4_PT_LSB = 32;
localparam integer DTPU_CL_VEC4_PT_WIDTH = 8;
localparam integer DTPU_CL_VEC4_PL_LSB = 40;
localparam integer DTPU_CL_VEC4_PL_WIDTH = 8;
localparam integer DTPU_CL_VEC5_M1_LSB = 0;
localparam integer DTPU_CL_VEC5_M1_WIDTH = 32;
localparam integer DTPU_CL_VEC5_M2_LSB = 32;
localparam integer DTPU_CL_VEC5_M2_WIDTH = 32;
localparam integer DTPU_CL_VEC6_MO_LSB = 0;
localparam integer DTPU_CL_VEC6_MO_WIDTH = 32;
localparam integer DTPU_CL_VEC6_SH1_LSB = 32;
localparam integer DTPU_CL_VEC6_SH1_WIDTH = 8;
localparam integer DTPU_CL_VEC6_SH2_LSB = 40;
localparam integer DTPU_CL_VEC6_SH2_WIDTH = 8;
localparam integer DTPU_CL_VEC6_SHO_LSB = 48;
localparam integer DTPU_CL_VEC6_SHO_WIDTH = 8;
localparam integer DTPU_CL_VEC7_IN1_OFF_LSB = 0;
localparam integer DTPU_CL_VEC7_IN1_OFF_WIDTH = 16;
localparam integer DTPU_CL_VEC7_IN2_OFF_LSB = 16;
localparam integer DTPU_CL_VEC7_IN2_OFF_WIDTH = 16;
localparam integer DTPU_CL_VEC7_OH_LSB = 32;
localparam integer DTPU_CL_VEC7_OH_WIDTH = 16;
localparam integer DTPU_CL_VEC7_OW_LSB = 48;
localparam integer DTPU_CL_VEC7_OW_WIDTH = 16;

// ---- act_modes ----
localparam [3:0] DTPU_CL_ACT_NONE = 4'd0;
localparam [3:0] DTPU_CL_ACT_WINDOWS = 4'd1;
localparam [3:0] DTPU_CL_ACT_CHANNELS = 4'd2;

// ---- res_modes ----
localparam [3:0] DTPU_CL_RES_NONE = 4'd0;
localparam [3:0] DTPU_CL_RES_ITEMS = 4'd1;
localparam [3:0] DTPU_CL_RES_ACC = 4'd2;

// ---- vec_ops ----
localparam [3:0] DTPU_CL_VEC_ADD = 4'd1;
localparam [3:0] DTPU_CL_VEC_MUL = 4'd2;
localparam [3:0] DTPU_CL_VEC_AVG_POOL = 4'd3;
localparam [3:0] DTPU_CL_VEC_MAX_POOL = 4'd4;
localparam [3:0] DTPU_CL_VEC_MEAN = 4'd5;
localparam [3:0] DTPU_CL_VEC_TABLE = 4'd6;
localparam [3:0] DTPU_CL_VEC_COPY = 4'd7;

// ---- CL_ERR bits ----
localparam integer DTPU_CL_ERR_BAD_OPCODE = 0;
localparam integer DTPU_CL_ERR_BAD_LENGTH = 1;
localparam integer DTPU_CL_ERR_BAD_FIELD = 2;
localparam integer DTPU_CL_ERR_SLVERR = 3;
localparam integer DTPU_CL_ERR_DECERR = 4;
localparam integer DTPU_CL_ERR_TIMEOUT = 5;
localparam integer DTPU_CL_ERR_JOB = 6;
localparam integer DTPU_CL_ERR_BUSY = 7;

// ---- 2.0 registers (byte offsets in the 1.2 map) and fields ----
localparam [7:0] DTPU_REG_CL_BASE = 8'h6C;  // rw, reset 0x0
localparam [7:0] DTPU_REG_DOORBELL = 8'h70;  // rw, reset 0x0
localparam [7:0] DTPU_REG_CL_STATUS = 8'h74;  // ro, reset 0x0
localparam integer DTPU_CL_STATUS_RUNNING_LSB = 0;
localparam integer DTPU_CL_STATUS_RUNNING_WIDTH = 1;
localparam integer DTPU_CL_STATUS_DONE_LSB = 1;
localparam integer DTPU_CL_STATUS_DONE_WIDTH = 1;
localparam integer DTPU_CL_STATUS_ERROR_LSB = 2;
localparam integer DTPU_CL_STATUS_ERROR_WIDTH = 1;
localparam [7:0] DTPU_REG_CL_ERR = 8'h78;  // w1c, reset 0x0
localparam [7:0] DTPU_REG_IRQ = 8'h7C;  // w1c, reset 0x0
localparam integer DTPU_IRQ_DONE_EN_LSB = 0;
localparam integer DTPU_IRQ_DONE_EN_WIDTH = 1;
localparam integer DTPU_IRQ_PENDING_LSB = 8;
localparam integer DTPU_IRQ_PENDING_WIDTH = 1;
localparam [7:0] DTPU_REG_CL_ERR_PC = 8'hA0;  // ro, reset 0x0
localparam [7:0] DTPU_REG_CL_ERR_TAG = 8'hA4;  // ro, reset 0x0
localparam [7:0] DTPU_REG_TIMEOUT = 8'hA8;  // rw, reset 0xf4240
localparam [7:0] DTPU_REG_CL_CYCLES_LO = 8'hAC;  // ro, reset 0x0
localparam [7:0] DTPU_REG_CL_CYCLES_HI = 8'hB0;  // ro, reset 0x0
localparam [7:0] DTPU_REG_IDLE_LO = 8'hB4;  // ro, reset 0x0
localparam [7:0] DTPU_REG_IDLE_HI = 8'hB8;  // ro, reset 0x0
localparam [7:0] DTPU_REG_RD_BEATS = 8'hBC;  // ro, reset 0x0
localparam [7:0] DTPU_REG_WR_BEATS = 8'hC0;  // ro, reset 0x0
localparam [7:0] DTPU_REG_DESCS = 8'hC4;  // ro, reset 0x0

// ---- descriptor checks ----
// 1 when `op` is one of desc_opcodes
function automatic dtpu_cl_op_known(input [7:0] op);
    begin
        case (op)
            DTPU_CL_OP_END: dtpu_cl_op_known = 1'b1;
            DTPU_CL_OP_LOAD: dtpu_cl_op_known = 1'b1;
            DTPU_CL_OP_REGS: dtpu_cl_op_known = 1'b1;
            DTPU_CL_OP_RUN: dtpu_cl_op_known = 1'b1;
            DTPU_CL_OP_POST: dtpu_cl_op_known = 1'b1;
            DTPU_CL_OP_VEC: dtpu_cl_op_known = 1'b1;
            default: dtpu_cl_op_known = 1'b0;
        endcase
    end
endfunction

// 1 when LEN `len` matches the layout of the known opcode `op` (a starred layout:
// at least its fixed words)
function automatic dtpu_cl_len_ok(input [7:0] op, input [7:0] len);
    begin
        case (op)
            DTPU_CL_OP_END: dtpu_cl_len_ok = (len == DTPU_CL_LEN_END);
            DTPU_CL_OP_LOAD: dtpu_cl_len_ok = (len == DTPU_CL_LEN_LOAD);
            DTPU_CL_OP_REGS: dtpu_cl_len_ok = (len >= DTPU_CL_LEN_REGS);
            DTPU_CL_OP_RUN: dtpu_cl_len_ok = (len == DTPU_CL_LEN_RUN);
            DTPU_CL_OP_POST: dtpu_cl_len_ok = (len == DTPU_CL_LEN_POST);
            DTPU_CL_OP_VEC: dtpu_cl_len_ok = (len == DTPU_CL_LEN_VEC);
            default: dtpu_cl_len_ok = 1'b0;
        endcase
    end
endfunction
