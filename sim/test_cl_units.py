"""Contract 2.0 units (docs/rtl.md "Contract 2.0 units, status"): the AXI4 read and write
masters and the descriptor fetcher, each against an AxiRam with random latency and
backpressure. The default run uses the contract's build (16-beat bursts, 8 in flight); the
slow sweeps add seeds, a small build (4-beat bursts, 2 in flight) and an odd one (8-beat bursts,
5 in flight, 6-bit AXI IDs as on the HP ports)."""
import pytest

from dtpu_sim import RTL_DIR, build, lint, run_tests
from dtpu_sim.build import TB_DIR

# the masters' burst splitter (dtpu_axi_burst.v) comes with each of them
BURST = RTL_DIR / "dtpu_axi_burst.v"


def _run(top, tb, params=None, env=None, name=None):
    params = params or {}
    d = build(top, params, [RTL_DIR / f"{top}.v", BURST], name=name or top)
    run_tests(top, tb, d, parameters=params, extra_env=env or {})


@pytest.mark.parametrize("top,params", [
    ("dtpu_axi_rd", {"MAX_BURST": 4, "MAX_OUTSTANDING": 2}),
    ("dtpu_axi_rd", {"ID_W": 6, "MAX_OUTSTANDING": 5}),   # AXI3 HP port IDs; not a power of 2
    ("dtpu_axi_wr", {"MAX_BURST": 4, "MAX_OUTSTANDING": 2}),
    ("dtpu_axi_wr", {"ID_W": 6, "MAX_OUTSTANDING": 5}),
    ("dtpu_cl_fetch", {"LOG_MAX_DESCS": 3}),
], ids=lambda v: v if isinstance(v, str) else "_".join(f"{k}{x}" for k, x in v.items()))
def test_lint_other_builds(top, params):
    """verilator -Wall on the builds the sweeps and the HP port use (test_lint.py: defaults)."""
    r = lint(top, [RTL_DIR / f"{top}.v", BURST], params)
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out


@pytest.mark.slow
def test_axi_rd():
    _run("dtpu_axi_rd", "tb_axi_rd")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("params", [{}, {"MAX_BURST": 4, "MAX_OUTSTANDING": 2},
                                    {"MAX_BURST": 8, "MAX_OUTSTANDING": 5, "ID_W": 6}],
                         ids=["contract", "small", "odd"])
def test_axi_rd_sweep(seed, params):
    _run("dtpu_axi_rd", "tb_axi_rd", params, {"DTPU_SEED": seed, "DTPU_CASES": 150})


@pytest.mark.slow
def test_axi_wr():
    _run("dtpu_axi_wr", "tb_axi_wr")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("params", [{}, {"MAX_BURST": 4, "MAX_OUTSTANDING": 2},
                                    {"MAX_BURST": 8, "MAX_OUTSTANDING": 5, "ID_W": 6}],
                         ids=["contract", "small", "odd"])
def test_axi_wr_sweep(seed, params):
    _run("dtpu_axi_wr", "tb_axi_wr", params, {"DTPU_SEED": seed, "DTPU_CASES": 100})


def _fetch(params=None, env=None):
    params = params or {}
    srcs = [RTL_DIR / "dtpu_cl_fetch.v", RTL_DIR / "dtpu_axi_rd.v", BURST,
            TB_DIR / "tb_cl_fetch_top.v"]
    d = build("tb_cl_fetch_top", params, srcs, name="cl_fetch")
    run_tests("tb_cl_fetch_top", "tb_cl_fetch", d, parameters=params, extra_env=env or {})


def test_cl_fetch():
    """Compiled lists word-exact; malformed lists, bus faults, a timeout and the read-ahead past
    the end of memory give the golden model's CL_ERR, CL_ERR_PC, CL_ERR_TAG and count."""
    _fetch()


@pytest.mark.slow
def test_cl_fetch_descriptor_limit():
    """BAD_LENGTH after 2^LOG_MAX_DESCS descriptors without END (a build with 8)."""
    _fetch({"LOG_MAX_DESCS": 3})


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_cl_fetch_sweep(seed):
    _fetch(env={"DTPU_SEED": seed, "DTPU_CASES": 40})
