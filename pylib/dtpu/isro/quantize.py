"""Quantization on the ground: a float Keras model plus calibration data -> an int8 TFLite graph.

The scheme is the TFLite converter's post-training full-integer one, so a model quantized here
behaves like one the operator would have converted with TensorFlow:

- weights: symmetric int8 in [-127, 127], one scale per output channel (CONV_2D,
  DEPTHWISE_CONV_2D and FULLY_CONNECTED), batch normalization folded into them first;
- biases: int32 at scale input_scale x weight_scale[c], zero point 0;
- activations: asymmetric int8 (scale, zero point) from each tensor's range over the calibration
  set, widened to include 0; ``minmax`` (the converter's own calibration: the smallest and
  largest value seen) or ``percentile`` (the P-th and (100-P)-th percentiles of all values
  seen, which clips rare outliers to spend the 256 levels on the bulk);
- max/average pooling, padding and reshapes keep their input's quantization (TFLite requires
  it); SOFTMAX and LOGISTIC outputs are fixed at scale 1/256, zero point -128 (likewise).

The result is written as a TFLite flatbuffer (:mod:`dtpu.tflite_writer`), which
:mod:`dtpu.isro.ground` compiles with the TFLite front end, so the interpreter's CPU kernels are
the bundle's layer-by-layer I8 oracle; it also measures the accuracy against the float model.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dtpu.isro import keras_h5
from dtpu.isro.ir import CompileError
from dtpu.isro.npy import read_npy
from dtpu.tflite_writer import GraphWriter, Tensor

log = logging.getLogger(__name__)

METHODS = ("minmax", "percentile")
DEFAULT_PERCENTILE = 99.99
HOLDOUT_FRACTION = 5          # without --holdout, every fifth sample (the last N // 5) is held out
_FOLDABLE_ACT = {"relu": "relu", "relu6": "relu6"}
_MAC = ("Conv2D", "DepthwiseConv2D", "Dense")


def load_samples(path: str | Path, input_shape: tuple[int, ...], what: str) -> np.ndarray:
    """An .npy of samples (N, *input_shape) as float32; one sample without the batch axis is N=1."""
    x = read_npy(path, what, f"a .npy array of shape (N, {', '.join(map(str, input_shape))})",
                 "float or integer arrays of real input values")
    shape = tuple(input_shape)
    if x.shape == shape:
        x = x[None]
    if x.shape[1:] != shape or x.shape[0] < 1:
        raise ValueError(f"{what} {path}: shape {x.shape}; accepted: (N, {', '.join(map(str, shape))}) "
                         f"with N >= 1, the model's input shape")
    x = x.astype(np.float32)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} {path}: holds NaN or infinite values; accepted: finite real inputs")
    return x


def split(samples: np.ndarray, holdout: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(calibration, held-out): `holdout` when given, else the last N // 5 samples (none below 5)."""
    if holdout is not None:
        return samples, holdout
    n = len(samples)
    k = n // HOLDOUT_FRACTION
    if k == 0:
        return samples, None
    return samples[:n - k], samples[n - k:]


# -- calibration ------------------------------------------------------------------------------------

def calibrate(model: keras_h5.KerasModel, samples: np.ndarray, method: str = "minmax",
              percentile: float = DEFAULT_PERCENTILE) -> dict[str, tuple[float, float]]:
    """The real range of every layer's output (and the input) over `samples`, by `method`."""
    from dtpu.isro.verify import keras_reference
    if method not in METHODS:
        raise ValueError(f"calibration method {method!r}; accepted: {', '.join(METHODS)}")
    if method == "percentile" and not 50.0 < percentile <= 100.0:
        raise ValueError(f"percentile {percentile}; accepted: 50 < P <= 100")
    seen: dict[str, list] = {}
    for x in samples:
        for name, y in keras_reference(model, x).items():
            y = np.asarray(y, np.float64).reshape(-1)
            if method == "minmax":
                lo, hi = seen.get(name, (np.inf, -np.inf))
                seen[name] = (min(lo, float(y.min())), max(hi, float(y.max())))
            else:
                seen.setdefault(name, []).append(y)
    if method == "percentile":
        seen = {name: (float(np.percentile(np.concatenate(v), 100.0 - percentile)),
                       float(np.percentile(np.concatenate(v), percentile))) for name, v in seen.items()}
    for name, (lo, hi) in seen.items():
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise CompileError(f"{name.split('/')[0]}: values [{lo}, {hi}] over the calibration set are not "
                               f"finite (NaN or infinite weights, or an overflow); an int8 range needs finite "
                               f"values")
    return seen


