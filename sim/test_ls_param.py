"""The parameter memory's read rotation (dtpu_ls_param), full (LOG_ALIGN = 0) and narrowed to the
post unit's aligned reads: LOG_ALIGN = min(3, log2 COLS), LOG_MIN_LANES 3 (8-bit-only builds:
the int8 board build), 2 (int16 too: the int16 board build), 1 (float precisions)."""
import pytest

from dtpu_sim import RTL_DIR, build, run_tests


# the default run: the int8 board's knobs (lanes 1..7 wires) and a COLS = 4 float build's (every
# lane rotated, 8:1 / 4:1 / 2:1); the rest in make test-all
@pytest.mark.parametrize("log_align,log_min_lanes", [(3, 3), (2, 1),
                                                    pytest.param(0, 0, marks=pytest.mark.slow),
                                                    pytest.param(3, 0, marks=pytest.mark.slow),
                                                    pytest.param(3, 2, marks=pytest.mark.slow),
                                                    pytest.param(2, 3, marks=pytest.mark.slow)])
def test_ls_param(log_align, log_min_lanes):
    srcs = [RTL_DIR / n for n in ("dtpu_ls_param.v", "dtpu_bram.v")]
    params = {"ADDR_W": 6, "LOG_ALIGN": log_align, "LOG_MIN_LANES": log_min_lanes}
    d = build("dtpu_ls_param", params, srcs, name=f"ls_param_{log_align}_{log_min_lanes}")
    run_tests("dtpu_ls_param", "tb_ls_param", d, parameters=params,
              extra_env={"DTPU_PARAM_ADDR_W": "6", "DTPU_PARAM_LOG_ALIGN": str(log_align),
                         "DTPU_PARAM_LOG_MIN_LANES": str(log_min_lanes)})
