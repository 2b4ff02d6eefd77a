#!/usr/bin/env python3
"""Generate the ImageNet-scale models of the test zoo (kind "imagenet" in zoo/index.json).

Real architectures at 224x224x3 with 1000 classes, random weights (make_zoo.randomize),
BatchNormalization statistics measured on the calibration data (so deep nets stay in a sane
numeric range), and integer quantization calibrated on random data, all seeded by the model's
name, so they are deterministic. Needs TensorFlow (tensorflow-cpu 2.14) like make_zoo.py;
the tests do not.

    python tests/models/make_imagenet.py              # the committed set -> tests/models/zoo/
    python tests/models/make_imagenet.py --only v2    # a subset (substring of the names)
    python tests/models/make_imagenet.py --cache      # the large set -> the model cache

The committed set is what tests/test_models_at_scale.py runs by default; it must keep the whole
zoo (tests/models/zoo) under ZOO_BUDGET. The --cache set is too big to commit (tens of MB each):
it goes to tests/models/cache/ (git-ignored; env DTPU_MODEL_CACHE overrides the place) with an
index.json of the same format, and only slow tests use it.

Every model gets a second output, the last feature map before global pooling: the classifier
output alone averages that map over 7x7 pixels, so an error in a single pixel of the last
convolutions could round away; the feature map shows every pixel.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_zoo as z  # noqa: E402  (sets TF_CPP_MIN_LOG_LEVEL before TensorFlow loads)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ZOO_BUDGET = 26 * 1000 * 1000  # the whole committed zoo, bytes (issue #12: "about 25 MB")
L = tf.keras.layers
N_BN = 8  # calibration samples that set the BatchNormalization statistics


def cache_dir() -> Path:
    return Path(os.environ.get("DTPU_MODEL_CACHE") or HERE / "cache")


# ---------------------------------------------------------------------------------------
# Architectures
# ---------------------------------------------------------------------------------------
def _randomized(model: tf.keras.Model, name: str) -> tf.keras.Model:
    """make_zoo.randomize, except Normalization layers (EfficientNet's input preprocessing):
    their weights are a mean and a variance (a random variance could be negative), kept at the
    identity they have without adapt()."""
    keep = {layer.name: layer.get_weights() for layer in model.layers
            if isinstance(layer, L.Normalization)}
    z.randomize(model, np.random.default_rng(z.seed_of("net:" + name)))
    for layer_name, ws in keep.items():
        model.get_layer(layer_name).set_weights(ws)
    return model


def _normalize_batchnorm(model: tf.keras.Model, data: list[np.ndarray]) -> None:
    """Set each BatchNormalization's moving mean and variance to the statistics of its actual
    input on `data`, in graph order (so every layer sees the already normalized layers before
    it); gamma and beta stay random.

    With make_zoo.randomize's statistics alone, deep nets are numerically degenerate: its
    kernels are skewed to one sign (for one-sided per-tensor weights), so uncapped ReLU layers
    grow by about 10x per layer or die, and ResNet's residual sums reach scales of 1e-8 and
    7e3, which TFLite's own ADD cannot even prepare (it aborts). Normalized, every layer's
    activations stay in a range where the int8 quantization has something to represent.
    """
    bns = [layer for layer in model.layers if isinstance(layer, L.BatchNormalization)]
    x = np.concatenate(data)
    for bn in bns:
        probe = tf.keras.Model(model.input, bn.input)
        a = probe(x, training=False).numpy().astype(np.float64)
        axes = tuple(range(a.ndim - 1))
        mean, var = a.mean(axis=axes), a.var(axis=axes)
        var = np.where(var > 1e-12, var, 1.0)  # a channel with a constant input
        affine = bn.get_weights()[:-2]  # gamma and beta, where the layer has them
        bn.set_weights([*affine, mean.astype(np.float32), var.astype(np.float32)])


def _with_features(model: tf.keras.Model, layer: str) -> tf.keras.Model:
    """The model with a second output: `layer`'s output (the last feature map)."""
    return tf.keras.Model(model.input, [model.output, model.get_layer(layer).output],
                          name=model.name)


def _cbr(x, filters, kernel, strides=1, padding="same", name=""):
    """Conv (no bias) + BatchNormalization + ReLU, as in Inception / ResNet."""
    x = L.Conv2D(filters, kernel, strides=strides, padding=padding, use_bias=False,
                 name=name)(x)
    x = L.BatchNormalization(name=name + "_bn")(x)
    return L.ReLU(name=name + "_relu")(x)


def mobilenet_v1_224():
    return tf.keras.applications.MobileNet(alpha=1.0, input_shape=(224, 224, 3), weights=None,
                                           classifier_activation=None), "conv_pw_13_relu"


def mobilenet_v1_050_224():
    return tf.keras.applications.MobileNet(alpha=0.5, input_shape=(224, 224, 3), weights=None,
                                           classifier_activation=None), "conv_pw_13_relu"


def mobilenet_v2_224():
    return tf.keras.applications.MobileNetV2(alpha=1.0, input_shape=(224, 224, 3),
                                             weights=None, classifier_activation=None), "out_relu"


def efficientnet_b0_224():
    """keras.applications.EfficientNetB0: MBConv blocks with squeeze-excite and swish; its
    Rescaling + Normalization input layers stay (they convert to integer MUL/SUB ops)."""
    return tf.keras.applications.EfficientNetB0(weights=None, input_shape=(224, 224, 3),
                                                classifier_activation=None), "top_activation"


def resnet50_224():
    return tf.keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3),
                                          classifier_activation=None), "conv5_block3_out"


