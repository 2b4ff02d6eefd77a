"""backend=model end to end: the delegate runs every claimed node through lower -> pack -> golden
model -> unpack and must equal TFLite's CPU kernels on the whole zoo (bit for bit on integer
models, within 1e-5 relative on float32), and report the hardware counters."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.backends import get
from dtpu.backends.base import Probes
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from tests.delegate_util import (CLAIMED_MODES, assert_matches, dtpu_so, run, tfl,  # noqa: F401
                                 zoo_entries)

ZOO = [e for e in zoo_entries() if e["mode"] in CLAIMED_MODES]


@pytest.mark.skipif(not ZOO, reason="model zoo (tests/models/zoo) not present")
@pytest.mark.parametrize("entry", ZOO, ids=[e["name"] for e in ZOO])
def test_zoo_model_bit_exact(entry, dtpu_so, tfl):
    import dtpu
    from tests.models import zoo

    path = zoo.model_path(entry)
    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, {"backend": "model", "ops": "conv2d,depthwise_conv2d,fully_connected"})
    ours.allocate_tensors()
    for seed in range(2):
        inputs = zoo.make_inputs(entry, seed=seed)
        for got, want in zip(run(ours, inputs), run(cpu, inputs)):
            assert_matches(got, want, f"{entry['name']} seed {seed}")
    report = dtpu.last_report()
    assert report.nodes, "nothing ran on the DTPU model"
    for node in report.to_dict()["nodes"]:
        hw = node["hw"]
        assert hw["cycles"] > 0 and hw["stall_cycles"] == 0 and hw["macs"] > 0
        assert 0 < hw["utilization"] <= 1
        assert hw["words_in"]["act"] > 0 and hw["words_out"]["res"] > 0
        assert hw["latency_us"] == pytest.approx(hw["cycles"] / 100.0)
    run_hw = report.to_dict()["hw"]
    for name in ("words_in", "words_out"):
        streams = {s for n in report.nodes for s in n.hw[name]}
        assert run_hw[name] == {s: sum(n.hw[name].get(s, 0) for n in report.nodes) for s in streams}


def _float_spec():
    return ConvSpec(OpKind.CONV_2D, DataMode.FLOAT32, (1, 6, 6, 16), (24, 3, 3, 16), padding=Padding.SAME)


def test_backend_interface_counters_and_residency():
    rng = np.random.default_rng(0)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 6, 6, 16), (24, 1, 1, 16),
                    input_q=Quant((0.02,), (-3,)), filter_q=Quant(tuple(rng.uniform(0.005, 0.02, 24)), (0,) * 24),
                    output_q=Quant((0.1,), (5,)))
    x = rng.integers(-128, 128, spec.input_shape).astype(np.int8)
    f = rng.integers(-127, 128, spec.filter_shape).astype(np.int8)
    b = rng.integers(-1000, 1000, 24).astype(np.int32)
    backend = get("model")({"mxu": (8, 8), "clock_mhz": 200.0})
    handle = backend.prepare(spec, f, b)
    assert handle.lowered.resident
    probes = Probes()
    y, hw = backend.invoke(handle, x, probes)
    from dtpu import reference
    assert np.array_equal(y, reference.run(spec, x, f, b))
    # 36 pixels x 3 tiles of 2 words: stationary weights are not re-sent
    assert hw.words_in == {"wgt": 0, "act": 36 * 2} and hw.words_out == {"res": 36 * 3}
    assert hw.macs == spec.macs and hw.utilization == pytest.approx(spec.macs / (hw.cycles * 64))
    assert hw.latency_us == pytest.approx(hw.cycles / 200.0)
    assert {"pack", "compute", "unpack"} <= set(probes.seconds)
    backend.release(handle)
    assert backend.resident_weight_words == 0


def test_backend_pages_weights_that_do_not_fit():
    rng = np.random.default_rng(1)
    spec = ConvSpec(OpKind.FULLY_CONNECTED, DataMode.INT8, (1, 1, 1, 512), (1000, 512),
                    input_q=Quant((0.02,), (1,)), filter_q=Quant((0.01,), (0,)), output_q=Quant((0.3,), (0,)))
    x = rng.integers(-128, 128, spec.input_shape).astype(np.int8)
    f = rng.integers(-127, 128, spec.filter_shape).astype(np.int8)
    b = rng.integers(-1000, 1000, 1000).astype(np.int32)
    backend = get("model")({})
    big = backend.prepare(spec, f, b)  # 64000 words > 32768: paged through the scratch region
    assert not big.lowered.resident
    y, hw = backend.invoke(big, x, Probes())
    from dtpu import reference
    assert np.array_equal(y.reshape(-1), reference.run(spec, x, f, b).reshape(-1))
    assert hw.words_in["wgt"] >= 64000  # weight words streamed at every invoke, and counted
    assert hw.utilization < 0.125 + 1e-9  # one weight word feeds at most 8 MACs


def test_bf16_option_on_float_nodes():
    rng = np.random.default_rng(2)
    spec = _float_spec()
    x = rng.standard_normal(spec.input_shape).astype(np.float32)
    f = (rng.standard_normal(spec.filter_shape) * 0.3).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    from dtpu import reference
    exact = reference.run(spec, x, f, b)
    mag = reference.accumulate(spec, np.abs(x), np.abs(f))
    ys = {}
    for prec in ("auto", "bf16"):
        backend = get("model")({"precision": prec})
        y, hw = backend.invoke(backend.prepare(spec, f, b), x, Probes())
        ys[prec] = y
        assert hw.words_in["act"] == 36 * (-(-144 // (2 if prec == "auto" else 4)))
    err32 = np.abs(ys["auto"] - exact) / mag
    err16 = np.abs(ys["bf16"] - exact) / mag
    assert err32.max() < 2.0**-18 and err16.max() < 2.0**-7 and err16.max() > err32.max()


def test_bad_mxu_option_names_the_accepted_values():
    with pytest.raises(ValueError, match="ROWS=8"):
        get("model")({"mxu": (4, 8)})
