"""The load unit's activation stream (hw/rtl/dtpu_cl_load.v, docs/rtl.md "Contract 2.0: the load
unit's activation stream"): the unit on a dtpu_axi_rd (sim/tb/tb_cl_load_top.v) against the
AXI memory of sim/dtpu_sim/axi_mem.py, every word compared with the golden model's
`Executor.gather` on the same bytes (sim/tb/tb_cl_load.py)."""
import re

import pytest

from dtpu.hw.listformat import Format
from dtpu_sim import RTL_DIR, build, lint, run_tests
from dtpu_sim.build import TB_DIR

SOURCES = [RTL_DIR / "dtpu_cl_load.v", RTL_DIR / "dtpu_act_agu.v", RTL_DIR / "dtpu_axi_rd.v",
           RTL_DIR / "dtpu_axi_burst.v", TB_DIR / "tb_cl_load_top.v"]


def _run(params=None, env=None, testcase=None):
    params = params or {}
    d = build("tb_cl_load_top", params, SOURCES, name="cl_load")
    run_tests("tb_cl_load_top", "tb_cl_load", d, testcase=testcase, parameters=params,
              extra_env=env or {})


@pytest.mark.slow
def test_cl_load():
    """Default subset: 150 random descriptors (word and lane mode, random latency, stalls and
    backpressure), MODE NONE and bad fields, streams sharing a rewritten word, chains of streams
    started ahead (random, timed, with a fault), the timed streams (first word and one word per
    cycle in word mode), SLVERR / DECERR / TIMEOUT inside the tensor."""
    _run(env={"DTPU_SEED": 1, "DTPU_CASES": 150, "DTPU_LOAD_MAX_WORDS": 1000})


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_cl_load_sweep(seed):
    """More descriptors and longer streams, 10 chains of 8 streams; seed 4 with larger shapes."""
    _run(env={"DTPU_SEED": seed, "DTPU_CASES": 300, "DTPU_LOAD_MAX_WORDS": 3000,
              "DTPU_LOAD_BIG": int(seed >= 4)}, testcase=["test_random", "test_chains"])


@pytest.mark.slow
def test_cl_load_small_build():
    """A small build: 4-beat bursts, 2 in flight, a 16-element FIFO (runs closed by the full
    FIFO, the deadlock rule)."""
    _run({"MAX_BURST": 4, "MAX_OUTSTANDING": 2, "EF_LOG2": 4},
         env={"DTPU_SEED": 5, "DTPU_CASES": 150}, testcase=["test_random", "test_chains", "test_bus_errors",
                                                       "test_chain_fault"])


@pytest.mark.parametrize("params", [{}, {"MAX_BURST": 4, "EF_LOG2": 4, "RQ_LOG2": 1},
                                    {"ADDR_W": 40, "CNT_W": 16}],
                         ids=["default", "small", "wide"])
def test_lint_cl_load(params):
    """verilator -Wall on the unit alone with other parameters (test_lint.py: the defaults)."""
    r = lint("dtpu_cl_load", [RTL_DIR / "dtpu_cl_load.v", RTL_DIR / "dtpu_act_agu.v"], params)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out


def test_cl_load_defaults_match_contract():
    """The field widths and mode codes of dtpu_cl_load are contract2.desc_fields' (ACT0..ACT4)
    and contract2.act_modes; MAX_BURST the memory model's MEM_BURST_BEATS."""
    fmt = Format()
    f = fmt.fields
    p = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"parameter\s+(\w+)\s*=\s*(\d+)", (RTL_DIR / "dtpu_cl_load.v").read_text())}
    want = {
        "MODE_W": [f["ACT0"]["MODE"]], "LANES_W": [f["ACT0"]["LANES"]],
        "ESIZE_W": [f["ACT0"]["ESIZE"]], "PAD_W": [f["ACT0"]["PAD"]], "ADDR_W": [f["ACT0"]["SRC"]],
        "DIM_W": [f["ACT1"][k] for k in ("N", "H", "W", "C")] + [f["ACT2"][k] for k in ("OH", "OW")],
        "KER_W": [f["ACT2"][k] for k in ("KH", "KW", "SY", "SX", "DY", "DX", "PT", "PL")],
        "KP_W": [f["ACT3"][k] for k in ("KP", "K0", "K1", "NCHUNK")] + [f["ACT4"]["CV"]],
    }
    for name, fields in want.items():
        assert {w for _, w in fields} == {p[name]}, f"{name} = {p[name]}, contract {fields}"
    assert p["MODE_NONE"] == fmt.act_modes["NONE"]
    assert p["MODE_WINDOWS"] == fmt.act_modes["WINDOWS"]
    assert p["MODE_CHANNELS"] == fmt.act_modes["CHANNELS"]
    assert p["MAX_BURST"] == int(fmt.mem["MEM_BURST_BEATS"])
