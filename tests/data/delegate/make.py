"""Regenerate the delegate's own small test models (the zoo in tests/models/ is the main set).

These cover what the zoo may not: models the delegate must refuse (hybrid, float16 weights,
non-constant filters), int16x8, a fully-connected net, partitions split by a CPU op, and an
input with a free batch dimension. Run with the models environment (TensorFlow 2.14):

    .venv-models/bin/python tests/data/delegate/make.py

index.json records, per model, how many CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED nodes the
delegate must leave on the CPU with its default options ("cpu_ops") and with ops including
fully_connected ("cpu_ops_fc").
"""
from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
RNG = np.random.default_rng(1234)
SHAPE = (12, 12, 3)


def representative(shape=SHAPE, count=32):
    def gen():
        for _ in range(count):
            yield [RNG.uniform(-1.0, 1.0, size=(1, *shape)).astype(np.float32)]
    return gen


def net_chain(shape=SHAPE):
    """conv -> dwconv -> conv: one partition, two tensors internal to it."""
    x = tf.keras.Input(shape=shape, batch_size=None)
    y = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu6")(x)
    y = tf.keras.layers.DepthwiseConv2D(3, strides=2, padding="same", activation="relu")(y)
    y = tf.keras.layers.Conv2D(16, 1, padding="valid")(y)
    return tf.keras.Model(x, y)


def net_split(shape=SHAPE):
    """conv(dilation 2) | maxpool (CPU) | dwconv(multiplier 2) -> conv(stride 2, valid): two partitions."""
    x = tf.keras.Input(shape=shape)
    kernel = tf.constant(RNG.normal(0.0, 0.3, size=(3, 3, shape[2], 6)).astype(np.float32))
    bias = tf.constant(RNG.normal(0.0, 0.1, size=(6,)).astype(np.float32))
    # tf.nn.conv2d keeps the dilation on the op (Keras would wrap it in SPACE_TO_BATCH_ND).
    y = tf.keras.layers.Lambda(
        lambda t: tf.nn.relu(tf.nn.conv2d(t, kernel, strides=1, padding="VALID", dilations=2) + bias))(x)
    y = tf.keras.layers.MaxPooling2D(2, strides=1)(y)
    y = tf.keras.layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same")(y)
    y = tf.keras.layers.Conv2D(5, (3, 2), strides=(2, 1), padding="valid", activation="relu6")(y)
    return tf.keras.Model(x, y)


def net_wide(shape=(8, 8, 16)):
    """Layers big enough (>= 1024 weights) for dynamic-range quantization to quantize them."""
    x = tf.keras.Input(shape=shape)
    y = tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    y = tf.keras.layers.DepthwiseConv2D(3, padding="same")(y)
    y = tf.keras.layers.Conv2D(48, 1, padding="same", activation="relu6")(y)
    return tf.keras.Model(x, y)


def net_fc(shape=(6, 6, 4)):
    x = tf.keras.Input(shape=shape)
    y = tf.keras.layers.Conv2D(4, 3, padding="same", activation="relu")(x)
    y = tf.keras.layers.Flatten()(y)
    y = tf.keras.layers.Dense(10, activation="relu")(y)
    return tf.keras.Model(x, y)


def convert(model, kind, shape=SHAPE):
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind == "int8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative(shape)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    elif kind == "int16x8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative(shape)
        conv.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        conv.inference_input_type = tf.int16
        conv.inference_output_type = tf.int16
    elif kind == "hybrid":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    elif kind == "float16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif kind != "float32":
        raise ValueError(kind)
    return conv.convert()


def dynamic_filter_model():
    """CONV_2D whose filter is a model input: must stay on the CPU."""
    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32),
                                  tf.TensorSpec([3, 3, 3, 4], tf.float32)])
    def f(x, w):
        return tf.nn.conv2d(x, w, strides=1, padding="SAME")
    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    return conv.convert()


def hybrid_ops(content: bytes) -> dict[str, int]:
    """Conv-like ops with float32 activations but integer weights (what the delegate refuses)."""
    interp = tf.lite.Interpreter(model_content=content)
    types = {t["index"]: t["dtype"] for t in interp.get_tensor_details()}
    counts: dict[str, int] = {}
    for op in interp._get_ops_details():
        if op["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            x, w = op["inputs"][0], op["inputs"][1]
            if types[x] == np.float32 and types[w] in (np.int8, np.uint8):
                counts[op["op_name"]] = counts.get(op["op_name"], 0) + 1
    return counts


def count_ops(content: bytes) -> dict[str, int]:
    interp = tf.lite.Interpreter(model_content=content)
    counts: dict[str, int] = {}
    for op in interp._get_ops_details():
        counts[op["op_name"]] = counts.get(op["op_name"], 0) + 1
    return counts


def main() -> None:
    tf.keras.utils.set_random_seed(7)
    chain, split, fc = net_chain(), net_split(), net_fc()
    models = {
        "chain_int8": (convert(chain, "int8"), "all"),
        "chain_float32": (convert(chain, "float32"), "all"),
        "split_int8": (convert(split, "int8"), "all"),
        "split_int16x8": (convert(split, "int16x8"), "all"),
        "split_float32": (convert(split, "float32"), "all"),
        "fc_int8": (convert(fc, "int8", (6, 6, 4)), "all"),
        "fc_float32": (convert(fc, "float32", (6, 6, 4)), "all"),
        "wide_hybrid": (convert(net_wide(), "hybrid", (8, 8, 16)), "auto"),
        "chain_float16": (convert(chain, "float16"), "none"),
        "dynamic_filter": (dynamic_filter_model(), "none"),
    }
    index = {}
    for name, (content, claims) in models.items():
        (HERE / f"{name}.tflite").write_bytes(content)
        ops = count_ops(content)
        conv_ops = {k: v for k, v in ops.items()
                    if k in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")}
        if claims == "auto":
            cpu = cpu_fc = hybrid_ops(content)
            assert cpu, f"{name}: nothing was quantized"
        elif claims == "all":
            cpu = {"FULLY_CONNECTED": conv_ops.get("FULLY_CONNECTED", 0)}
            cpu_fc = {}
        else:
            cpu = dict(conv_ops)
            cpu_fc = dict(conv_ops)
        index[name] = {"file": f"{name}.tflite", "ops": ops, "cpu_ops": cpu, "cpu_ops_fc": cpu_fc}
        print(f"{name}: {len(content)} bytes, {ops}")
    (HERE / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
