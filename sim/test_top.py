"""Top-level regressions: dtpu_axi through AXI4-Lite / AXI4-Stream against the golden model."""
import os

import pytest

from dtpu_sim import build, run_tests

# Small memories for build speed; the golden model runs with the same HwConfig.
MEM = {"LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


def top(cols: int) -> tuple[dict, object]:
    params = {"COLS": cols, **MEM}
    return params, build("dtpu_axi", params, name="top")


# the 1.2 top (dtpu_axi) runs in make test-all only: the integer build with PE pairs
# (test_top_pe_pair_dw: 8x4, GEMM, depthwise, BAD_PRECISION; 65 CPU-s cold), 8 columns (149 s),
# 4 (85 s), the board build (8x8, 81 CPU-s cold) and the integer-only build. The default run
# lints it (sim/test_lint.py) and runs its dtpu_core inside the 2.0 top
@pytest.mark.slow
@pytest.mark.parametrize("cols", [8])
def test_top_default(cols):
    params, d = top(cols)
    run_tests("dtpu_axi", "tb_top", d, parameters=params,
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", "12345")})


SWEEP_TESTS = ["test_gemm_stall_free", "test_gemm_gaps_and_backpressure",
               "test_depthwise_nodes_stall_free", "test_depthwise_nodes_gaps",
               "test_gemm_nodes_stall_free", "test_prefetch_stall_free", "test_prefetch_gaps"]


@pytest.mark.slow
@pytest.mark.parametrize("cols", [2, 4])
def test_top_small_arrays(cols):
    """8x2 and 8x4 arrays: a few random jobs of every kind (the default subset)."""
    params, d = top(cols)
    run_tests("dtpu_axi", "tb_top", d, testcase=SWEEP_TESTS + ["test_identity"], parameters=params,
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", str(777 + cols)), "DTPU_CASES": "4"})


@pytest.mark.slow
def test_top_pe_pair_gemm():
    """PE pairs (PE_PAIR = 1) in the board's integer build: GEMM jobs and nodes give the golden
    model's words and stall-free cycles (the pairs change no result and no latency). Depthwise:
    test_top_pe_pair_dw."""
    params = {"COLS": 4, "PREC_EN": 7, "PE_PAIR": 1, **MEM}
    d = build("dtpu_axi", params, name="top_pair")
    run_tests("dtpu_axi", "tb_top", d, parameters=params,
              testcase=["test_identity", "test_gemm_stall_free", "test_gemm_gaps_and_backpressure",
                        "test_gemm_nodes_stall_free", "test_prefetch_stall_free"],
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", "4343"), "DTPU_CASES": "4"})


@pytest.mark.slow
@pytest.mark.parametrize("cols", [4, 8])
def test_top_dw_banked(cols):
    """The banked depthwise layout (DW_ROTATE = 0: a column reads any bank, TAP_CYCLES avoids
    bank conflicts), the alternative to the default rotated one, against the golden model with
    the same knob: lowered depthwise nodes, with gaps, CONFIG checks (ERR.BANK_CONFLICT decided
    in CONFIG), prefetching DWCONV jobs."""
    params = {"COLS": cols, "DW_ROTATE": 0, **MEM}
    d = build("dtpu_axi", params, name="top_banked")
    run_tests("dtpu_axi", "tb_top", d, parameters=params,
              testcase=["test_identity", "test_depthwise_nodes_stall_free", "test_depthwise_nodes_gaps",
                        "test_dw_one_word", "test_config_errors", "test_dw_bank_conflict_in_config",
                        "test_prefetch_stall_free"],
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", str(5150 + cols)), "DTPU_CASES": "6"})


@pytest.mark.slow
def test_top_pe_pair_dw():
    """PE pairs (PE_PAIR = 1) in depthwise, on the board's integer build with the default
    rotated layout: lowered depthwise nodes (TAP_CYCLES 2 where a row has more than COLS/2
    items) give the golden model's words and cycles, and random rows on both sides of the pair
    rule are refused in CONFIG (ERR.BANK_CONFLICT, CFG_CYCLES) exactly when the model refuses
    them (tests/test_pe_pair_dw.py has the rule and the lowering); a one-word depthwise job
    (its only word, tlast, taken in the loader's first cycle) is not TLAST_EARLY.

    Also the board's precisions on the 1.2 top (one build for both): GEMM jobs stall-free and
    BAD_PRECISION for the precisions left out, which the board build itself (8x8, gaps and
    backpressure) checks in test_top_board_build. Slow since the default run stopped building
    the 1.2 top (a Verilator build of its own): the default run's depthwise coverage of the
    core is on the 2.0 top, which holds the same dtpu_core (tests/test_rtl_lists.py,
    tests/test_rtl_vector.py, the rtl one-kick tests)."""
    params = {"COLS": 4, "PREC_EN": 7, "PE_PAIR": 1, **MEM}
    d = build("dtpu_axi", params, name="top_pair")
    run_tests("dtpu_axi", "tb_top", d, parameters=params,
              testcase=["test_depthwise_nodes_stall_free", "test_dw_bank_conflict_in_config",
                        "test_dw_one_word", "test_identity", "test_gemm_stall_free",
                        "test_precision_not_built"],
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", "4545"), "DTPU_CASES": "3"})


@pytest.mark.slow
@pytest.mark.parametrize("cols", [4, 8])
def test_top_pe_pair_dw_sweep(cols):
    """test_top_pe_pair_dw with gaps and prefetch, at 8x4 and 8x8, and in the banked layout."""
    for rotate in (1, 0):
        params = {"COLS": cols, "PREC_EN": 7, "PE_PAIR": 1, "DW_ROTATE": rotate, **MEM}
        d = build("dtpu_axi", params, name=f"top_pair_r{rotate}")
        run_tests("dtpu_axi", "tb_top", d, parameters=params,
                  testcase=["test_depthwise_nodes_stall_free", "test_depthwise_nodes_gaps",
                            "test_dw_bank_conflict_in_config", "test_prefetch_stall_free"],
                  extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", str(4600 + cols)), "DTPU_CASES": "6"})


@pytest.mark.slow
def test_top_integer_only_build():
    """PREC_EN = int8/uint8/int16 (the board-sized build): HWCFG0 says so, float and wide jobs
    get BAD_PRECISION from CONFIG, the rest runs exactly."""
    params = {"COLS": 4, "PREC_EN": 7, **MEM}
    d = build("dtpu_axi", params, name="top")
    run_tests("dtpu_axi", "tb_top", d, parameters=params,
              testcase=["test_identity", "test_gemm_stall_free", "test_gemm_nodes_stall_free",
                        "test_depthwise_nodes_stall_free", "test_precision_not_built"],
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", "4242"), "DTPU_CASES": "3"})


@pytest.mark.slow
def test_top_lean_int8():
    """An int8/uint8 build whose post lanes have only DOUBLE, DOUBLE_UP and FP32 (RQ_EN = 25,
    what an int8 board needs: docs/architecture.md, issue 26's budget), the golden model alike:
    GEMM jobs and nodes, depthwise nodes exact and stall-free, the left-out variants refused in
    CONFIG (ERR.BAD_MODE) exactly as the model refuses them. The default run has the lane
    (sim/test_units.py::test_post_lane_pruned) and the POST unit (sim/test_cl_post.py) of such
    builds, and the model's refusal (tests/test_rq_en.py)."""
    params = {"COLS": 4, "PREC_EN": 3, "RQ_EN": 25, **MEM}
    d = build("dtpu_axi", params, name="top_lean")
    run_tests("dtpu_axi", "tb_top", d, parameters=params,
              testcase=["test_identity", "test_variant_not_built", "test_gemm_stall_free",
                        "test_gemm_nodes_stall_free", "test_depthwise_nodes_stall_free",
                        "test_precision_not_built"],
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", "2526"), "DTPU_CASES": "4"})


@pytest.mark.slow
def test_top_board_build():
    """The PYNQ-Z2 board build of docs/synthesis.md: 8x8, PREC_EN = int8/uint8/int16 (55-bit
    values, no float paths): exact words and stall-free cycles against the golden model, with
    gaps/backpressure too, and BAD_PRECISION for what is left out. Its own Verilator build (81
    CPU-s cold), hence slow: the default run has the same precisions at 8x4 with PE pairs
    (test_top_pe_pair_dw) and the 8x8 1.2 top through backend=rtl (tests/test_backend_rtl.py)."""
    params = {"COLS": 8, "PREC_EN": 7, **MEM}
    d = build("dtpu_axi", params, name="top")
    run_tests("dtpu_axi", "tb_top", d, parameters=params,
              testcase=SWEEP_TESTS + ["test_identity", "test_precision_not_built"],
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", "8807"), "DTPU_CASES": "4"})


@pytest.mark.slow
@pytest.mark.parametrize("cols", [2, 4, 8])
def test_top_sweep(cols):
    """The full random sweep: DTPU_SWEEP_CASES (default 60) seeds per test and array."""
    params, d = top(cols)
    seed = os.environ.get("DTPU_SEED", str(100_000 + 1000 * cols))
    run_tests("dtpu_axi", "tb_top", d, testcase=SWEEP_TESTS, parameters=params,
              extra_env={"DTPU_SEED": seed, "DTPU_CASES": os.environ.get("DTPU_SWEEP_CASES", "60")})


@pytest.mark.slow
def test_top_sweep_board_build():
    """The full random sweep on the board build (8x8, PREC_EN = int8/uint8/int16)."""
    params = {"COLS": 8, "PREC_EN": 7, **MEM}
    d = build("dtpu_axi", params, name="top")
    seed = os.environ.get("DTPU_SEED", "208807")
    run_tests("dtpu_axi", "tb_top", d, testcase=SWEEP_TESTS, parameters=params,
              extra_env={"DTPU_SEED": seed, "DTPU_CASES": os.environ.get("DTPU_SWEEP_CASES", "60")})

