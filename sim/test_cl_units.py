"""Contract 2.0 units (docs/rtl.md "Contract 2.0 units, status"): the AXI4 read and write
masters and the descriptor fetcher, each against an AxiRam with random latency and
backpressure. The default run uses the contract's build (16-beat bursts, 8 in flight); the
slow sweeps add seeds and a small build (4-beat bursts, 2 in flight)."""
import pytest

from dtpu_sim import RTL_DIR, build, run_tests


def _run(top, tb, params=None, env=None, name=None):
    params = params or {}
    d = build(top, params, [RTL_DIR / f"{top}.v"], name=name or top)
    run_tests(top, tb, d, parameters=params, extra_env=env or {})


def test_axi_rd():
    _run("dtpu_axi_rd", "tb_axi_rd")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("params", [{}, {"MAX_BURST": 4, "MAX_OUTSTANDING": 2}],
                         ids=["contract", "small"])
def test_axi_rd_sweep(seed, params):
    _run("dtpu_axi_rd", "tb_axi_rd", params, {"DTPU_SEED": seed, "DTPU_CASES": 150})


def test_axi_wr():
    _run("dtpu_axi_wr", "tb_axi_wr")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("params", [{}, {"MAX_BURST": 4, "MAX_OUTSTANDING": 2}],
                         ids=["contract", "small"])
def test_axi_wr_sweep(seed, params):
    _run("dtpu_axi_wr", "tb_axi_wr", params, {"DTPU_SEED": seed, "DTPU_CASES": 100})
