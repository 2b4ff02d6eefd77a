"""Top-level regressions: dtpu_axi through AXI4-Lite / AXI4-Stream against the golden model."""
import os

import pytest

from dtpu_sim import build, run_tests

# Small memories for build speed; the golden model runs with the same HwConfig.
MEM = {"LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


def top(cols: int) -> tuple[dict, object]:
    params = {"COLS": cols, **MEM}
    return params, build("dtpu_axi", params, name="top")


@pytest.mark.parametrize("cols", [8])
def test_top_default(cols):
    params, d = top(cols)
    run_tests("dtpu_axi", "tb_top", d, parameters=params,
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", "12345")})


SWEEP_TESTS = ["test_gemm_stall_free", "test_gemm_gaps_and_backpressure",
               "test_depthwise_nodes_stall_free", "test_depthwise_nodes_gaps",
               "test_gemm_nodes_stall_free"]


@pytest.mark.parametrize("cols", [2, 4])
def test_top_small_arrays(cols):
    """8x2 and 8x4 arrays: a few random jobs of every kind (the default subset)."""
    params, d = top(cols)
    run_tests("dtpu_axi", "tb_top", d, testcase=SWEEP_TESTS + ["test_identity"], parameters=params,
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", str(777 + cols)), "DTPU_CASES": "4"})


@pytest.mark.slow
@pytest.mark.parametrize("cols", [2, 4, 8])
def test_top_sweep(cols):
    """The full random sweep: DTPU_SWEEP_CASES (default 60) seeds per test and array."""
    params, d = top(cols)
    seed = os.environ.get("DTPU_SEED", str(100_000 + 1000 * cols))
    run_tests("dtpu_axi", "tb_top", d, testcase=SWEEP_TESTS, parameters=params,
              extra_env={"DTPU_SEED": seed, "DTPU_CASES": os.environ.get("DTPU_SWEEP_CASES", "60")})
