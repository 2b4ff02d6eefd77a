"""Coverage build of dtpu_axi (Verilator --coverage): the default top-level regression, then a
line/toggle/branch summary parsed from coverage.dat (written to sim_build/coverage.md)."""
import os
import shutil

import pytest

from dtpu_sim import BUILD_ROOT, build, run_dir, run_tests
from dtpu_sim.coverage import load, report, summarize


@pytest.mark.slow
def test_coverage_summary(monkeypatch):
    monkeypatch.setenv("DTPU_COVERAGE", "1")
    params = {"COLS": 8, "LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}
    d = build("dtpu_axi", params, name="top")
    dats = []
    for k, cols_env in enumerate([{}, {"DTPU_SEED": "424242", "DTPU_CASES": "20"}]):
        dat = run_dir(d) / "coverage.dat"
        if dat.exists():
            dat.unlink()
        run_tests("dtpu_axi", "tb_top", d, parameters=params, extra_env=cols_env)
        keep = d / f"coverage_{k}.dat"
        shutil.copy(dat, keep)
        dats.append(keep)
    s = summarize(load(dats))
    text = report(s)
    (BUILD_ROOT / "coverage.md").write_text(text + "\n")
    print(text)
    line_cov, line_tot = s["kinds"]["line"]
    assert line_tot > 0 and line_cov / line_tot > 0.8, text


@pytest.mark.slow
def test_cl_top_coverage_summary(monkeypatch):
    """The contract-2.0 top (dtpu_cl_top and every unit in it): the default end-to-end,
    error-path and sequencer regressions (tb_cl_run, tb_cl_faults, tb_cl_seq) on one coverage
    build, their union summarized per file into sim_build/coverage_cl_top.md (docs/rtl.md
    quotes it). Held: lines of the 2.0 units' files (dtpu_cl_*.v, the AGU, the AXI masters)
    at least 90 % together; the 1.2 core's files are tb_top's (test_coverage_summary)."""
    monkeypatch.setenv("DTPU_COVERAGE", "1")
    params = {"COLS": 8, "LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}
    d = build("dtpu_cl_top", params, name="cl_top")
    dats = []
    for k, tb in enumerate(["tb_cl_run", "tb_cl_faults", "tb_cl_seq"]):
        dat = run_dir(d) / "coverage.dat"
        if dat.exists():
            dat.unlink()
        run_tests("dtpu_cl_top", tb, d, parameters=params)
        keep = d / f"coverage_{k}.dat"
        shutil.copy(dat, keep)
        dats.append(keep)
    s = summarize(load(dats))
    text = report(s)
    (BUILD_ROOT / "coverage_cl_top.md").write_text(text + "\n")
    print(text)
    units = [(c, t) for f, (c, t) in s["files"]["line"].items()
             if f.startswith(("dtpu_cl_", "dtpu_act_agu", "dtpu_axi_")) and f.endswith(".v")]
    cov, tot = map(sum, zip(*units))
    assert len(units) >= 12 and cov / tot >= 0.9, text
