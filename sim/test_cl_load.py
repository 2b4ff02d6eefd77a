"""The load unit's activation stream (hw/rtl/dtpu_cl_load.v, docs/rtl.md "Contract 2.0: the load
unit's activation stream"): the unit on a dtpu_axi_rd (sim/tb/tb_cl_load_top.v) against the
AXI memory of sim/dtpu_sim/axi_mem.py, every word compared with the golden model's
`Executor._gather` on the same bytes (sim/tb/tb_cl_load.py)."""
import pytest

from dtpu_sim import RTL_DIR, build, lint, run_tests
from dtpu_sim.build import TB_DIR

SOURCES = [RTL_DIR / "dtpu_cl_load.v", RTL_DIR / "dtpu_act_agu.v", RTL_DIR / "dtpu_axi_rd.v",
           RTL_DIR / "dtpu_axi_burst.v", TB_DIR / "tb_cl_load_top.v"]


def _run(params=None, env=None, testcase=None):
    params = params or {}
    d = build("tb_cl_load_top", params, SOURCES, name="cl_load")
    run_tests("tb_cl_load_top", "tb_cl_load", d, testcase=testcase, parameters=params,
              extra_env=env or {})


def test_cl_load():
    """Default subset: 60 random descriptors (word and lane mode, random latency, stalls and
    backpressure), MODE NONE and bad fields, the timed streams (first word and one word per cycle
    in word mode), SLVERR / DECERR / TIMEOUT inside the tensor."""
    _run(env={"DTPU_SEED": 1, "DTPU_CASES": 60, "DTPU_LOAD_MAX_WORDS": 600})


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_cl_load_sweep(seed):
    """More descriptors and longer streams; seed 4 with larger shapes."""
    _run(env={"DTPU_SEED": seed, "DTPU_CASES": 300, "DTPU_LOAD_MAX_WORDS": 3000,
              "DTPU_LOAD_BIG": int(seed >= 4)}, testcase="test_random")


@pytest.mark.slow
def test_cl_load_small_build():
    """A small build: 4-beat bursts, 2 in flight, a 16-element FIFO (runs closed by the full
    FIFO, the deadlock rule)."""
    _run({"MAX_BURST": 4, "MAX_OUTSTANDING": 2, "EF_LOG2": 4},
         env={"DTPU_SEED": 5, "DTPU_CASES": 150}, testcase=["test_random", "test_bus_errors"])


@pytest.mark.parametrize("params", [{}, {"MAX_BURST": 4, "EF_LOG2": 4, "RQ_LOG2": 1},
                                    {"ADDR_W": 40, "CNT_W": 16}],
                         ids=["default", "small", "wide"])
def test_lint_cl_load(params):
    """verilator -Wall on the unit alone with other parameters (test_lint.py: the defaults)."""
    r = lint("dtpu_cl_load", [RTL_DIR / "dtpu_cl_load.v", RTL_DIR / "dtpu_act_agu.v"], params)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out
