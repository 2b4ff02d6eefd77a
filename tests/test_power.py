"""Power: XADC transfer functions, the per-invoke sampler, external meters, the activity model,
and what backend=model and backend=pynq put in the report (docs/power.md)."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dtpu.backends.base import HwCounters, PowerReading
from dtpu.board import xadc
from dtpu.board.power import PowerMonitor, external_power, parse_power_meter, set_external_power
from dtpu.power import DEFAULT, Coefficients, EnergyMeter, activity, coefficient_table

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------- XADC codes


@pytest.mark.parametrize("reg,celsius", [(0x0000, -273.15), (0x9A00, 30.022), (0xFFF0, 230.702)])
def test_temperature_transfer_function(reg, celsius):
    assert xadc.temperature_c(reg) == pytest.approx(celsius, abs=0.01)
    assert xadc.code(reg) == reg >> 4


@pytest.mark.parametrize("volts", [1.0, 1.5, 1.8, 0.95])
def test_supply_transfer_function_is_3v_full_scale(volts):
    reg = xadc.register_for_supply(volts)
    assert xadc.supply_v(reg) == pytest.approx(volts, abs=3.0 / 4096)
    assert xadc.supply_v(0x5550) == pytest.approx(0x555 / 4096 * 3.0)


def test_register_map_matches_pg091():
    assert (xadc.TEMPERATURE, xadc.VCCINT, xadc.VCCAUX, xadc.VCCBRAM) == (0x200, 0x204, 0x208, 0x218)
    assert (xadc.VCCPINT, xadc.VCCPAUX, xadc.VCCO_DDR) == (0x234, 0x238, 0x23C)
    regs = {0x200: xadc.register_for_temperature(45.0),
            **{r: xadc.register_for_supply(v) for r, v in xadc.SUPPLIES.values()}}
    temp, volts = xadc.read_sensors(regs.__getitem__)
    assert temp == pytest.approx(45.0, abs=0.13)
    assert volts == pytest.approx({n: v for n, (_, v) in xadc.SUPPLIES.items()}, abs=1e-3)


# ---------------------------------------------------------------------------------- sampler


class _Sensors:
    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            self.calls += 1
            t = 40.0 + self.calls % 5
        return t, {"vccint": 1.0 + 0.001 * (self.calls % 3), "vccaux": 1.8}


def test_window_statistics_and_thread_lifecycle():
    sensors = _Sensors()
    mon = PowerMonitor(sensors, period_s=0.001)
    assert mon.end() is None
    mon.begin()
    assert mon.sampling
    time.sleep(0.03)
    mon.begin()  # already open: no-op
    w = mon.end()
    assert len(w.samples) >= 4 and w.duration_s >= 0.03
    t = w.temperature()
    assert 40.0 <= t["min"] <= t["avg"] <= t["max"] <= 44.0
    v = w.voltages()
    assert v["vccint_min"] <= v["vccint"] <= v["vccint_max"] and v["vccaux"] == pytest.approx(1.8)
    assert w.power() is None
    time.sleep(0.005)  # a sample in flight when the window closed lands now
    calls = sensors.calls
    time.sleep(0.01)
    assert sensors.calls == calls, "no sampling between windows"
    mon.close()
    assert not mon.sampling


def test_a_short_window_still_has_two_samples():
    mon = PowerMonitor(_Sensors(), period_s=10.0)
    mon.begin()
    w = mon.end()
    assert len(w.samples) >= 2
    mon.close()


def test_failing_sensor_does_not_fail_the_window(caplog):
    def broken():
        raise OSError("bus error")

    mon = PowerMonitor(broken, period_s=0.001)
    mon.begin()
    w = mon.end()
    assert w.temperature() is None and "XADC read failed" in caplog.text
    mon.close()


@pytest.mark.parametrize("value,watts", [(2.5, 2.5), ("3", 3.0), (lambda: 1.25, 1.25)])
def test_external_power_sources(value, watts):
    try:
        set_external_power(value)
        assert external_power()() == watts
        mon = PowerMonitor(None, period_s=0.001)
        mon.begin()
        w = mon.end()
        assert w.power() == {"min": watts, "avg": watts, "max": watts}
        mon.close()
    finally:
        set_external_power(None)
    assert external_power() is None


def test_external_power_from_a_file(tmp_path):
    f = tmp_path / "meter.txt"
    f.write_text("2.75 W\n")
    assert parse_power_meter(f"file:{f}") == f"file:{f}"
    set_external_power(f"file:{f}")
    try:
        assert external_power()() == 2.75
        f.write_text("3.0")
        assert external_power()() == 3.0
    finally:
        set_external_power(None)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "abc", "inf"])
def test_bad_external_power_names_the_value(bad):
    with pytest.raises(ValueError):
        set_external_power(bad)
    assert external_power() is None


def test_power_meter_option(tmp_path):
    from dtpu.delegate.options import parse

    assert parse({"power_meter": "2.5"}).backend_options()["power_meter"] == 2.5
    assert "power_meter" not in parse({"power_meter": "none"}).backend_options()
    with pytest.raises(ValueError, match=r"option 'power_meter'='-3' is invalid; expected none, a "
                                         r"number of watts > 0, or file:PATH"):
        parse({"power_meter": "-3"})
    with pytest.raises(ValueError, match=r"option 'power_meter'='file:/nonexistent/m' is invalid"):
        parse({"power_meter": "file:/nonexistent/m"})


def test_bitstream_option(tmp_path):
    from dtpu.board.emulate import write_design
    from dtpu.delegate.options import parse

    bit = write_design(tmp_path)
    assert parse({"bitstream": str(bit)}).backend_options()["bitstream"] == str(bit)
    assert "bitstream" not in parse({}).backend_options()
    with pytest.raises(ValueError, match=r"option 'bitstream'='x.bin' is invalid; expected 'default', "
                                         r"an overlay's name \(int8, int16\) or the path of an "
                                         r"existing .bit"):
        parse({"bitstream": "x.bin"})
    # an overlay's name is kept as such: its file is looked for beside the default bitstream
    # when the board is opened (dtpu.board.resolve_bitstream)
    assert parse({"bitstream": "INT16"}).backend_options()["bitstream"] == "int16"
    assert parse({"bitstream": "int16"}).to_dict()["bitstream"] == "int16"
    bit.with_suffix(".hwh").unlink()
    with pytest.raises(ValueError, match=r"has no dtpu_pynqz2.hwh beside it"):
        parse({"bitstream": str(bit)})


def test_bitstream_names_resolve_beside_the_default(tmp_path, monkeypatch):
    """`bitstream=int16` is the int16 overlay's file where `make -C hw/overlays OVERLAY=int16
    install` puts it: beside the default bitstream (on the board /home/xilinx/pynq/overlays/
    dtpu/, else beside $DTPU_BITSTREAM); `int8` and `default` are the default overlay's."""
    from pathlib import Path

    from dtpu.board import resolve_bitstream

    monkeypatch.delenv("DTPU_BITSTREAM", raising=False)
    board = Path("/home/xilinx/pynq/overlays/dtpu")
    assert resolve_bitstream("int16") == board / "dtpu_pynqz2_int16.bit"
    assert resolve_bitstream("int8") == resolve_bitstream("default") == resolve_bitstream(None) \
        == board / "dtpu_pynqz2.bit"
    monkeypatch.setenv("DTPU_BITSTREAM", str(tmp_path / "mine.bit"))
    assert resolve_bitstream("int16") == tmp_path / "dtpu_pynqz2_int16.bit"
    assert resolve_bitstream(None) == tmp_path / "mine.bit"
    assert resolve_bitstream(str(tmp_path / "x.bit")) == tmp_path / "x.bit"


# ----------------------------------------------------------------------------- the estimate


def test_docs_table_lists_the_code_coefficients():
    text = (ROOT / "docs" / "power.md").read_text()
    rows = dict(re.findall(r"^\| (static_w|mac_pj|word_pj\[\w+\]|bram_pj|busy_cycle_pj|"
                           r"precision_scale\[\w+\]) \| ([\d.]+) \|", text, re.M))
    table = {name: value for name, value, _ in coefficient_table()}
    assert set(rows) == set(table)
    assert {k: float(v) for k, v in rows.items()} == table


def test_activity_and_energy_are_linear_in_the_counters():
    c = HwCounters(cycles=1000, macs=64_000, words_in={"wgt": 0, "act": 100}, words_out={"res": 50})
    a = activity(c, "int8", cols=8)
    assert a.macs == 64_000 and a.words == {"wgt": 0, "act": 100, "res": 50}
    assert a.bram_accesses == pytest.approx(100 + 64_000 / 64 * 9)
    e = a.energy_j()
    want = (64_000 * 3.0 + 150 * 1600.0 + a.bram_accesses * 30.0 + 1000 * 100.0) * 1e-12
    assert e == pytest.approx(want)
    c2 = HwCounters(cycles=2000, macs=128_000, words_in={"wgt": 0, "act": 200}, words_out={"res": 100})
    assert activity(c2, "int8", 8).energy_j() == pytest.approx(2 * e)
    assert activity(c, "int16", 8).macs == 4 * a.macs  # wider lanes: dearer MACs, fewer per word


def test_meter_reading_over_busy_time_or_a_window():
    m = EnergyMeter(clock_mhz=100.0, cols=8)
    assert m.reading() == PowerReading(method="estimated")
    c = HwCounters(cycles=10_000, macs=640_000, words_in={"act": 1000}, words_out={"res": 500})
    dyn = m.add(c, "int8")
    r = m.reading()
    busy = 10_000 / 100e6
    assert r.method == "estimated" and r.energy_j == pytest.approx(dyn + DEFAULT.static_w * busy)
    assert r.avg_w == pytest.approx(r.energy_j / busy) and r.max_w >= r.avg_w
    assert r.temperature_c is None and m.empty
    m.add(c, "int8")
    r2 = m.reading(window_s=1e-3)  # board: static power over the invoke's wall time
    assert r2.energy_j == pytest.approx(dyn + DEFAULT.static_w * 1e-3)
    custom = EnergyMeter(100.0, 8, Coefficients(static_w=0.0, mac_pj=0.0, bram_pj=0.0,
                                                busy_cycle_pj=0.0))
    custom.add(c, "int8")
    assert custom.reading().energy_j == pytest.approx(1500 * 1600e-12)


def test_backend_model_reports_the_estimate_per_invoke(tmp_path):
    import json

    import dtpu

    model = ROOT / "tests" / "models" / "zoo" / "mobilenet_like__int8.tflite"
    path = tmp_path / "reports.jsonl"
    it = dtpu.make_interpreter(model, {"backend": "model", "report": str(path)})
    it.allocate_tensors()
    d = it.get_input_details()[0]
    energies = []
    for _ in range(2):
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        it.invoke()
        r = dtpu.last_report()
        p = r.power
        assert p["method"] == "estimated" and p["temperature_c"] is None
        busy = r.hw["cycles"] / 100e6
        assert p["energy_j"] == pytest.approx(p["avg_w"] * busy)
        assert DEFAULT.static_w < p["avg_w"] <= p["max_w"] < 2.0
        energies.append(p["energy_j"])
    assert energies[0] == pytest.approx(energies[1])  # per invoke, not accumulated
    assert 1e-6 < energies[0] < 1e-4
    # issue 24.6: the line says what the figure covers
    assert "(estimated: the DTPU's own, the xc7z020's static power plus" in r.table()
    del it
    dtpu.last_report()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines and all(rec["power"]["method"] == "estimated" for rec in lines)


def test_backend_pynq_reports_external_power_when_given(tmp_path, monkeypatch):
    from dtpu.backends import get
    from dtpu.backends.base import Probes
    from dtpu.board import emulate
    from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant

    pytest.importorskip("pynq", reason="the board emulation runs the pynq package, not installed "
                                       "here (pip install pynq)")
    monkeypatch.setenv("DTPU_BITSTREAM", str(tmp_path / "unused.bit"))
    bit = emulate.install(tmp_path, contract=1)   # the backend API's per-node jobs: the 1.2 design
    try:
        rng = np.random.default_rng(0)
        spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 6, 6, 16), (8, 1, 1, 16),
                        padding=Padding.VALID, input_q=Quant((0.02,), (0,)),
                        filter_q=Quant((0.01,) * 8, (0,) * 8), output_q=Quant((0.3,), (0,)))
        x = rng.integers(-128, 128, spec.input_shape).astype(np.int8)
        f = rng.integers(-127, 128, spec.filter_shape).astype(np.int8)
        backend = get("pynq")({"bitstream": str(bit), "power_meter": 2.0})
        h = backend.prepare(spec, f, None)
        started = time.monotonic()
        _, hw = backend.invoke(h, x, Probes())
        r = backend.power()
        elapsed = time.monotonic() - started
        assert r.method == "external" and r.avg_w == r.max_w == 2.0
        # mean reading x the device's busy time, not the invoke's (emulator's) wall time
        assert r.energy_j == pytest.approx(2.0 * hw.cycles / 100e6) and r.energy_j < 2.0 * elapsed
        assert set(r.temperature_c) == {"min", "avg", "max"} and "vccpint" in r.voltages_v
        assert backend.power() == PowerReading()  # nothing ran since
        backend.close()
    finally:
        emulate.uninstall()


def test_energy_per_inference_is_device_time_on_every_backend(tmp_path, monkeypatch):
    """The same model on backend=model and on the emulated board: same cycles, so the same
    estimated energy and average power (the emulator's wall time, thousands of times the
    device's, must not enter: it once gave 3.6 mJ against 17 uJ for the same cycles)."""
    import dtpu
    from dtpu.board import emulate

    pytest.importorskip("pynq", reason="the board emulation runs the pynq package, not installed "
                                       "here (pip install pynq)")
    model = ROOT / "tests" / "models" / "zoo" / "mobilenet_like__int8.tflite"
    monkeypatch.setenv("DTPU_BITSTREAM", str(tmp_path / "unused.bit"))
    bit = emulate.install(tmp_path)
    try:
        power = {}
        # the emulated board's default design is the 2.0 one (command lists), the int8 overlay
        # with the vector unit and one requantizing lane: the model likewise, as that build
        # (design.board_config: its lanes and knobs, so its cycles are the build's)
        from dtpu.board.design import board_config
        for backend, options in (("model", {"path": "lists"}), ("pynq", {"bitstream": str(bit)})):
            with board_config():
                it = dtpu.make_interpreter(model, {"backend": backend, **options})
                it.allocate_tensors()
                d = it.get_input_details()[0]
                for _ in range(2):   # the second invoke: steady state on both
                    it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
                    it.invoke()
                r = dtpu.last_report()
            power[backend] = (r.hw["cycles"], r.power["method"], r.power["energy_j"], r.power["avg_w"])
            del it
        assert power["model"][1] == power["pynq"][1] == "estimated"
        assert power["model"][0] == power["pynq"][0]
        assert power["pynq"][2] == pytest.approx(power["model"][2], rel=1e-9)
        assert power["pynq"][3] == pytest.approx(power["model"][3], rel=1e-9)
    finally:
        emulate.uninstall()
