#!/usr/bin/env python3
"""Generate the DTPU test model zoo (tests/models/zoo/*.tflite + zoo/index.json).

Needs TensorFlow (tensorflow-cpu 2.14, numpy<2, ml-dtypes 0.2); the tests that use
the zoo do not: they read the committed .tflite files through tests/models/zoo.py.

    python tests/models/make_zoo.py            # regenerate everything (deterministic)
    python tests/models/make_zoo.py --only dw_ # regenerate a subset, keep the other entries

See tests/models/README.md for the modes and the limitations found.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.lite.python import schema_py_generated as schema  # noqa: E402
from tensorflow.lite.tools import flatbuffer_utils  # noqa: E402

HERE = Path(__file__).resolve().parent
ZOO = HERE / "zoo"
INDEX = ZOO / "index.json"
SIZE_BUDGET = 2 * 1024 * 1024
N_CALIB = 16  # representative-dataset samples

ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")

_OPNAME = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
_ACTNAME = {v: k for k, v in vars(schema.ActivationFunctionType).items() if not k.startswith("_")}
_TTNAME = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
_PADNAME = {v: k for k, v in vars(schema.Padding).items() if not k.startswith("_")}


def seed_of(text: str) -> int:
    return zlib.crc32(text.encode())


# ---------------------------------------------------------------------------------------
# The single-layer grid. Each spec names the modes it is generated in.
# ---------------------------------------------------------------------------------------
ALL8 = "int8"
PT = ("int8_per_tensor", "uint8", "uint8_fakequant")
FIO = ("int8_float_io",)
I16 = ("int16x8",)
F32 = ("float32",)
F16 = ("float16_weights",)
DR = ("dynamic_range", "float32")


def conv(hw, cin, cout, k, s=1, d=1, pad="same", act="NONE", bias=True, batch=1, modes=()):
    return dict(kind="conv2d", hw=hw, cin=cin, cout=cout, k=k, s=s, d=d, pad=pad, act=act,
                bias=bias, batch=batch, dm=None, modes=modes)


def dw(hw, cin, dm, k, s=1, d=1, pad="same", act="NONE", bias=True, batch=1, modes=()):
    return dict(kind="depthwise_conv2d", hw=hw, cin=cin, cout=cin * dm, k=k, s=s, d=d, pad=pad,
                act=act, bias=bias, batch=batch, dm=dm, modes=modes)


SINGLE_SPECS = [
    # ---- CONV_2D ---------------------------------------------------------------------
    conv((8, 8), 3, 5, 3, modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    conv((9, 9), 5, 7, 3, s=2, act="RELU", modes=(ALL8, *PT, *FIO, *I16, *F32)),  # SAME, odd in, s2
    conv((8, 8), 7, 5, 3, s=2, act="RELU6", modes=(ALL8, *PT, *I16, *F32, *F16)),  # asym pad
    conv((9, 9), 3, 13, 4, s=2, act="RELU_N1_TO_1", modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    conv((7, 7), 7, 13, 1, pad="valid", act="RELU6", modes=(ALL8,)),
    conv((11, 11), 13, 3, 5, pad="valid", act="RELU_N1_TO_1", modes=(ALL8, *PT, *I16, *F32)),
    conv((10, 10), 3, 7, (3, 1), act="RELU", modes=(ALL8, *FIO, *I16, *F32, *F16)),
    conv((9, 9), 5, 5, (1, 5), bias=False, modes=(ALL8, *PT)),
    conv((12, 12), 7, 5, 4, s=(2, 1), act="RELU6", modes=(ALL8, *PT, *FIO, *I16, *F32)),
    conv((11, 11), 3, 13, 3, s=3, pad="valid", modes=(ALL8,)),
    conv((10, 10), 5, 7, 3, d=2, act="RELU", modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    conv((12, 12), 13, 13, 2, s=2, pad="valid", act="RELU_N1_TO_1", modes=(ALL8,)),
    conv((7, 7), 5, 3, 5, s=2, act="RELU6", modes=(ALL8, *FIO)),
    conv((11, 9), 7, 7, 3, s=(1, 3), bias=False, modes=(ALL8,)),
    conv((12, 10), 3, 5, (5, 3), s=2, pad="valid", act="RELU", modes=(ALL8,)),
    conv((9, 9), 13, 7, 3, d=2, pad="valid", act="RELU6", modes=(ALL8,)),
    conv((6, 6), 5, 13, 2, act="RELU_N1_TO_1", modes=(ALL8, *I16)),  # even kernel, s1: asym pad
    conv((8, 8), 7, 3, 5, s=3, act="RELU", batch=2, modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    conv((5, 5), 3, 7, 3, pad="valid", batch=2, modes=(ALL8,)),
    conv((10, 10), 13, 5, 1, s=2, pad="valid", bias=False, modes=(ALL8,)),
    conv((11, 11), 5, 7, (3, 5), d=(1, 2), act="RELU6", modes=(ALL8, *PT, *F32)),
    conv((12, 12), 3, 3, 3, s=2, act="RELU_N1_TO_1", bias=False, batch=2, modes=(ALL8,)),
    # dynamic-range quantization only quantizes weights with >= 1024 elements
    conv((8, 8), 16, 16, 3, act="RELU", modes=DR),
    conv((9, 9), 13, 24, 3, s=2, modes=DR),
    conv((10, 10), 32, 40, 1, pad="valid", act="RELU6", modes=DR),
    conv((7, 7), 8, 16, (3, 5), pad="valid", act="RELU_N1_TO_1", batch=2, modes=DR),
    # ---- DEPTHWISE_CONV_2D -------------------------------------------------------------
    dw((8, 8), 3, 1, 3, modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    dw((9, 9), 5, 1, 3, s=2, act="RELU", modes=(ALL8, *PT, *I16, *F32)),
    dw((10, 10), 7, 1, 3, s=2, act="RELU6", modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    dw((11, 11), 13, 1, 5, pad="valid", act="RELU_N1_TO_1", modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    dw((10, 10), 5, 2, (3, 1), act="RELU", modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    dw((9, 9), 7, 1, (1, 5), pad="valid", bias=False, modes=(ALL8,)),
    dw((12, 12), 13, 1, 3, d=2, act="RELU6", modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    dw((11, 11), 3, 2, 4, s=3, pad="valid", modes=(ALL8, *PT, *F32)),
    dw((12, 12), 5, 1, 2, s=(1, 2), act="RELU_N1_TO_1", modes=(ALL8, *FIO, *I16)),
    dw((7, 7), 13, 2, 1, pad="valid", act="RELU", modes=(ALL8,)),
    dw((9, 9), 7, 1, 5, s=2, act="RELU6", batch=2, modes=(ALL8, *PT, *FIO, *I16, *F32, *F16)),
    dw((9, 9), 3, 2, 4, s=2, modes=(ALL8, *PT, *FIO, *F32)),  # SAME, odd in, even k: asym pad
    dw((8, 8), 5, 2, 5, act="RELU_N1_TO_1", modes=(ALL8, *I16)),
    dw((11, 9), 7, 1, 3, s=(3, 1), act="RELU", bias=False, modes=(ALL8,)),
    dw((10, 10), 13, 1, (5, 3), d=2, pad="valid", modes=(ALL8,)),
    dw((6, 6), 3, 1, 2, act="RELU6", modes=(ALL8,)),
    dw((12, 10), 5, 2, 3, s=3, act="RELU_N1_TO_1", batch=2, modes=(ALL8, *I16)),
    dw((5, 5), 7, 1, 3, pad="valid", act="RELU", batch=2, modes=(ALL8,)),
    dw((10, 10), 5, 1, 3, d=(1, 2), modes=(ALL8, *PT, *F32)),
    dw((8, 8), 13, 2, 3, s=2, act="RELU", modes=(ALL8, *PT)),
    # dynamic range (>= 1024 weight elements)
    dw((8, 8), 48, 1, 5, act="RELU", modes=DR),
    dw((9, 9), 64, 2, 3, s=2, modes=DR),
    dw((10, 10), 128, 1, 3, d=2, act="RELU6", modes=DR),
    dw((9, 9), 48, 1, 5, s=2, pad="valid", act="RELU_N1_TO_1", batch=2, modes=DR),
]

NET_MODES = {
    "mobilenet_like": ("int8", "int8_float_io", "int16x8", "float32", "int8_per_tensor", "uint8"),
    "dscnn_like": ("int8", "int8_float_io", "int16x8", "float32", "int8_per_tensor", "uint8"),
    "mobilenet_v1_025_96": ("int8",),
}


def pair(v):
    return [int(v), int(v)] if isinstance(v, int) else [int(v[0]), int(v[1])]


def spec_tag(sp) -> str:
    h, w = sp["hw"]
    kh, kw = pair(sp["k"])
    sh, sw = pair(sp["s"])
    dh, dw_ = pair(sp["d"])
    if sp["kind"] == "conv2d":
        t = f"conv_i{h}x{w}x{sp['cin']}_o{sp['cout']}"
    else:
        t = f"dw_i{h}x{w}x{sp['cin']}_m{sp['dm']}"
    t += f"_k{kh}x{kw}_s{sh}x{sw}"
    if (dh, dw_) != (1, 1):
        t += f"_d{dh}x{dw_}"
    t += f"_{sp['pad']}_{sp['act'].lower()}"
    if not sp["bias"]:
        t += "_nobias"
    if sp["batch"] != 1:
        t += f"_b{sp['batch']}"
    return t


def same_pads(size, k, s, d):
    """TFLite's (== TF's) SAME padding: (before, after) and the output size."""
    ek = (k - 1) * d + 1
    out = (size + s - 1) // s
    total = max((out - 1) * s + ek - size, 0)
    return total // 2, total - total // 2, out


def spec_params(sp) -> dict:
    h, w = sp["hw"]
    k, s, d = pair(sp["k"]), pair(sp["s"]), pair(sp["d"])
    p = {
        "input_shape": [sp["batch"], h, w, sp["cin"]],
        "batch": sp["batch"],
        "in_channels": sp["cin"],
        "out_channels": sp["cout"],
        "kernel": k,
        "strides": s,
        "dilation": d,
        "padding": sp["pad"].upper(),
        "activation": sp["act"],
        "use_bias": sp["bias"],
    }
    if sp["kind"] == "conv2d":
        p["filters"] = sp["cout"]
    else:
        p["channels"] = sp["cin"]
        p["depth_multiplier"] = sp["dm"]
    if sp["pad"] == "same":
        t, b, oh = same_pads(h, k[0], s[0], d[0])
        l, r, ow = same_pads(w, k[1], s[1], d[1])
    else:
        t = b = l = r = 0
        oh = (h - ((k[0] - 1) * d[0] + 1)) // s[0] + 1
        ow = (w - ((k[1] - 1) * d[1] + 1)) // s[1] + 1
    p["pads_tblr"] = [t, b, l, r]
    p["asymmetric_padding"] = (t != b) or (l != r)
    p["output_shape"] = [sp["batch"], oh, ow, sp["cout"]]
    return p


# ---------------------------------------------------------------------------------------
# Keras models
# ---------------------------------------------------------------------------------------
def randomize(model: tf.keras.Model, rng: np.random.Generator):
    """Deterministic random weights (independent of Keras' initializers)."""
    for layer in model.layers:
        ws = layer.get_weights()
        if not ws:
            continue
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            c = ws[0].shape[0]
            gamma = rng.uniform(0.5, 1.5, c)
            beta = rng.uniform(-0.3, 0.3, c)
            mean = rng.uniform(-0.2, 0.2, c)
            var = rng.uniform(0.5, 1.5, c)
            # a layer without scale / center (InceptionV3's) has no gamma / beta; the draws
            # stay the same so the other layers' weights do not depend on that
            new = [a for a, kept in zip([gamma, beta, mean, var],
                                        [layer.scale, layer.center, True, True]) if kept]
        else:
            new = []
            for i, wt in enumerate(ws):
                if i == 0:  # kernel
                    if isinstance(layer, tf.keras.layers.DepthwiseConv2D):
                        fan_in = wt.shape[0] * wt.shape[1]
                    else:
                        fan_in = int(np.prod(wt.shape[:-1]))
                    std = np.sqrt(2.0 / fan_in)
                    skew = rng.choice([-0.4, 0.4])  # keeps per-tensor int8 weights one-sided
                    new.append(rng.normal(skew * std, std, wt.shape))
                else:  # bias
                    new.append(rng.normal(0.0, 0.2, wt.shape))
        layer.set_weights([np.asarray(a, np.float32) for a in new])


def build_single(sp) -> tf.keras.Model:
    tf.keras.backend.clear_session()
    L = tf.keras.layers
    h, w = sp["hw"]
    x = tf.keras.Input(shape=(h, w, sp["cin"]), batch_size=sp["batch"], name="input")
    kw = dict(strides=pair(sp["s"]), padding=sp["pad"], dilation_rate=pair(sp["d"]),
              use_bias=sp["bias"], activation="relu" if sp["act"] == "RELU" else None)
    if sp["kind"] == "conv2d":
        y = L.Conv2D(sp["cout"], pair(sp["k"]), name="conv", **kw)(x)
    else:
        y = L.DepthwiseConv2D(pair(sp["k"]), depth_multiplier=sp["dm"], name="dwconv", **kw)(x)
    if sp["act"] == "RELU6":
        y = L.ReLU(max_value=6.0, name="relu6")(y)
    elif sp["act"] == "RELU_N1_TO_1":
        y = L.Lambda(lambda t: tf.clip_by_value(t, -1.0, 1.0), name="relu_n1_to_1")(y)
    m = tf.keras.Model(x, y, name="single")
    randomize(m, np.random.default_rng(seed_of("w:" + spec_tag(sp))))
    return m


def build_mobilenet_like() -> tf.keras.Model:
    tf.keras.backend.clear_session()
    L = tf.keras.layers
    x = tf.keras.Input(shape=(32, 32, 3), batch_size=1, name="input")
    y = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False, name="conv0")(x)
    y = L.BatchNormalization(name="conv0_bn")(y)
    y = L.ReLU(6.0, name="conv0_relu")(y)
    for i, (c, s) in enumerate([(16, 1), (24, 2), (24, 1), (32, 2), (32, 1), (32, 1)], 1):
        y = L.DepthwiseConv2D(3, strides=s, padding="same", use_bias=False, name=f"dw{i}")(y)
        y = L.BatchNormalization(name=f"dw{i}_bn")(y)
        y = L.ReLU(6.0, name=f"dw{i}_relu")(y)
        y = L.Conv2D(c, 1, use_bias=False, name=f"pw{i}")(y)
        y = L.BatchNormalization(name=f"pw{i}_bn")(y)
        y = L.ReLU(6.0, name=f"pw{i}_relu")(y)
    y = L.GlobalAveragePooling2D(name="gap")(y)
    y = L.Dense(10, activation="softmax", name="fc")(y)
    m = tf.keras.Model(x, y, name="mobilenet_like")
    randomize(m, np.random.default_rng(seed_of("net:mobilenet_like")))
    return m


