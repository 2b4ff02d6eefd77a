"""Models with several inputs and outputs (issue 28.1): each further input is a frame tensor the
host writes with the frame image, live from before the first instruction, and each further
output a layer's tensor kept live until END, so frame reuse never places another layer's output
over either; every layer still equals Keras (F32) or TFLite (I8, bit for bit)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import cli, compile_h5, compile_tflite, keras_h5, run, verify
from dtpu.isro.check import check_bundle
from dtpu.isro.compare import compare, write_dumps
from dtpu.isro.ir import CompileError
from dtpu.tflite_writer import GraphWriter, Tensor
from tests.test_isro_compiler import conv, layer


def write_two_input_h5(path: Path, rng, outputs=("fc",)) -> Path:
    """image (8x8x3) -> conv 3x3 SAME + ReLU, mask (8x8x2) -> conv 1x1, their sum -> conv 3x3 ->
    flatten -> Dense softmax. The second InputLayer sits in the middle of the layer list, as
    Keras writes it when the input is first used there."""
    import h5py
    layers = [
        {"class_name": "InputLayer", "config": {"name": "image", "batch_input_shape": [None, 8, 8, 3]}},
        conv("ca", 4, 3, padding="same", activation="relu"),
        {"class_name": "InputLayer", "config": {"name": "mask", "batch_input_shape": [None, 8, 8, 2]}},
        conv("cb", 4, 1), layer("Add", "add"), conv("cc", 3, 3), layer("Flatten", "f"),
        layer("Dense", "fc", units=5, activation="softmax", use_bias=True)]
    inbound = {"ca": ["image"], "cb": ["mask"], "add": ["ca", "cb"], "cc": ["add"], "f": ["cc"], "fc": ["f"]}
    for lc in layers:
        name = lc["config"]["name"]
        lc["name"] = name
        lc["inbound_nodes"] = [[[s, 0, 0, {}] for s in inbound[name]]] if name in inbound else []
    config = {"class_name": "Functional", "config": {
        "name": "two", "layers": layers, "input_layers": [["image", 0, 0], ["mask", 0, 0]],
        "output_layers": [[o, 0, 0] for o in outputs]}}
    weights = {"ca": {"kernel": rng.normal(size=(3, 3, 3, 4)), "bias": rng.normal(size=4)},
               "cb": {"kernel": rng.normal(size=(1, 1, 2, 4)), "bias": rng.normal(size=4)},
               "cc": {"kernel": rng.normal(size=(3, 3, 4, 3)), "bias": rng.normal(size=3)},
               "fc": {"kernel": rng.normal(size=(6 * 6 * 3, 5)), "bias": rng.normal(size=5)}}
    with h5py.File(path, "w") as f:
        f.attrs["model_config"] = json.dumps(config)
        mw = f.create_group("model_weights")
        for lc in layers:
            name = lc["config"]["name"]
            g = mw.create_group(name)
            ws = weights.get(name, {})
            g.attrs["weight_names"] = [f"{name}/{k}:0".encode() for k in ws]
            for k, v in ws.items():
                g.create_dataset(f"{name}/{k}:0", data=np.asarray(v, np.float32))
    return path


def write_two_input_tflite(path: Path, rng, outputs=("y",)) -> Path:
    """int8: a (1,8,8,3) through CONV_2D 3x3 SAME + RELU, b (1,8,8,4) at its own scale and zero
    point, ADD, MAX_POOL_2D, RESHAPE, FULLY_CONNECTED."""
    g = GraphWriter()
    a = g.tensor(Tensor((1, 8, 8, 3), "int8", (0.02,), (-5,), name="a"))
    b = g.tensor(Tensor((1, 8, 8, 4), "int8", (0.05,), (10,), name="b"))
    ws = rng.uniform(0.002, 0.01, 4).astype(np.float32)
    w = g.const("w", rng.integers(-127, 128, (4, 3, 3, 3)), "int8", scale=tuple(map(float, ws)),
                zero_point=(0,) * 4, axis=0)
    bias = g.const("bias", rng.integers(-500, 500, 4), "int32", scale=tuple(float(np.float32(0.02) * s) for s in ws),
                   zero_point=(0,) * 4)
    c = g.tensor(Tensor((1, 8, 8, 4), "int8", (0.04,), (-128,), name="c"))
    g.op("CONV_2D", [a, w, bias], [c], activation="relu", padding="same", stride=(1, 1), dilation=(1, 1))
    s = g.tensor(Tensor((1, 8, 8, 4), "int8", (0.08,), (-20,), name="sum"))
    g.op("ADD", [c, b], [s])
    p = g.tensor(Tensor((1, 4, 4, 4), "int8", (0.08,), (-20,), name="pool"))
    g.op("MAX_POOL_2D", [s], [p], padding="valid", stride=(2, 2), filter=(2, 2))
    shape = g.const("shape", np.array([1, 64]), "int32")
    flat = g.tensor(Tensor((1, 64), "int8", (0.08,), (-20,), name="flat"))
    g.op("RESHAPE", [p, shape], [flat], new_shape=[1, 64])
    fw = g.const("fw", rng.integers(-127, 128, (6, 64)), "int8", scale=(0.004,), zero_point=(0,))
    fb = g.const("fb", rng.integers(-300, 300, 6), "int32", scale=(float(np.float32(0.08) * np.float32(0.004)),),
                 zero_point=(0,))
    y = g.tensor(Tensor((1, 6), "int8", (0.3,), (3,), name="y"))
    g.op("FULLY_CONNECTED", [flat, fw, fb], [y])
    named = {"y": y, "c": c, "sum": s}
    path.write_bytes(g.to_bytes([a, b], [named[o] for o in outputs]))
    return path


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def test_two_input_keras_model_is_keras_layer_by_layer(tmp_path, rng):
    path = write_two_input_h5(tmp_path / "two.h5", rng)
    model = keras_h5.read(path)
    assert model.input_name == "image" and model.extra_inputs == [("mask", (8, 8, 2))]
    xa, xb = rng.random((8, 8, 3)).astype(np.float32), rng.random((8, 8, 2)).astype(np.float32)
    for reuse in (False, True):            # shared frame memory must not land on the second input
        bundle = compile_h5(path, [xa, xb], reuse=reuse)
        assert [m["name"] for m in bundle.meta["inputs"]] == ["image", "mask"]
        assert check_bundle(bundle) == []
        result = run(bundle)
        checks = verify.against_keras(bundle, result, model, [xa, xb])
        assert [c.layer for c in checks][:4] == ["ca", "cb", "add", "cc"]
        assert all(c.ok for c in checks), [str(c) for c in checks]
    # other inputs at run time, and the compiled ones recovered from the image
    ya, yb = rng.random((8, 8, 3)).astype(np.float32), rng.random((8, 8, 2)).astype(np.float32)
    again = run(bundle, [ya, yb])
    assert all(c.ok for c in verify.against_keras(bundle, again, model, [ya, yb]))
    assert not np.allclose(again.output, result.output)
    with pytest.raises(ValueError, match=r"input: the bundle has 2 inputs \(image, mask\); got 1 arrays"):
        run(bundle, ya)


def test_two_input_int8_tflite_is_bit_exact(tmp_path, rng):
    path = write_two_input_tflite(tmp_path / "two.tflite", rng)
    xa = rng.integers(-128, 128, (1, 8, 8, 3)).astype(np.int8)
    xb = rng.integers(-128, 128, (1, 8, 8, 4)).astype(np.int8)
    bundle = compile_tflite(path, [xa, xb], reuse=True)
    assert bundle.fmt.name == "I8" and bundle.meta["inputs"][1]["zero_point"] == 10
    assert check_bundle(bundle) == []
    result = run(bundle)
    checks = verify.against_tflite(bundle, result, path, [xa, xb])
    compared = [c for c in checks if not c.note]
    assert compared and all(c.exact for c in compared), [str(c) for c in checks]
    # dumps for hardware-in-the-loop cover the second input's region as the host wrote it
    dumps = write_dumps(bundle, tmp_path / "dumps", [xa, xb])
    assert all(d.ok for d in compare(bundle, dumps, [xa, xb]))


def test_cli_takes_one_input_per_model_input(tmp_path, rng, capsys):
    path = write_two_input_h5(tmp_path / "two.h5", rng)
    np.save(tmp_path / "a.npy", rng.random((8, 8, 3)).astype(np.float32))
    np.save(tmp_path / "b.npy", rng.random((8, 8, 2)).astype(np.float32))
    out = tmp_path / "b"
    assert cli.main(["compile", str(path), "--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "b.npy"),
                     "-o", str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["run", str(out), "--verify", "--no-dump"]) == 0          # the compiled inputs
    assert "verification passed" in capsys.readouterr().out
    assert cli.main(["run", str(out), "--input", str(tmp_path / "a.npy"), "--input", str(tmp_path / "b.npy"),
                     "--verify", "--no-dump"]) == 0
    capsys.readouterr()
    for args, message in (
            (["--input", str(tmp_path / "a.npy")], "1 arrays for a bundle with 2 inputs (image, mask)"),
            (["--input", str(tmp_path / "b.npy"), "--input", str(tmp_path / "a.npy")],
             "b.npy: shape (8, 8, 2) (HWC) does not match the model's (8, 8, 3)")):
        rc = cli.main(["run", str(out), "--no-dump"] + args)
        err = capsys.readouterr().err
        assert rc == 2 and len(err.splitlines()) == 1 and message in err, err
    rc = cli.main(["compile", str(path), "--input", str(tmp_path / "a.npy"), "-o", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert rc == 2 and "a.npy: the model has 2 inputs (image, mask); got 1 arrays" in err, err


def test_several_inputs_refused_where_one_is_meant(tmp_path, rng):
    path = write_two_input_h5(tmp_path / "two.h5", rng)
    from dtpu.isro import quantize
    with pytest.raises(CompileError, match=r"2 inputs; quantization on the ground takes one-input models"):
        quantize.quantize_keras(keras_h5.read(path), {})


def test_two_outputs_keras(tmp_path, rng, capsys):
    """The Dense head and the feature map `add` (read by `cc` too) as outputs of one program."""
    path = write_two_input_h5(tmp_path / "two.h5", rng, outputs=("add", "fc"))
    model = keras_h5.read(path)
    assert model.extra_outputs == ["add"]
    xa, xb = rng.random((8, 8, 3)).astype(np.float32), rng.random((8, 8, 2)).astype(np.float32)
    bundle = compile_h5(path, [xa, xb], reuse=True)
    assert [o["name"] for o in bundle.meta["outputs"]] == ["fc", "add"]
    assert check_bundle(bundle) == []
    result = run(bundle)
    ref = verify.keras_reference(model, [xa, xb])
    np.testing.assert_allclose(result.more_outputs["add"][0], ref["add"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.output[0], ref["fc"], rtol=1e-5, atol=1e-6)
    # chosen: the last layer alone; a choice without it is refused
    assert "outputs" not in compile_h5(path, [xa, xb], output="fc").meta
    with pytest.raises(CompileError, match=r"leave out 'fc', the last layer"):
        compile_h5(path, output="add")
    with pytest.raises(CompileError, match=r"no model output 'nope'; accepted: its outputs 0: 'fc', 1: 'add'"):
        compile_h5(path, output="nope")
    out = tmp_path / "b"
    assert cli.main(["compile", str(path), "-o", str(out)]) == 0
    assert "model outputs: 'fc', 'add'" in capsys.readouterr().out
    assert cli.main(["run", str(out), "--verify", "--no-dump"]) == 0
    text = capsys.readouterr().out
    assert "output 1 'add' (1, 8, 8, 4) float32" in text and "verification passed" in text
    assert np.load(out / "run" / "output_1.npy").shape == (1, 8, 8, 4)


def test_two_outputs_int8_tflite_chosen_with_repeated_model_output(tmp_path, rng, capsys):
    path = write_two_input_tflite(tmp_path / "two.tflite", rng, outputs=("c", "y"))
    xa = rng.integers(-128, 128, (1, 8, 8, 3)).astype(np.int8)
    xb = rng.integers(-128, 128, (1, 8, 8, 4)).astype(np.int8)
    bundle = compile_tflite(path, [xa, xb], reuse=True, output=["c", "y"])
    assert [o["name"] for o in bundle.meta["outputs"]] == ["op4_fully_connected", "op0_conv_2d"]
    assert bundle.meta["tflite"]["more_outputs"] == ["c"]
    result = run(bundle)
    ref = verify.tflite_reference(path, [xa, xb])
    c_tensor = 4                                     # a, b, w, bias, c: the writer's tensor order
    np.testing.assert_array_equal(result.more_outputs["op0_conv_2d"], ref[c_tensor])
    np.testing.assert_array_equal(result.output, ref[bundle.meta["tflite"]["output_tensor"]])
    assert all(c.exact for c in verify.against_tflite(bundle, result, path, [xa, xb]) if not c.note)
    # without a choice the one output no operator reads is compiled, as before
    assert "outputs" not in compile_tflite(path).meta
    assert cli.main(["compile", str(path), "--model-output", "c", "--model-output", "1", "-o",
                     str(tmp_path / "b")]) == 0
    assert "model outputs:" in capsys.readouterr().out
