"""benchmarks/bench_board_estimate.py: its cost table is complete and sourced, and one row's
arithmetic is right on a tiny model (counts from the golden model; nothing is timed here)."""
from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_board_estimate as be  # noqa: E402

TINY = ROOT / "tests/models/zoo/conv_i12x12x7_o5_k4x4_s2x1_same_relu6__int8.tflite"
KINDS = {"cited", "derived", "measured", "assumption"}


def test_every_cost_has_a_value_a_unit_a_kind_and_a_source():
    assert be.COSTS, "empty cost table"
    for name, entry in be.COSTS.items():
        assert set(entry) == {"value", "unit", "kind", "source"}, name
        assert isinstance(entry["value"], (int, float)) and entry["value"] > 0, name
        assert entry["unit"].strip(), name
        assert entry["kind"] in KINDS, (name, entry["kind"])
        assert len(entry["source"]) > 40, f"{name}: a source says where the figure comes from"
        if entry["kind"] == "cited":     # a cited figure names where it was published
            assert "http" in entry["source"] or "docs/" in entry["source"], name


def test_costs_apply_overrides_and_refuse_unknown_names():
    c = be.costs({"mmio_read_us": 1.5})
    assert c["mmio_read_us"] == 1.5 and c["mmio_write_us"] == be.COSTS["mmio_write_us"]["value"]
    assert set(c) == set(be.COSTS)
    with pytest.raises(KeyError, match="no_such_cost"):
        be.costs({"no_such_cost": 1})


@pytest.fixture(scope="module")
def tiny():
    # round, distinct numbers so that a wrong term shows
    c = {k: float(i + 2) for i, k in enumerate(sorted(be.COSTS))}
    c["fabric_mhz"] = 100.0
    return be.estimate("tiny", TINY, c), c


def test_tiny_model_counts_are_those_of_the_two_paths(tiny):
    est, _ = tiny
    old, new, cpath = (r["ops"] for r in est["rows"])
    assert cpath is new                     # the C path runs the same list as Python does
    assert new["nodes"] == 1
    assert est["partitions"] == 1 and est["nodes"] == 1 and est["bit_exact"]
    assert old["starts"] >= 1 and old["dma_starts"] >= 2
    assert old["dma_send_bytes"] > 0 and old["dma_recv_bytes"] > 0
    assert new["doorbells"] == 1 and new["mmio_reads"] == 5 and new["mmio_writes"] == 3
    assert new["dma_starts"] == 0 and new["transforms"] == 0
    # the partition's input (1x12x12x7) and output (1x6x12x5) int8 tensors, one copy each
    assert new["copy_in_bytes"] == 12 * 12 * 7 and new["copy_out_bytes"] == 6 * 12 * 5


def test_one_row_arithmetic(tiny):
    est, c = tiny
    side = est["cpu_side"]
    old, new, cpath = est["rows"]
    o = old["ops"]
    # 1.2, term by term
    dma_each = c["dma_mmio_reads"] * c["mmio_read_us"] + c["dma_mmio_writes"] * c["mmio_write_us"] \
        + c["cache_op_us"]
    host = (o["mmio_reads"] * c["mmio_read_us"] + o["mmio_writes"] * c["mmio_write_us"]
            + o["starts"] * c["poll_reads_per_start"] * c["mmio_read_us"]
            + o["dma_starts"] * dma_each + o["transforms"] * c["numpy_call_us"]) / 1000 \
        + o["dma_send_bytes"] / (c["copy_MBps"] * 1000) \
        + o["dma_recv_bytes"] / (c["uncached_read_MBps"] * 1000) \
        + o["transform_bytes"] / (c["transform_MBps"] * 1000)
    assert old["host_ms"] == pytest.approx(host)
    assert old["device_ms"] == pytest.approx(old["cycles"] / 100e3)
    cpu = side["ops"] * c["cpu_op_us"] / 1000 + side["bytes"] / (c["cpu_op_MBps"] * 1000) \
        + 1 * c["py_partition_here_us"] * c["python_a9_factor"] / 1000
    assert side["cpu_conv_macs"] == 0
    assert old["cpu_ms"] == pytest.approx(cpu)
    assert old["whole_ms"] == pytest.approx(old["device_ms"] + host + cpu)
    tfl = side["model_macs"] / (c["tflite_a9_gmacs"] * 1e6) + side["ops"] * c["cpu_op_us"] / 1000 \
        + side["bytes"] / (c["cpu_op_MBps"] * 1000)
    assert old["tflite_ms"] == pytest.approx(tfl)
    assert old["speedup"] == pytest.approx(tfl / old["whole_ms"])
    slow = tfl + side["model_macs"] / (c["a9_measured_gmacs"] * 1e6) \
        - side["model_macs"] / (c["tflite_a9_gmacs"] * 1e6)
    assert old["tflite_slow_ms"] == pytest.approx(slow)
    assert old["speedup_slow"] == pytest.approx(slow / old["whole_ms"])
    # 2.0
    n = new["ops"]
    moved = n["copy_in_bytes"] + n["copy_out_bytes"]       # through the cacheable list buffer
    host20 = (5 * c["mmio_read_us"] + 3 * c["mmio_write_us"] + c["irq_wait_us"]
              + 2 * c["cache_op_us"]) / 1000 \
        + moved / (c["copy_MBps"] * 1000) + moved / (c["cache_maint_MBps"] * 1000)
    assert new["host_ms"] == pytest.approx(host20)
    assert new["whole_ms"] == pytest.approx(new["cycles"] / 100e3 + host20 + cpu)
    assert new["host"]["total"] == pytest.approx(sum(v for k, v in new["host"].items() if k != "total"))
    # the C path: registers from C, one nap of the run's time (overshooting by the timer
    # slack) and its clock read, a sync call per tensor, the code and its clock reads, the
    # fold per node of the reports read (none with report=none)
    device = cpath["cycles"] / 100e3
    host_c = (5 * c["c_mmio_read_us"] + 3 * c["c_mmio_write_us"]
              + 2 * c["c_sync_call_us"] + c["timer_slack_us"] + c["c_clock_us"]
              + c["c_run_us"] + 5 * c["c_clock_us"]) / 1000 \
        + moved / (c["copy_MBps"] * 1000) + moved / (c["cache_maint_MBps"] * 1000)
    assert cpath["host_ms"] == pytest.approx(host_c)
    cpu_c = cpu - c["py_partition_here_us"] * c["python_a9_factor"] / 1000 \
        + c["c_delegate_call_us"] / 1000
    assert cpath["whole_ms"] == pytest.approx(device + host_c + cpu_c)


def test_json_output_carries_the_sources():
    out = io.StringIO()
    with redirect_stdout(out):
        assert be.main(["--only", "resnet", "--json"]) == 0
    doc = json.loads(out.getvalue())
    assert set(doc["costs"]) == set(be.COSTS)
    assert all(v["source"] for v in doc["costs"].values())
    (res,) = doc["results"]
    assert [r["path"] for r in res["rows"]] == ["1.2", "2.0", "c"]
    assert res["rows"][1]["ops"]["doorbells"] == res["partitions"]