def build_dscnn_like() -> tf.keras.Model:
    """DS-CNN (Hello Edge KWS) at width 32 instead of 64; ReLU as in the original."""
    tf.keras.backend.clear_session()
    L = tf.keras.layers
    x = tf.keras.Input(shape=(49, 10, 1), batch_size=1, name="input")
    y = L.Conv2D(32, (10, 4), strides=2, padding="same", use_bias=False, name="conv0")(x)
    y = L.BatchNormalization(name="conv0_bn")(y)
    y = L.ReLU(name="conv0_relu")(y)
    for i in range(1, 5):
        y = L.DepthwiseConv2D(3, padding="same", use_bias=False, name=f"dw{i}")(y)
        y = L.BatchNormalization(name=f"dw{i}_bn")(y)
        y = L.ReLU(name=f"dw{i}_relu")(y)
        y = L.Conv2D(32, 1, use_bias=False, name=f"pw{i}")(y)
        y = L.BatchNormalization(name=f"pw{i}_bn")(y)
        y = L.ReLU(name=f"pw{i}_relu")(y)
    y = L.AveragePooling2D(pool_size=(25, 5), name="avgpool")(y)
    y = L.Flatten(name="flatten")(y)
    y = L.Dense(12, activation="softmax", name="fc")(y)
    m = tf.keras.Model(x, y, name="dscnn_like")
    randomize(m, np.random.default_rng(seed_of("net:dscnn_like")))
    return m


