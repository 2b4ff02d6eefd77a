"""Unit tests of the post-unit lane against the golden model's arithmetic."""
from dtpu_sim import RTL_DIR, build, run_tests


def test_post_lane():
    srcs = [RTL_DIR / n for n in ("dtpu_post_lane.v", "dtpu_fp_add.v", "dtpu_fp_round.v")]
    d = build("dtpu_post_lane", {}, srcs, name="post_lane")
    run_tests("dtpu_post_lane", "tb_post_lane", d)
