"""fp32 adder / multiplier unit tests (the SMAC, column tree and post unit use them)."""
import pytest

from dtpu_sim import RTL_DIR, build, run_tests


@pytest.mark.slow
@pytest.mark.parametrize("op", ["add", "mul"])
def test_fp_unit(op):
    top = f"dtpu_fp_{op}"
    d = build(top, {}, [RTL_DIR / f"{top}.v", RTL_DIR / "dtpu_fp_round.v"], name=top)
    run_tests(top, "tb_fp", d, extra_env={"DTPU_FP_OP": op})