def inception_v3_299():
    return tf.keras.applications.InceptionV3(weights=None, input_shape=(299, 299, 3),
                                             classifier_activation=None), "mixed10"


def inception_like_224():
    """Inception-v3 structure at about a tenth of its parameters: the VALID stem with max
    pools, two Inception-A blocks (1x1, 5x5, double 3x3, average-pool branches) at 25x25, a
    grid reduction to 12x12 (stride-2 VALID convolutions beside a max pool), two Inception-B
    blocks whose branches factor 7x7 into 1x7 and 7x1 convolutions, then a 1x1 convolution to
    512 channels, global average pool and a 1000-way dense layer."""
    x = tf.keras.Input(shape=(224, 224, 3), batch_size=1, name="input")
    y = _cbr(x, 32, 3, 2, "valid", "stem1")                # 111
    y = _cbr(y, 32, 3, 1, "valid", "stem2")                # 109
    y = _cbr(y, 64, 3, name="stem3")
    y = L.MaxPooling2D(3, 2, name="stem_pool1")(y)         # 54
    y = _cbr(y, 80, 1, name="stem4")
    y = _cbr(y, 192, 3, 1, "valid", "stem5")               # 52
    y = L.MaxPooling2D(3, 2, name="stem_pool2")(y)         # 25
    for i, pool_proj in enumerate((32, 64)):
        n = f"a{i}"
        b1 = _cbr(y, 64, 1, name=n + "_1x1")
        b5 = _cbr(_cbr(y, 48, 1, name=n + "_5x5r"), 64, 5, name=n + "_5x5")
        b3 = _cbr(y, 64, 1, name=n + "_3x3r")
        b3 = _cbr(_cbr(b3, 96, 3, name=n + "_3x3a"), 96, 3, name=n + "_3x3b")
        bp = L.AveragePooling2D(3, 1, "same", name=n + "_pool")(y)
        bp = _cbr(bp, pool_proj, 1, name=n + "_poolproj")
        y = L.Concatenate(name=n)([b1, b5, b3, bp])        # 256, 288
    r1 = _cbr(y, 96, 3, 2, "valid", "red_3x3")             # 12
    r2 = _cbr(_cbr(y, 64, 1, name="red_dbl_r"), 96, 3, name="red_dbl_a")
    r2 = _cbr(r2, 32, 3, 2, "valid", "red_dbl_b")
    rp = L.MaxPooling2D(3, 2, name="red_pool")(y)
    y = L.Concatenate(name="red")([r1, r2, rp])            # 96 + 32 + 288 = 416
    for i, c7 in enumerate((64, 80)):
        n = f"b{i}"
        b1 = _cbr(y, 96, 1, name=n + "_1x1")
        b7 = _cbr(y, c7, 1, name=n + "_7r")
        b7 = _cbr(_cbr(b7, c7, (1, 7), name=n + "_1x7"), 96, (7, 1), name=n + "_7x1")
        bd = _cbr(y, c7, 1, name=n + "_d7r")
        bd = _cbr(_cbr(bd, c7, (7, 1), name=n + "_d7x1a"), c7, (1, 7), name=n + "_d1x7a")
        bd = _cbr(_cbr(bd, c7, (7, 1), name=n + "_d7x1b"), 96, (1, 7), name=n + "_d1x7b")
        bp = L.AveragePooling2D(3, 1, "same", name=n + "_pool")(y)
        bp = _cbr(bp, 96, 1, name=n + "_poolproj")
        y = L.Concatenate(name=n)([b1, b7, bd, bp])        # 384
    y = _cbr(y, 512, 1, name="top")
    f = L.GlobalAveragePooling2D(name="gap")(y)
    out = L.Dense(1000, name="logits")(f)
    return tf.keras.Model(x, out, name="inception_like_224"), "top_relu"


