"""PE (SMAC) unit tests: the widest row (all integer lanes, int64 overflow) and an int8 row."""
import pytest

from dtpu_sim import RTL_DIR, build, run_tests

SOURCES = [RTL_DIR / "dtpu_smac.v"]


@pytest.mark.parametrize("opw,acc_w", [pytest.param(65, 84, marks=pytest.mark.slow), (9, 36)])
def test_smac_int(opw, acc_w):
    params = {"OPW": opw, "ACC_W": acc_w}
    d = build("dtpu_smac", params, SOURCES, name="smac")
    run_tests("dtpu_smac", "tb_smac", d, parameters=params)


@pytest.mark.slow   # PE_PAIR is off in every shipped build
def test_smac_pair():
    params = {"ACC_W": 36}
    d = build("dtpu_smac_pair", params, [RTL_DIR / "dtpu_smac_pair.v"], name="smac_pair")
    run_tests("dtpu_smac_pair", "tb_smac_pair", d, parameters=params)
