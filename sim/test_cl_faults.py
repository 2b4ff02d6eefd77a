"""Contract 2.0's error paths on the assembled top (sim/tb/tb_cl_faults.py): read faults on a
RUN's activations and a POST's sums, DECERR, a fatal job error, a memory that stops answering,
lane-mode gathers of 2- and 4-byte elements, the host-only registers; against the Executor.
Same build as test_cl_run (one Verilator model serves both)."""
import pytest

from dtpu_sim import build, run_tests

MEM = {"LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


# make test-all (144 s and the cl_top build): the same error paths run in process in the default
# run (tests/test_rtl_lists.py::test_malformed_lists_and_bus_errors_as_the_model)
@pytest.mark.slow
def test_cl_faults():
    params = {"COLS": 8, **MEM}
    d = build("dtpu_cl_top", params, name="cl_top")
    run_tests("dtpu_cl_top", "tb_cl_faults", d, parameters=params)