def activation_quant(lo: float, hi: float) -> tuple[float, int]:
    """(scale, zero point) of an int8 tensor holding [lo, hi] (widened to include 0), as the
    converter's asymmetric activation quantization."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo < 1e-12:
        hi = lo + 1e-6                  # a constant-zero tensor: any scale represents it
    scale = float(np.float32((hi - lo) / 255.0))
    zp = int(np.clip(np.round(-128.0 - lo / scale), -128, 127))
    return scale, zp


def _round_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def weight_quant(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-channel int8 along `axis`: (int8 weights, float32 scales)."""
    moved = np.moveaxis(np.asarray(w, np.float64), axis, 0)
    peak = np.abs(moved.reshape(moved.shape[0], -1)).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(_round_away(np.asarray(w, np.float64) / scales.astype(np.float64).reshape(shape)), -127, 127)
    return q.astype(np.int8), scales


# -- the Keras graph as an int8 TFLite graph --------------------------------------------------------

@dataclass
class _Pending:
    """A MAC or ADD whose BatchNormalization and activation may still fold in before it is written."""

    kind: str                          # a Keras class name (Conv2D, DepthwiseConv2D, Dense, Add)
    layer: keras_h5.KerasLayer
    sources: list[str]
    end: str                           # the last Keras layer folded in: the op's output equals it
    weights: np.ndarray | None = None  # float, Keras layout
    bias: np.ndarray | None = None
    activation: str = "none"
    head: str | None = None            # softmax / sigmoid of the Dense itself


@dataclass
class Quantized:
    """The int8 graph (TFLite flatbuffer bytes) and what the quantizer decided."""

    tflite: bytes
    method: str
    percentile: float | None
    input_scale: float
    input_zero_point: int
    tensors: dict[str, dict] = field(default_factory=dict)     # Keras layer -> scale, zero point


def _readers(sources: dict[str, list[str]]) -> dict[str, int]:
    """How many layers read each layer's output (a fold needs exactly one)."""
    count: dict[str, int] = {}
    for srcs in sources.values():
        for s in srcs:
            count[s] = count.get(s, 0) + 1
    return count


def _graph_sources(model: keras_h5.KerasModel) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Each layer's inputs, with inference no-ops (Dropout, linear activations) bypassed."""
    alias: dict[str, str] = {}
    out: dict[str, list[str]] = {}
    prev = model.input_name
    for layer in model.layers:
        srcs = model.inbound[layer.name] if model.inbound is not None else [prev]
        srcs = [alias.get(s, s) for s in srcs]
        identity = layer.class_name in keras_h5.IDENTITY or (
            layer.class_name == "Activation" and layer.config.get("activation") in (None, "linear"))
        if identity:
            alias[layer.name] = srcs[0]
        else:
            out[layer.name] = srcs
        prev = layer.name
    return out, alias