def resnet18_half_224():
    """ResNet-18 (basic blocks, 2-2-2-2, residual ADDs, 1x1 stride-2 projection shortcuts) at
    half width (32-64-128-256 channels) to fit the zoo's size budget; 224x224, 1000 classes."""
    x = tf.keras.Input(shape=(224, 224, 3), batch_size=1, name="input")
    y = _cbr(x, 32, 7, 2, name="conv1")                    # 112
    y = L.MaxPooling2D(3, 2, "same", name="pool1")(y)      # 56
    for s, width in enumerate((32, 64, 128, 256)):
        for b in range(2):
            n = f"s{s}b{b}"
            stride = 2 if (s > 0 and b == 0) else 1
            r = _cbr(y, width, 3, stride, name=n + "_a")
            r = L.Conv2D(width, 3, padding="same", use_bias=False, name=n + "_b")(r)
            r = L.BatchNormalization(name=n + "_b_bn")(r)
            if stride != 1 or y.shape[-1] != width:
                y = L.Conv2D(width, 1, strides=stride, use_bias=False, name=n + "_proj")(y)
                y = L.BatchNormalization(name=n + "_proj_bn")(y)
            y = L.ReLU(name=n + "_out")(L.Add(name=n + "_add")([y, r]))
    f = L.GlobalAveragePooling2D(name="gap")(y)
    out = L.Dense(1000, name="logits")(f)
    return tf.keras.Model(x, out, name="resnet18_half_224"), "s3b1_out"


# name -> (builder, modes, description). Committed (zoo) and cached sets.
ZOO_NETS = {
    "mobilenet_v1_224": (mobilenet_v1_224, ("int8",),
                         "keras.applications.MobileNet(alpha=1.0, 224): 13 depthwise-separable "
                         "blocks, explicit PAD before the stride-2 depthwise layers, 1x1 conv "
                         "classifier"),
    "mobilenet_v2_224": (mobilenet_v2_224, ("int8",),
                         "keras.applications.MobileNetV2(alpha=1.0, 224): inverted residual "
                         "blocks (expand 1x1, depthwise 3x3, project 1x1, residual ADD)"),
    "efficientnet_b0_224": (efficientnet_b0_224, ("int8",),
                            "keras.applications.EfficientNetB0 (224): MBConv blocks with "
                            "squeeze-excite (MEAN, 1x1 convs on 1x1 maps, LOGISTIC, MUL), swish, "
                            "depthwise 3x3 and 5x5"),
    "inception_like_224": (inception_like_224, ("int8",),
                           "Inception-v3 structure at ~1/10 of its parameters (224): VALID stem, "
                           "Inception-A blocks, grid reduction, Inception-B blocks with 1x7 / "
                           "7x1 convolutions, CONCATENATION, AVERAGE_POOL_2D"),
    "resnet18_half_224": (resnet18_half_224, ("int8",),
                          "ResNet-18 at half width (32..256) at 224: basic blocks with residual "
                          "ADDs, 7x7 stride-2 stem, 1x1 stride-2 projections"),
    "mobilenet_v1_050_224": (mobilenet_v1_050_224, ("int8_per_tensor", "uint8"),
                             "keras.applications.MobileNet(alpha=0.5, 224), the architecture of "
                             "the published mobilenet_v1_0.5_224_quant (uint8)"),
}
CACHE_NETS = {
    "mobilenet_v1_224": (mobilenet_v1_224, ("int8_per_tensor", "uint8"),
                         ZOO_NETS["mobilenet_v1_224"][2]),
    "resnet50_224": (resnet50_224, ("int8",),
                     "keras.applications.ResNet50 (224): bottleneck blocks, residual ADDs"),
    "inception_v3_299": (inception_v3_299, ("int8",),
                         "keras.applications.InceptionV3 (299): the full Inception v3"),
}


