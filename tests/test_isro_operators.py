"""Operators added for mission-size networks (issue 28), each bit-exact against TFLite 2.14."""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import tflite

from dtpu.isro import compile_tflite, run, verify
from dtpu.isro.check import check_bundle
from dtpu.isro.isa import Fmt, Instruction, Op

FIXTURES = Path(__file__).resolve().parent / "isro"
sys.path.insert(0, str(Path(__file__).resolve().parent))          # isro_nets


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


# -- issue 28.2: operators inside the network, each against the interpreter ------------------------

def _exact(tmp_path, net, out, name, seeds=2, fmt="int8"):
    """Compile `net` (I8 from calibrated int8, or F32), run it on random inputs and compare every
    layer with the interpreter: bit-exact in I8, within float tolerance in F32."""
    rng = np.random.default_rng(0)
    calib = rng.standard_normal((6,) + net.shapes[net.input][1:]).astype(np.float32)
    path = tmp_path / f"{name}_{fmt}.tflite"
    path.write_bytes(net.int8(out, calib) if fmt == "int8" else net.float32(out))
    bundle = compile_tflite(path)
    assert check_bundle(bundle) == []
    for k in range(seeds):
        result = run(bundle, calib[k])
        checks = [ck for ck in verify.against_tflite(bundle, result, path, calib[k]) if not ck.note]
        assert checks and all(ck.ok and (ck.exact or fmt != "int8") for ck in checks), "\n".join(map(str, checks))
    return bundle


