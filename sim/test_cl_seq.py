"""Contract 2.0 list sequencer (docs/rtl.md "Contract 2.0 units, status"): dtpu_cl_top (the 1.2
core, the descriptor fetcher, one AXI4 read master, dtpu_cl_seq) against the golden model
dtpu.hw.executor.Executor, with the DDR image in an AxiRam with random latency and backpressure.
Small memories for build speed (the model runs with the same HwConfig); the slow sweep adds
seeds and a small master build (4-beat bursts, 2 in flight)."""
import pytest

from dtpu_sim import RTL_DIR, build, lint, rtl_sources, run_tests

MEM = {"LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


def _run(params=None, env=None, testcase=None):
    params = {"COLS": 8, **MEM, **(params or {})}
    d = build("dtpu_cl_top", params, name="cl_top")
    run_tests("dtpu_cl_top", "tb_cl_seq", d, parameters=params, extra_env=env or {},
              testcase=testcase)


@pytest.mark.parametrize("params", [
    pytest.param({"MAX_BURST": 4, "MAX_OUTSTANDING": 2}, marks=pytest.mark.slow),
    pytest.param({"ID_W": 6}, marks=pytest.mark.slow), pytest.param(MEM, marks=pytest.mark.slow)],
    ids=["small_master", "hp_ids", "small_memories"])
def test_lint_cl_top_builds(params):
    """verilator -Wall on the builds the regression and the HP port use (test_lint.py: defaults).
    The default run lints the board's (the HP port's 6-bit IDs; about 9 CPU-s a lint of the
    whole top); the builds of the regressions here, small memories and the small master, are
    linted in the slow set, beside the sweeps that run them."""
    r = lint("dtpu_cl_top", rtl_sources(), params)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out
    assert (RTL_DIR / "dtpu_cl_top.v").exists()


@pytest.mark.slow
def test_cl_seq():
    """Prologue LOADs word-exact in both memories, REGS lists, offsets outside the job
    registers, malformed lists, LOAD faults and bad fields,
    DOORBELL while running, the interrupt, the 1.2 protocol around a list; CL_ERR / PC / TAG /
    DESCS as the model's.

    Slow (a cocotb build of the whole 2.0 top of its own, ~140 CPU-s): the default run checks
    the same classes on the same RTL in process, against the Executor, under random memory
    latency and backpressure (tests/test_rtl_lists.py: prologue, malformed lists and bus errors,
    random lists, the doorbell and interrupt protocol)."""
    _run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("params", [{}, {"MAX_BURST": 4, "MAX_OUTSTANDING": 2}],
                         ids=["contract", "small"])
def test_cl_seq_sweep(seed, params):
    _run(params, {"DTPU_SEED": seed, "DTPU_CASES": 30})
