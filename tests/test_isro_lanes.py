"""A convolution's `lanes` (several output channels per cycle) and the split that uses them.

The split planner is judged against cycle counts worked out by hand for VGG's layer shapes
(docs/isro_isa.md §6), the machine against the same convolution run with one lane, and the
checker against the machine on the words that break the rule.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import compile_model, isa
from dtpu.isro.check import check_bundle, check_program, first_fault
from dtpu.isro.ir import Layer
from dtpu.isro.isa import Fmt, Instruction, Op, assemble, disassemble
from dtpu.isro.layout import conv_cycles_per_output, split_blocks
from dtpu.isro.machine import Machine, MachineError

ZOO = Path(__file__).resolve().parent / "models" / "zoo"


def _conv(cin: int, cout: int, k: int = 3) -> Layer:
    return Layer(name="c", kind="conv", in_shape=(cin, 16, 16), out_shape=(cout, 14, 14), kernel=(k, k),
                 weights=np.zeros((cout, cin, k, k), np.int8))


@pytest.mark.parametrize("cin, blocks, cycles", [
    (3, 1, 8),            # 27 MACs: 9 lanes, 64 channels in 8 steps
    (64, 4, 144),         # 2x2 taps x 64 (256), 2 x 2 taps (128, 2 lanes), 1 tap (64, 4 lanes): 2.25 x 64
    (128, 5, 288),        # 2x2 taps x 64 twice, 2 taps x 128 twice, 1 tap x 128 at 2 lanes: 4.5 x 64
    (256, 9, 9 * 64),     # one tap of 256 channels per block: the ideal
    (512, 18, 18 * 64),
])
def test_vgg_layers_split_into_blocks_that_fill_the_array(cin, blocks, cycles):
    got = split_blocks(_conv(cin, 64), 256)
    assert len(got) == blocks and conv_cycles_per_output(got, 64) == cycles
    assert all(b["cn"] * b["rn"] * b["sn"] * b["lanes"] <= 256 for b in got)
    # every (channel, tap) pair is covered by exactly one block
    seen = np.zeros((cin, 3, 3), int)
    for b in got:
        seen[b["c0"]:b["c0"] + b["cn"], b["r0"]:b["r0"] + b["rn"], b["s0"]:b["s0"] + b["sn"]] += 1
    assert (seen == 1).all()


def test_ties_keep_the_whole_kernel_and_lanes_never_exceed_the_channels():
    got = split_blocks(_conv(56, 3), 256)        # 504 MACs: two blocks of 28 channels, as always
    assert [(b["c0"], b["cn"], b["rn"], b["sn"]) for b in got] == [(0, 28, 3, 3), (28, 28, 3, 3)]
    assert split_blocks(_conv(3, 2), 256)[0]["lanes"] == 2
    assert split_blocks(_conv(3, 64), None)[0]["lanes"] == 1


def _memories(rng, cin=3, cout=7):
    x = rng.integers(-128, 128, (cin, 6, 6)).astype(np.int8)
    w = rng.integers(-127, 128, (cout, cin, 3, 3)).astype(np.int8)
    frame, filt = np.full(4096, 0xFF, np.uint8), np.full(4096, 0xFF, np.uint8)
    frame[:x.size] = x.reshape(-1).view(np.uint8)
    filt[:w.size] = w.reshape(-1).view(np.uint8)
    return frame, filt


def _word(lanes: int, **over) -> Instruction:
    return Instruction(Op.CONV, **{**dict(fmt=Fmt.I8, src=0, dst=1024, wgt=0, prm=0, cin=3, hin=6, win=6, cout=7,
                                          kh=3, kw=3, hout=4, wout=4, cn=3, rn=3, sn=3, partial=1, lanes=lanes),
                                   **over})


@pytest.mark.parametrize("lanes", [2, 3, 7])
def test_lanes_change_the_cycles_not_the_values(lanes):
    runs = []
    for n in (1, lanes):
        frame, filt = _memories(np.random.default_rng(lanes))
        c = Machine(pe=27 * lanes).execute([_word(n), Instruction(Op.END)], frame, filt)
        runs.append((filt[1024:1024 + 7 * 16 * 4].copy(), c.cycles, c.macs))
    (one, cyc1, macs1), (many, cyc, macs) = runs
    np.testing.assert_array_equal(one, many)
    assert macs == macs1 == 7 * 16 * 27
    assert cyc1 == 7 * 16 and cyc == -(-7 // lanes) * 16


@pytest.mark.parametrize("lanes, pe, message", [
    (3, 80, r"a block of 27 inputs x 3 lanes needs 81 processing elements, the machine has 80"),
    (0, 256, r"lanes=0; a block computes 1 to cout=7 output channels per cycle"),
    (8, 256, r"lanes=8; a block computes 1 to cout=7"),
])
def test_machine_and_checker_refuse_lanes_that_do_not_fit(lanes, pe, message):
    program = [_word(lanes), Instruction(Op.END)]
    frame, filt = _memories(np.random.default_rng(0))
    with pytest.raises(MachineError, match=message):
        Machine(pe=pe).execute(program, frame, filt)
    findings = check_program(program, frame_bytes=4096, filter_bytes=4096, pe=pe, frame_defined=(0, 108),
                             filter_image=bytes(filt[:7 * 27]))
    assert first_fault(findings) == 0


def test_lanes_round_trip_through_the_assembler():
    program = [_word(1), _word(3), Instruction(Op.END)]
    text = disassemble(program)
    assert "lanes=3" in text and text.count("lanes=") == 1     # one lane is the default: omitted
    assert assemble(text) == program
    assert Instruction(Op.CONV, cout=7).lanes == 1


def test_fewest_partials_keeps_the_channel_ranges_with_lanes_on_the_last():
    got = split_blocks(_conv(64, 64), 256, fewest_partials=True)
    assert [(b["c0"], b["cn"], b["rn"], b["sn"], b["lanes"]) for b in got] == \
        [(0, 28, 3, 3, 1), (28, 28, 3, 3, 1), (56, 8, 3, 3, 3)]
    assert conv_cycles_per_output(got, 64) == 64 + 64 + 22


@pytest.mark.skipif(not (ZOO / "resnet18_half_224__int8.tflite").is_file(), reason="model zoo not present")
def test_a_network_that_fits_on_chip_stays_there_with_fewer_partials():
    """ResNet-18-half 224's partial sums fit filter memory only as the channel-range split has
    them; the compiler falls back to it (lanes on the last range) before staging."""
    bundle = compile_model(ZOO / "resnet18_half_224__int8.tflite")
    assert not bundle.meta.get("staged") and check_bundle(bundle) == []
    assert max(isa.lanes(ins) for ins in bundle.program) > 1