@pytest.mark.parametrize("bilinear", [False, True])
@pytest.mark.parametrize("align, half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("size", [(12, 10), (5, 7), (3, 17)])
def test_resize_is_bit_exact(tmp_path, bilinear, align, half, size):
    from isro_nets import Net
    n = Net((1, 6, 5, 3), seed=sum(size))
    y = n.resize(n.conv(n.input, 4), size, bilinear=bilinear, align=align, half=half)
    bundle = _exact(tmp_path, n, y, "resize")
    assert bundle.meta["stats"]["by_op"]["resize"] == 1


@pytest.mark.parametrize("stride, padding, k, hw", [(2, "SAME", 3, (5, 6)), (2, "VALID", 3, (4, 4)),
                                                    (1, "SAME", 3, (6, 5)), (3, "SAME", 2, (3, 4)),
                                                    (2, "SAME", 4, (4, 3)), (3, "VALID", 5, (3, 3))])
def test_transposed_convolution_is_bit_exact(tmp_path, stride, padding, k, hw):
    from isro_nets import Net
    n = Net((1,) + hw + (3,), seed=k * 10 + stride)
    y = n.tconv(n.conv(n.input, 5), 6, k=k, stride=stride, padding=padding)
    bundle = _exact(tmp_path, n, y, "tconv")
    ins = [i for i in bundle.program if i.op.name == "TCONV"]
    assert len(ins) == 1 and (ins[0].uh, ins[0].uw) == (stride, stride)
    _exact(tmp_path, n, y, "tconv", seeds=1, fmt="float32")


def test_transposed_convolution_split_over_processing_elements(tmp_path):
    from isro_nets import Net
    n = Net((1, 4, 4, 6), seed=3)
    y = n.tconv(n.input, 4, k=3, stride=2)
    calib = np.random.default_rng(1).standard_normal((2, 4, 4, 6)).astype(np.float32)
    path = tmp_path / "tconv_split.tflite"
    path.write_bytes(n.int8(y, calib))
    bundle = compile_tflite(path, pe=20)
    assert [i.op.name for i in bundle.program].count("TCONV") == 3 and bundle.program[-2].op is Op.ADD
    result = run(bundle, calib[0])
    assert all(ck.exact for ck in verify.against_tflite(bundle, result, path, calib[0]) if not ck.note)


@pytest.mark.parametrize("broadcast", [False, True])
def test_elementwise_mul_is_bit_exact(tmp_path, broadcast):
    from isro_nets import Net
    n = Net((1, 6, 6, 4), seed=5)
    a = n.conv(n.input, 8, act="none")
    b = n.mean(n.conv(n.input, 8), keep=True) if broadcast else n.conv(n.input, 8, k=1)
    y = n.mul(a, b)
    bundle = _exact(tmp_path, n, y, "mul", seeds=3)
    emul = [i for i in bundle.program if i.op.name == "EMUL"]
    assert len(emul) == 1 and emul[0].bcast == int(broadcast)


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH", "HARD_SWISH"])
def test_element_wise_functions_are_tables_exact_by_construction(tmp_path, op):
    from isro_nets import Net
    n = Net((1, 8, 8, 3), seed=7)
    y = n.conv(n.unary(op, n.conv(n.input, 6, act="none")), 4)    # inside the network, not a head
    bundle = _exact(tmp_path, n, y, op.lower(), seeds=3)
    assert bundle.meta["heads"] == [] and [i.op.name for i in bundle.program].count("LUT") == 1
    _exact(tmp_path, n, y, op.lower(), seeds=1, fmt="float32")


@pytest.mark.parametrize("k, stride, hw", [(3, 2, (7, 6)), (2, 2, (5, 5)), (3, 1, (4, 6)), (5, 3, (8, 7))])
def test_same_average_pooling_divides_by_the_taps_inside(tmp_path, k, stride, hw):
    from isro_nets import Net
    n = Net((1,) + hw + (3,), seed=k + stride)
    y = n.pool("AVERAGE_POOL_2D", n.conv(n.input, 4), k=k, stride=stride, padding="SAME")
    bundle = _exact(tmp_path, n, y, "avg", seeds=3)
    avg = [i for i in bundle.program if i.op is Op.AVGPOOL][0]
    assert (avg.at, avg.ab, avg.al, avg.ar) != (0, 0, 0, 0)
    _exact(tmp_path, n, y, "avg", seeds=1, fmt="float32")


def test_concatenation_of_three_with_borders(tmp_path):
    """Three operands, one read with a border by another consumer (a SAME convolution)."""
    from isro_nets import Net
    n = Net((1, 6, 6, 3), seed=9)
    a, b = n.conv(n.input, 4), n.conv(n.input, 2, k=1)
    c = n.conv(a, 3)
    y = n.conv(n.concat([a, b, c]), 5)
    bundle = _exact(tmp_path, n, y, "concat", seeds=2)
    cats = [i for i in bundle.program if i.op.name == "CAT"]
    assert [i.coff for i in cats] == [0, 4, 6] and {i.cout for i in cats} == {9}


def test_new_opcodes_fault_on_bad_fields():
    from dtpu.isro.isa import Func
    from dtpu.isro.machine import Machine, MachineError
    frame, filt = np.zeros(4096, np.uint8), np.zeros(4096, np.uint8)
    bad = [
        (Instruction("cat", fmt=Fmt.I8, cin=4, cout=6, coff=3, hout=2, wout=2), "channels 3\\+4 outside the output's 6"),
        (Instruction("lut", fmt=Fmt.F32, func=Func.TABLE, cin=1, hin=1, win=1), "func=table in f32"),
        (Instruction("lut", fmt=Fmt.I8, func=Func.TANH, cin=1, hin=1, win=1), "func=tanh in i8"),
        (Instruction("tconv", fmt=Fmt.I8, uh=0, cin=1, hin=1, win=1, cout=1), "upsampling 0x1"),
        (Instruction("emul", fmt=Fmt.I8, cout=1, hout=1, wout=1), "EMUL rescales its operands"),
        (Instruction(Op.AVGPOOL, fmt=Fmt.F32, cin=1, hin=3, win=3, kh=1, kw=1, sh=1, sw=1, hout=3, wout=3, at=1),
         "window lies wholly in the border"),
    ]
    for ins, message in bad:
        with pytest.raises(MachineError, match=message):
            Machine().execute([ins, Instruction(Op.END)], frame.copy(), filt.copy())


def test_mix_s_int8_compiles_whole_and_is_bit_exact():
    """Its int8 ADD of a constant bias after the dilated convolution (refused before issue 28.2)
    is a per-channel LUT table now."""
    path = FIXTURES / "mix_s_int8.tflite"
    bundle = compile_tflite(path)
    assert bundle.meta["stats"]["by_op"]["lut"] == 1
    c, h, w = bundle.meta["input"]["shape"]
    for seed in range(2):
        x = (np.random.default_rng(seed).random((1, h, w, c)) * 6 - 3).astype(np.float32)
        result = run(bundle, x)
        checks = [ck for ck in verify.against_tflite(bundle, result, path, x) if not ck.note]
        assert len(checks) >= 8 and all(ck.exact for ck in checks), "\n".join(map(str, checks))
