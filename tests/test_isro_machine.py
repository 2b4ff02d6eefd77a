"""The machine model against hand-written programs and loop-level definitions of each instruction.

Memories are laid out by hand here, so these tests pin the ISA semantics independently of the
compiler: a compiler bug cannot hide a machine bug or the other way round.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtpu.isro.isa import Fill, Fmt, Instruction, Op, Rounding
from dtpu.isro.machine import Machine, MachineError, requantize
from dtpu.reference import quantize as rq


def put(mem: np.ndarray, addr: int, arr) -> None:
    b = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    mem[addr:addr + b.size] = b


def get(mem: np.ndarray, addr: int, dtype, shape) -> np.ndarray:
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    return mem[addr:addr + n * dt.itemsize].view(dt).reshape(shape)


def memories(frame=4096, filt=4096):
    return np.full(frame, 0xFF, np.uint8), np.full(filt, 0xFF, np.uint8)


# -- the I8 DSP multiplier ---------------------------------------------------------------------

def _wrap(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def _double_up(x: int, m: int, s: int) -> int:
    """Definition with Python integers: high-mul rounding half up, then shift rounding half up."""
    left, right = max(s, 0), max(-s, 0)
    high = (_wrap(x << left) * m + (1 << 30)) >> 31
    return (high + (1 << (right - 1))) >> right if right else high


ints32 = st.integers(-(1 << 31), (1 << 31) - 1)
mults = st.one_of(st.integers(1 << 30, (1 << 31) - 1), st.just(0))
shifts = st.integers(-31, 30)


@given(st.lists(ints32, min_size=1, max_size=8), mults, shifts)
@settings(max_examples=400, deadline=None)
def test_requantize_matches_tflite_primitives(xs, m, s):
    x = np.array(xs, np.int64)
    for rounding, variant in ((Rounding.DOUBLE, "double"), (Rounding.SINGLE, "single")):
        want = rq.multiply_by_quantized_multiplier(x, m, s, variant=variant)
        np.testing.assert_array_equal(requantize(x, m, s, rounding), want)
    np.testing.assert_array_equal(requantize(x, m, s, Rounding.DOUBLE_UP), [_double_up(v, m, s) for v in xs])


def test_the_three_roundings_on_ties_and_double_rounding():
    m, s = 1 << 30, -1                              # multiply by 1/4
    x = np.array([2, -2, 6, -6, 5, -5])             # 0.5, -0.5, 1.5, -1.5, 1.25, -1.25
    # the last step rounds ties away from zero; 1.25 is first rounded to 1.5, then to 2
    assert requantize(x, m, s, Rounding.DOUBLE).tolist() == [1, -1, 2, -2, 2, -1]
    assert requantize(x, m, s, Rounding.SINGLE).tolist() == [1, 0, 2, -1, 1, -1]       # ties up, once
    assert requantize(x, m, s, Rounding.DOUBLE_UP).tolist() == [1, 0, 2, -1, 2, -1]    # ties up, twice
    with pytest.raises(MachineError, match=r"shift 31\.\.31 outside \[-31, 30\]"):
        requantize(x, m, 31, Rounding.SINGLE)


# -- instructions against loop definitions ------------------------------------------------------

def _conv_loops(x, w, stride, dilation, zp=0):
    cout, cin, kh, kw = w.shape
    _, h, wd = x.shape
    oh = (h - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (wd - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    y = np.zeros((cout, oh, ow), np.float64)
    for o in range(cout):
        for i in range(oh):
            for j in range(ow):
                acc = 0.0
                for c in range(cin):
                    for r in range(kh):
                        for q in range(kw):
                            acc += (float(x[c, i * stride[0] + r * dilation[0], j * stride[1] + q * dilation[1]]) - zp) * float(w[o, c, r, q])
                y[o, i, j] = acc
    return y


def test_conv_f32_with_stride_dilation_dsp_activation_and_output_padding():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 7, 8)).astype(np.float32)
    w = rng.normal(size=(3, 2, 2, 3)).astype(np.float32)
    v1, v2, v3 = (rng.normal(size=3).astype(np.float32) for _ in range(3))
    head = np.array([0.25, 0.1, -0.5, 1.5], np.float32)          # a1, a2, lo, hi
    frame, filt = memories()
    put(frame, 0, x)
    put(filt, 0, w)
    put(filt, 256, np.concatenate([head, v1, v2, v3]))
    ins = Instruction(Op.CONV, fmt=Fmt.F32, dsp=1, leaky=1, clamp=1, fill=Fill.LOWEST, src=0, dst=512, wgt=0,
                      prm=256, cin=2, hin=7, win=8, cout=3, kh=2, kw=3, sh=2, sw=1, dh=1, dw=2,
                      hout=3, wout=4, cn=2, rn=2, sn=3, pt=1, pb=0, pl=0, pr=2)
    seen = []
    c = Machine(pe=12).execute([ins, Instruction(Op.END)], frame, filt, on_output=lambda i, ins, y: seen.append(y))
    acc = _conv_loops(x, w, (2, 1), (1, 2))
    want = v2[:, None, None] + v1[:, None, None] * (acc + v3[:, None, None])
    want = np.where(want < 0.25, 0.1 * want, want).clip(-0.5, 1.5)
    out = get(frame, 512, np.float32, (3, 4, 6))
    np.testing.assert_allclose(out[:, 1:, :4], want, rtol=1e-5, atol=1e-6)
    assert np.all(out[:, 0, :] == -np.inf) and np.all(out[:, :, 4:] == -np.inf)
    np.testing.assert_array_equal(seen[0], out[:, 1:, :4])
    assert (c.macs, c.cycles, c.instructions) == (3 * 3 * 4 * 12, 36, 2)
    assert c.frame_write == 3 * 4 * 6 * 4 and c.filter_read == w.nbytes + 4 * (4 + 9)


def test_conv_i8_requantizes_clamps_and_fills_with_the_zero_point():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (3, 5, 5)).astype(np.int8)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    bias = rng.integers(-5000, 5000, 4).astype(np.int32)
    mult = rng.integers(1 << 30, 1 << 31, 4).astype(np.int32)
    shift = np.array([-9, -10, -8, -11], np.int32)
    frame, filt = memories()
    put(frame, 0, x)
    put(filt, 0, w)
    put(filt, 128, np.concatenate([np.array([-100, 90, 0, 0], np.int32), bias, mult, shift]))
    ins = Instruction(Op.CONV, fmt=Fmt.I8, dsp=1, clamp=1, rnd=Rounding.DOUBLE, in_zp=7, out_zp=-3,
                      src=0, dst=256, wgt=0, prm=128, cin=3, hin=5, win=5, cout=4, kh=3, kw=3,
                      hout=3, wout=3, cn=3, rn=3, sn=3, pt=1, pb=1, pl=1, pr=1)
    Machine().execute([ins, Instruction(Op.END)], frame, filt)
    acc = _conv_loops(x, w, (1, 1), (1, 1), zp=7).astype(np.int64) + bias[:, None, None]
    want = np.clip(rq.multiply_by_quantized_multiplier(acc, mult[:, None, None], shift[:, None, None]) - 3, -100, 90)
    out = get(frame, 256, np.int8, (4, 5, 5))
    np.testing.assert_array_equal(out[:, 1:4, 1:4], want)
    assert np.all(out[:, 0] == -3) and np.all(out[:, :, 4] == -3)


def test_dwconv_with_depth_multiplier_partials_and_add():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, 6)).astype(np.float32)
    w = rng.normal(size=(4, 3, 3)).astype(np.float32)            # output channel c*2 + m
    frame, filt = memories()
    put(frame, 0, x)
    put(filt, 0, w)
    put(filt, 256, np.concatenate([np.zeros(4, np.float32), np.ones(4), np.zeros(4), np.full(4, 0.5)]).astype(np.float32))
    base = dict(fmt=Fmt.F32, src=0, wgt=0, cin=2, hin=6, win=6, cout=4, kh=3, kw=3, hout=4, wout=4, mult=2, sn=3)
    prog = [Instruction(Op.DWCONV, **base, partial=1, r0=0, rn=2, dst=1024),
            Instruction(Op.DWCONV, **base, partial=1, r0=2, rn=1, dst=1024 + 4 * 64),
            Instruction(Op.ADD, fmt=Fmt.F32, dsp=1, src=1024, dst=512, prm=256, cout=4, hout=4, wout=4, npart=2),
            Instruction(Op.END)]
    with pytest.raises(MachineError, match=r"instruction 0 \(dwconv\): a block of 6 inputs needs 6 processing elements, the machine has 5"):
        Machine(pe=5).execute(prog, frame.copy(), filt.copy())
    c = Machine(pe=6).execute(prog, frame, filt)
    want = np.stack([_conv_loops(x[o // 2:o // 2 + 1], w[o][None, None], (1, 1), (1, 1))[0] for o in range(4)]) + 0.5
    np.testing.assert_allclose(get(frame, 512, np.float32, (4, 4, 4)), want, rtol=1e-5, atol=1e-6)
    assert c.macs == 4 * 16 * 9 and c.adds == 64 and c.filter_write == 2 * 64 * 4
    assert c.by_op == {"dwconv": 2, "add": 1, "end": 1}


def test_dense_reads_the_whole_tensor_flat_and_splits_by_elements():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (2, 3, 3)).astype(np.int8)
    w = rng.integers(-127, 128, (5, 18)).astype(np.int8)
    frame, filt = memories()
    put(frame, 0, x)
    put(filt, 0, w)
    prog = [Instruction(Op.DENSE, fmt=Fmt.I8, partial=1, in_zp=-4, src=0, dst=512 + 20 * k, wgt=0,
                        cin=2, hin=3, win=3, cout=5, n0=8 * k, nn=min(8, 18 - 8 * k)) for k in range(3)]
    prog += [Instruction(Op.ADD, fmt=Fmt.I8, src=512, dst=256, cout=5, hout=1, wout=1, npart=3), Instruction(Op.END)]
    Machine(pe=8).execute(prog, frame, filt)
    acc = w.astype(np.int64) @ (x.reshape(-1).astype(np.int64) + 4)
    np.testing.assert_array_equal(get(filt, 512, np.int32, (3, 5)).sum(axis=0), acc)
    np.testing.assert_array_equal(get(frame, 256, np.int8, (5,)), np.clip(acc, -128, 127))   # no DSP: saturate


def test_maxpool_windows_and_i8_clamp():
    x = np.arange(-40, 40, dtype=np.int8).reshape(2, 5, 8)
    frame, filt = memories()
    put(frame, 0, x)
    put(filt, 0, np.array([-30, 20, 0, 0], np.int32))
    ins = Instruction(Op.MAXPOOL, fmt=Fmt.I8, clamp=1, out_zp=5, src=0, dst=128, prm=0, cin=2, hin=5, win=8,
                      kh=2, kw=3, sh=2, sw=3, hout=2, wout=2, pr=1)
    c = Machine().execute([ins, Instruction(Op.END)], frame, filt)
    want = np.array([[[x[ch, 2 * i:2 * i + 2, 3 * j:3 * j + 3].max() for j in range(2)] for i in range(2)] for ch in range(2)])
    out = get(frame, 128, np.int8, (2, 2, 3))
    np.testing.assert_array_equal(out[:, :, :2], np.clip(want, -30, 20))
    assert np.all(out[:, :, 2] == 5)                    # the border: I8 zero is the zero point
    assert c.compares == 2 * 4 * 5 and c.macs == 0


@pytest.mark.parametrize("ins, message", [
    (Instruction(Op.CONV, fmt=Fmt.F32, src=4048, cin=1, hin=4, win=4, cout=1, kh=1, kw=1, hout=4, wout=4, cn=1, rn=1, sn=1),
     r"instruction 0 \(conv\): frame region \[0xfd0, 0x1010\) runs past the end of frame memory \(0x1000 bytes\)"),
    (Instruction(Op.CONV, fmt=Fmt.F32, src=2, cin=1, hin=4, win=4, cout=1, kh=1, kw=1, hout=4, wout=4, cn=1, rn=1, sn=1),
     "frame address 0x2 is not 4-byte aligned"),
    (Instruction(Op.CONV, fmt=Fmt.F32, cin=1, hin=4, win=4, cout=1, kh=3, kw=3, hout=4, wout=4, cn=1, rn=3, sn=3),
     r"out=4x4 but a 3x3 window \(stride 1x1, dilation 1x1\) over 4x4 gives 2x2"),
    (Instruction(Op.CONV, fmt=Fmt.F32, in_zp=3, cin=1, hin=1, win=1, cout=1, kh=1, kw=1, hout=1, wout=1, cn=1, rn=1, sn=1),
     "zero points and rounding are I8-only fields"),
    (Instruction(Op.CONV, fmt=Fmt.I8, leaky=1, cin=1, hin=1, win=1, cout=1, kh=1, kw=1, hout=1, wout=1, cn=1, rn=1, sn=1),
     "the I8 leaky stage is a second DSP multiplier"),       # without dsp=1 (issue 28: with it, LEAKY_RELU)
    (Instruction(Op.CONV, fmt=Fmt.I8, partial=1, dsp=1, cin=1, hin=1, win=1, cout=1, kh=1, kw=1, hout=1, wout=1, cn=1, rn=1, sn=1),
     "a partial result is raw accumulators"),
    (Instruction(Op.CONV, fmt=Fmt.I8, cin=2, hin=1, win=1, cout=1, kh=1, kw=1, hout=1, wout=1, c0=1, cn=2, rn=1, sn=1),
     r"channels 1\+2 outside the input's 2"),
    (Instruction(Op.DWCONV, fmt=Fmt.F32, cin=2, hin=1, win=1, cout=3, kh=1, kw=1, hout=1, wout=1, mult=1, rn=1, sn=1),
     r"dwconv output channels 3 != input channels 2 x depth multiplier 1"),
    (Instruction(Op.ADD, fmt=Fmt.F32, cout=1, hout=1, wout=1, npart=0), "npart must be at least 1"),
])
def test_faults_name_the_instruction_and_the_problem(ins, message):
    frame, filt = memories()
    with pytest.raises(MachineError, match=message):
        Machine().execute([ins, Instruction(Op.END)], frame, filt)


def test_a_program_must_end_and_memories_must_be_bytes():
    frame, filt = memories()
    with pytest.raises(MachineError, match="ran off its end after 1 instructions without END"):
        Machine().execute([Instruction(Op.NOP)], frame, filt)
    with pytest.raises(TypeError, match="frame memory must be a 1-D uint8 numpy array"):
        Machine().execute([Instruction(Op.END)], frame.view(np.int8), filt)
    with pytest.raises(ValueError, match="pe must be a positive integer or None, got 0"):
        Machine(pe=0)
