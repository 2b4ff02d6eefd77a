"""Time, throughput and energy from the chip profile's marked assumptions (issue 28): what `run`
prints beside cycles, so the figures can stand beside RC64's."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dtpu.isro import cli
from dtpu.isro.machine import Counters
from dtpu.isro.performance import figures
from dtpu.isro.profile import DEFAULT_PATH, ProfileError, from_dict, load

FIXTURES = Path(__file__).resolve().parent / "isro"


def _profile(**change):
    d = {k: v for k, v in json.loads(DEFAULT_PATH.read_text()).items() if k not in ("about", "source")}
    d.update(change)
    return from_dict({k: v for k, v in d.items() if v is not None}, "test profile")


def test_default_profile_marks_clock_and_power_as_assumptions():
    raw = json.loads(DEFAULT_PATH.read_text())
    assert raw["source"]["clock_mhz"].startswith("assumption") and raw["source"]["power"].startswith("assumption")
    prof = load()
    assert prof.clock_mhz == 200 and prof.power.mac("i8") == 1.0 and prof.power.mac("f32") == 10.0
    assert prof.to_dict()["power"] == raw["power"] and prof.to_dict()["clock_mhz"] == 200


def test_figures_follow_the_counters_and_the_profile():
    prof = _profile(clock_mhz=100, power={"static_w": 2.0, "mac_pj": {"f32": 10.0, "i8": 1.0},
                                          "sram_pj_per_byte": 4.0})
    c = Counters(cycles=1_000_000, macs=128_000_000, adds=1_000, compares=500, frame_read=3_000,
                 frame_write=1_000, filter_read=5_000, filter_write=1_000)
    f = figures(c, prof, "i8", 256)
    assert f.seconds == pytest.approx(0.01) and f.frames_per_s == pytest.approx(100)
    assert f.gop_per_s == pytest.approx(2 * 128e6 / 0.01 / 1e9) and f.peak_gop_per_s == pytest.approx(51.2)
    assert f.utilization == pytest.approx(128e6 / (1e6 * 256))
    assert f.energy_static_j == pytest.approx(0.02)
    assert f.energy_mac_j == pytest.approx((128e6 + 1_500) * 1e-12)
    assert f.energy_memory_j == pytest.approx(10_000 * 4e-12)
    assert f.energy_j == pytest.approx(0.02 + (128e6 + 1_500) * 1e-12 + 4e-8)
    assert f.power_w == pytest.approx(f.energy_j / 0.01) and f.frames_per_s_per_w == pytest.approx(100 / f.power_w)
    f32 = figures(c, prof, "f32", 256)
    assert f32.energy_mac_j == pytest.approx(10 * f.energy_mac_j)
    assert figures(c, prof, "i8", None).utilization is None and figures(c, prof, "i8", None).peak_gop_per_s is None


def test_a_profile_without_clock_or_power_reports_what_it_can():
    c = Counters(cycles=1000, macs=64_000)
    bare = _profile(clock_mhz=None, power=None)
    f = figures(c, bare, "i8", 256)
    assert f.seconds is None and f.energy_j is None and f.utilization == pytest.approx(0.25)
    assert "no clock_mhz" in f.lines()[0]
    timed = figures(c, _profile(power=None), "i8", 256)
    assert timed.frames_per_s == pytest.approx(200e3) and timed.energy_j is None
    assert any("no power model" in line for line in timed.lines())


@pytest.mark.parametrize("change, key", [
    (dict(clock_mhz=0), "clock_mhz"), (dict(clock_mhz="fast"), "clock_mhz"), (dict(clock_mhz=True), "clock_mhz"),
    (dict(power={"static_w": 1.0}), "power"),
    (dict(power={"static_w": -1.0, "mac_pj": {"f32": 1.0, "i8": 1.0}, "sram_pj_per_byte": 1.0}), "power.static_w"),
    (dict(power={"static_w": 1.0, "mac_pj": {"i8": 1.0}, "sram_pj_per_byte": 1.0}), "power.mac_pj"),
    (dict(power={"static_w": 1.0, "mac_pj": {"f32": 1.0, "i8": 1.0}, "sram_pj_per_byte": "2"}),
     "power.sram_pj_per_byte"),
])
def test_bad_performance_keys_are_named(change, key):
    with pytest.raises(ProfileError, match=re.escape(key)):
        _profile(**change)


def test_run_prints_time_frames_per_second_and_energy(tmp_path, capsys):
    assert cli.main(["compile", str(FIXTURES / "vgg_s.h5"), "-o", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert cli.main(["run", str(tmp_path / "b"), "--no-dump"]) == 0
    out = capsys.readouterr().out
    cycles = int(re.search(r"total: .* ([\d,]+) cycles", out).group(1).replace(",", ""))
    ms = float(re.search(r"at 200 MHz \(profile clock, an assumption\): ([\d.]+) ms per frame", out).group(1))
    assert ms == pytest.approx(cycles / 200e3, abs=1e-3)
    assert re.search(r"[\d.]+ frames/s, [\d.]+ GOP/s of 102\.4 peak", out)
    assert re.search(r"energy \(profile power model, an assumption\): [\d.]+ mJ per frame .* [\d.]+ frames/s/W", out)
    assert "waiting only for its data" in out and "transfers:" not in out     # all on chip: no XFER


def test_compile_estimate_prints_the_same_figures_as_run(tmp_path, capsys):
    assert cli.main(["compile", str(FIXTURES / "resnet8_int8.tflite"), "-o", str(tmp_path / "b"), "--estimate"]) == 0
    compiled = capsys.readouterr().out
    assert cli.main(["run", str(tmp_path / "b"), "--no-dump"]) == 0
    ran = capsys.readouterr().out
    line = re.search(r"at 200 MHz .*", compiled).group(0)
    assert line in ran and "frames/s/W" in compiled


def test_bench_sets_models_beside_rc64(capsys):
    assert cli.main(["bench", str(FIXTURES / "resnet8_int8.tflite"), str(FIXTURES / "vgg_s.h5")]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:4]}
    assert set(rows) == {"resnet8_int8", "vgg_s"}
    for name, cols in rows.items():
        cycles, fps = int(cols[3].replace(",", "")), float(cols[4])
        assert cols[1] == "on-chip"
        assert fps == pytest.approx(200e6 / cycles, rel=1e-3), name
    assert re.search(r"VGG-19 224 \(RC64, published\)\s+-\s+19\.63\s+-\s+2\.80\s+54\.97\s+80\.0 %\s+0\.56", out)


def test_bench_prints_where_the_cycles_go_layer_by_layer(capsys):
    from dtpu.isro import compile_model, run
    from dtpu.isro.performance import layer_table
    assert cli.main(["bench", str(FIXTURES / "resnet8_int8.tflite"), "--layers"]) == 0
    out = capsys.readouterr().out
    assert out.index("resnet8_int8:\nlayer") < out.index("VGG-19 224 (RC64, published)")
    bundle = compile_model(FIXTURES / "resnet8_int8.tflite")
    result = run(bundle)
    table = layer_table(bundle, result).splitlines()
    assert len(table) == 2 + sum(layer["kind"] != "input" for layer in bundle.layers)
    total = table[-1].split()
    assert int(total[-2].replace(",", "")) == result.schedule.cycles        # elapsed sums to the run
    elapsed = sum(int(line.split()[7].replace(",", "")) for line in table[1:-1])
    assert elapsed == result.schedule.cycles
    util = float(total[-1].rstrip("%")) / 100
    assert util == pytest.approx(result.counters.macs / bundle.meta["pe"] / result.schedule.cycles, abs=1e-3)