def quantize_keras(model: keras_h5.KerasModel, ranges: dict[str, tuple[float, float]], *,
                   method: str = "minmax", percentile: float | None = None) -> Quantized:
    """The int8 TFLite graph of `model` with activation ranges `ranges` (from :func:`calibrate`)."""
    from dtpu.isro.verify import PRE_SOFTMAX
    if model.extra_inputs:
        raise CompileError(f"{model.name}: {1 + len(model.extra_inputs)} inputs; quantization on the ground "
                           f"takes one-input models (calibration data is one array)")
    if model.extra_outputs:
        raise CompileError(f"{model.name}: {1 + len(model.extra_outputs)} outputs; quantization on the ground "
                           f"takes one-output models (accuracy is measured on one output)")
    sources, alias = _graph_sources(model)
    layers = [layer for layer in model.layers if layer.name in sources]
    readers = _readers(sources)
    g = GraphWriter()
    tensor_of: dict[str, int] = {}
    quant: dict[str, tuple[float, int]] = {}
    pend: dict[str, _Pending] = {}

    def act_tensor(name: str, shape, key: str | None = None, fixed=None) -> int:
        scale, zp = fixed if fixed is not None else activation_quant(*ranges[key or name])
        quant[name] = (scale, zp)
        return g.tensor(Tensor(tuple(int(v) for v in shape), "int8", (scale,), (zp,), name=name))

    shape = model.input_shape
    in_shape = (1, *shape)
    tensor_of[model.input_name] = act_tensor(model.input_name, in_shape)
    shapes = {model.input_name: in_shape}

    def emit(p: _Pending) -> None:
        """Write a pending MAC or ADD, and its head (SOFTMAX/LOGISTIC) if it has one."""
        name, layer, cfg = p.end, p.layer, p.layer.config
        x = tensor(p.sources[0])
        xs = shapes[p.sources[0]]
        s_in = quant[p.sources[0]][0]
        if p.kind == "Add":
            b = tensor(p.sources[1])
            out_shape = xs
            y = act_tensor(name, out_shape)
            g.op("ADD", [x, b], [y], activation=p.activation)
        else:
            w, bias = p.weights, p.bias
            if p.kind == "Conv2D":
                tw = w.transpose(3, 0, 1, 2)                          # OHWI
                axis, cout = 0, tw.shape[0]
            elif p.kind == "DepthwiseConv2D":
                kh, kw, c, mult = w.shape
                tw = w.reshape(kh, kw, c * mult)[None]                # 1 KH KW C*M
                axis, cout = 3, tw.shape[3]
            else:
                tw = w.T                                              # O N
                axis, cout = 0, tw.shape[0]
            qw, ws = weight_quant(tw, axis)
            wt = g.const(f"{layer.name}/weights", qw, "int8", scale=tuple(float(v) for v in ws),
                         zero_point=(0,) * cout, axis=axis)
            bscale = (np.float32(s_in) * ws).astype(np.float32)
            qb = np.clip(_round_away(np.asarray(bias, np.float64) / bscale.astype(np.float64)),
                         -(1 << 31), (1 << 31) - 1).astype(np.int32)
            bt = g.const(f"{layer.name}/bias", qb, "int32", scale=tuple(float(v) for v in bscale),
                         zero_point=(0,) * cout, axis=0)
            key = name + PRE_SOFTMAX if p.head else name
            if p.kind == "Dense":
                xn = int(np.prod(xs[1:]))
                if len(xs) != 2:
                    raise CompileError(f"{layer.name}: Dense on a {xs[1:]} tensor applies per pixel; "
                                       f"add a Flatten before it")
                out_shape = (1, cout)
                if xn != tw.shape[1]:
                    raise CompileError(f"{layer.name}: kernel expects {tw.shape[1]} inputs, the tensor has {xn}")
                y = act_tensor(key if p.head else name, out_shape, key)
                g.op("FULLY_CONNECTED", [x, wt, bt], [y], activation=p.activation)
            else:
                st, dil = keras_h5.size_2d(cfg.get("strides", 1)), keras_h5.size_2d(cfg.get("dilation_rate", 1))
                padding = cfg.get("padding", "valid")
                if len(xs) != 4:
                    raise CompileError(f"{layer.name}: a convolution on a flattened tensor")
                _, h, wd, _ = xs
                k = tw.shape[1:3]
                oh, ow = (_out(h, k[0], st[0], dil[0], padding), _out(wd, k[1], st[1], dil[1], padding))
                out_shape = (1, oh, ow, cout)
                y = act_tensor(name, out_shape)
                if p.kind == "Conv2D":
                    g.op("CONV_2D", [x, wt, bt], [y], activation=p.activation, padding=padding,
                         stride=st, dilation=dil)
                else:
                    g.op("DEPTHWISE_CONV_2D", [x, wt, bt], [y], activation=p.activation, padding=padding,
                         stride=st, dilation=dil, depth_multiplier=int(cfg.get("depth_multiplier", 1)))
        if p.head:
            h = act_tensor(name, out_shape, fixed=(1.0 / 256.0, -128))
            g.op("SOFTMAX" if p.head == "softmax" else "LOGISTIC", [y], [h], beta=1.0)
            y = h
        tensor_of[name], shapes[name] = y, out_shape

    def tensor(name: str) -> int:
        if name in pend:
            emit(pend.pop(name))
        return tensor_of[name]

    last = layers[-1].name if layers else None
    for layer in layers:
        cls, cfg, name = layer.class_name, layer.config, layer.name
        srcs = sources[name]
        src = srcs[0]
        p = pend.get(src) if len(srcs) == 1 and readers.get(src, 0) == 1 else None
        if cls == "BatchNormalization" and p is not None and p.kind in _MAC and p.activation == "none" and not p.head:
            c = p.weights.shape[-1] if p.kind != "DepthwiseConv2D" else p.weights.shape[2] * p.weights.shape[3]
            gamma = layer.weights.get("gamma", np.ones(c)) if cfg.get("scale", True) else np.ones(c)
            beta = layer.weights.get("beta", np.zeros(c)) if cfg.get("center", True) else np.zeros(c)
            k = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(layer.weights["moving_variance"], np.float64)
                                                        + float(cfg.get("epsilon", 1e-3)))
            if p.kind == "DepthwiseConv2D":
                kh, kw, cc, m = p.weights.shape
                p.weights = (p.weights.reshape(kh, kw, cc * m) * k).reshape(kh, kw, cc, m)
            else:
                p.weights = p.weights * k
            p.bias = (p.bias - np.asarray(layer.weights["moving_mean"], np.float64)) * k + beta
            p.end = name
            pend[name] = pend.pop(src)
            continue
        fold = _relu_kind(layer)
        if fold is not None and p is not None and p.activation == "none" and not p.head:
            p.activation, p.end = fold, name
            pend[name] = pend.pop(src)
            continue
        if cls in _MAC:
            if cls == "Conv2D" or cls == "DepthwiseConv2D":
                keras_h5.check_channels_last(layer)
                if cfg.get("groups", 1) != 1:
                    raise CompileError(f"{name}: grouped convolution (groups={cfg['groups']}) is not supported")
            wkey = "depthwise_kernel" if cls == "DepthwiseConv2D" and "depthwise_kernel" in layer.weights else "kernel"
            w = np.asarray(layer.weights[wkey], np.float64)
            if not np.all(np.isfinite(w)) or ("bias" in layer.weights and not np.all(np.isfinite(layer.weights["bias"]))):
                raise CompileError(f"{name}: NaN or infinite weights cannot be quantized")
            cout = w.shape[-1] if cls != "DepthwiseConv2D" else w.shape[2] * w.shape[3]
            bias = (np.asarray(layer.weights["bias"], np.float64) if cfg.get("use_bias", True)
                    else np.zeros(cout))
            act = cfg.get("activation") or "linear"
            q = _Pending(cls, layer, srcs, name, w, bias)
            if act in _FOLDABLE_ACT:
                q.activation = _FOLDABLE_ACT[act]
            elif act in ("softmax", "sigmoid") and cls == "Dense" and name == last:
                q.head = act
            elif act != "linear":
                raise CompileError(f"{name}: activation {act!r} cannot be quantized for the chip; accepted: "
                                   f"linear, relu, relu6 (softmax or sigmoid on the last Dense)")
            tensor(src)
            pend[name] = q
            continue
        if cls == "Add":
            if len(srcs) != 2:
                raise CompileError(f"{name}: Add of {len(srcs)} tensors; the chip adds two")
            tensor(srcs[0]), tensor(srcs[1])
            if shapes[srcs[0]] != shapes[srcs[1]]:
                raise CompileError(f"{name}: adds shapes {shapes[srcs[0]]} and {shapes[srcs[1]]}")
            pend[name] = _Pending("Add", layer, srcs, name)
            continue
        if len(srcs) != 1:
            raise CompileError(f"{name}: {cls} with {len(srcs)} inputs; accepted: one (two for Add)")
        x = tensor(src)
        xs = shapes[src]
        same = quant[src]
        if cls in ("MaxPooling2D", "AveragePooling2D"):
            keras_h5.check_channels_last(layer)
            pool = keras_h5.size_2d(cfg.get("pool_size", 2))
            st = keras_h5.size_2d(cfg.get("strides") or pool)
            padding = cfg.get("padding", "valid")
            _, h, wd, c = xs
            out_shape = (1, _out(h, pool[0], st[0], 1, padding), _out(wd, pool[1], st[1], 1, padding), c)
            y = act_tensor(name, out_shape, fixed=same)
            g.op("MAX_POOL_2D" if cls == "MaxPooling2D" else "AVERAGE_POOL_2D", [x], [y], padding=padding,
                 stride=st, filter=pool)
        elif cls == "GlobalAveragePooling2D":
            if cfg.get("keepdims"):
                raise CompileError(f"{name}: GlobalAveragePooling2D(keepdims=True); accepted: keepdims=False")
            axes = g.const(f"{name}/axes", np.array([1, 2]), "int32")
            out_shape = (1, xs[3])
            y = act_tensor(name, out_shape)
            g.op("MEAN", [x, axes], [y], keep_dims=False)
        elif cls == "ZeroPadding2D":
            pd = cfg.get("padding", 1)
            if isinstance(pd, int):
                t = bo = le = r = pd
            elif isinstance(pd[0], (list, tuple)):
                (t, bo), (le, r) = pd
            else:
                t, bo, le, r = pd[0], pd[0], pd[1], pd[1]
            pads = g.const(f"{name}/paddings", np.array([[0, 0], [t, bo], [le, r], [0, 0]]), "int32")
            out_shape = (1, xs[1] + t + bo, xs[2] + le + r, xs[3])
            y = act_tensor(name, out_shape, fixed=same)
            g.op("PAD", [x, pads], [y])
        elif cls == "Flatten":
            n = int(np.prod(xs[1:]))
            shp = g.const(f"{name}/shape", np.array([1, n]), "int32")
            out_shape = (1, n)
            y = act_tensor(name, out_shape, fixed=same)
            g.op("RESHAPE", [x, shp], [y], new_shape=[1, n])
        elif cls == "LeakyReLU":
            out_shape = xs
            y = act_tensor(name, out_shape)
            g.op("LEAKY_RELU", [x], [y], alpha=float(cfg.get("alpha", cfg.get("negative_slope", 0.3))))
        elif fold is not None:
            out_shape = xs                  # a ReLU that cannot fold: the input's quantization, a clamp
            y = act_tensor(name, out_shape, fixed=same)
            g.op(fold.upper(), [x], [y])
        elif cls in ("Softmax", "Activation") and (cls == "Softmax" or cfg.get("activation") in ("softmax", "sigmoid")):
            kind = "softmax" if cls == "Softmax" else cfg["activation"]
            out_shape = xs
            y = act_tensor(name, out_shape, fixed=(1.0 / 256.0, -128))
            g.op("SOFTMAX" if kind == "softmax" else "LOGISTIC", [x], [y], beta=1.0)
        else:
            raise CompileError(f"{name}: layer type {cls}"
                               f"{' (' + str(cfg.get('activation')) + ')' if cls == 'Activation' else ''} cannot "
                               f"be quantized for the chip; accepted: Conv2D, DepthwiseConv2D, Dense, "
                               f"BatchNormalization (after them), ReLU/relu/relu6, LeakyReLU, MaxPooling2D, "
                               f"AveragePooling2D, GlobalAveragePooling2D, Add, ZeroPadding2D, Flatten, "
                               f"Dropout, Softmax/sigmoid at the end")
        tensor_of[name], shapes[name] = y, out_shape
    if last is None:
        raise CompileError(f"{model.name}: no layers to quantize")
    final = alias.get(model.layers[-1].name, model.layers[-1].name)
    out = tensor(final)
    for name in list(pend):
        raise CompileError(f"{name}: its result is not used by the model output")
    data = g.to_bytes([tensor_of[model.input_name]], [out],
                      description=f"dtpu isro quantizer: {model.name} int8 ({method})")
    s_in, z_in = quant[model.input_name]
    return Quantized(data, method, percentile, s_in, z_in,
                     {k: {"scale": v[0], "zero_point": v[1]} for k, v in quant.items()})


def _relu_kind(layer: keras_h5.KerasLayer) -> str | None:
    """'relu' / 'relu6' when the layer is a plain ReLU a fused activation can express."""
    cfg = layer.config
    if layer.class_name == "Activation" and cfg.get("activation") in _FOLDABLE_ACT:
        return _FOLDABLE_ACT[cfg["activation"]]
    if layer.class_name == "ReLU" and float(cfg.get("negative_slope", 0.0) or 0.0) == 0.0 \
            and float(cfg.get("threshold", 0.0) or 0.0) == 0.0:
        mx = cfg.get("max_value")
        if mx is None:
            return "relu"
        if float(mx) == 6.0:
            return "relu6"
    return None


def _out(size: int, k: int, s: int, d: int, padding: str) -> int:
    if padding == "same":
        return -(-size // s)
    return (size - (k - 1) * d - 1) // s + 1
