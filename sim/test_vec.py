"""The vector unit's RTL (contract 2.1) against the golden model: the ADD / SUB lane first."""
import pytest

from dtpu_sim import RTL_DIR, build, run_tests


@pytest.mark.parametrize("signed", [1, pytest.param(0, marks=pytest.mark.slow)])
def test_vec_add_lane(signed):
    top = "dtpu_vec_add_lane"
    d = build(top, {"SIGNED": signed}, [RTL_DIR / f"{top}.v"], name=f"{top}_{signed}")
    run_tests(top, "tb_vec_add_lane", d, extra_env={"DTPU_VEC_SIGNED": str(signed)})
