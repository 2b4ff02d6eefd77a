"""The POST unit borrowing lane 0 of the core's post unit (dtpu_cl_post EXT_LANE = 1, dtpu_post
EXT_LANE0 = 1, dtpu_cl_top SHARE_POST_LANE = 1; docs/synthesis.md "Contract 2.0 board build").

Behaviour is covered end to end by sim/test_cl_run.py (its K-split programs finish int64 partial
sums with POST through the shared lane, byte-exact against dtpu.hw.executor.Executor, and RUNs
whose words pass the same lane 0); the slow test here runs that program set on the board
build's precisions (PREC_EN int8/uint8/int16: the core's AW is 55 bits and lane 0 is widened to
the POST sums' 64) and on the unshared build. The default tests lint the configurations that the
other lint tests do not reach."""
import pytest

from dtpu_sim import build, lint, rtl_sources, run_tests

SRCS = rtl_sources()
MEM = {"LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


@pytest.mark.parametrize("top,params", [
    ("dtpu_cl_top", {"PREC_EN": "16'h7"}),
    pytest.param("dtpu_cl_top", {"SHARE_POST_LANE": 0}, marks=pytest.mark.slow),
    ("dtpu_cl_post", {"EXT_LANE": 1}),
    ("dtpu_post", {"EXT_LANE0": 1}),
    ("dtpu_post", {"EXT_LANE0": 1, "AW": 55, "PREC_EN": "16'h7"}),
    ("dtpu_core", {"EXT_POST_LANE": 1, "PREC_EN": "16'h7"}),
], ids=["cl_top_board", "cl_top_unshared", "cl_post_ext", "post_ext", "post_ext_aw55", "core_ext_board"])
def test_lint(top, params):
    r = lint(top, SRCS, params)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out


@pytest.mark.slow
@pytest.mark.parametrize("params", [{"PREC_EN": 7}, {"SHARE_POST_LANE": 0}], ids=["board", "unshared"])
def test_cl_run_lane(params):
    params = {"COLS": 8, **MEM, **params}
    name = "cl_top_" + "_".join(f"{k}{v}" for k, v in params.items() if k not in MEM and k != "COLS")
    d = build("dtpu_cl_top", params, name=name)
    run_tests("dtpu_cl_top", "tb_cl_run", d, parameters=params)
