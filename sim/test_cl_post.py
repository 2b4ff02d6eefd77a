"""Contract 2.0 post unit (hw/rtl/dtpu_cl_post.v, docs/rtl.md "Contract 2.0: the post unit"):
random POST descriptors through dtpu_axi_rd and an AxiRam with random latency and stalls, the
parameter entries from a dtpu_ls_param, random result backpressure, against
dtpu.hw.executor.Executor.post (sim/tb/tb_cl_post.py); the overflow (JOB) error, read faults, a
timeout, the BAD_FIELD checks and the stall-free timing."""
import re

import pytest

from dtpu.hw.listformat import Format
from dtpu_sim import RTL_DIR, build, lint, run_tests
from dtpu_sim.build import TB_DIR

SRCS = [RTL_DIR / "dtpu_cl_post.v", RTL_DIR / "dtpu_post_lane.v"]
BENCH = SRCS + [RTL_DIR / "dtpu_ls_param.v", RTL_DIR / "dtpu_bram.v", RTL_DIR / "dtpu_axi_rd.v",
                RTL_DIR / "dtpu_axi_burst.v", TB_DIR / "tb_cl_post_top.v"]


@pytest.mark.parametrize("params", [{}, {"FIFO_LOG": 4, "PADDR_W": 8, "PREC_EN": "16'h0007"},
                                    {"PREC_EN": "16'h0003", "ADDR_W": 40, "PIX_W": 20},
                                    {"PREC_EN": "16'h0003", "RQ_EN": 25}, {"RQ_EN": 16}],
                         ids=["default", "fifo16_p8_int", "int8_only_wide", "int8_lean", "fp32_only"])
def test_lint(params):
    """verilator -Wall on dtpu_cl_post and its lane (test_lint.py: every module, defaults)."""
    r = lint("dtpu_cl_post", SRCS, params)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out


def test_defaults_match_contract():
    """Field widths of the POST descriptor (contract2.desc_fields POST1..3) and RES0's ITEMS code."""
    fmt = Format()
    f = fmt.fields
    p = {m.group(1): int(m.group(2)) for m in
         re.finditer(r"parameter\s+(\w+)\s*=\s*(\d+)", (RTL_DIR / "dtpu_cl_post.v").read_text())}
    assert p["ADDR_W"] == f["POST1"]["SRC"][1] == f["POST1"]["DST"][1]
    assert p["PIX_W"] == f["POST2"]["PIX"][1]
    assert p["CH_W"] == f["POST2"]["CH0"][1] == f["POST2"]["CH"][1] == f["POST3"]["DSTC"][1]
    assert p["MODE_ITEMS"] == fmt.res_modes["ITEMS"]
    assert 1 << p["PADDR_W"] == fmt.cfg.PARAM_ENTRIES


def _run(env=None, testcase=None, params=None, name="cl_post"):
    params = params or {}
    d = build("tb_cl_post_top", params, BENCH, name=name)
    run_tests("tb_cl_post_top", "tb_cl_post", d, testcase=testcase, parameters=params,
              extra_env=env or {})


def test_cl_post():
    """Default subset: 24 random descriptors (latency 1..40, stalls 0-50 %, backpressure 0-60 %,
    one in six spoiled), the RTL-only BAD_FIELD checks, 4 overflows, 4 read faults, a timeout and
    12 timed descriptors."""
    _run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_cl_post_sweep(seed):
    """150 random descriptors per seed; seed 4 with up to 120 pixels and 100 channels."""
    _run({"DTPU_SEED": seed, "DTPU_CASES": 150, "DTPU_BIG": int(seed == 4)}, testcase="test_random")


@pytest.mark.slow
def test_cl_post_small_master():
    """A read master with 4-beat bursts, 2 in flight (the sums no longer arrive one per cycle) and
    a 16-word result FIFO: 60 random descriptors, the error cases (not the timed ones)."""
    _run({"DTPU_SEED": 5, "DTPU_CASES": 60},
         testcase=["test_random", "test_rtl_only_checks", "test_overflow", "test_read_faults",
                   "test_timeout"],
         params={"MAX_BURST": 4, "MAX_OUTSTANDING": 2, "FIFO_LOG": 4})


@pytest.mark.slow
def test_cl_post_board_build():
    """The board build's precisions (int8/uint8/int16: int32/int64 and the floats are BAD_FIELD)
    with 256 parameter entries, the golden model configured alike: 60 random descriptors and
    the error cases."""
    _run({"DTPU_SEED": 6, "DTPU_CASES": 60},
         testcase=["test_random", "test_rtl_only_checks", "test_overflow", "test_read_faults",
                   "test_timeout"],
         params={"PREC_EN": 7, "PADDR_W": 8})


@pytest.mark.parametrize("rq_en", [pytest.param(25, marks=pytest.mark.slow),
                                   pytest.param(9, marks=pytest.mark.slow),
                                   pytest.param(16, marks=pytest.mark.slow)])
def test_cl_post_lean_int8(rq_en):
    """An int8/uint8 build with some requantization variants left out of its lane (RQ_EN, the
    golden model's HwConfig alike): 25 = DOUBLE, DOUBLE_UP and FP32 (an int8 board for TFLite
    2.14 and LiteRT), 9 = DOUBLE and DOUBLE_UP, 16 = FP32 only. A POST naming a variant not
    built is BAD_FIELD in the unit and in the model (also among the random spoiled cases), the
    built ones are exact on random descriptors."""
    _run({"DTPU_SEED": 7 + rq_en, "DTPU_CASES": 12},
         testcase=["test_variant_not_built", "test_random", "test_rtl_only_checks"],
         params={"PREC_EN": 3, "PADDR_W": 8, "RQ_EN": rq_en}, name=f"cl_post_rq{rq_en}")