def build_mobilenet_v1_025_96() -> tf.keras.Model:
    tf.keras.backend.clear_session()
    m = tf.keras.applications.MobileNet(alpha=0.25, input_shape=(96, 96, 3), weights=None,
                                        classes=10)
    randomize(m, np.random.default_rng(seed_of("net:mobilenet_v1_025_96")))
    return m


NET_BUILDERS = {
    "mobilenet_like": build_mobilenet_like,
    "dscnn_like": build_dscnn_like,
    "mobilenet_v1_025_96": build_mobilenet_v1_025_96,
}


def calib_data(shape, name) -> list[np.ndarray]:
    rng = np.random.default_rng(seed_of("calib:" + name))
    return [rng.uniform(-1.0, 1.0, shape).astype(np.float32) for _ in range(N_CALIB)]


# ---------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------
def convert(model: tf.keras.Model, mode: str, data: list[np.ndarray]) -> bytes:
    c = tf.lite.TFLiteConverter.from_keras_model(model)

    def rep():
        for a in data:
            yield [a]

    if mode == "float32":
        pass
    elif mode == "float16_weights":
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        c.target_spec.supported_types = [tf.float16]
    elif mode == "dynamic_range":
        c.optimizations = [tf.lite.Optimize.DEFAULT]
    elif mode in ("int8", "int8_float_io", "int8_per_tensor"):
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        c.representative_dataset = rep
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if mode != "int8_float_io":
            c.inference_input_type = tf.int8
            c.inference_output_type = tf.int8
        if mode == "int8_per_tensor":
            c._experimental_disable_per_channel = True
    elif mode == "int16x8":
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        c.representative_dataset = rep
        c.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        c.inference_input_type = tf.int16
        c.inference_output_type = tf.int16
    else:
        raise ValueError(mode)
    return bytes(c.convert())


