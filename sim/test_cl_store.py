"""Contract 2.0 store unit (docs/rtl.md "Contract 2.0: the store unit"): dtpu_cl_store with
dtpu_axi_wr and dtpu_axi_rd on one AxiRam with random latency and stalls, the whole memory
compared with dtpu.hw.executor.Executor.scatter after every sequence of RUNs (sim/tb/tb_cl_store.py).
The default run uses the contract's masters (16-beat bursts, 8 in flight); the slow sweeps add
seeds, longer sequences and a small build (4-beat bursts, 2 in flight, 4-word requests, an
8-word queue, no gap filling)."""
import re

import pytest

from dtpu.hw.listformat import Format
from dtpu_sim import RTL_DIR, build, lint, run_tests
from dtpu_sim.build import TB_DIR

UNIT = [RTL_DIR / f"{m}.v" for m in ("dtpu_cl_store", "dtpu_cl_store_walk", "dtpu_cl_store_pack",
                                      "dtpu_cl_store_wq")]
MASTERS = [RTL_DIR / f"{m}.v" for m in ("dtpu_axi_wr", "dtpu_axi_rd", "dtpu_axi_burst")]


def _run(params=None, env=None, testcase=None):
    params = params or {}
    d = build("tb_cl_store_top", params, UNIT + MASTERS + [TB_DIR / "tb_cl_store_top.v"],
              name="cl_store")
    run_tests("tb_cl_store_top", "tb_cl_store", d, testcase=testcase, parameters=params,
              extra_env=env or {})


def test_cl_store_defaults_match_contract():
    """The field widths and mode codes of dtpu_cl_store are contract2.desc_fields' (RES0..RES2)
    and contract2.res_modes (no 2.0 include for them yet: the RTL takes them as parameters)."""
    fmt = Format()
    f = fmt.fields
    p = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"parameter\s+(\w+)\s*=\s*(\d+)", (RTL_DIR / "dtpu_cl_store.v").read_text())}
    want = {
        "MODE_W": [f["RES0"]["MODE"]],
        "LANES_W": [f["RES0"]["LANES"]],
        "ESIZE_W": [f["RES0"]["ESIZE"]],
        "ADDR_W": [f["RES0"]["DST"]],
        "PIX_W": [f["RES1"]["PIX"]],
        "DIM_W": [f["RES1"][k] for k in ("OUTER", "INNER")] + [f["RES2"][k] for k in ("GW", "CH0", "CH1", "DSTC")],
    }
    for name, fields in want.items():
        widths = {w for _, w in fields}
        assert widths == {p[name]}, f"{name} = {p[name]}, contract widths {widths}"
    assert p["MODE_ITEMS"] == fmt.res_modes["ITEMS"]
    assert p["MODE_ACC"] == fmt.res_modes["ACC"]


@pytest.mark.parametrize("params", [{}, {"MAX_RUN": 4, "LOG_WQ": 3, "MAX_GAP": 0},
                                    {"ADDR_W": 40, "IDX_W": 24}],
                         ids=["default", "small", "wide"])
def test_lint_cl_store(params):
    """verilator -Wall on the unit (test_lint.py: every module at its defaults) and builds with
    short requests and other address widths."""
    r = lint("dtpu_cl_store", UNIT, params)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out


@pytest.mark.slow
def test_cl_store():
    """Random ITEMS / ACC RUNs back to back (every LANES, FIRST on and off), the RUNs of two
    compiled lists (mobilenet_like; a K-split conv + FC in ACC), the rates without stalls and at
    latency 85, a BRESP SLVERR and an ACC read error, timeouts (flagged, no hang), refused fields
    and wrong stream lengths: memory byte-exact against the golden model."""
    _run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
@pytest.mark.parametrize("params", [{}, {"MAX_BURST": 4, "MAX_OUTSTANDING": 2, "MAX_RUN": 4,
                                         "LOG_WQ": 3, "MAX_GAP": 0}], ids=["contract", "small"])
def test_cl_store_sweep(seed, params):
    _run(params, {"DTPU_SEED": seed, "DTPU_CASES": 40, "DTPU_MAX_WORDS": 1500},
         testcase="test_items_acc_random")


@pytest.mark.slow
@pytest.mark.parametrize("net", ["dscnn_like__int8", "mobilenet_v1_025_96__int8"])
def test_cl_store_zoo(net):
    """The RUNs of more zoo networks' command lists (the default run has mobilenet_like)."""
    _run(env={"DTPU_ZOO_NET": net}, testcase="test_compiled_zoo")
