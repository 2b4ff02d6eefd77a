"""backend=isro against the TFLite interpreter on the model zoo, node by node and through the delegate.

Each CONV_2D / DEPTHWISE_CONV_2D of the zoo (tests/models/zoo) is handed to the backend as the
delegate would hand it (a ConvSpec plus constant weights) and compared with the interpreter's
own output tensor for that node (experimental_preserve_all_tensors): bit for bit for int8, within
float32 summation-order differences for float32. The rounding table the I8 DSP stage uses is
checked here too, by showing the other roundings really do disagree with TFLite on the zoo.
"""
from __future__ import annotations

import numpy as np
import pytest

from dtpu import backends, reference
from dtpu.backends.base import Probes
from dtpu.backends.isro import IsroBackend
from dtpu.isro import isa, tflite_model
from dtpu.isro.ir import TFLITE_ROUNDING
from dtpu.isro.isa import Rounding
from dtpu.isro.machine import requantize, wrap_int32
from dtpu.spec import DataMode, OpKind

zoo = pytest.importorskip("tests.models.zoo", reason="model zoo (tests/models) not present")
ENTRIES = [e for e in zoo.load_index() if e["kind"] in ("conv2d", "depthwise_conv2d", "net")] \
    if zoo.INDEX_PATH.exists() else []
ON_CHIP = ("int8", "int8_per_tensor", "int8_float_io", "float32")
HOST = ("uint8", "uint8_fakequant", "int16x8")


def _nodes(entry, seeds=(0, 1)):
    """(spec, filters, bias, node input, interpreter's node output) per conv node and seed."""
    from dtpu.tflite import Interpreter
    path = zoo.model_path(entry)
    model = tflite_model.read(path)
    specs = [s for s in tflite_model.node_specs(model) if s[1].kind is not OpKind.FULLY_CONNECTED]
    it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    for seed in seeds:
        for d, v in zip(it.get_input_details(), zoo.make_inputs(entry, seed=seed)):
            it.set_tensor(d["index"], v)
        it.invoke()
        for op, spec, w, b in specs:
            yield spec, w, b, it.get_tensor(op.inputs[0]), it.get_tensor(op.outputs[0])