def convert_uint8_fakequant(sp, model: tf.keras.Model, data: list[np.ndarray]) -> bytes:
    """Real uint8 (asymmetric weights) through the legacy TF1 converter path.

    The float graph is rebuilt with tf.nn ops and FakeQuant nodes (quantization-aware
    style): input range [-1, 1], weight range = actual min/max of the weights, output
    range = min/max of the float model's output over the calibration data.
    """
    layer = model.get_layer("conv" if sp["kind"] == "conv2d" else "dwconv")
    ws = layer.get_weights()
    kernel = ws[0]
    bias = ws[1] if sp["bias"] else None
    outs = np.concatenate([model(a).numpy().ravel() for a in data])
    omin, omax = float(min(outs.min(), 0.0)), float(max(outs.max(), 0.0))
    h, w = sp["hw"]
    sh, sw = pair(sp["s"])
    dil = pair(sp["d"])
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (sp["batch"], h, w, sp["cin"]), name="input")
        xq = tf.quantization.fake_quant_with_min_max_args(x, -1.0, 1.0)
        wq = tf.quantization.fake_quant_with_min_max_args(
            tf.constant(kernel), float(kernel.min()), float(kernel.max()))
        if sp["kind"] == "conv2d":
            y = tf.nn.conv2d(xq, wq, [1, sh, sw, 1], sp["pad"].upper(), dilations=[1, *dil, 1])
        else:
            y = tf.nn.depthwise_conv2d(xq, wq, [1, sh, sw, 1], sp["pad"].upper(), dilations=dil)
        if bias is not None:
            y = tf.nn.bias_add(y, tf.constant(bias))
        if sp["act"] == "RELU":
            y = tf.nn.relu(y)
        elif sp["act"] == "RELU6":
            y = tf.nn.relu6(y)
        elif sp["act"] == "RELU_N1_TO_1":
            y = tf.clip_by_value(y, -1.0, 1.0)
        y = tf.quantization.fake_quant_with_min_max_args(y, omin, omax, name="output")
        with tf.compat.v1.Session(graph=g) as sess:
            c = tf.compat.v1.lite.TFLiteConverter.from_session(sess, [x], [y])
            c.inference_type = tf.uint8
            # FakeQuant(-1, 1) nudges to zero point 128, scale 2/255
            c.quantized_input_stats = {"input": (128.0, 127.5)}
            return bytes(c.convert())


