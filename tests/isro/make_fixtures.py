"""Regenerate the ISRO compiler's test models (tests/isro/*.h5, *.tflite, expected.npz).

Needs TensorFlow, so it runs in the models environment, never in the tests:

    .venv-models/bin/python tests/isro/make_fixtures.py

Four small sequential networks with random weights, shaped after the families the report
verified (AlexNet, VGG, ResNet) plus one that exercises the remaining layer options:

- alexnet_s: 11x11 stride-4 stem, max pooling, SAME 5x5 and 3x3 convolutions, three dense layers
  with dropout; the last pooling leaves 2x2 so the flatten reordering matters.
- vgg_s: three blocks of two 3x3 ReLU convolutions and a 2x2 pooling, two dense layers.
- resnet_s: ResNet's stem (ZeroPadding 3, 7x7 stride 2 conv, BN, ReLU, ZeroPadding 1, 3x3/2 max
  pool) and plain conv-BN-ReLU blocks with stride-2 downsampling (made before the chip model had
  EADD, so no residual add), biasless convolutions as in ResNet.
- resnet8 (functional): MLPerf Tiny's ResNet-8 with residual adds, average pooling and softmax.
- mobilenet_s (functional): depthwise-separable blocks, an inverted residual, global average
  pooling, softmax. These two get no float32 .tflite (fixture budget); `make_fixtures.py resnet8
  mobilenet_s` regenerates just them with their own seeds.
- mix_s (functional API): LeakyReLU, ReLU(max_value=6), depthwise with a depth multiplier, a
  dilated convolution, asymmetric stride and kernel, SAME max pooling with an odd size, BN after Dense.

Each is saved as Keras .h5, converted to float32 TFLite, and to full-integer int8 TFLite
(alexnet_s/resnet_s with int8 input, vgg_s/mix_s with float input behind QUANTIZE). BN gets
random statistics so folding is not the identity. The Keras outputs for the inputs the tests
use (numpy default_rng(SEED)) go to expected.npz.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = 2025
L = tf.keras.layers


def alexnet_s():
    return tf.keras.Sequential([
        tf.keras.Input((67, 67, 3), name="image"),
        L.Conv2D(8, 11, strides=4, activation="relu", name="conv1"),
        L.MaxPooling2D(3, strides=2, name="pool1"),
        L.Conv2D(16, 5, padding="same", activation="relu", name="conv2"),
        L.MaxPooling2D(3, strides=2, name="pool2"),
        L.Conv2D(24, 3, padding="same", activation="relu", name="conv3"),
        L.Conv2D(24, 3, padding="same", activation="relu", name="conv4"),
        L.Conv2D(16, 3, padding="same", activation="relu", name="conv5"),
        L.MaxPooling2D(2, strides=1, name="pool5"),
        L.Flatten(name="flatten"),
        L.Dense(32, activation="relu", name="fc6"),
        L.Dropout(0.5, name="drop6"),
        L.Dense(32, activation="relu", name="fc7"),
        L.Dropout(0.5, name="drop7"),
        L.Dense(10, name="fc8"),
    ], name="alexnet_s")


def vgg_s():
    layers = [tf.keras.Input((32, 32, 3), name="image")]
    for block, ch in enumerate((8, 16, 16), 1):
        for i in (1, 2):
            layers.append(L.Conv2D(ch, 3, padding="same", activation="relu", name=f"block{block}_conv{i}"))
        layers.append(L.MaxPooling2D(2, name=f"block{block}_pool"))
    layers += [L.Flatten(name="flatten"), L.Dense(32, activation="relu", name="fc1"), L.Dense(10, name="predictions")]
    return tf.keras.Sequential(layers, name="vgg_s")


def resnet_s():
    def cbr(ch, k, s, name):
        return [L.Conv2D(ch, k, strides=s, padding="same", use_bias=False, name=f"{name}_conv"),
                L.BatchNormalization(epsilon=1.001e-5, name=f"{name}_bn"),
                L.ReLU(name=f"{name}_relu")]
    layers = [tf.keras.Input((32, 32, 3), name="image"),
              L.ZeroPadding2D(3, name="conv1_pad"),
              L.Conv2D(8, 7, strides=2, use_bias=False, name="conv1_conv"),
              L.BatchNormalization(epsilon=1.001e-5, name="conv1_bn"),
              L.ReLU(name="conv1_relu"),
              L.ZeroPadding2D(1, name="pool1_pad"),
              L.MaxPooling2D(3, strides=2, name="pool1_pool")]
    layers += cbr(8, 3, 1, "conv2_block1") + cbr(8, 3, 1, "conv2_block2")
    layers += cbr(16, 3, 2, "conv3_block1") + cbr(16, 3, 1, "conv3_block2")
    layers += cbr(32, 3, 2, "conv4_block1") + cbr(32, 1, 1, "conv4_block2")
    layers += [L.Flatten(name="flatten"), L.Dense(10, name="predictions")]
    return tf.keras.Sequential(layers, name="resnet_s")


def mix_s():
    inp = tf.keras.Input((13, 11, 4), name="image")
    x = L.Conv2D(8, (3, 2), strides=(2, 1), padding="same", name="conv_a")(inp)
    x = L.LeakyReLU(0.1, name="leaky_a")(x)
    x = L.DepthwiseConv2D(3, depth_multiplier=2, padding="same", name="dw_b")(x)
    x = L.ReLU(max_value=6.0, name="relu6_b")(x)
    x = L.Conv2D(8, 3, dilation_rate=2, activation="relu", name="conv_c")(x)
    x = L.MaxPooling2D(3, strides=2, padding="same", name="pool_c")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(16, name="fc_d")(x)
    x = L.BatchNormalization(name="bn_d")(x)
    x = L.LeakyReLU(0.2, name="leaky_d")(x)
    x = L.Dense(4, name="fc_e")(x)
    return tf.keras.Model(inp, x, name="mix_s")


def resnet8():
    """MLPerf Tiny's image-classification ResNet-8 (CIFAR-10, 16/32/64 channels, residual adds with
    1x1 stride-2 projection shortcuts, 8x8 average pooling, softmax), at its real width."""
    inp = tf.keras.Input((32, 32, 3), name="image")
    x = L.Conv2D(16, 3, padding="same", name="stem_conv")(inp)
    x = L.BatchNormalization(name="stem_bn")(x)
    x = L.Activation("relu", name="stem_relu")(x)
    for stage, (ch, stride) in enumerate(((16, 1), (32, 2), (64, 2)), 1):
        y = L.Conv2D(ch, 3, strides=stride, padding="same", name=f"s{stage}_conv1")(x)
        y = L.BatchNormalization(name=f"s{stage}_bn1")(y)
        y = L.Activation("relu", name=f"s{stage}_relu1")(y)
        y = L.Conv2D(ch, 3, padding="same", name=f"s{stage}_conv2")(y)
        y = L.BatchNormalization(name=f"s{stage}_bn2")(y)
        if stride != 1:
            x = L.Conv2D(ch, 1, strides=stride, name=f"s{stage}_short")(x)
        x = L.Add(name=f"s{stage}_add")([x, y])
        x = L.Activation("relu", name=f"s{stage}_relu2")(x)
    x = L.AveragePooling2D(8, name="pool")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(10, activation="softmax", name="fc")(x)
    return tf.keras.Model(inp, x, name="resnet8")


def mobilenet_s():
    """A MobileNet-style net: depthwise-separable blocks with BN and ReLU6, a residual add (v2
    style), global average pooling and a softmax classifier."""
    inp = tf.keras.Input((24, 24, 3), name="image")
    x = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False, name="stem")(inp)
    x = L.BatchNormalization(name="stem_bn")(x)
    x = L.ReLU(6.0, name="stem_relu")(x)
    for i, (ch, stride) in enumerate(((16, 1), (16, 1), (24, 2)), 1):
        y = L.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False, name=f"b{i}_dw")(x)
        y = L.BatchNormalization(name=f"b{i}_dw_bn")(y)
        y = L.ReLU(6.0, name=f"b{i}_dw_relu")(y)
        y = L.Conv2D(ch, 1, use_bias=False, name=f"b{i}_pw")(y)
        y = L.BatchNormalization(name=f"b{i}_pw_bn")(y)
        if stride == 1 and x.shape[-1] == ch:
            y = L.Add(name=f"b{i}_add")([x, y])
        x = L.ReLU(6.0, name=f"b{i}_relu")(y)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    x = L.Dense(5, name="logits")(x)
    x = L.Softmax(name="probs")(x)
    return tf.keras.Model(inp, x, name="mobilenet_s")


def sigmoid_s():
    """A binary classifier: a sigmoid head (TFLite LOGISTIC) after global average pooling."""
    inp = tf.keras.Input((16, 16, 3), name="image")
    x = L.Conv2D(6, 3, strides=2, padding="same", activation="relu", name="conv")(inp)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    x = L.Dense(1, activation="sigmoid", name="score")(x)
    return tf.keras.Model(inp, x, name="sigmoid_s")


NETS = {"alexnet_s": (alexnet_s, "int8"), "vgg_s": (vgg_s, "float"), "resnet_s": (resnet_s, "int8"),
        "mix_s": (mix_s, "float"), "resnet8": (resnet8, "int8"), "mobilenet_s": (mobilenet_s, "int8"),
        "sigmoid_s": (sigmoid_s, "int8")}
# whole networks (issue 16): no float32 .tflite, to keep the committed fixtures small
NO_F32_TFLITE = ("resnet8", "mobilenet_s", "sigmoid_s")


def randomize(model, rng):
    """Random weights with a little spread everywhere, BN statistics included."""
    for layer in model.layers:
        ws = layer.get_weights()
        if not ws:
            continue
        if isinstance(layer, L.BatchNormalization):
            c = ws[0].shape[0]
            new = [rng.uniform(0.5, 1.5, c), rng.uniform(-0.2, 0.2, c), rng.uniform(-0.2, 0.2, c),
                   rng.uniform(0.5, 2.0, c)]
        else:
            new = [w if w.ndim > 1 else rng.uniform(-0.1, 0.1, w.shape) for w in ws]
        layer.set_weights([np.asarray(w, np.float32) for w in new])


def inputs(shape, seed=SEED, n=1):
    """The test inputs: uniform [0, 1), like a normalized image (the tests call this too)."""
    return np.random.default_rng(seed).random((n,) + tuple(shape), dtype=np.float64).astype(np.float32)


def main(only: list[str] | None = None) -> None:
    """Regenerate every net, or only the named ones (keeping the others' files and entries)."""
    expected, index = {}, {}
    if only:
        old = np.load(HERE / "expected.npz")
        expected = {k: old[k] for k in old.files if k != "seed"}
        index = json.loads((HERE / "fixtures.json").read_text())
    shared = np.random.default_rng(SEED)
    tf.keras.utils.set_random_seed(SEED)
    for name, (make, io) in NETS.items():
        if only and name not in only:
            continue
        rng = shared
        if only:                                 # a net's own seeds: independent of the others
            tf.keras.utils.set_random_seed(SEED + sorted(NETS).index(name))
            rng = np.random.default_rng(SEED + sorted(NETS).index(name))
        model = make()
        randomize(model, rng)
        model.save(HERE / f"{name}.h5", include_optimizer=False)
        shape = model.input_shape[1:]
        x = inputs(shape)
        expected[name] = model(x).numpy()

        if name not in NO_F32_TFLITE:
            conv = tf.lite.TFLiteConverter.from_keras_model(model)
            (HERE / f"{name}_f32.tflite").write_bytes(conv.convert())

        def representative(shape=shape):
            calib = np.random.default_rng(SEED + 1)
            for _ in range(32):
                yield [calib.random((1,) + tuple(shape), dtype=np.float64).astype(np.float32)]
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if io == "int8":
            conv.inference_input_type = tf.int8
            conv.inference_output_type = tf.int8
        (HERE / f"{name}_int8.tflite").write_bytes(conv.convert())
        index[name] = {"input_shape": list(shape), "int8_io": io, "params": int(model.count_params()),
                       "layers": [layer.name for layer in model.layers]}
        print(f"{name}: {model.count_params()} parameters, output {expected[name].shape}")
    np.savez(HERE / "expected.npz", seed=SEED, **expected)
    (HERE / "fixtures.json").write_text(json.dumps(index, indent=1) + "\n")
    total = sum(p.stat().st_size for p in HERE.iterdir() if p.suffix in (".h5", ".tflite", ".npz", ".json"))
    print(f"fixtures: {total / 1024:.0f} KiB")


if __name__ == "__main__":
    import sys
    main(sys.argv[1:] or None)
