"""The parameter memory's read rotation (dtpu_ls_param), full (LOG_ALIGN = 0) and narrowed to the
post unit's aligned reads (LOG_ALIGN = 3: the board builds, COLS >= 8; 2: a COLS = 4 build)."""
import pytest

from dtpu_sim import RTL_DIR, build, run_tests


@pytest.mark.parametrize("log_align", [0, 3, 2])
def test_ls_param(log_align):
    srcs = [RTL_DIR / n for n in ("dtpu_ls_param.v", "dtpu_bram.v")]
    params = {"ADDR_W": 6, "LOG_ALIGN": log_align}
    d = build("dtpu_ls_param", params, srcs, name=f"ls_param_{log_align}")
    run_tests("dtpu_ls_param", "tb_ls_param", d, parameters=params,
              extra_env={"DTPU_PARAM_ADDR_W": "6", "DTPU_PARAM_LOG_ALIGN": str(log_align)})
