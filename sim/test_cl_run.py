"""Contract 2.0 end to end in RTL (docs/rtl.md "RUN and POST in the list top"): compiled
programs (prologue + partition list: conv, depthwise, pointwise, K split with ACC and POST,
int16) run on dtpu_cl_top against dtpu.hw.executor.Executor, every DDR byte compared, with random
latency and backpressure on the AXI4 read and write channels. Small memories for build speed
(the model runs with the same HwConfig)."""
import pytest

from dtpu_sim import build, run_tests

MEM = {"LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


def _run(params=None, env=None, testcase=None):
    params = {"COLS": 8, **MEM, **(params or {})}
    d = build("dtpu_cl_top", params, name="cl_top")
    run_tests("dtpu_cl_top", "tb_cl_run", d, parameters=params, extra_env=env or {},
              testcase=testcase)


# make test-all: 169 s in the default run; the 2.0 top's RUN / POST cycles and words stay in the
# default run in process (tests/test_rtl_lists.py, the contract's memory exactly), under cocotb
# through test_cocotb_lists_transport_runs_a_zoo_model_as_the_in_process_one
@pytest.mark.slow
def test_cl_run():
    """Small program (lane- and word-mode gathers, depthwise CHANNELS, pointwise), K split
    (ACC + POST), int16, RUN errors (word count, mode, SLVERR on the output), random latencies:
    DDR byte-exact and CL_* as the model's."""
    _run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("params", [{}, {"MAX_BURST": 4, "MAX_OUTSTANDING": 2}],
                         ids=["contract", "small"])
def test_cl_run_sweep(seed, params):
    _run(params, {"DTPU_SEED": seed, "DTPU_CASES": 8})
