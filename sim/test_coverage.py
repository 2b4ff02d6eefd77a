"""Coverage builds (Verilator --coverage) of the two tops: default regressions on each, then a
line/toggle/branch summary parsed from their coverage.dat files (sim_build/coverage*.md)."""
import shutil

import pytest

from dtpu_sim import BUILD_ROOT, build, run_dir, run_tests
from dtpu_sim.coverage import load, report, summarize

PARAMS = {"COLS": 8, "LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


def _covered(top, name, runs, out):
    """Build `top` with coverage, run each (bench, env) of `runs` on it, keep every run's
    coverage.dat and write the union's summary to sim_build/`out`; returns the summary."""
    d = build(top, PARAMS, name=name)
    dats = []
    for k, (tb, env) in enumerate(runs):
        dat = run_dir(d) / "coverage.dat"
        if dat.exists():
            dat.unlink()
        run_tests(top, tb, d, parameters=PARAMS, extra_env=env)
        keep = d / f"coverage_{k}.dat"
        shutil.copy(dat, keep)
        dats.append(keep)
    s = summarize(load(dats))
    text = report(s)
    (BUILD_ROOT / out).write_text(text + "\n")
    print(text)
    return s, text


@pytest.mark.slow
def test_coverage_summary(monkeypatch):
    """The 1.2 top dtpu_axi: tb_top twice (default, and 20 cases of another seed)."""
    monkeypatch.setenv("DTPU_COVERAGE", "1")
    s, text = _covered("dtpu_axi", "top", [("tb_top", {}), ("tb_top", {"DTPU_SEED": "424242",
                                                                        "DTPU_CASES": "20"})],
                       "coverage.md")
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
    s, text = _covered("dtpu_cl_top", "cl_top",
                       [(tb, {}) for tb in ("tb_cl_run", "tb_cl_faults", "tb_cl_seq")],
                       "coverage_cl_top.md")
    units = [(c, t) for f, (c, t) in s["files"]["line"].items()
             if f.startswith(("dtpu_cl_", "dtpu_act_agu", "dtpu_axi_")) and f.endswith(".v")]
    cov, tot = map(sum, zip(*units))
    assert len(units) >= 12 and cov / tot >= 0.9, text