def uint8_from_int8(buf: bytes, want_shift: int) -> tuple[bytes, dict]:
    """Rewrite an int8 per-tensor model into uint8: every INT8 tensor becomes UINT8, its
    zero points and constant bytes move by +128. Convolution weights additionally move by
    up to |want_shift| (so their zero point is 128 +- shift, not 128) where their value range
    allows it;
    the integer arithmetic, hence the output, is unchanged: out_u8 == out_i8 + 128."""
    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(buf))
    sg = m.subgraphs[0]
    conv_weights = set()
    for op in sg.operators:
        name = _opname(m, op)
        if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            conv_weights.add(op.inputs[1])
    shifts = []
    for ti, t in enumerate(sg.tensors):
        if t.type != schema.TensorType.INT8:
            continue
        q = t.quantization
        zp = np.asarray(q.zeroPoint, np.int64)
        data = m.buffers[t.buffer].data if t.buffer < len(m.buffers) else None
        shift = 0
        if data is not None and len(data):
            vals = np.frombuffer(bytes(np.asarray(data, np.uint8)), np.int8).astype(np.int64)
            if ti in conv_weights:
                if len(zp) != 1:
                    raise ValueError("uint8 needs per-tensor weights")
                lo, hi = -128 - int(vals.min()), 127 - int(vals.max())  # allowed shift range
                # move towards the side with room: zero point 128 +- |want_shift|
                shift = int(np.clip(abs(want_shift) * (1 if hi >= -lo else -1), lo, hi))
                shifts.append({"tensor": t.name.decode(), "shift": shift,
                               "zero_point": int(zp[0]) + 128 + shift,
                               "int8_range": [int(vals.min()), int(vals.max())]})
            new = vals + 128 + shift
            assert new.min() >= 0 and new.max() <= 255, "weight bytes not representable"
            m.buffers[t.buffer].data = new.astype(np.uint8)
        t.type = schema.TensorType.UINT8
        q.zeroPoint = (zp + 128 + shift).astype(np.int64)
        assert q.zeroPoint.min() >= 0 and q.zeroPoint.max() <= 255
    out = flatbuffer_utils.convert_object_to_bytearray(m)
    return bytes(out), {"weight_shifts": shifts}


