// Generated from pylib/dtpu/hw/contract.json by `python -m dtpu.hw.gen_header`.
// Do not edit: change the JSON and regenerate (tests/test_hw_contract.py checks drift).
// Language: Verilog 2001 (localparams only; include inside a module body).

localparam [31:0] DTPU_ID = 32'h44545055;
localparam [31:0] DTPU_VERSION = 32'h00010002;

// ---- default build parameters (override with module parameters / -G) ----
localparam integer DTPU_DEFAULT_ROWS = 8;
localparam integer DTPU_DEFAULT_COLS = 8;
localparam integer DTPU_DEFAULT_DATA_WIDTH = 64;
localparam integer DTPU_DEFAULT_AXIL_ADDR_WIDTH = 8;
localparam integer DTPU_DEFAULT_LOG_WEIGHT_WORDS = 15;
localparam integer DTPU_DEFAULT_LOG_PARAM_ENTRIES = 12;
localparam integer DTPU_DEFAULT_LOG_ACT_WORDS = 12;
localparam [15:0] DTPU_DEFAULT_PREC_EN = 16'h007F;

// ---- schedule constants: the golden model's cycle formulas use the same values ----
localparam integer DTPU_CFG_CYCLES = 2;  // Cycles from the START write to the first issue cycle (latch registers, derive counters, check the configuration).
localparam integer DTPU_LOAD_LATENCY = 2;  // Cycles from the last LOAD word accepted to DONE (memory write pipeline).
localparam integer DTPU_LAT_MXU = 4;  // Cycles from the last issue cycle of a step to its PE accumulators being final (operand read, multiply, accumulate).
localparam integer DTPU_LAT_REDUCE = 3;  // GEMM only: cycles of the column adder tree that sums the ROWS per-PE accumulators (log2 ROWS stages).
localparam integer DTPU_LAT_POST = 11;  // Cycles from a step's accumulators (GEMM: column sums) to its first result word on m_axis_res (bias, requantize, zero point, clamp, pack).
localparam integer DTPU_FP_PARTIALS = 4;  // fp32/bf16: interleaved partial accumulators per PE; issue cycle w of a step adds into partial w mod FP_PARTIALS, partials are combined as a pairwise tree at the step end. Hides the fp adder latency and fixes the summation order.
localparam integer DTPU_DW_SETUP = 58;  // DWCONV only: cycles after CONFIG before the row loader takes its first word and the computer may issue: the depthwise sequencer derives its counts, ring-row deltas (remainders modulo LB_ROWS) and per-column start values one product and one quotient bit per cycle (its CONFIG checks still decide in CFG_CYCLES).

