"""Quantization on the ground (issue 28.3): a float Keras .h5 plus calibration data becomes an I8
bundle that equals its own int8 reference (TFLite's kernels) layer by layer, with the accuracy
drop against the float model measured on calibration and held-out inputs.

The models are written with h5py alone (tests/test_isro_compiler.py's writer) or are the Keras-made
fixtures in tests/isro/; no TensorFlow is needed.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dtpu import tflite_model
from dtpu.isro import cli, ground, keras_h5
from dtpu.isro import quantize as q
from dtpu.isro.bundle import Bundle
from dtpu.isro.ir import CompileError
from tests.test_isro_compiler import conv, layer, write_h5

FIXTURES = Path(__file__).resolve().parent / "isro"
CLASSES = 4


def _cnn(path: Path, rng) -> Path:
    """A small residual classifier: conv + BN + ReLU, max pool, depthwise + ReLU6, 1x1 conv, a
    residual Add with a fused ReLU, global average pooling, Dense + softmax."""
    layers = [
        conv("c1", 8, 3, padding="same"), layer("BatchNormalization", "bn1", axis=-1, epsilon=1e-3),
        layer("ReLU", "r1"), layer("MaxPooling2D", "p1", pool_size=[2, 2], strides=[2, 2], padding="valid"),
        layer("DepthwiseConv2D", "dw", kernel_size=[3, 3], strides=[1, 1], padding="same", depth_multiplier=1,
              dilation_rate=[1, 1], activation="relu6", use_bias=True),
        conv("pw", 8, 1), layer("Add", "add"), layer("Activation", "r2", activation="relu"),
        layer("GlobalAveragePooling2D", "gap"), layer("Dropout", "drop", rate=0.2),
        layer("Dense", "fc", units=CLASSES, activation="softmax", use_bias=True)]
    w = {"c1": {"kernel": rng.normal(0, 0.4, (3, 3, 3, 8)), "bias": rng.normal(0, 0.1, 8)},
         "bn1": {"gamma": rng.uniform(0.5, 1.5, 8), "beta": rng.normal(0, 0.1, 8),
                 "moving_mean": rng.normal(0, 0.2, 8), "moving_variance": rng.uniform(0.5, 2, 8)},
         "dw": {"depthwise_kernel": rng.normal(0, 0.4, (3, 3, 8, 1)), "bias": rng.normal(0, 0.1, 8)},
         "pw": {"kernel": rng.normal(0, 0.5, (1, 1, 8, 8)), "bias": rng.normal(0, 0.1, 8)},
         # channel c votes for class c % 4, so images dominated by one colour pattern separate
         "fc": {"kernel": np.eye(8)[:, :CLASSES] * 3 + np.eye(8)[:, CLASSES:] * 3 + rng.normal(0, 0.3, (8, CLASSES)),
                "bias": np.zeros(CLASSES)}}
    inbound = {"c1": ["input"], "bn1": ["c1"], "r1": ["bn1"], "p1": ["r1"], "dw": ["p1"], "pw": ["dw"],
               "add": ["p1", "pw"], "r2": ["add"], "gap": ["r2"], "drop": ["gap"], "fc": ["drop"]}
    return write_h5(path, (16, 16, 3), layers, w, functional_inbound=inbound)


def _images(rng, n: int) -> np.ndarray:
    """Scene-like inputs: a smooth colour gradient per image plus texture, values in [0, 1]."""
    yy, xx = np.mgrid[0:16, 0:16] / 15.0
    out = []
    for _ in range(n):
        a, b = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
        img = 0.5 + 0.35 * (a * yy[..., None] + b * xx[..., None]) / 2 + rng.normal(0, 0.05, (16, 16, 3))
        out.append(np.clip(img, 0, 1))
    return np.stack(out).astype(np.float32)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    d = tmp_path_factory.mktemp("quant")
    rng = np.random.default_rng(28)
    model = _cnn(d / "cnn.h5", rng)
    np.save(d / "cal.npy", _images(rng, 40))
    np.save(d / "hold.npy", _images(rng, 24))
    return d, model


@pytest.fixture(scope="module")
def quantized(cnn):
    d, model = cnn
    bundle, report = ground.compile_quantized(model, d / "cal.npy", d / "b", holdout=d / "hold.npy")
    bundle.save(d / "b")
    return d / "b", bundle, report


def test_quantized_cnn_is_its_int8_reference_bit_for_bit_and_close_to_float(quantized):
    _, bundle, report = quantized
    assert bundle.fmt.name == "I8"
    assert report.ok and report.verified_inputs == 2
    compared = [c for c in report.checks if not c.note]
    assert compared and all(c.exact for c in compared), [str(c) for c in report.checks]
    # accuracy drop against F32 (measured: top-1 24/24 held out, max |err| 0.049, mean 0.005 of probabilities up to 0.78)
    assert report.calibration.samples == 40 and report.holdout.samples == 24
    assert report.holdout.top1_agree >= 22, report.holdout.line("held out")
    assert report.calibration.top1_agree >= 37, report.calibration.line("calibration")
    assert report.holdout.max_abs_err < 0.1 and report.holdout.mean_abs_err < 0.01
    meta = bundle.meta["quantization"]
    assert meta["calibration"]["method"] == "minmax" and meta["verified"]["ok"]
    assert meta["holdout"]["source"].startswith("--holdout")


def test_weights_per_channel_symmetric_biases_int32_at_input_times_weight_scale(quantized, cnn):
    b, _, report = quantized
    model = tflite_model.load(b / ground.QUANTIZED_NAME)
    sg = model.main
    convs = [op for op in sg.operators if op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")]
    assert [op.opcode for op in convs] == ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "FULLY_CONNECTED"]
    for op in convs:
        x, w, bias = (sg.tensors[i] for i in op.inputs[:3])
        axis = 3 if op.opcode == "DEPTHWISE_CONV_2D" else 0
        cout = w.shape[axis]
        assert w.dtype == np.int8 and len(w.quantization.scale) == cout
        assert np.all(w.quantization.zero_point == 0)
        peak = np.abs(np.moveaxis(w.data, axis, 0).reshape(cout, -1)).max(axis=1)
        assert np.all(peak == 127)                       # every channel uses its full symmetric range
        assert bias.dtype == np.int32
        np.testing.assert_allclose(bias.quantization.scale,
                                   np.float32(x.quantization.scale[0]) * w.quantization.scale, rtol=1e-6)
    # batch normalization was folded into c1 before its per-channel scales were chosen
    k = keras_h5.read(cnn[1])
    c1 = {lyr.name: lyr for lyr in k.layers}["c1"]
    bn = {lyr.name: lyr for lyr in k.layers}["bn1"].weights
    fold = bn["gamma"] / np.sqrt(bn["moving_variance"] + 1e-3)
    want = np.abs(c1.weights["kernel"] * fold).reshape(-1, 8).max(axis=0) / 127
    np.testing.assert_allclose(sg.tensors[convs[0].inputs[1]].quantization.scale, want, rtol=1e-6)


def test_minmax_and_percentile_ranges(cnn):
    d, model = cnn
    k = keras_h5.read(model)
    x = np.load(d / "cal.npy")[:8].copy()
    x[0, 0, 0, 0] = 40.0                                  # one outlier pixel
    mm = q.calibrate(k, x, "minmax")
    pc = q.calibrate(k, x, "percentile", 99.9)
    assert mm["input"] == (float(x.min()), 40.0)
    assert pc["input"][1] < 1.01 and pc["input"][0] >= float(x.min())
    scale, zp = q.activation_quant(*mm["input"])
    assert scale == pytest.approx((40.0 - min(0.0, float(x.min()))) / 255, rel=1e-6) and zp == -128
    # a range that excludes zero is widened to include it; an all-zero tensor still gets a scale
    assert q.activation_quant(2.0, 5.0) == (pytest.approx(5.0 / 255, rel=1e-6), -128)
    assert q.activation_quant(0.0, 0.0)[0] > 0
    with pytest.raises(ValueError, match=r"calibration method 'kl'; accepted: minmax, percentile"):
        q.calibrate(k, x, "kl")
    with pytest.raises(ValueError, match=r"percentile 20.0; accepted: 50 < P <= 100"):
        q.calibrate(k, x, "percentile", 20.0)


def test_holdout_split():
    x = np.zeros((20, 2, 2, 1), np.float32)
    cal, hold = q.split(x, None)
    assert len(cal) == 16 and len(hold) == 4 and np.array_equal(hold, x[16:])
    cal, hold = q.split(x[:4], None)
    assert len(cal) == 4 and hold is None
    cal, hold = q.split(x, x[:3])
    assert len(cal) == 20 and len(hold) == 3


@pytest.mark.parametrize("name", ["mix_s", "resnet8"])
def test_keras_fixtures_quantize_bit_exact(name, tmp_path):
    """Keras-made files: LeakyReLU and BN after Dense (mix_s), residual stages with 1x1
    shortcuts and average pooling (resnet8)."""
    k = keras_h5.read(FIXTURES / f"{name}.h5")
    rng = np.random.default_rng(5)
    np.save(tmp_path / "cal.npy", rng.random((10, *k.input_shape)).astype(np.float32))
    bundle, report = ground.compile_quantized(FIXTURES / f"{name}.h5", tmp_path / "cal.npy", tmp_path / "b")
    assert report.ok and report.holdout.samples == 2, report.lines()
    assert all(c.exact for c in report.checks if not c.note)
    assert report.holdout.top1_agree == 2


# -- the command line -----------------------------------------------------------------------------

def test_cli_quantize_then_run_verify(cnn, capsys):
    d, model = cnn
    out = d / "cli"
    rc = cli.main(["compile", str(model), "--quantize", "int8", "--calibration", str(d / "cal.npy"),
                   "--calibration-method", "percentile", "--percentile", "99.9", "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "(i8," in text and "99.9th percentile over 32 calibration inputs" in text
    assert "held out (the last 8 of 40 calibration samples): 8 inputs, top-1 agreement" in text
    assert "-- bit-exact" in text
    assert Bundle.load(out).meta["quantization"]["calibration"]["percentile"] == 99.9
    rc = cli.main(["run", str(out), "--verify", "--no-dump"])
    text = capsys.readouterr().out
    assert rc == 0 and "verification passed" in text, text


def _bad_files(d: Path) -> dict[str, Path]:
    files = {}
    (d / "garbage.npy").write_bytes(b"\x00\x01 not numpy")
    files["not a readable .npy"] = d / "garbage.npy"
    np.save(d / "full.npy", np.zeros((6, 16, 16, 3), np.float32))
    (d / "trunc.npy").write_bytes((d / "full.npy").read_bytes()[:300])
    files["trunc.npy: not a readable .npy"] = d / "trunc.npy"
    np.save(d / "shape.npy", np.zeros((6, 16, 3), np.float32))
    files["shape (6, 16, 3); accepted: (N, 16, 16, 3)"] = d / "shape.npy"
    np.save(d / "empty.npy", np.zeros((0, 16, 16, 3), np.float32))
    files["shape (0, 16, 16, 3)"] = d / "empty.npy"
    nan = np.zeros((6, 16, 16, 3), np.float32)
    nan[1, 2, 3, 0] = np.nan
    np.save(d / "nan.npy", nan)
    files["NaN or infinite"] = d / "nan.npy"
    np.save(d / "str.npy", np.array(["a", "b"]))
    files["dtype <U1; accepted: float or integer"] = d / "str.npy"
    files["does not exist"] = d / "missing.npy"
    return files


@pytest.mark.parametrize("flag", ["--calibration", "--holdout"])
def test_cli_bad_calibration_and_holdout_files(cnn, tmp_path, capsys, flag):
    d, model = cnn
    for message, path in _bad_files(tmp_path).items():
        args = ["compile", str(model), "--quantize", "int8", "-o", str(tmp_path / "b")]
        args += ["--calibration", str(path)] if flag == "--calibration" else \
            ["--calibration", str(d / "cal.npy"), "--holdout", str(path)]
        rc = cli.main(args)
        err = capsys.readouterr().err
        assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), (message, err)
        assert message in err and path.name in err, (message, err)
        assert ("calibration data" if flag == "--calibration" else "held-out data") in err


def test_cli_quantize_refusals(cnn, tmp_path, capsys):
    d, model = cnn
    cal = str(d / "cal.npy")
    cases = [
        (["compile", str(FIXTURES / "vgg_s_int8.tflite"), "--quantize", "int8", "--calibration", cal],
         "--quantize takes a float Keras model"),
        (["compile", str(model), "--calibration", cal], "--calibration without --quantize int8"),
        (["compile", str(model), "--quantize", "int8"], "--quantize int8 needs --calibration NPY"),
        (["compile", str(model), "--quantize", "int4", "--calibration", cal], "invalid choice: 'int4'"),
        (["compile", str(model), "--quantize", "int8", "--calibration", cal, "--calibration-method",
          "percentile", "--percentile", "10"], "percentile 10.0; accepted: 50 < P <= 100"),
    ]
    tanh = write_h5(tmp_path / "tanh.h5", (16, 16, 3),
                    [conv("c", 2, 3), layer("Activation", "t", activation="tanh"), layer("Flatten", "f")],
                    {"c": {"kernel": np.ones((3, 3, 3, 2)), "bias": np.zeros(2)}})
    cases.append((["compile", str(tanh), "--quantize", "int8", "--calibration", cal],
                  "t: layer type Activation (tanh) cannot be quantized for the chip"))
    # too big for a chip profile without external memory: refused after quantizing, nothing written
    tiny = tmp_path / "tiny.json"
    from dtpu.isro.profile import load
    tiny.write_text(json.dumps({**load().to_dict(), "name": "tiny", "frame_bytes": 2048, "external": None}))
    cases.append((["compile", str(model), "--quantize", "int8", "--calibration", cal, "--chip", str(tiny)],
                  "frame memory needs"))
    for args, message in cases:
        try:
            rc = cli.main(args + ["-o", str(tmp_path / "out")])
        except SystemExit as exc:          # a usage error from argparse
            rc = exc.code
        err = capsys.readouterr().err
        assert rc == 2 and len(err.splitlines()) == 1 and message in err, (args, err)
        assert not (tmp_path / "out").exists()


def test_unused_branch_is_refused(tmp_path):
    rng = np.random.default_rng(1)
    path = write_h5(tmp_path / "m.h5", (6, 6, 1), [conv("a", 2, 3), conv("b", 2, 1), conv("c", 2, 1)],
                    {n: {"kernel": rng.normal(size=(3, 3, 1, 2) if n == "a" else (1, 1, 2, 2)),
                         "bias": np.zeros(2)} for n in "abc"},
                    functional_inbound={"a": ["input"], "b": ["a"], "c": ["a"]})
    k = keras_h5.read(path)
    with pytest.raises(CompileError, match=r"b: its result is not used by the model output"):
        q.quantize_keras(k, q.calibrate(k, rng.random((2, 6, 6, 1))))


def test_damaged_models_fail_cleanly_under_quantize(tmp_path, capsys):
    """Seeded fuzzing of the .h5 under --quantize: cuts, random bytes and 32-bit words anywhere
    (NaN weights included); each run quantizes and verifies, or is one error line, exit 2."""
    data = (FIXTURES / "mix_s.h5").read_bytes()
    k = keras_h5.read(FIXTURES / "mix_s.h5")
    np.save(tmp_path / "cal.npy", np.random.default_rng(0).random((6, *k.input_shape)).astype(np.float32))
    rng = np.random.default_rng(3)
    outcomes = set()
    for trial in range(16):
        d = bytearray(data)
        kind = trial % 3
        if kind == 0:
            d = d[:int(rng.integers(1, len(d)))]
        elif kind == 1:
            for at in rng.integers(0, len(d), int(rng.integers(1, 20))):
                d[at] = int(rng.integers(256))
        else:
            at = int(rng.integers(0, len(d) - 8))
            d[at:at + 4] = int(rng.integers(0, 2 ** 32)).to_bytes(4, "little")
        p = tmp_path / f"{trial}.h5"
        p.write_bytes(bytes(d))
        rc = cli.main(["compile", str(p), "--quantize", "int8", "--calibration", str(tmp_path / "cal.npy"),
                       "-o", str(tmp_path / f"o{trial}")])
        err = capsys.readouterr().err
        assert rc in (0, 2) and len(err.splitlines()) <= 1 and "internal error" not in err, (trial, err)
        outcomes.add(rc)
    assert 2 in outcomes


def test_nan_weights_are_named(tmp_path, capsys):
    w = {"c": {"kernel": np.full((3, 3, 1, 2), np.nan), "bias": np.zeros(2)}}
    path = write_h5(tmp_path / "nan.h5", (6, 6, 1), [conv("c", 2, 3), layer("Flatten", "f")], w)
    np.save(tmp_path / "cal.npy", np.zeros((2, 6, 6, 1), np.float32))
    rc = cli.main(["compile", str(path), "--quantize", "int8", "--calibration", str(tmp_path / "cal.npy"),
                   "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: c: NaN or infinite weights cannot be quantized"), err


def test_quantized_bundle_staged_through_external_memory_is_bit_exact(tmp_path):
    """A quantized network larger than the chip's memories is staged (external memory) and still
    equals its int8 reference layer by layer."""
    from dtpu.isro.profile import Profile, load
    k = keras_h5.read(FIXTURES / "resnet8.h5")
    np.save(tmp_path / "cal.npy", np.random.default_rng(2).random((5, *k.input_shape)).astype(np.float32))
    on_chip, _ = ground.compile_quantized(FIXTURES / "resnet8.h5", tmp_path / "cal.npy", tmp_path / "a")
    small = Profile(**{**load().__dict__, "name": "small-8", "frame_bytes": on_chip.meta["frame_bytes"] // 8,
                       "filter_bytes": on_chip.meta["filter_bytes"] // 8})
    bundle, report = ground.compile_quantized(FIXTURES / "resnet8.h5", tmp_path / "cal.npy", tmp_path / "b", chip=small)
    assert bundle.meta.get("staged") and report.ok
    assert all(c.exact for c in report.checks if not c.note), report.lines()