def compare_uint8(u8: bytes, i8: bytes, name: str, samples: int = 8) -> dict:
    """Run both with TF's interpreter (same kernels as tflite-runtime 2.14) on random int8
    inputs x / x+128; return how far out_u8 is from out_i8 + 128."""
    def run(buf, xs):
        it = tf.lite.Interpreter(
            model_content=buf, num_threads=1,
            experimental_op_resolver_type=tf.lite.experimental.OpResolverType
            .BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), xs):
            it.set_tensor(d["index"], x)
        it.invoke()
        return [it.get_tensor(d["index"]).astype(np.int64) for d in it.get_output_details()]

    rng = np.random.default_rng(seed_of("u8check:" + name))
    shapes = [d["shape"] for d in tf.lite.Interpreter(model_content=i8).get_input_details()]
    worst, bad, total = 0, 0, 0
    for _ in range(samples):
        xs = [rng.integers(-128, 128, s).astype(np.int8) for s in shapes]
        oi = run(i8, xs)
        ou = run(u8, [(x.astype(np.int16) + 128).astype(np.uint8) for x in xs])
        for a, b in zip(oi, ou):
            d = np.abs(b - (a + 128))
            worst = max(worst, int(d.max()))
            bad += int((d != 0).sum())
            total += d.size
    return {"max_abs_diff": worst, "mismatch_fraction": round(bad / total, 6),
            "samples": samples}


# ---------------------------------------------------------------------------------------
# Reading the converted model back
# ---------------------------------------------------------------------------------------
def _opname(m, op) -> str:
    oc = m.operatorCodes[op.opcodeIndex]
    return _OPNAME[max(oc.builtinCode, oc.deprecatedBuiltinCode)]


def _tinfo(m, sg, ti) -> dict:
    t = sg.tensors[ti]
    d = {"shape": [int(v) for v in t.shape], "dtype": _TTNAME[t.type].lower()}
    q = t.quantization
    if q is not None and q.scale is not None and len(q.scale):
        d["scale"] = [float(v) for v in q.scale] if len(q.scale) > 1 else float(q.scale[0])
        zp = [int(v) for v in q.zeroPoint]
        d["zero_point"] = zp if len(zp) > 1 else zp[0]
    return d


