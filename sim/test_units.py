"""Unit tests of the post-unit lane against the golden model's arithmetic."""
import pytest

from dtpu_sim import RTL_DIR, build, run_tests


@pytest.mark.parametrize("aw,prec_en", [pytest.param(84, None, marks=pytest.mark.slow), (55, 0x7)])
def test_post_lane(aw, prec_en):
    """Every precision (84-bit values) and the integer-only board build (int8/uint8/int16:
    55-bit values, no float path)."""
    srcs = [RTL_DIR / n for n in ("dtpu_post_lane.v", "dtpu_fp_add.v", "dtpu_fp_mul.v", "dtpu_fp_round.v")]
    params = {"AW": aw} if prec_en is None else {"AW": aw, "PREC_EN": prec_en}
    d = build("dtpu_post_lane", params, srcs, name=f"post_lane_{aw}")
    run_tests("dtpu_post_lane", "tb_post_lane", d, extra_env={"DTPU_LANE_AW": str(aw)})


# RQ_EN: the variants an int8 board needs (DOUBLE, DOUBLE_UP, FP32), TFLite 2.14's alone (DOUBLE,
# DOUBLE_UP), LiteRT's XNNPACK alone (FP32), and without SINGLE or without INT64 (int16 rows)
@pytest.mark.parametrize("rq_en,prec_en,aw", [
    (25, 0x3, 39), pytest.param(9, 0x3, 39, marks=pytest.mark.slow),
    pytest.param(16, 0x3, 39, marks=pytest.mark.slow), pytest.param(29, 0x7, 55, marks=pytest.mark.slow),
    pytest.param(27, 0x7, 55, marks=pytest.mark.slow)])
def test_post_lane_pruned(rq_en, prec_en, aw):
    """A lane built with only some requantization variants (RQ_EN; docs/architecture.md, issue 26's
    budget) is exact in every variant and precision it has: the int8/uint8 build's 39-bit
    values by default, the others in the slow set."""
    srcs = [RTL_DIR / n for n in ("dtpu_post_lane.v", "dtpu_fp_add.v", "dtpu_fp_mul.v", "dtpu_fp_round.v")]
    params = {"AW": aw, "PREC_EN": prec_en, "RQ_EN": rq_en}
    d = build("dtpu_post_lane", params, srcs, name=f"post_lane_{aw}_rq{rq_en}")
    run_tests("dtpu_post_lane", "tb_post_lane", d, parameters=params,
              extra_env={"DTPU_LANE_AW": str(aw), "DTPU_LANE_N": "300"})


@pytest.mark.slow
@pytest.mark.parametrize("top", ["dtpu_filter_select", "dtpu_compact_select"])
def test_select_units(top):
    d = build(top, {}, [RTL_DIR / f"{top}.v"], name=top)
    run_tests(top, "tb_select", d, extra_env={"DTPU_TOP": top})


@pytest.mark.slow
@pytest.mark.parametrize("prec_en", [0x7, 0x3])
def test_filter_select_integer_builds(prec_en):
    """The narrow Filter&Select of 8/16-bit-only builds (one adder per row)."""
    top = "dtpu_filter_select"
    d = build(top, {"PREC_EN": prec_en}, [RTL_DIR / f"{top}.v"], name=top)
    run_tests(top, "tb_select", d, extra_env={"DTPU_TOP": top, "DTPU_PREC_EN": str(prec_en)})


@pytest.mark.slow
def test_mxu():
    params = {"COLS": 2}
    srcs = [RTL_DIR / n for n in ("dtpu_mxu.v", "dtpu_smac.v", "dtpu_filter_select.v",
                                  "dtpu_fp_mul.v", "dtpu_fp_add.v", "dtpu_fp_round.v")]
    d = build("dtpu_mxu", params, srcs, name="mxu")
    run_tests("dtpu_mxu", "tb_mxu", d, parameters=params)


@pytest.mark.slow   # PE_PAIR is off in every shipped build
@pytest.mark.parametrize("prec_en,aw", [(0x7, 55), (0x3, 39)])
def test_mxu_pe_pair(prec_en, aw):
    """PE pairs (PE_PAIR = 1) in GEMM and in DWCONV with TAP_CYCLES 2: the board's integer
    build (int16 rows unpaired, 8-bit rows paired) and the 8-bit-only one (every row paired)."""
    params = {"COLS": 4, "PREC_EN": prec_en, "AW": aw, "PE_PAIR": 1}
    srcs = [RTL_DIR / n for n in ("dtpu_mxu.v", "dtpu_smac.v", "dtpu_smac_pair.v",
                                  "dtpu_filter_select.v", "dtpu_fp_mul.v", "dtpu_fp_add.v",
                                  "dtpu_fp_round.v")]
    d = build("dtpu_mxu", params, srcs, name=f"mxu_pair_{prec_en}")
    run_tests("dtpu_mxu", "tb_mxu_pair", d, parameters=params)
