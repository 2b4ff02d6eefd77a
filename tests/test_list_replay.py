"""A command list run again replays its data path from operations prepared once
(dtpu.hw.replay): a property of the zoo's models through the delegate, seed after seed, against
the same lists taken step by step (``Executor.replay`` False, the executor's own steps), and
against TFLite's CPU kernels: the same output bytes, the same cycles and words per node."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dtpu.hw.executor import Executor
from tests.delegate_util import assert_matches, builtin_cpu_kernels_only, run

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "models" / "zoo"
INDEX = json.loads((ZOO / "index.json").read_text())
#: the zoo's nets (every operator kind the lists carry: convolutions, K-split sums and POST,
#: vector-unit nodes) and the MLPerf Tiny autoencoder, in the default set
NETS = [e["name"] for e in INDEX if e["kind"] in ("net", "dense")]
#: the ImageNet-scale nets (a minute or more each on the golden model): make test-all
IMAGENET = [e["name"] for e in INDEX if e["kind"] == "imagenet"]
#: single-operator models of every mode the delegate claims, a seeded sample by default
SINGLE = sorted(e["name"] for e in INDEX if e["kind"] in ("conv2d", "depthwise_conv2d")
                and e["mode"] not in ("float16_weights", "dynamic_range"))
SAMPLE = [SINGLE[i] for i in sorted(np.random.default_rng(23).choice(len(SINGLE), 8, replace=False))]


def _inputs(interpreter, seed: int) -> list[np.ndarray]:
    """Full-range integer inputs (float inputs in [-1, 1)), seeded."""
    rng = np.random.default_rng(seed)
    xs = []
    for d in interpreter.get_input_details():
        if np.issubdtype(d["dtype"], np.integer):
            info = np.iinfo(d["dtype"])
            xs.append(rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"]))
        else:
            xs.append(rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]))
    return xs


def _hw(report) -> list:
    """The report's cycles and words, the invoke's and each node's."""
    d = report.to_dict()
    return [d["hw"]] + [(n["node"], n["hw"]) for n in d["nodes"]]


def _check(name: str, invokes: int = 3) -> None:
    import dtpu
    from dtpu import tflite

    path = ZOO / f"{name}.tflite"
    assert path.exists(), f"{path} missing: the zoo is committed"
    cpu = tflite.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    replayed = dtpu.make_interpreter(path, {"backend": "model"})
    stepped = dtpu.make_interpreter(path, {"backend": "model"})
    for it in (replayed, stepped):
        it.allocate_tensors()
    replays = 0
    for seed in range(invokes):
        xs = _inputs(cpu, seed)
        got = run(replayed, xs)
        report = dtpu.last_report()
        replays += not report.first
        Executor.replay = False
        try:
            want = run(stepped, xs)
        finally:
            Executor.replay = True
        assert _hw(report) == _hw(dtpu.last_report()), (name, seed)
        for k, (g, w, c) in enumerate(zip(got, want, run(cpu, xs))):
            assert g.dtype == w.dtype and np.array_equal(g, w), (name, seed, k)
            assert_matches(g, c, f"{name} seed {seed} output {k}")
    assert replays == invokes - 1, "every invoke after the first replays its lists"


@builtin_cpu_kernels_only()
@pytest.mark.parametrize("name", NETS)
def test_replayed_lists_equal_their_steps_on_the_zoo_nets(name):
    _check(name)


@builtin_cpu_kernels_only()
def test_replayed_lists_equal_their_steps_on_single_operators():
    for name in SAMPLE:
        _check(name, invokes=2)


@pytest.mark.slow
@builtin_cpu_kernels_only()
@pytest.mark.parametrize("name", [n for n in SINGLE if n not in SAMPLE])
def test_replayed_lists_equal_their_steps_on_every_single_operator(name):
    _check(name, invokes=2)


@pytest.mark.slow
@builtin_cpu_kernels_only()
@pytest.mark.parametrize("name", IMAGENET)
def test_replayed_lists_equal_their_steps_on_the_imagenet_nets(name):
    _check(name, invokes=2)


def test_a_stale_ddr_layout_or_an_injected_fault_leaves_the_replay():
    """The replay's DDR views belong to the buffers they were taken from: an alloc or free
    changes the pool's layout; an injected fault, or a memory whose reads are checked (the
    emulated board's HP port), sends the run through the executor's steps."""
    from dtpu.board.emulate.board import HpPort
    from dtpu.hw.ddr import Ddr, DdrPool
    from dtpu.hw.replay import replayable

    pool = DdrPool()
    before = pool.layout
    buf = pool.alloc(100)
    assert pool.layout != before
    mid = pool.layout
    buf.free()
    assert pool.layout != mid
    assert replayable(pool)
    pool.slverr.append((0, 8))
    assert not replayable(pool)
    ddr = Ddr(0x1000, 64)
    assert replayable(ddr)
    ddr.hang.append((0x1000, 0x1008))
    assert not replayable(ddr)
    assert not replayable(HpPort(None))


def test_the_collector_pauses_only_while_a_timeline_is_computed():
    """Executor.run turns Python's cyclic collector off while it computes a list's timeline and
    restores the caller's setting afterwards, also when the block raises."""
    import gc

    from dtpu.hw.executor import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with collector_paused():
            raise ValueError("a list fault")
    assert gc.isenabled()
    with collector_paused(False):
        assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "a caller's disabled collector stays disabled"
    finally:
        gc.enable()