def analyze(buf: bytes) -> dict:
    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(buf))
    sg = m.subgraphs[0]
    producer = {}
    for op in sg.operators:
        for o in op.outputs:
            producer[o] = op
    ops, counts, convs = [], {}, []
    for op in sg.operators:
        name = _opname(m, op)
        ops.append(name)
        counts[name] = counts.get(name, 0) + 1
        if name not in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            continue
        o = op.builtinOptions
        wi = op.inputs[1]
        wsrc = wi
        via = None
        if wi in producer and _opname(m, producer[wi]) == "DEQUANTIZE":
            wsrc = producer[wi].inputs[0]
            via = "DEQUANTIZE"
        w = _tinfo(m, sg, wsrc)
        q = sg.tensors[wsrc].quantization
        gran = None
        if q is not None and q.scale is not None and len(q.scale):
            gran = "per_channel" if len(q.scale) > 1 else "per_tensor"
        zps = sorted({int(v) for v in q.zeroPoint}) if gran else None
        bi = op.inputs[2] if len(op.inputs) > 2 else -1
        c = {
            "op": name,
            "fused_activation": _ACTNAME[o.fusedActivationFunction],
            "padding": _PADNAME[o.padding],
            "strides": [o.strideH, o.strideW],
            "dilation": [o.dilationHFactor, o.dilationWFactor],
            "input": _tinfo(m, sg, op.inputs[0]),
            "output": _tinfo(m, sg, op.outputs[0]),
            "weights_dtype": w["dtype"],
            "weights_shape": w["shape"],
            "weights_via": via,
            "weights_quantization": gran,
            "weights_zero_points": zps,
            "bias_dtype": _tinfo(m, sg, bi)["dtype"] if bi >= 0 else None,
            "version": int(m.operatorCodes[op.opcodeIndex].version),
        }
        if name == "DEPTHWISE_CONV_2D":
            c["depth_multiplier"] = o.depthMultiplier
        convs.append(c)
    return {
        "op_counts": {"CONV_2D": counts.get("CONV_2D", 0),
                      "DEPTHWISE_CONV_2D": counts.get("DEPTHWISE_CONV_2D", 0)},
        "all_op_counts": dict(sorted(counts.items())),
        "ops": ops,
        "inputs": [_tinfo(m, sg, i) for i in sg.inputs],
        "outputs": [_tinfo(m, sg, i) for i in sg.outputs],
        "conv_ops": convs,
    }


MODE_NOTES = {
    "int8": "full integer: int8 in/out, per-channel int8 weights (zero point 0), int32 bias",
    "int8_float_io": "full integer inside, float32 in/out: QUANTIZE before and DEQUANTIZE after",
    "int8_per_tensor": "like int8 but per-tensor weights (_experimental_disable_per_channel); "
                       "source of the 'uint8' models",
    "int16x8": "int16 activations (zero point 0), int8 per-channel weights, int64 bias; "
               "int16 in/out",
    "float32": "plain float32",
    "float16_weights": "float16 weights/bias dequantized to float32 by DEQUANTIZE ops",
    "dynamic_range": "weights-only int8 (per-channel), float activations: hybrid kernels",
    "uint8": "int8_per_tensor model rewritten: INT8 tensors -> UINT8, zero points and bytes "
             "+128, conv weights shifted further so their zero point is not 128; output == "
             "output of the int8_per_tensor model + 128 (up to +-1 on rare elements: the "
             "uint8 and int8 kernels round differently; see vs_int8_plus_128)",
    "uint8_fakequant": "real uint8 (asymmetric weights) from the legacy TF1 converter: float "
                       "graph with FakeQuant nodes, inference_type=uint8",
}