// ---- enums ----
// What START runs. LOAD_* copy LOAD_COUNT words from s_axis_wgt into a memory; GEMM and DWCONV stream s_axis_act in and m_axis_res out and, when PF_COUNT > 0, prefetch PF_COUNT words from s_axis_wgt into weight memory at the same time.
localparam [3:0] DTPU_OPCODE_NOP = 4'd0;
localparam [3:0] DTPU_OPCODE_LOAD_WGT = 4'd1;
localparam [3:0] DTPU_OPCODE_LOAD_PARAM = 4'd2;
localparam [3:0] DTPU_OPCODE_GEMM = 4'd3;
localparam [3:0] DTPU_OPCODE_DWCONV = 4'd4;
// Lane format of activation and weight words. Lanes per word: INT8/UINT8 8, INT16/BF16 4, INT32/FP32 2, INT64 1.
localparam [3:0] DTPU_PREC_INT8 = 4'd0;
localparam [3:0] DTPU_PREC_UINT8 = 4'd1;
localparam [3:0] DTPU_PREC_INT16 = 4'd2;
localparam [3:0] DTPU_PREC_INT32 = 4'd3;
localparam [3:0] DTPU_PREC_INT64 = 4'd4;
localparam [3:0] DTPU_PREC_FP32 = 4'd5;
localparam [3:0] DTPU_PREC_BF16 = 4'd6;
// REQUANT: bias + fixed-point rescale + zero point + clamp, results in the activation format (8-/16-bit precisions only). RAW: accumulators without bias (int32 lanes for 8-bit precisions, int64 otherwise). FLOAT: bias + clamp in fp32, fp32 results (FP32/BF16 only).
localparam [3:0] DTPU_OUT_MODE_REQUANT = 4'd0;
localparam [3:0] DTPU_OUT_MODE_RAW = 4'd1;
localparam [3:0] DTPU_OUT_MODE_FLOAT = 4'd2;
// How REQUANT rescales (accumulator + bias): the output stage of the TFLite kernel being reproduced; names match dtpu.reference.Variant. DOUBLE, SINGLE, INT64, DOUBLE_UP apply the entry's (multiplier, shift); FP32 (XNNPACK, LiteRT's default interpreter) reads the entry's low 32 bits as a float32 scale: int32 total to fp32, times the scale, rounded to nearest even, zero point, clamp (shift unused).
localparam [3:0] DTPU_RQ_VARIANT_DOUBLE = 4'd0;
localparam [3:0] DTPU_RQ_VARIANT_SINGLE = 4'd1;
localparam [3:0] DTPU_RQ_VARIANT_INT64 = 4'd2;
localparam [3:0] DTPU_RQ_VARIANT_DOUBLE_UP = 4'd3;
localparam [3:0] DTPU_RQ_VARIANT_FP32 = 4'd4;
// STATUS.STATE codes of the control FSM: CONFIG0/CONFIG1 latch and check the job (CFG_CYCLES), LOAD runs LOAD_*, GEMM/DW the compute jobs (with their prefetch), LOAD_LAT the memory write pipeline after a LOAD, DONE one cycle before IDLE.
localparam [3:0] DTPU_STATE_IDLE = 4'd0;
localparam [3:0] DTPU_STATE_CONFIG0 = 4'd1;
localparam [3:0] DTPU_STATE_CONFIG1 = 4'd2;
localparam [3:0] DTPU_STATE_LOAD = 4'd3;
localparam [3:0] DTPU_STATE_GEMM = 4'd4;
localparam [3:0] DTPU_STATE_DW = 4'd5;
localparam [3:0] DTPU_STATE_LOAD_LAT = 4'd6;
localparam [3:0] DTPU_STATE_DONE = 4'd7;

// ---- ERR bits ----
localparam integer DTPU_ERR_BAD_OPCODE = 0;  // JOB.OPCODE is not one of OPCODE.
localparam integer DTPU_ERR_BAD_PRECISION = 1;  // JOB.PREC unknown or not in ENABLED.
localparam integer DTPU_ERR_BAD_MODE = 2;  // JOB.OUT_MODE/RQ_VARIANT not valid for JOB.PREC and the opcode, or RQ_VARIANT not built (RQ_EN).
localparam integer DTPU_ERR_BAD_DIMS = 3;  // A dimension register is zero, out of its field range, or inconsistent (e.g. OUT_H larger than the window allows).
localparam integer DTPU_ERR_WGT_RANGE = 4;  // Weight memory access beyond WEIGHT_WORDS, WGT_BASE not a multiple of COLS, or a GEMM/DWCONV prefetch range [PF_ADDR, PF_ADDR+PF_COUNT) that leaves the memory or overlaps the job's own weight words.
localparam integer DTPU_ERR_PARAM_RANGE = 5;  // Parameter memory access beyond PARAM_ENTRIES, or LOAD_PARAM with an odd word count.
localparam integer DTPU_ERR_ACT_CAPACITY = 6;  // GEMM_KW larger than ACT_WORDS, or the depthwise ring (LB_ROWS rows) does not fit ACT_WORDS or holds fewer rows than one window spans.
localparam integer DTPU_ERR_BANK_CONFLICT = 7;  // Depthwise: two columns served in the same cycle read the same activation bank at different addresses (TAP_CYCLES too small for the stride), or, with PE pairs (PE_PAIR), the two columns of a pair would issue together (TAP_CYCLES 1 and OW*GC > COLS/2). Both decided in CONFIG. A DW_ROTATE build has no bank conflicts of the first kind (its columns read one rotation of the banks).
localparam integer DTPU_ERR_TLAST_EARLY = 8;  // An input stream raised tlast before the job's last word (s_axis_wgt during a prefetch: before its PF_COUNT-th word).
localparam integer DTPU_ERR_TLAST_MISSING = 9;  // An input stream did not raise tlast on the job's last word.
localparam integer DTPU_ERR_OVERFLOW = 10;  // A result left its accumulator (int32 for 8-bit precisions, int64 otherwise; an 8-bit REQUANT job with an int32 variant does not flag this: it wraps accumulator+bias to 32 bits and sets WARN_WRAP32, as TFLite's int32 kernels do), a product left int64 (INT64: |product| > 2^63-1), or INT64 requantization got |accumulator+bias| >= 2^47.
localparam integer DTPU_ERR_BUSY_WRITE = 11;  // START or a job register written while STATUS.BUSY.
localparam integer DTPU_ERR_WARN_WRAP32 = 16;  // Warning, not an error: REQUANT with an int32 variant wrapped accumulator+bias to 32 bits, as TFLite's int32 kernels do.
localparam [31:0] DTPU_ERR_FATAL_MASK = 32'h00000FFF;

