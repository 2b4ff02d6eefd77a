"""The PYNQ-Z2 estimate as users meet it: every report prices its own invoke (device cycles at
the build's clock, its host operations, the CPU operators around its partitions), `dtpu
estimate MODEL` prices any model file, and the two agree where they run the same partitions."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dtpu.board import costs as bc
from dtpu.board.estimate import estimate
from tests.delegate_util import dtpu_so  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "models" / "zoo"
MOBILENET = ZOO / "mobilenet_like__int8.tflite"
VWW = ZOO / "mobilenet_v1_025_96__int8.tflite"


def _reports(model, options, invokes=2):
    import dtpu

    it = dtpu.make_interpreter(model, options)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    rng = np.random.default_rng(0)
    for _ in range(invokes):
        info = np.iinfo(d["dtype"])
        it.set_tensor(d["index"], rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"]))
        it.invoke()
    return dtpu.reports()[-invokes:]


@pytest.fixture(scope="module")
def mobilenet_lists(dtpu_so):
    # the estimate's partitions: the convolution chains (dtpu.board.estimate, the int16
    # overlay's: vector=off leaves MEAN on the CPU as there)
    return _reports(MOBILENET, {"backend": "model", "path": "lists", "vector": "off"})


def test_report_table_shows_device_time_and_the_board_estimate_apart_from_host_time(mobilenet_lists):
    report = mobilenet_lists[-1]
    text = report.table()
    est = report.board_estimate()
    assert est is not None and est["path"] == "c"      # the second invoke ran on the C path
    lines = text.splitlines()
    device = next(line for line in lines if line.startswith("device time at "))
    assert device == (f"device time at 100 MHz: {report.hw['latency_us'] / 1e3:.3f} ms per invoke "
                      f"({report.hw['cycles']:,} cycles)")
    board = next(line for line in lines if line.startswith("estimated whole invoke on the PYNQ-Z2"))
    assert f"{est['whole_ms']:.2f} ms" in board and "not measured on a board" in board
    assert any(line.startswith("simulator host time on this machine (not the board)")
               for line in lines)
    # the operators TFLite keeps on the CPU around the partition are named, the FC among them
    assert "MEAN x1" in text and "SOFTMAX x1" in text


def test_report_estimate_is_the_model_files_estimate_on_the_same_partition(mobilenet_lists):
    """The delegate's partition of the zoo's MobileNet-like net is the chain `dtpu estimate`
    compiles: every term is equal, device cycles included."""
    got = mobilenet_lists[-1].board_estimate()
    want = estimate("m", MOBILENET)["rows"][2]           # the C path's row
    assert got["cycles"] == want["cycles"]
    assert got["ops"]["copy_in_bytes"] == want["ops"]["copy_in_bytes"] == 32 * 32 * 3   # the 1x32x32x3 int8 input
    assert got["ops"]["copy_out_bytes"] == want["ops"]["copy_out_bytes"]
    for key in ("device_ms", "host_ms", "cpu_ms", "whole_ms", "tflite_ms", "tflite_slow_ms"):
        assert got[key] == pytest.approx(want[key], rel=1e-12), key
    assert got["host"] == pytest.approx(want["host"], rel=1e-12)


def test_a_report_of_the_python_path_is_priced_as_the_python_path(dtpu_so):
    # the board's partitions: the estimate prices a core without the vector unit
    got = _reports(MOBILENET, {"backend": "model", "path": "lists", "invoke": "python",
                               "vector": "off"})[-1]
    got = got.board_estimate()
    want = estimate("m", MOBILENET, paths=("2.0",))["rows"][0]
    assert got["path"] == want["path"] == "2.0"
    for key in ("device_ms", "host_ms", "cpu_ms", "whole_ms"):
        assert got[key] == pytest.approx(want[key], rel=1e-12), key


def test_cpu_side_seen_by_the_delegate_prices_the_unclaimed_fully_connected(mobilenet_lists):
    side = mobilenet_lists[-1].cpu_side
    assert side["opcodes"] == {"MEAN": 1, "SOFTMAX": 1}
    # the FC (32 -> 10 classes here) stays on the CPU with ops' default: its MACs on the A9
    assert side["cpu_conv_macs"] == 32 * 10
    assert side["model_macs"] == side["placed_macs"] + side["cpu_conv_macs"]
    assert side["placed_macs"] == mobilenet_lists[-1].hw["macs"]


def test_report_on_the_jobs_path_prices_contract_1_2(dtpu_so):
    report = _reports(MOBILENET, {"backend": "model", "path": "jobs"})[-1]
    est = report.board_estimate()
    assert est["path"] == "1.2"
    c = bc.costs()
    o = est["ops"]
    assert o["starts"] == report.host["doorbells"] and o["dma_starts"] == report.host["dma_starts"]
    assert o["dma_send_bytes"] == 8 * sum(report.hw["words_in"].values()) > 0
    dma_each = (c["dma_mmio_reads"] * c["mmio_read_us"] + c["dma_mmio_writes"] * c["mmio_write_us"]
                + c["cache_op_us"])
    assert est["host"]["dma"] == pytest.approx(
        o["dma_starts"] * dma_each / 1e3 + o["dma_send_bytes"] / (c["copy_MBps"] * 1e3)
        + o["dma_recv_bytes"] / (c["uncached_read_MBps"] * 1e3))
    assert "bytes written by the host's layout steps" in est["not_counted"]
    assert "not in the estimate: bytes written by the host's layout steps" in report.table()


def test_a_backend_without_device_cycles_says_it_has_no_estimate(dtpu_so):
    report = _reports(MOBILENET, {"backend": "reference"})[-1]
    assert report.board_estimate() is None
    assert "device time and PYNQ-Z2 estimate: none" in report.table()


def test_vww_report_and_model_file_agree_on_host_terms(dtpu_so):
    """On VWW (2 partitions, its PADs folded: docs/partitions.md) host operations, copies and
    TFLite's time alone are the same, and so are the device cycles of the delegate's partitions and of
    the chains (with its 6 partitions before issue #25 they differed by 37 of 204,097):
    recorded here so that a change of either shows (LAT_POST 6 -> 9 for the post lane's timing
    split: 202,556 -> 202,640, 84 cycles more; the rotated depthwise layout as the default,
    issue 26: 202,640 -> 202,508, its stride-2 depthwise at TAP_CYCLES 1; LAT_POST 9 -> 11 for
    the post unit's input split: 202,508 -> 202,564). The report runs
    with `vector=off`: the estimate
    prices the convolution chains (dtpu.board.estimate: a build without the vector unit, the
    int16 overlay), so its MEAN cuts the graph there, while the golden model with the unit (and
    the int8 overlay) runs VWW as one partition."""
    got = _reports(VWW, {"backend": "model", "vector": "off"})[-1].board_estimate()
    want = estimate("vww", VWW)["rows"][2]
    assert got["host"] == pytest.approx(want["host"], rel=1e-12)
    assert got["tflite_ms"] == pytest.approx(want["tflite_ms"], rel=1e-12)
    assert (want["cycles"], got["cycles"]) == (202564, 202564)


def test_vww_report_and_model_file_agree_on_the_cpu_side(dtpu_so):
    """Both sides price the same CPU operators: the model-file estimate applies the delegate's
    own shape-chain fold and view rule (dtpu.shape_fold), so VWW's SHAPE -> STRIDED_SLICE ->
    PACK -> RESHAPE head, which the delegate evaluates at Prepare, is folded on both (issue 25:
    the estimate priced it as 4 CPU operators, 0.146 against 0.066 ms)."""
    got = _reports(VWW, {"backend": "model", "vector": "off"})[-1].board_estimate()
    est = estimate("vww", VWW)
    assert got["cpu_ms"] == pytest.approx(est["rows"][2]["cpu_ms"], rel=1e-12)
    assert got["cpu_side"]["opcodes"] == est["cpu_side"]["opcodes"] == {"MEAN": 1, "SOFTMAX": 1}
    assert got["cpu_side"]["folded"] == est["cpu_side"]["folded"]
    assert est["cpu_side"]["folded"]["ops"] == 4 + 4   # the 4 PADs and the shape head


def _dtpu(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "pylib"))
    return subprocess.run([sys.executable, "-m", "dtpu.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_dtpu_estimate_prints_both_builds_for_any_model():
    proc = _dtpu("estimate", str(MOBILENET), "--brief")
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| mobilenet_like")]
    assert [r.split(" | ")[1] for r in rows] == ["1.2 job by job", "2.0 command list (Python)",
                                                 "2.0 command list (C path)"]
    assert "not measured on a board" in proc.stdout and "costs (kind: source)" not in proc.stdout
    doc = json.loads(_dtpu("estimate", str(MOBILENET), "--json").stdout)
    assert [r["path"] for r in doc["results"][0]["rows"]] == ["1.2", "2.0", "c"]
    assert set(doc["costs"]) == set(bc.COSTS)


@pytest.mark.parametrize("args,message", [
    (("estimate", "no_such.tflite"), "does not exist"),
    (("estimate", str(MOBILENET), "--ops", "conv3d"), "conv3d unknown"),
])
def test_dtpu_estimate_bad_input_exits_2(args, message):
    proc = _dtpu(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_the_benchmark_uses_the_package_model():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_board_estimate as be

    assert be.COSTS is bc.COSTS and be.costs is bc.costs