# ---------------------------------------------------------------------------------------
def write_index(path: Path, entries: list[dict]) -> None:
    """One entry per line, as make_zoo.py writes it."""
    path.write_text("[\n" + ",\n".join(json.dumps(e, separators=(",", ":")) for e in entries)
                    + "\n]\n")


def generate(nets: dict, out: Path, only: str, problems: list[str]) -> list[dict]:
    entries = []
    for net, (builder, modes, what) in nets.items():
        names = [f"{net}__{m}" for m in modes]
        if only and not any(only in n for n in names):
            continue
        t0 = time.time()
        tf.keras.backend.clear_session()
        try:
            base, features = builder()
            base = _randomized(base, net)
            shape = (1, *base.input_shape[1:])
            data = z.calib_data(shape, net)
            _normalize_batchnorm(base, data[:N_BN])
            model = _with_features(base, features)
        except Exception as ex:  # record and go on with the other nets
            problems.append(f"{net}: building failed: {str(ex).splitlines()[0][:200]}")
            continue
        params = {"input_shape": list(shape), "batch": 1, "keras_layers": len(model.layers),
                  "parameters": int(model.count_params()), "features_layer": features,
                  "architecture": what}
        pt_buf = None
        for mode in modes:
            name = f"{net}__{mode}"
            extra = None
            try:
                if mode == "uint8":
                    if pt_buf is None:
                        pt_buf = z.convert(model, "int8_per_tensor", data)
                    buf, info = z.uint8_from_int8(pt_buf, 6)
                    extra = {"derived_from": f"{net}__int8_per_tensor", "output_offset": 128,
                             "weight_shift_requested": 6, **info,
                             "vs_int8_plus_128": z.compare_uint8(buf, pt_buf, name, samples=2)}
                else:
                    buf = z.convert(model, mode, data)
                    if mode == "int8_per_tensor":
                        pt_buf = buf
            except Exception as ex:  # record and go on, like make_zoo.py
                problems.append(f"{name}: conversion failed: {str(ex).splitlines()[0][:200]}")
                continue
            (out / f"{name}.tflite").write_bytes(buf)
            e = {"name": name, "file": f"{name}.tflite", "mode": mode, "kind": "imagenet",
                 "params": params}
            e.update(z.analyze(buf))
            e["size_bytes"] = len(buf)
            e["notes"] = (f"{net}: random weights, BatchNormalization statistics of its input on "
                          f"the calibration data (folded by "
                          f"the converter); outputs: the logits (no softmax) and the feature map "
                          f"of {features}; " + z.MODE_NOTES[mode])
            if extra:
                e.update(extra)
            entries.append(e)
            oc = e["op_counts"]
            print(f"  {name:40s} {len(buf):9d} B  CONV_2D {oc['CONV_2D']:3d}  DEPTHWISE "
                  f"{oc['DEPTHWISE_CONV_2D']:3d}  {time.time() - t0:5.0f} s", flush=True)
    return entries


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="substring of model names to (re)generate")
    ap.add_argument("--cache", action="store_true",
                    help="generate the large set into the model cache instead of the zoo")
    args = ap.parse_args(argv)
    tf.get_logger().setLevel("ERROR")
    out = cache_dir() if args.cache else z.ZOO
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.json"
    problems: list[str] = []
    fresh = generate(CACHE_NETS if args.cache else ZOO_NETS, out, args.only, problems)
    old = json.loads(index.read_text()) if index.exists() else []
    by_name = {e["name"]: e for e in fresh}
    entries = [by_name.pop(e["name"], e) for e in old] + list(by_name.values())
    write_index(index, entries)
    total = sum((out / e["file"]).stat().st_size for e in entries) + index.stat().st_size
    print(f"{len(fresh)} models written; {len(entries)} in {index}, {total} bytes")
    if not args.cache and total > ZOO_BUDGET:
        problems.append(f"zoo is {total} bytes > budget {ZOO_BUDGET}")
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
