"""Top-level regressions: dtpu_axi through AXI4-Lite / AXI4-Stream against the golden model."""
import os

import pytest

from dtpu_sim import build, run_tests

# Small memories for build speed; the golden model runs with the same HwConfig.
MEM = {"LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


def top(cols: int) -> tuple[dict, object]:
    params = {"COLS": cols, **MEM}
    return params, build("dtpu_axi", params, name="top")


@pytest.mark.parametrize("cols", [8])
def test_top_default(cols):
    params, d = top(cols)
    run_tests("dtpu_axi", "tb_top", d, parameters=params,
              extra_env={"DTPU_SEED": os.environ.get("DTPU_SEED", "12345")})
