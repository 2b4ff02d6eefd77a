"""Whole networks (issue 16): residual adds, average and global average pooling, branching
graphs, host heads; MLPerf-Tiny-class int8 models layer by layer against TFLite, bit for bit.

- resnet8 (tests/isro, MLPerf Tiny's image-classification ResNet-8 at its real 16/32/64 width):
  residual ADDs with 1x1 stride-2 projections, AVERAGE_POOL_2D, softmax head;
- dscnn_like (zoo, MLPerf Tiny keyword spotting shape): depthwise-separable, AVERAGE_POOL_2D;
- mobilenet_v1_025_96 (zoo, MLPerf Tiny visual wake words' network): MEAN keep_dims, shape
  arithmetic before the final RESHAPE, softmax head;
- mobilenet_s (tests/isro): an inverted-residual ADD, MEAN without keep_dims, softmax.
Every layer the chip writes is compared with the interpreter's tensor, and the host head's
output with the model output, on the default chip profile (so splitting and the profile's
memories are in play).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import compile_tflite, run, verify
from dtpu.isro.check import check_bundle
from dtpu.isro.isa import Op
from dtpu.isro.tflite_model import read

HERE = Path(__file__).resolve().parent
INT8 = {
    "resnet8": HERE / "isro" / "resnet8_int8.tflite",
    "mobilenet_s": HERE / "isro" / "mobilenet_s_int8.tflite",
    "dscnn_like": HERE / "models" / "zoo" / "dscnn_like__int8.tflite",
    "mobilenet_v1_025_96": HERE / "models" / "zoo" / "mobilenet_v1_025_96__int8.tflite",
}
EXPECT_OPS = {"resnet8": {Op.EADD, Op.AVGPOOL}, "mobilenet_s": {Op.EADD, Op.AVGPOOL},
              "dscnn_like": {Op.AVGPOOL, Op.DWCONV}, "mobilenet_v1_025_96": {Op.AVGPOOL, Op.DWCONV}}


@pytest.mark.parametrize("name", sorted(INT8))
def test_int8_whole_network_bit_exact_layer_by_layer(name):
    path = INT8[name]
    model = read(path)
    bundle = compile_tflite(path)
    assert EXPECT_OPS[name] <= {i.op for i in bundle.program}
    assert bundle.meta["heads"] and bundle.meta["heads"][0]["kind"] == "softmax"
    assert check_bundle(bundle) == []
    shape = model.tensors[model.inputs[0]].shape
    for seed in range(2):
        x = np.random.default_rng(seed).random(shape).astype(np.float32)
        if model.tensors[model.inputs[0]].dtype == np.int8 and seed:
            x = np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)
        result = run(bundle, x)
        checks = verify.against_tflite(bundle, result, path, x)
        compared = [c for c in checks if not c.note]
        bad = [str(c) for c in compared if not c.exact]
        assert not bad, "\n".join(bad)
        assert len(compared) >= len(bundle.layers) - 3          # only ADD-in-place inputs skipped
        assert compared[-1].kind == "host"                       # the softmax head, bit for bit
        ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
        np.testing.assert_array_equal(result.output, ref)


def test_split_and_reuse_do_not_change_resnet8():
    path = INT8["resnet8"]
    x = np.random.default_rng(3).random((1, 32, 32, 3)).astype(np.float32)
    base = run(compile_tflite(path, pe=None, reuse=False), x)
    for pe, reuse in ((16, True), (100, None)):
        b = compile_tflite(path, pe=pe, reuse=reuse)
        assert check_bundle(b) == []
        r = run(b, x)
        np.testing.assert_array_equal(r.output, base.output)
        for name, y in base.layers.items():
            np.testing.assert_array_equal(r.layers[name], y)
    shared = compile_tflite(path, reuse=True)
    kept = compile_tflite(path, reuse=False)
    assert shared.meta["frame_bytes"] < kept.meta["frame_bytes"] / 2


def test_residual_block_input_is_stored_once_per_border():
    """The block input of a downsampling stage is read by a SAME 3x3/2 conv (border 0,1,0,1) and a
    VALID 1x1/2 projection (no border): stored bare, copied once with the border."""
    b = compile_tflite(INT8["resnet8"])
    copies = [m for m in b.layers if ".border" in m["name"]]
    assert len(copies) == 2 and all(m["kind"] == "maxpool" for m in copies)
    assert all(m["output"]["pad"] == [0, 1, 0, 1] for m in copies)


# -- Keras .h5 graphs (float): residual adds, pooling, softmax head --------------------------------

import json  # noqa: E402

from dtpu.isro import compile_h5, keras_h5  # noqa: E402
from dtpu.isro.compiler import compile_model  # noqa: E402
from dtpu.isro.ir import CompileError  # noqa: E402
from dtpu.isro.profile import Profile, load  # noqa: E402

FIX = HERE / "isro"
INDEX = json.loads((FIX / "fixtures.json").read_text())
EXPECTED = np.load(FIX / "expected.npz")


def _keras_input(name):
    shape = tuple(INDEX[name]["input_shape"])
    return np.random.default_rng(int(EXPECTED["seed"])).random((1,) + shape, dtype=np.float64).astype(np.float32)


@pytest.mark.parametrize("name", ["resnet8", "mobilenet_s"])
def test_keras_graphs_match_keras_layer_by_layer(name):
    x = _keras_input(name)
    model = keras_h5.read(FIX / f"{name}.h5")
    bundle = compile_h5(FIX / f"{name}.h5", x)
    assert check_bundle(bundle) == []
    assert Op.EADD in {i.op for i in bundle.program} and bundle.meta["heads"][0]["kind"] == "softmax"
    result = run(bundle)
    checks = verify.against_keras(bundle, result, model, x[0])
    assert all(c.ok for c in checks), [str(c) for c in checks if not c.ok]
    assert checks[-1].kind == "host"
    np.testing.assert_allclose(result.output, EXPECTED[name], rtol=1e-5, atol=1e-6)   # TensorFlow's own
    covered = {s for m in bundle.layers for s in m["sources"]} | {h["name"] for h in bundle.meta["heads"]}
    assert {layer.name for layer in model.layers} <= covered | {layer.name for layer in model.layers
                                                                if layer.class_name == "Dense"}


def _vgg(tmp_path, rng, widths=(64, 128, 256)):
    """A VGG-style net at realistic width: two 3x3 convolutions per block, 2x2 pooling, dense head."""
    from tests.test_isro_compiler import conv, layer, write_h5
    layers, weights, cin = [], {}, 3
    for bi, ch in enumerate(widths, 1):
        for ci in (1, 2):
            name = f"b{bi}c{ci}"
            layers.append(conv(name, ch, 3, padding="same", activation="relu"))
            weights[name] = {"kernel": rng.normal(0, (2 / (9 * cin)) ** 0.5, (3, 3, cin, ch)), "bias": rng.normal(0, 0.05, ch)}
            cin = ch
        layers.append(layer("MaxPooling2D", f"b{bi}p", pool_size=[2, 2], strides=[2, 2], padding="valid"))
    layers += [layer("Flatten", "flat"), layer("Dense", "fc", units=10, activation="softmax", use_bias=True)]
    weights["fc"] = {"kernel": rng.normal(0, 0.02, (4 * 4 * cin, 10)), "bias": np.zeros(10)}
    return write_h5(tmp_path / "vgg.h5", (32, 32, 3), layers, weights)


def test_vgg_of_realistic_width_needs_a_bigger_chip_and_fits_one(tmp_path):
    rng = np.random.default_rng(11)
    path = _vgg(tmp_path, rng)
    base = load()
    on_chip = Profile(**{**base.__dict__, "external": None})      # staging: tests/test_isro_staging.py
    with pytest.raises(CompileError, match=r"b3c2: its weights \(2,359,296 B\) end at byte [\d,]+ of filter memory, "
                                           r"past chip profile isro-asic-default's 4,194,304 B"):
        compile_h5(path, chip=on_chip)
    big = Profile(**{**base.__dict__, "name": "big-filter", "filter_bytes": 8 << 20})
    x = rng.random((1, 32, 32, 3)).astype(np.float32)
    bundle = compile_h5(path, x, chip=big)
    assert bundle.meta["reuse"] is True                # all outputs kept would not fit 1 MiB
    assert bundle.meta["frame_bytes"] <= base.frame_bytes
    assert Op.ADD in {i.op for i in bundle.program}     # 3x3x64 blocks exceed 256 PEs: split
    assert check_bundle(bundle) == []
    checks = verify.against_keras(bundle, run(bundle), keras_h5.read(path), x[0])
    assert all(c.ok for c in checks), [str(c) for c in checks if not c.ok]


# -- Keras 3 files (.keras zip and Keras 3 legacy .h5), read without TensorFlow or Keras -----------

K3 = np.load(FIX / "k3_expected.npz")


@pytest.mark.parametrize("file", ["k3net.keras", "k3net_k3.h5"])
def test_keras3_files_compile_and_match_keras3(file):
    x = np.random.default_rng(int(K3["seed"])).random((1, 12, 12, 3), dtype=np.float64).astype(np.float32)
    model = keras_h5.read(FIX / file)
    assert {layer.class_name for layer in model.layers} >= {"DepthwiseConv2D", "Add", "GlobalAveragePooling2D", "Softmax"}
    np.testing.assert_allclose(verify.keras_reference(model, x[0])["probs"], K3["k3net"][0], rtol=1e-5, atol=1e-6)
    bundle = compile_h5(FIX / file, x)
    assert check_bundle(bundle) == [] and bundle.meta["heads"][0]["name"] == "probs"
    result = run(bundle)
    checks = verify.against_keras(bundle, result, model, x[0])
    assert all(c.ok for c in checks), [str(c) for c in checks if not c.ok]
    np.testing.assert_allclose(result.output, K3["k3net"], rtol=1e-5, atol=1e-6)


def test_a_zip_that_is_not_a_keras_file_is_named(tmp_path):
    import zipfile
    p = tmp_path / "x.keras"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("readme.txt", "hi")
    with pytest.raises(CompileError, match=r"x.keras: a zip without config.json and model.weights.h5 is not a "
                                           r"Keras 3 .keras file \(it has readme.txt\)"):
        compile_model(p)


def test_model_input_read_with_two_borders_is_copied(tmp_path):
    from tests.test_isro_compiler import conv, layer, write_h5
    rng = np.random.default_rng(0)
    w = {"a": {"kernel": rng.normal(size=(3, 3, 2, 4)), "bias": np.zeros(4)},
         "b": {"kernel": rng.normal(size=(1, 1, 2, 4)), "bias": np.zeros(4)}}
    p = write_h5(tmp_path / "two.h5", (6, 6, 2), [conv("a", 4, 3, padding="same"), conv("b", 4, 1), layer("Add", "add")],
                 w, functional_inbound={"a": ["input"], "b": ["input"], "add": ["a", "b"]})
    x = rng.random((1, 6, 6, 2)).astype(np.float32)
    bundle = compile_h5(p, x)
    assert [m["name"] for m in bundle.layers] == ["input.border1_1_1_1", "a", "b", "add"]
    assert bundle.meta["input"]["pad"] == [0, 0, 0, 0] and check_bundle(bundle) == []
    checks = verify.against_keras(bundle, run(bundle), keras_h5.read(p), x[0])
    assert all(c.ok for c in checks) and checks[0].exact


def test_sigmoid_head_int8_bit_exact_and_float_matches_keras():
    """A binary classifier's LOGISTIC head on the host: TFLite's int8 table, many table entries."""
    path = FIX / "sigmoid_s_int8.tflite"
    bundle = compile_tflite(path)
    assert [h["kind"] for h in bundle.meta["heads"]] == ["sigmoid"]
    seen = set()
    for seed in range(60):
        x = np.random.default_rng(seed).random((1, 16, 16, 3)).astype(np.float32) * (1 + seed % 5)
        result = run(bundle, x)
        ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
        np.testing.assert_array_equal(result.output, ref)
        seen.add(int(result.chip_output.ravel()[0]))
    assert len(seen) >= 30                                # the test reaches many table entries
    x = _keras_input("sigmoid_s")
    keras = compile_h5(FIX / "sigmoid_s.h5", x)
    result = run(keras)
    checks = verify.against_keras(keras, result, keras_h5.read(FIX / "sigmoid_s.h5"), x[0])
    assert all(c.ok for c in checks) and checks[-1].kind == "host"
    np.testing.assert_allclose(result.output, EXPECTED["sigmoid_s"], rtol=1e-5, atol=1e-6)
