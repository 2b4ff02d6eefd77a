"""uint8 models (issue 28): TF1 quantization-aware nets with uint8 activations and asymmetric
uint8 weights compile to I8 with every value stored 128 lower and the weights' zero point in the
instruction (w_zp), bit-exact against TFLite 2.14 layer by layer."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import cli, compile_tflite, run, verify
from dtpu.isro.check import check_bundle, check_program
from dtpu.isro.isa import Fmt, Instruction, Op
from dtpu.isro.machine import Machine, MachineError

ZOO = Path(__file__).resolve().parent / "models" / "zoo"
SINGLE = sorted(p for p in ZOO.glob("*uint8*.tflite")
                if p.name.startswith(("conv_", "dw_")) and "_b2_" not in p.name) if ZOO.is_dir() else []
needs_zoo = pytest.mark.skipif(not SINGLE, reason="model zoo (tests/models/zoo) not present")


def _exact(path, bundle, seeds=(0, 1)):
    c, h, w = bundle.meta["input"]["shape"]
    for seed in seeds:
        x = np.random.default_rng(seed).integers(0, 256, (1, h, w, c)).astype(np.uint8)
        result = run(bundle, x)
        checks = [k for k in verify.against_tflite(bundle, result, path, x) if not k.note]
        assert checks and all(k.exact for k in checks), f"{path.name}: " + "; ".join(map(str, checks))
        ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
        assert result.output.dtype == np.uint8
        np.testing.assert_array_equal(result.output, ref)
    return result


@needs_zoo
def test_uint8_conv_and_depthwise_nodes_are_bit_exact():
    uses_w_zp = 0
    for path in SINGLE:
        bundle = compile_tflite(path)
        assert bundle.meta["input"]["offset"] == 128 and check_bundle(bundle) == []
        uses_w_zp += any(getattr(i, "w_zp", 0) for i in bundle.program if i.op in (Op.CONV, Op.DWCONV))
        _exact(path, bundle)
    assert len(SINGLE) >= 30 and uses_w_zp >= 10


@needs_zoo
def test_uint8_mobilenet_v1_050_224_is_bit_exact(tmp_path, capsys):
    path = ZOO / "mobilenet_v1_050_224__uint8.tflite"
    bundle = compile_tflite(path)
    assert check_bundle(bundle) == []
    assert {Op.CONV, Op.DWCONV, Op.AVGPOOL} <= {i.op for i in bundle.program}
    _exact(path, bundle, seeds=(3,))
    x = np.random.default_rng(5).integers(0, 256, (1, 224, 224, 3)).astype(np.uint8)
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "b"), "--input", str(tmp_path / "x.npy")]) == 0
    assert cli.main(["run", str(tmp_path / "b"), "--verify", "--no-dump"]) == 0
    assert "verification passed" in capsys.readouterr().out
    assert np.load(tmp_path / "b" / "run" / "output.npy").dtype == np.uint8


@needs_zoo
def test_uint8_average_pooling_rounds_half_up_bit_exact():
    """TFLite's uint8 AVERAGE_POOL_2D computes (sum + n/2) / n: the AVGPOOL's hup flag."""
    path = ZOO / "dscnn_like__uint8.tflite"
    bundle = compile_tflite(path)
    pools = [i for i in bundle.program if i.op is Op.AVGPOOL]
    assert pools and all(i.hup and not i.dsp for i in pools) and check_bundle(bundle) == []
    _exact(path, bundle, seeds=(0, 1, 2))


def _average(x: np.ndarray, **fields) -> int:
    """One 2x2 I8 AVGPOOL over the 1 x 2 x 2 `x`, as the machine computes it."""
    frame, filt = np.full(256, 0xFF, np.uint8), np.full(256, 0xFF, np.uint8)
    frame[:4] = x.astype(np.int8).reshape(-1).view(np.uint8)
    ins = Instruction(Op.AVGPOOL, fmt=Fmt.I8, src=0, dst=64, cin=1, hin=2, win=2, kh=2, kw=2, sh=2, sw=2,
                      hout=1, wout=1, **fields)
    Machine(pe=4).execute([ins, Instruction(Op.END)], frame, filt)
    return int(frame[64:65].view(np.int8)[0])


@pytest.mark.parametrize("values, away, up", [
    ([-3, -2, 0, 3], -1, 0),        # sum -2: -0.5, the only kind of value where the two differ
    ([3, 2, 0, -3], 1, 1),          # sum 2: 0.5
    ([-3, -2, 0, 1], -1, -1),       # sum -4: exact
    ([-3, -3, 0, 1], -1, -1),       # -1.25
])
def test_half_up_and_half_away_differ_only_on_negative_ties(values, away, up):
    x = np.array(values).reshape(1, 2, 2)
    assert (_average(x), _average(x, hup=1)) == (away, up)


def test_half_up_is_refused_where_it_means_nothing():
    frame, filt = np.full(256, 0xFF, np.uint8), np.full(256, 0xFF, np.uint8)
    ins = Instruction(Op.AVGPOOL, fmt=Fmt.I8, dsp=1, src=0, dst=64, cin=1, hin=2, win=2, kh=2, kw=2, sh=2, sw=2,
                      hout=1, wout=1, hup=1)
    with pytest.raises(MachineError, match="hup .round the average half up. is I8 without the DSP stage only"):
        Machine(pe=4).execute([ins, Instruction(Op.END)], frame, filt)
    findings = check_program([ins, Instruction(Op.END)], frame_bytes=256, filter_bytes=256, pe=4,
                             frame_defined=(0, 4))
    assert any(f.kind == "fault" and f.index == 0 and "hup" in f.message for f in findings)


@needs_zoo
def test_uint8_softmax_head_on_the_host_is_bit_exact():
    """TFLite's uint8 softmax is its int8 one on values 128 higher: the host runs the int8 head on
    the stored values with the zero points stored 128 lower, then adds 128."""
    path = ZOO / "mobilenet_like__uint8.tflite"
    bundle = compile_tflite(path)
    assert [h["kind"] for h in bundle.meta["heads"]] == ["softmax"] and check_bundle(bundle) == []
    result = _exact(path, bundle, seeds=(0, 1, 2))
    assert result.output.sum(axis=-1).max() > 200           # probabilities in 1/256 steps


def test_the_weight_zero_point_is_subtracted_by_the_mac_array():
    x = np.arange(-4, 5, dtype=np.int8)                 # 1 x 3 x 3
    w = np.array([3, -2, 7, 0, 1, -1, 5, 2, -3], np.int8)
    frame = np.zeros(64, np.uint8)
    filt = np.zeros(64, np.uint8)
    frame[:9] = x.view(np.uint8)
    filt[:9] = w.view(np.uint8)
    conv = Instruction(Op.CONV, fmt=Fmt.I8, src=0, dst=32, wgt=0, cin=1, hin=3, win=3, cout=1, kh=3, kw=3,
                       hout=1, wout=1, cn=1, rn=3, sn=3, in_zp=-2, w_zp=-5, partial=1)
    Machine().execute([conv, Instruction(Op.END)], frame, filt)
    acc = int(filt[32:36].view("<i4")[0])
    assert acc == int(np.sum((x.astype(np.int64) + 2) * (w.astype(np.int64) + 5)))


# -- TF2 int8 models with uint8 input and output: a QUANTIZE at each end -----------------------------

def _uint8_io_model(path, out_scale=0.05, head=False, in_int8_scale=0.02):
    """uint8 input -> QUANTIZE -> int8 CONV (relu) [-> SOFTMAX] -> QUANTIZE -> uint8 output, as TF2's
    converter writes with inference_input_type / inference_output_type uint8."""
    from dtpu.tflite_writer import Node, Tensor, write
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    b = rng.integers(-500, 500, 8).astype(np.int32)
    t = [Tensor((1, 8, 8, 3), "uint8", 0.02, 128, name="input"),
         Tensor((1, 8, 8, 3), "int8", in_int8_scale, 0, name="q_in"),
         Tensor((8, 3, 3, 3), "int8", [0.01] * 8, [0] * 8, data=w, name="w", axis=0),
         Tensor((8,), "int32", [0.0002] * 8, [0] * 8, data=b, name="b"),
         Tensor((1, 8, 8, 8), "int8", 0.05, -3, name="conv")]
    nodes = [Node("QUANTIZE", [0], [1]),
             Node("CONV_2D", [1, 2, 3], [4], dict(padding="SAME", stride=(1, 1), activation="relu"))]
    last = 4
    if head:
        t.append(Tensor((1, 8, 8, 8), "int8", 1 / 256, -128, name="probs"))
        nodes.append(Node("SOFTMAX", [4], [5], dict(beta=1.0)))
        last = 5
    # the uint8 view of the last int8 tensor: its scale (unless `out_scale` rescales), zero point + 128
    t.append(Tensor((1, 8, 8, 8), "uint8", t[last].scale if head else out_scale, t[last].zero_point + 128,
                    name="output"))
    nodes.append(Node("QUANTIZE", [last], [len(t) - 1]))
    path.write_bytes(write(t, nodes, [0], [len(t) - 1]))
    return path


def test_tf2_int8_model_with_uint8_input_and_output_is_bit_exact(tmp_path, capsys):
    path = _uint8_io_model(tmp_path / "u8io.tflite")
    bundle = compile_tflite(path)
    assert check_bundle(bundle) == [] and [i.op for i in bundle.program] == [Op.CONV, Op.END]
    assert bundle.meta["input"]["offset"] == bundle.meta["output"]["offset"] == 128
    for seed in (0, 1):
        x = np.random.default_rng(seed).integers(0, 256, (1, 8, 8, 3)).astype(np.uint8)
        result = run(bundle, x)
        checks = verify.against_tflite(bundle, result, path, x)
        assert checks and all(c.exact for c in checks), checks
        ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
        assert ref.dtype == result.output.dtype == np.uint8
        np.testing.assert_array_equal(result.output, ref)
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "b"), "--input", str(tmp_path / "x.npy")]) == 0
    assert cli.main(["run", str(tmp_path / "b"), "--verify", "--no-dump"]) == 0
    assert "verification passed" in capsys.readouterr().out


@pytest.mark.parametrize("change, message", [
    (dict(out_scale=0.04), r"output QUANTIZE 'conv' -> 'output': uint8 scale 0\.04.*accepted: the same scale"),
    (dict(in_int8_scale=0.03), r"input QUANTIZE 'input' -> 'q_in': uint8 scale 0\.02.*int8 scale 0\.03"),
])
def test_uint8_ends_that_rescale_are_refused_in_one_line(tmp_path, capsys, change, message):
    path = _uint8_io_model(tmp_path / "u8io.tflite", **change)
    with pytest.raises(ValueError, match=message):
        compile_tflite(path)
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "error:" in err


def test_tf2_uint8_output_after_a_host_softmax_is_bit_exact(tmp_path):
    path = _uint8_io_model(tmp_path / "u8head.tflite", head=True)
    bundle = compile_tflite(path)
    assert bundle.meta["heads"] and bundle.meta["output"]["offset"] == 128
    x = np.random.default_rng(4).integers(0, 256, (1, 8, 8, 3)).astype(np.uint8)
    result = run(bundle, x)
    ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
    assert ref.dtype == result.output.dtype == np.uint8
    np.testing.assert_array_equal(result.output, ref)
    assert all(c.exact for c in verify.against_tflite(bundle, result, path, x) if not c.note)


def test_damaged_uint8_io_models_fail_cleanly_or_run(tmp_path, capsys):
    """The new input path fuzzed as the others (tests/isro_fuzz.py)."""
    from tests import isro_fuzz
    src = _uint8_io_model(tmp_path / "u8io.tflite").read_bytes()
    rng = np.random.default_rng(7)
    for trial in range(12):
        p = tmp_path / f"{trial}.tflite"
        p.write_bytes(isro_fuzz.damage(src, rng))
        rc, err = isro_fuzz.compile_and_run(p, tmp_path / f"o{trial}", capsys)
        assert isro_fuzz.one_clean_line(rc, err), (trial, err)


def test_tf1_uint8_sigmoid_head_on_the_host_is_bit_exact(tmp_path):
    """A uint8 net (uint8 weights with their zero point) ending in LOGISTIC: the int8 table on the
    stored values, then + 128."""
    from dtpu.tflite_writer import Node, Tensor, write
    rng = np.random.default_rng(0)
    t = [Tensor((1, 8, 8, 3), "uint8", 0.02, 128, name="input"),
         Tensor((8, 3, 3, 3), "uint8", 0.01, 120, data=rng.integers(0, 256, (8, 3, 3, 3)).astype(np.uint8), name="w"),
         Tensor((8,), "int32", 0.0002, 0, data=rng.integers(-500, 500, 8).astype(np.int32), name="b"),
         Tensor((1, 8, 8, 8), "uint8", 0.05, 125, name="conv"),
         Tensor((1, 8, 8, 8), "uint8", 1 / 256, 0, name="output")]
    nodes = [Node("CONV_2D", [0, 1, 2], [3], dict(padding="SAME", stride=(1, 1))), Node("LOGISTIC", [3], [4])]
    path = tmp_path / "sig.tflite"
    path.write_bytes(write(t, nodes, [0], [4]))
    bundle = compile_tflite(path)
    assert [h["kind"] for h in bundle.meta["heads"]] == ["sigmoid"]
    _exact(path, bundle, seeds=(0, 1, 2))
