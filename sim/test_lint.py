"""verilator --lint-only -Wall on every RTL module (each as its own top, default parameters)."""
import pytest

from dtpu_sim import RTL_DIR, lint, rtl_sources

MODULES = [p.stem for p in rtl_sources()]


def test_every_module_has_its_file():
    assert MODULES, f"no RTL in {RTL_DIR}"
    for p in rtl_sources():
        text = p.read_text()
        assert f"module {p.stem}" in text, f"{p.name} must define module {p.stem}"
        assert "`default_nettype none" in text and text.rstrip().endswith("`resetall"), p.name


@pytest.mark.parametrize("module", MODULES)
def test_lint_clean(module):
    r = lint(module, rtl_sources())
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out
