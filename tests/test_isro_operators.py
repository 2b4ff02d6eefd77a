"""Operators added for mission-size networks (issue 28), each bit-exact against TFLite 2.14."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import tflite

from dtpu.isro import compile_tflite, run, verify
from dtpu.isro.check import check_bundle
from dtpu.isro.isa import Fmt, Instruction, Op

FIXTURES = Path(__file__).resolve().parent / "isro"


def _with_output(src: Path, tensor: int, dst: Path) -> Path:
    """`src` with its one subgraph output replaced by `tensor` (the ops after it stay, unused)."""
    data = bytearray(src.read_bytes())
    sg = tflite.Model.GetRootAs(data, 0).Subgraphs(0)
    assert sg.OutputsLength() == 1
    struct.pack_into("<i", data, sg._tab.Vector(sg._tab.Offset(8)), tensor)
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("tensor", [17, 18])       # LEAKY_RELU's output, and the depthwise conv reading it
def test_int8_leaky_relu_is_bit_exact(tmp_path, tensor):
    path = _with_output(FIXTURES / "mix_s_int8.tflite", tensor, tmp_path / "leaky.tflite")
    bundle = compile_tflite(path)
    leaky = [layer for layer in bundle.layers if layer["name"] == "op2_leaky_relu"]
    assert leaky and leaky[0]["kind"] == "avgpool"
    first, last = leaky[0]["instructions"]
    assert bundle.program[last].leaky == 1 and bundle.program[last].fmt is Fmt.I8
    assert check_bundle(bundle) == []
    c, h, w = bundle.meta["input"]["shape"]
    negatives = 0
    for seed in range(3):
        x = (np.random.default_rng(seed).random((1, h, w, c)) * 6 - 3).astype(np.float32)
        result = run(bundle, x)
        checks = [ck for ck in verify.against_tflite(bundle, result, path, x) if not ck.note]
        assert checks and all(ck.exact for ck in checks), "\n".join(map(str, checks))
        conv = result.layers["op1_conv_2d"]
        negatives += int(np.sum(conv < bundle.layers[0]["output"]["zero_point"]))
    assert negatives > 100                              # the alpha branch is exercised


def test_i8_leaky_needs_the_dsp_stage():
    from dtpu.isro.machine import Machine, MachineError
    ins = Instruction(Op.AVGPOOL, fmt=Fmt.I8, leaky=1, clamp=1, src=0, dst=64, cin=1, hin=2, win=2, kh=1, kw=1,
                      sh=1, sw=1, hout=2, wout=2)
    with pytest.raises(MachineError, match="needs dsp=1"):
        Machine().execute([ins, Instruction(Op.END)], np.zeros(256, np.uint8), np.zeros(256, np.uint8))
