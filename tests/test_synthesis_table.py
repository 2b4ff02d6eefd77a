"""docs/synthesis.md's resource table is generated from hw/synth/results.json (what `dtpu synth`
writes and notebook 03 plots): the two cannot drift."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _synth_module():
    spec = importlib.util.spec_from_file_location("dtpu_synth_script", ROOT / "hw" / "synth" / "synth.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_doc_table_is_the_json(tmp_path):
    synth = _synth_module()
    results = tmp_path / "results.json"
    shutil.copy(ROOT / "hw" / "synth" / "results.json", results)
    doc = tmp_path / "synthesis.md"
    doc.write_text((ROOT / "docs" / "synthesis.md").read_text())
    assert synth.main(["--cols", "--json", str(results), "--out", str(doc)]) == 0  # tabulate only
    assert doc.read_text() == (ROOT / "docs" / "synthesis.md").read_text()


def test_board_builds_are_recorded():
    data = json.loads((ROOT / "hw" / "synth" / "results.json").read_text())
    builds = {k: r for k, r in data.items() if k != "timing"}  # timing.py's section (test_timing.py)
    board = [r for r in builds.values()
             if r["params"].get("PREC_EN") == 7 and r.get("top", "dtpu_axi") == "dtpu_axi"]
    assert sorted(r["cols"] for r in board) == [4, 8, 16]
    assert all({"lut", "ff", "dsp", "bram36"} <= set(r) for r in builds.values())