# ---------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="substring of model names to (re)generate")
    ap.add_argument("--no-nets", action="store_true", help="skip the multi-layer nets")
    args = ap.parse_args(argv)
    tf.get_logger().setLevel("ERROR")
    ZOO.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    old = json.loads(INDEX.read_text()) if INDEX.exists() else []
    entries: list[dict] = []
    problems: list[str] = []

    def emit(name, kind, mode, buf, params, notes, extra=None):
        path = ZOO / f"{name}.tflite"
        path.write_bytes(buf)
        a = analyze(buf)
        e = {"name": name, "file": path.name, "mode": mode, "kind": kind, "params": params}
        e.update(a)
        if kind != "net":
            intended = params["activation"]
            actual = a["conv_ops"][0]["fused_activation"] if a["conv_ops"] else None
            e["activation_intended"] = intended
            e["activation_fused"] = actual
            e["activation_ok"] = actual == intended
            if actual != intended:
                problems.append(f"{name}: activation {intended} came out as {actual}")
            want = {"CONV_2D": 1 if kind == "conv2d" else 0,
                    "DEPTHWISE_CONV_2D": 1 if kind == "depthwise_conv2d" else 0}
            if a["op_counts"] != want:
                problems.append(f"{name}: op counts {a['op_counts']} != {want}")
            co = a["conv_ops"][0] if a["conv_ops"] else {}
            got = {"padding": co.get("padding"), "strides": co.get("strides"),
                   "dilation": co.get("dilation")}
            exp = {"padding": params["padding"], "strides": params["strides"],
                   "dilation": params["dilation"]}
            if kind == "depthwise_conv2d":
                got["depth_multiplier"] = co.get("depth_multiplier")
                exp["depth_multiplier"] = params["depth_multiplier"]
            e["params_match_graph"] = got == exp
            if got != exp:
                problems.append(f"{name}: graph has {got}, wanted {exp}")
        e["size_bytes"] = len(buf)
        e["notes"] = notes
        if extra:
            e.update(extra)
        entries.append(e)
        print(f"  {name:70s} {len(buf):7d} B  {' '.join(a['ops'])}", flush=True)

    for sp in SINGLE_SPECS:
        tag = spec_tag(sp)
        if args.only and not any(args.only in f"{tag}__{m}" for m in sp["modes"]):
            continue
        model = build_single(sp)
        h, w = sp["hw"]
        data = calib_data((sp["batch"], h, w, sp["cin"]), tag)
        params = spec_params(sp)
        pt_buf = None
        for mode in sp["modes"]:
            name = f"{tag}__{mode}"
            if args.only and args.only not in name:
                continue
            notes = MODE_NOTES[mode]
            extra = None
            try:
                if mode == "uint8":
                    if pt_buf is None:
                        pt_buf = convert(model, "int8_per_tensor", data)
                    want = 5 + seed_of(tag) % 4  # 5..8
                    buf, info = uint8_from_int8(pt_buf, want)
                    extra = {"derived_from": f"{tag}__int8_per_tensor", "output_offset": 128,
                             "weight_shift_requested": want, **info,
                             "vs_int8_plus_128": compare_uint8(buf, pt_buf, name)}
                elif mode == "uint8_fakequant":
                    buf = convert_uint8_fakequant(sp, model, data)
                else:
                    buf = convert(model, mode, data)
                    if mode == "int8_per_tensor":
                        pt_buf = buf
            except Exception as ex:  # record and go on
                problems.append(f"{name}: conversion failed: {str(ex).splitlines()[0][:200]}")
                continue
            emit(name, sp["kind"], mode, buf, params, notes, extra)

    if not args.no_nets:
        for net, modes in NET_MODES.items():
            if args.only and not any(args.only in f"{net}__{m}" for m in modes):
                continue
            model = NET_BUILDERS[net]()
            shape = (1, *model.input_shape[1:])
            data = calib_data(shape, net)
            params = {"input_shape": list(shape), "batch": 1,
                      "keras_layers": len(model.layers),
                      "parameters": int(model.count_params())}
            pt_buf = None
            for mode in modes:
                name = f"{net}__{mode}"
                if args.only and args.only not in name:
                    continue
                extra = None
                try:
                    if mode == "uint8":
                        if pt_buf is None:
                            pt_buf = convert(model, "int8_per_tensor", data)
                        buf, info = uint8_from_int8(pt_buf, 6)
                        extra = {"derived_from": f"{net}__int8_per_tensor",
                                 "output_offset": 128, "weight_shift_requested": 6, **info,
                                 "vs_int8_plus_128": compare_uint8(buf, pt_buf, name)}
                    else:
                        buf = convert(model, mode, data)
                        if mode == "int8_per_tensor":
                            pt_buf = buf
                except Exception as ex:
                    problems.append(f"{name}: conversion failed: {str(ex).splitlines()[0][:200]}")
                    continue
                notes = f"{net}: random weights, BatchNormalization folded by the converter; " \
                        + MODE_NOTES[mode]
                emit(name, "net", mode, buf, params, notes, extra)

    if args.only:
        fresh = {e["name"]: e for e in entries}  # keep the index order
        merged = [fresh.pop(e["name"], e) for e in old]
        entries = merged + list(fresh.values())
    else:  # the ImageNet-scale entries are make_imagenet.py's, the dense one make_autoencoder.py's
        entries += [e for e in old if e["kind"] in ("imagenet", "dense")]
    # one entry per line: compact, and regenerating one model changes one line
    INDEX.write_text("[\n" + ",\n".join(json.dumps(e, separators=(",", ":")) for e in entries)
                     + "\n]\n")
    keep = {e["file"] for e in entries} | {INDEX.name}
    if not args.only:
        for p in ZOO.iterdir():
            if p.name not in keep:
                p.unlink()
    # the budget of this script's models; make_imagenet.py checks the whole zoo's
    total = sum((ZOO / e["file"]).stat().st_size for e in entries if e["kind"] != "imagenet") \
        + INDEX.stat().st_size
    dt = time.time() - t0
    print(f"{len(entries)} models, {total} bytes in {ZOO}, {dt:.0f} s")
    for p in problems:
        print("PROBLEM:", p)
    if total > SIZE_BUDGET:
        print(f"PROBLEM: zoo is {total} bytes > budget {SIZE_BUDGET}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