def _check(backend, entry):
    n = 0
    for spec, w, b, x, want in _nodes(entry):
        handle = backend.prepare(spec, w, b)
        got, hw = backend.invoke(handle, x, Probes())
        assert got.dtype == want.dtype and got.shape == want.shape
        if spec.mode.is_quantized:
            bad = int(np.sum(got != want))
            assert bad == 0, f"{entry['name']} {spec.name}: {bad} of {want.size} values differ"
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())))
        if entry["mode"] in ON_CHIP:
            assert handle.bundle is not None
            # one block per cycle: every output once per partial (a convolution's `lanes` output
            # channels at once) and once more in the ADD
            body = handle.bundle.program[:-1]
            positions = int(np.prod(spec.output_shape)) // body[0].cout
            steps = sum(-(-ins.cout // isa.lanes(ins)) for ins in body)
            assert hw.macs == spec.macs and hw.cycles == steps * positions
        n += 1
    return n


@pytest.mark.skipif(not ENTRIES, reason="model zoo not present")
@pytest.mark.parametrize("mode", ON_CHIP)
def test_zoo_nodes_on_the_chip_match_tflite(mode):
    backend = IsroBackend()
    checked = sum(_check(backend, e) for e in ENTRIES if e["mode"] == mode)
    assert checked > 20


@pytest.mark.skipif(not ENTRIES, reason="model zoo not present")
def test_zoo_int8_nodes_split_for_few_processing_elements_still_match():
    backend = IsroBackend({"pe": 8})
    entries = [e for e in ENTRIES if e["mode"] == "int8"][:12]
    assert sum(_check(backend, e) for e in entries) > 10


@pytest.mark.skipif(not ENTRIES, reason="model zoo not present")
@pytest.mark.parametrize("mode", HOST)
def test_modes_without_an_isro_number_format_run_on_the_host(mode):
    backend = IsroBackend()
    entry = next(e for e in ENTRIES if e["mode"] == mode)
    for spec, w, b, x, _ in _nodes(entry, seeds=(0,)):
        handle = backend.prepare(spec, w, b)
        assert handle.bundle is None
        got, hw = backend.invoke(handle, x, Probes())
        np.testing.assert_array_equal(got, reference.run(spec, x, w, b))
        assert hw.macs == spec.macs and hw.cycles is None


@pytest.mark.skipif(not ENTRIES, reason="model zoo not present")
def test_the_rounding_table_is_the_one_tflite_uses():
    """Every int8 CONV_2D/DEPTHWISE output of the zoo: the table's rounding matches TFLite on all,
    and each alternative rounding misses some (so the table is not vacuous)."""
    misses = {kind: {r: 0 for r in Rounding} for kind in ("CONV_2D", "DEPTHWISE_CONV_2D")}
    for entry in ENTRIES:
        if entry["mode"] not in ("int8", "int8_per_tensor", "int8_float_io"):
            continue
        for spec, w, b, x, want in _nodes(entry, seeds=(0, 1, 2)):
            acc = reference.accumulate(spec, x, w) + (0 if b is None else b)
            m, s = reference.output_multipliers(spec)
            lo, hi = reference.activation_range(spec)
            for r in Rounding:
                y = np.clip(requantize(wrap_int32(acc), m, s, r) + spec.output_q.zero_point[0], lo, hi)
                misses[spec.kind.name][r] += int(np.sum(y != want))
    for kind, counts in misses.items():
        chosen = TFLITE_ROUNDING[kind]
        assert counts[chosen] == 0, (kind, counts)
        assert all(n > 0 for r, n in counts.items() if r is not chosen), (kind, counts)


def test_registered_and_options_checked():
    assert backends.get("isro") is IsroBackend
    assert IsroBackend({"pe": "16"}).pe == 16 and IsroBackend({"pe": "unlimited"}).pe is None
    with pytest.raises(ValueError, match=r"isro backend: pe='-3'; expected a positive integer or 'unlimited'"):
        IsroBackend({"pe": "-3"})


def test_batches_run_image_by_image_and_counters_add_up():
    from dtpu.spec import ConvSpec, Padding, Quant
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (3, 6, 5, 2), (1, 3, 3, 4), padding=Padding.SAME,
                    depth_multiplier=2, input_q=Quant((0.02,), (3,)), filter_q=Quant((0.01, 0.02, 0.03, 0.04), (0,) * 4),
                    output_q=Quant((0.05,), (-2,)))
    r = np.random.default_rng(0)
    w = r.integers(-127, 128, spec.filter_shape).astype(np.int8)
    b = r.integers(-100, 100, 4).astype(np.int32)
    x = r.integers(-128, 128, spec.input_shape).astype(np.int8)
    backend = IsroBackend({"pe": 4, "clock_mhz": 50})
    probes = Probes()
    got, hw = backend.invoke(backend.prepare(spec, w, b), x, probes)
    acc = reference.accumulate(spec, x, w) + b
    m, s = reference.output_multipliers(spec)
    want = np.clip(requantize(wrap_int32(acc), m, s, Rounding.DOUBLE) + (-2), -128, 127)
    np.testing.assert_array_equal(got, want)
    # 9 taps > 4 PEs: one kernel row per partial, 3 partials + ADD per image, 6x5x4 outputs each
    assert hw.macs == spec.macs and hw.cycles == 3 * 4 * (6 * 5 * 4)
    assert hw.latency_us == hw.cycles / 50 and 0 < hw.utilization <= 1
    assert set(probes.seconds) == {"pack", "compute", "unpack"}
    with pytest.raises(ValueError, match=r"input shape \(1, 6, 5, 2\) does not match the node's \(3, 6, 5, 2\)"):
        backend.invoke(backend.prepare(spec, w, b), x[:1], Probes())


@pytest.mark.skipif(not ENTRIES, reason="model zoo not present")
def test_through_the_delegate_int8_and_float_models_match_the_cpu():
    dtpu = pytest.importorskip("dtpu")
    try:
        dtpu.delegate_path()
    except Exception as exc:                       # the C glue needs a compiler; the nodes tests above do not
        pytest.skip(f"delegate library unavailable: {exc}")
    from dtpu.tflite import Interpreter
    for entry in [e for e in ENTRIES if e["mode"] in ("int8", "int8_float_io", "float32")]:
        path = zoo.model_path(entry)
        cpu = Interpreter(model_path=str(path))
        ours = dtpu.make_interpreter(path, {"backend": "isro"})
        outs = []
        for it in (cpu, ours):
            it.allocate_tensors()
            for d, v in zip(it.get_input_details(), zoo.make_inputs(entry, seed=3)):
                it.set_tensor(d["index"], v)
            it.invoke()
            outs.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
        for want, got in zip(*outs):
            if want.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())),
                                           err_msg=entry["name"])
            else:
                np.testing.assert_array_equal(got, want, err_msg=entry["name"])