// ---- register byte offsets and fields ----
localparam [7:0] DTPU_REG_ID = 8'h00;  // ro: ASCII 'DTPU'.
localparam [7:0] DTPU_REG_VERSION = 8'h04;  // ro: Contract version.
localparam integer DTPU_VERSION_MINOR_LSB = 0;
localparam integer DTPU_VERSION_MINOR_WIDTH = 16;
localparam integer DTPU_VERSION_MAJOR_LSB = 16;
localparam integer DTPU_VERSION_MAJOR_WIDTH = 16;
localparam [7:0] DTPU_REG_HWCFG0 = 8'h08;  // ro: Synthesized array shape and precisions.
localparam integer DTPU_HWCFG0_ROWS_LSB = 0;
localparam integer DTPU_HWCFG0_ROWS_WIDTH = 8;
localparam integer DTPU_HWCFG0_COLS_LSB = 8;
localparam integer DTPU_HWCFG0_COLS_WIDTH = 8;
localparam integer DTPU_HWCFG0_PREC_EN_LSB = 16;
localparam integer DTPU_HWCFG0_PREC_EN_WIDTH = 16;
localparam [7:0] DTPU_REG_HWCFG1 = 8'h0C;  // ro: Synthesized memory sizes (log2) and the requantization variants left out.
localparam integer DTPU_HWCFG1_LOG_WEIGHT_WORDS_LSB = 0;
localparam integer DTPU_HWCFG1_LOG_WEIGHT_WORDS_WIDTH = 8;
localparam integer DTPU_HWCFG1_LOG_PARAM_ENTRIES_LSB = 8;
localparam integer DTPU_HWCFG1_LOG_PARAM_ENTRIES_WIDTH = 8;
localparam integer DTPU_HWCFG1_LOG_ACT_WORDS_LSB = 16;
localparam integer DTPU_HWCFG1_LOG_ACT_WORDS_WIDTH = 8;
localparam integer DTPU_HWCFG1_RQ_OFF_LSB = 24;
localparam integer DTPU_HWCFG1_RQ_OFF_WIDTH = 5;
localparam [7:0] DTPU_REG_CTRL = 8'h10;  // rw: Pulses read back as 0.
localparam integer DTPU_CTRL_START_LSB = 0;
localparam integer DTPU_CTRL_START_WIDTH = 1;
localparam integer DTPU_CTRL_SOFT_RESET_LSB = 1;
localparam integer DTPU_CTRL_SOFT_RESET_WIDTH = 1;
localparam integer DTPU_CTRL_CLEAR_COUNTERS_LSB = 2;
localparam integer DTPU_CTRL_CLEAR_COUNTERS_WIDTH = 1;
localparam integer DTPU_CTRL_IRQ_EN_LSB = 8;
localparam integer DTPU_CTRL_IRQ_EN_WIDTH = 1;
localparam [7:0] DTPU_REG_STATUS = 8'h14;  // ro: Job state.
localparam integer DTPU_STATUS_BUSY_LSB = 0;
localparam integer DTPU_STATUS_BUSY_WIDTH = 1;
localparam integer DTPU_STATUS_DONE_LSB = 1;
localparam integer DTPU_STATUS_DONE_WIDTH = 1;
localparam integer DTPU_STATUS_ERROR_LSB = 2;
localparam integer DTPU_STATUS_ERROR_WIDTH = 1;
localparam integer DTPU_STATUS_STATE_LSB = 4;
localparam integer DTPU_STATUS_STATE_WIDTH = 4;
localparam [7:0] DTPU_REG_ERR = 8'h18;  // w1c: Sticky error flags (see errors); a job that sets one (bits < 16) ends at once without consuming or producing stream words, and its results are undefined.
localparam [7:0] DTPU_REG_JOB = 8'h1C;  // rw: What START runs.
localparam integer DTPU_JOB_OPCODE_LSB = 0;
localparam integer DTPU_JOB_OPCODE_WIDTH = 4;
localparam integer DTPU_JOB_PREC_LSB = 4;
localparam integer DTPU_JOB_PREC_WIDTH = 4;
localparam integer DTPU_JOB_OUT_MODE_LSB = 8;
localparam integer DTPU_JOB_OUT_MODE_WIDTH = 2;
localparam integer DTPU_JOB_RQ_VARIANT_LSB = 10;
localparam integer DTPU_JOB_RQ_VARIANT_WIDTH = 3;
localparam [7:0] DTPU_REG_LOAD_ADDR = 8'h20;  // rw: LOAD_WGT: first weight word address; LOAD_PARAM: first parameter entry (channel slot).
localparam [7:0] DTPU_REG_LOAD_COUNT = 8'h24;  // rw: Words to take from s_axis_wgt (LOAD_PARAM: 2 per entry).
localparam [7:0] DTPU_REG_WGT_BASE = 8'h28;  // rw: GEMM/DWCONV: weight word address of the job's first weight word (multiple of COLS).
localparam [7:0] DTPU_REG_PARAM_BASE = 8'h2C;  // rw: GEMM/DWCONV: parameter entry of the job's first output channel (multiple of COLS).
localparam [7:0] DTPU_REG_IN_OFFSET = 8'h30;  // rw: Signed; added to every activation lane before the multiply (TFLite input_offset = -input zero point).
localparam [7:0] DTPU_REG_WGT_OFFSET = 8'h34;  // rw: Signed; added to every weight lane before the multiply (uint8: -filter zero point).
localparam [7:0] DTPU_REG_ACT_MIN = 8'h38;  // rw: REQUANT: signed int32 lower clamp; FLOAT: fp32 bit pattern.
localparam [7:0] DTPU_REG_ACT_MAX = 8'h3C;  // rw: REQUANT: signed int32 upper clamp; FLOAT: fp32 bit pattern.
localparam [7:0] DTPU_REG_GEMM_M = 8'h40;  // rw: GEMM: pixels (rows of the activation matrix).
localparam [7:0] DTPU_REG_GEMM_KW = 8'h44;  // rw: GEMM: words per pixel vector (K padded to whole words / lanes).
localparam [7:0] DTPU_REG_GEMM_NT = 8'h48;  // rw: GEMM: output-channel tiles of COLS channels.
localparam [7:0] DTPU_REG_DW_IN = 8'h4C;  // rw: Depthwise input plane.
localparam integer DTPU_DW_IN_H_LSB = 0;
localparam integer DTPU_DW_IN_H_WIDTH = 16;
localparam integer DTPU_DW_IN_W_LSB = 16;
localparam integer DTPU_DW_IN_W_WIDTH = 16;
localparam [7:0] DTPU_REG_DW_OUT = 8'h50;  // rw: Depthwise output plane.
localparam integer DTPU_DW_OUT_H_LSB = 0;
localparam integer DTPU_DW_OUT_H_WIDTH = 16;
localparam integer DTPU_DW_OUT_W_LSB = 16;
localparam integer DTPU_DW_OUT_W_WIDTH = 16;
localparam [7:0] DTPU_REG_DW_KERNEL = 8'h54;  // rw: Depthwise window.
localparam integer DTPU_DW_KERNEL_KH_LSB = 0;
localparam integer DTPU_DW_KERNEL_KH_WIDTH = 8;
localparam integer DTPU_DW_KERNEL_KW_LSB = 8;
localparam integer DTPU_DW_KERNEL_KW_WIDTH = 8;
localparam integer DTPU_DW_KERNEL_PT_LSB = 16;
localparam integer DTPU_DW_KERNEL_PT_WIDTH = 8;
localparam integer DTPU_DW_KERNEL_PL_LSB = 24;
localparam integer DTPU_DW_KERNEL_PL_WIDTH = 8;
localparam [7:0] DTPU_REG_DW_STRIDE = 8'h58;  // rw: Depthwise stride and dilation.
localparam integer DTPU_DW_STRIDE_SY_LSB = 0;
localparam integer DTPU_DW_STRIDE_SY_WIDTH = 8;
localparam integer DTPU_DW_STRIDE_SX_LSB = 8;
localparam integer DTPU_DW_STRIDE_SX_WIDTH = 8;
localparam integer DTPU_DW_STRIDE_DY_LSB = 16;
localparam integer DTPU_DW_STRIDE_DY_WIDTH = 8;
localparam integer DTPU_DW_STRIDE_DX_LSB = 24;
localparam integer DTPU_DW_STRIDE_DX_WIDTH = 8;
localparam [7:0] DTPU_REG_DW_GROUPS = 8'h5C;  // rw: Depthwise channel groups (one word of lanes each).
localparam integer DTPU_DW_GROUPS_GC_LSB = 0;
localparam integer DTPU_DW_GROUPS_GC_WIDTH = 16;
localparam integer DTPU_DW_GROUPS_NCHUNK_LSB = 16;
localparam integer DTPU_DW_GROUPS_NCHUNK_WIDTH = 16;
localparam [7:0] DTPU_REG_DW_RING = 8'h60;  // rw: Depthwise line-buffer ring.
localparam integer DTPU_DW_RING_LB_ROWS_LSB = 0;
localparam integer DTPU_DW_RING_LB_ROWS_WIDTH = 16;
localparam integer DTPU_DW_RING_TAP_CYCLES_LSB = 16;
localparam integer DTPU_DW_RING_TAP_CYCLES_WIDTH = 4;
localparam [7:0] DTPU_REG_PF_ADDR = 8'h64;  // rw: GEMM/DWCONV prefetch: first weight word address the job's s_axis_wgt words are written to (any word address; LOAD_* and NOP ignore it).
localparam [7:0] DTPU_REG_PF_COUNT = 8'h68;  // rw: GEMM/DWCONV prefetch: words the job also takes from s_axis_wgt (tlast on the last) and writes to weight memory, one per cycle from the first cycle after CONFIG, while it computes; the job ends when both are done, stall-free at max(compute cycles, CFG_CYCLES + PF_COUNT + LOAD_LATENCY). 0: no prefetch.
localparam [7:0] DTPU_REG_CYCLES_LO = 8'h80;  // ro: Busy cycles since CLEAR_COUNTERS, low word (reading it latches CYCLES_HI).
localparam [7:0] DTPU_REG_CYCLES_HI = 8'h84;  // ro: Busy cycles, high word.
localparam [7:0] DTPU_REG_STALL_LO = 8'h88;  // ro: Busy cycles lost to an empty input stream or a full result stream, low word (latches STALL_HI).
localparam [7:0] DTPU_REG_STALL_HI = 8'h8C;  // ro: Stall cycles, high word.
localparam [7:0] DTPU_REG_WORDS_WGT = 8'h90;  // ro: Words accepted on s_axis_wgt since CLEAR_COUNTERS.
localparam [7:0] DTPU_REG_WORDS_ACT = 8'h94;  // ro: Words accepted on s_axis_act since CLEAR_COUNTERS.
localparam [7:0] DTPU_REG_WORDS_RES = 8'h98;  // ro: Words sent on m_axis_res since CLEAR_COUNTERS.
localparam [7:0] DTPU_REG_JOB_CYCLES = 8'h9C;  // ro: Busy cycles of the last job (saturates at 2^32-1).
