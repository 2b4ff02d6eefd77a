"""Contract 2.0 address generators as standalone units: hw/rtl/dtpu_act_agu.v (random ACT
descriptors with random backpressure against the golden model's gather, sim/tb/tb_agu.py) and
hw/rtl/dtpu_res_agu.v (random RES ITEMS descriptors against the golden model's scatter,
sim/tb/tb_res_agu.py), and their parameter defaults against contract.json."""
import re

import pytest

from dtpu.hw.listformat import Format
from dtpu_sim import RTL_DIR, build, lint, run_tests


def _defaults(path):
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"parameter\s+(\w+)\s*=\s*(\d+)", path.read_text())}


def test_act_agu_defaults_match_contract():
    """The field widths and mode codes of dtpu_act_agu are contract2.desc_fields' (ACT0..ACT4) and
    contract2.act_modes (no 2.0 include is generated yet: the RTL takes them as parameters)."""
    fmt = Format()
    f = fmt.fields
    p = _defaults(RTL_DIR / "dtpu_act_agu.v")
    want = {
        "MODE_W": [f["ACT0"]["MODE"]],
        "LANES_W": [f["ACT0"]["LANES"]],
        "DIM_W": [f["ACT1"][k] for k in ("N", "H", "W", "C")] + [f["ACT2"][k] for k in ("OH", "OW")],
        "KER_W": [f["ACT2"][k] for k in ("KH", "KW", "SY", "SX", "DY", "DX", "PT", "PL")],
        "KP_W": [f["ACT3"][k] for k in ("KP", "K0", "K1", "NCHUNK")] + [f["ACT4"]["CV"]],
        "IDX_W": [f["ACT0"]["SRC"]],
    }
    for name, fields in want.items():
        widths = {w for _, w in fields}
        assert widths == {p[name]}, f"{name} = {p[name]}, contract widths {widths}"
    assert p["MODE_WINDOWS"] == fmt.act_modes["WINDOWS"]
    assert p["MODE_CHANNELS"] == fmt.act_modes["CHANNELS"]


def test_res_agu_defaults_match_contract():
    fmt = Format()
    f = fmt.fields
    p = _defaults(RTL_DIR / "dtpu_res_agu.v")
    want = {
        "MODE_W": [f["RES0"]["MODE"]],
        "LANES_W": [f["RES0"]["LANES"]],
        "PIX_W": [f["RES1"]["PIX"]],
        "DIM_W": [f["RES1"][k] for k in ("OUTER", "INNER")] + [f["RES2"][k] for k in ("GW", "CH0", "CH1", "DSTC")],
        "IDX_W": [f["RES0"]["DST"]],
    }
    for name, fields in want.items():
        widths = {w for _, w in fields}
        assert widths == {p[name]}, f"{name} = {p[name]}, contract widths {widths}"
    assert p["MODE_ITEMS"] == fmt.res_modes["ITEMS"]
    assert p["MODE_ACC"] == fmt.res_modes["ACC"]


def _run(env):
    d = build("dtpu_act_agu", {}, [RTL_DIR / "dtpu_act_agu.v"], name="act_agu")
    run_tests("dtpu_act_agu", "tb_agu", d, extra_env=env)


def test_act_agu():
    """Default subset: 15 random descriptors per mode (backpressure 0-80 %), 3 more per mode without
    backpressure timed (one request per cycle), two chains of 7 streams each started while the
    one before runs (timed: no bubble once the setup is hidden; and under backpressure), and the
    empty streams."""
    _run({"DTPU_AGU_CASES": 15, "DTPU_AGU_SEED": 1})


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4, 5])
def test_act_agu_sweep(seed):
    """100 random descriptors per mode and seed, streams up to 20 k requests; seeds 4 and 5 with
    larger shapes (paddings up to 15, windows wholly outside the image, REP up to 5)."""
    _run({"DTPU_AGU_CASES": 100, "DTPU_AGU_SEED": seed, "DTPU_AGU_MAX_ELEMS": 20000,
          "DTPU_AGU_BIG": int(seed >= 4)})


def _run_res(env):
    d = build("dtpu_res_agu", {}, [RTL_DIR / "dtpu_res_agu.v"], name="res_agu")
    run_tests("dtpu_res_agu", "tb_res_agu", d, extra_env=env)


@pytest.mark.slow
def test_res_agu():
    """Default subset: 15 random RES ITEMS descriptors (backpressure 0-80 %), 3 more timed without
    backpressure (one lane per cycle from the cycle after start), and the empty streams."""
    _run_res({"DTPU_AGU_CASES": 15, "DTPU_AGU_SEED": 1})


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_res_agu_sweep(seed):
    _run_res({"DTPU_AGU_CASES": 300, "DTPU_AGU_SEED": seed, "DTPU_AGU_MAX_ELEMS": 20000})


# other widths: the modules are parameterised (wider indexes, a narrower PIX field)
WIDE = {"dtpu_act_agu": {"IDX_W": 40}, "dtpu_res_agu": {"IDX_W": 40, "PIX_W": 24}}


@pytest.mark.parametrize("top", sorted(WIDE))
def test_agu_lint_other_widths(top):
    r = lint(top, [RTL_DIR / f"{top}.v"], WIDE[top])
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out


@pytest.mark.slow
@pytest.mark.parametrize("top,tb", [("dtpu_act_agu", "tb_agu"), ("dtpu_res_agu", "tb_res_agu")])
def test_agu_other_widths(top, tb):
    d = build(top, WIDE[top], [RTL_DIR / f"{top}.v"], name=f"{top}_wide")
    run_tests(top, tb, d, extra_env={"DTPU_AGU_CASES": 30, "DTPU_AGU_SEED": 9})
