"""Unit tests of the post-unit lane against the golden model's arithmetic."""
from dtpu_sim import RTL_DIR, build, run_tests


def test_post_lane():
    srcs = [RTL_DIR / n for n in ("dtpu_post_lane.v", "dtpu_fp_add.v", "dtpu_fp_mul.v", "dtpu_fp_round.v")]
    d = build("dtpu_post_lane", {}, srcs, name="post_lane")
    run_tests("dtpu_post_lane", "tb_post_lane", d)


import pytest  # noqa: E402


@pytest.mark.parametrize("top", ["dtpu_filter_select", "dtpu_compact_select"])
def test_select_units(top):
    d = build(top, {}, [RTL_DIR / f"{top}.v"], name=top)
    run_tests(top, "tb_select", d, extra_env={"DTPU_TOP": top})


def test_mxu():
    params = {"COLS": 2}
    srcs = [RTL_DIR / n for n in ("dtpu_mxu.v", "dtpu_smac.v", "dtpu_filter_select.v",
                                  "dtpu_fp_mul.v", "dtpu_fp_add.v", "dtpu_fp_round.v")]
    d = build("dtpu_mxu", params, srcs, name="mxu")
    run_tests("dtpu_mxu", "tb_mxu", d, parameters=params)
