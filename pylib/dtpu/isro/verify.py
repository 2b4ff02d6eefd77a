"""Layer-by-layer verification of a bundle run, as the report verified the chip against Python.

Two independent oracles:

- :func:`keras_reference` evaluates a Keras .h5 model in float64 numpy with Keras' own layer
  semantics (BatchNormalization unfolded, SAME padding computed per layer, max pooling padded with
  -inf). It shares nothing with the compiler but the h5 reader, so a folding, padding, layout or
  weight-reordering mistake in the compiler shows up as a mismatch.
- :func:`tflite_reference` runs the TFLite interpreter with every intermediate tensor preserved.

The machine's dumps are compared with the output of the framework layer each hardware layer ends
with: within float tolerance for F32, bit for bit for I8.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from dtpu.isro import keras_h5
from dtpu.isro.bundle import Bundle, quantize, to_framework
from dtpu.isro.isa import Fmt
from dtpu.isro.machine import Result

log = logging.getLogger(__name__)

# F32 tolerance: float32 sums against a float64 reference, relative to the layer's magnitude
RTOL = 1e-4
# keras_reference's key for a layer's value before its softmax activation (what the chip computes)
PRE_SOFTMAX = "/pre_softmax"


@dataclass
class Check:
    layer: str
    kind: str
    max_abs_err: float
    scale: float
    exact: bool
    ok: bool
    note: str = ""               # why a layer could not be compared (ok stays True, exact False)

    def __str__(self) -> str:
        if self.note:
            return f"{self.layer:<32} {self.kind:<8} not compared: {self.note}"
        verdict = "exact" if self.exact else ("ok" if self.ok else "MISMATCH")
        return f"{self.layer:<32} {self.kind:<8} max|err| {self.max_abs_err:.3g} (of {self.scale:.3g})  {verdict}"


# -- Keras semantics in numpy -----------------------------------------------------------------------

def _same_pads(size: int, k: int, s: int, d: int) -> tuple[int, int]:
    eff = (k - 1) * d + 1
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def _windows(x: np.ndarray, k, s, d, padding: str, fill: float) -> np.ndarray:
    """(OH, OW, C, KH, KW) receptive fields of an (H, W, C) tensor."""
    if padding == "same":
        ph, pw = _same_pads(x.shape[0], k[0], s[0], d[0]), _same_pads(x.shape[1], k[1], s[1], d[1])
        x = np.pad(x, (ph, pw, (0, 0)), constant_values=fill)
    eh, ew = (k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1
    v = sliding_window_view(x, (eh, ew), axis=(0, 1))[::s[0], ::s[1]]
    return v[..., ::d[0], ::d[1]]


def _keras_activation(x: np.ndarray, act: str | None) -> np.ndarray:
    if act in (None, "linear"):
        return x
    if act == "softmax":
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if act == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if act == "tanh":
        return np.tanh(x)
    if act in ("hard_swish", "hard_silu"):
        return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0
    if act == "relu":
        return np.maximum(x, 0)
    if act == "relu6":
        return np.clip(x, 0, 6)
    raise ValueError(f"activation {act!r} has no reference implementation")


def _avg_same(y: np.ndarray, pool, strides) -> np.ndarray:
    """SAME average pooling as Keras computes it: the mean of the taps inside the input."""
    sums = _windows(y, pool, strides, (1, 1), "same", 0.0).sum(axis=(3, 4))
    taps = _windows(np.ones(y.shape[:2] + (1,)), pool, strides, (1, 1), "same", 0.0).sum(axis=(3, 4))
    return sums / taps


def _upsample_bilinear(y: np.ndarray, size) -> np.ndarray:
    """tf.image.resize(bilinear) by an integer factor: half-pixel centers, edges clamped."""
    for axis, s in enumerate(size):
        n = y.shape[axis]
        src = (np.arange(n * s) + 0.5) / s - 0.5
        lo_raw = np.floor(src).astype(int)
        frac = (src - lo_raw).reshape((-1,) + (1,) * (y.ndim - axis - 1))
        lo, hi = np.clip(lo_raw, 0, n - 1), np.clip(lo_raw + 1, 0, n - 1)
        y = np.take(y, lo, axis=axis) * (1 - frac) + np.take(y, hi, axis=axis) * frac
    return y


def _conv_transpose(y: np.ndarray, kern: np.ndarray, strides, padding: str) -> np.ndarray:
    """Keras Conv2DTranspose: every input pixel scatters kernel x value into the output."""
    h, w, _ = y.shape
    kh, kw, o, _ = kern.shape
    sh, sw = strides
    full = np.zeros(((h - 1) * sh + max(kh, sh), (w - 1) * sw + max(kw, sw), o))
    for i in range(h):
        for j in range(w):
            full[i * sh:i * sh + kh, j * sw:j * sw + kw] += np.einsum("c,ijoc->ijo", y[i, j], kern)
    if padding == "valid":
        return full
    oh, ow = h * sh, w * sw
    th = max(kh - sh, 0) // 2
    tw = max(kw - sw, 0) // 2
    return full[th:th + oh, tw:tw + ow]


def keras_reference(model: keras_h5.KerasModel, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every layer's output (without the batch axis), float64, for one input in HWC layout (a
    list of them, in the model's order, for a model with several inputs)."""
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if len(xs) != 1 + len(model.extra_inputs):
        raise ValueError(f"the model has {1 + len(model.extra_inputs)} inputs; got {len(xs)} arrays")
    y = np.asarray(xs[0], dtype=np.float64).reshape(model.input_shape)
    outs: dict[str, np.ndarray] = {model.input_name: y}
    for (name, shape), xi in zip(model.extra_inputs, xs[1:]):
        outs[name] = np.asarray(xi, dtype=np.float64).reshape(shape)
    for layer in model.layers:
        cfg, w = layer.config, layer.weights
        cls = layer.class_name
        pair = keras_h5.size_2d
        srcs = model.inbound[layer.name] if model.inbound is not None else None
        if srcs:
            y = outs[srcs[0]]
        if cls == "Add":
            y = sum(outs[s] for s in srcs)
        elif cls == "Multiply":
            y = outs[srcs[0]] * outs[srcs[1]]
        elif cls == "Concatenate":
            y = np.concatenate([outs[s] for s in srcs], axis=-1)
        elif cls == "Reshape":
            y = y.reshape(tuple(cfg["target_shape"]))
        elif cls == "UpSampling2D":
            size = pair(cfg.get("size", 2))
            if cfg.get("interpolation", "nearest") == "nearest":
                y = np.repeat(np.repeat(y, size[0], axis=0), size[1], axis=1)
            else:
                y = _upsample_bilinear(y, size)
        elif cls == "Conv2DTranspose":
            y = _conv_transpose(y, w["kernel"].astype(np.float64), pair(cfg.get("strides", 1)), cfg["padding"])
            if cfg.get("use_bias", True):
                y = y + w["bias"]
            outs[layer.name + keras_h5.PRE_ACTIVATION] = y
            y = _keras_activation(y, cfg.get("activation"))
        elif cls == "Conv1D":
            kern = w["kernel"].astype(np.float64)[None]            # 1 K I O
            win = _windows(y[None], kern.shape[:2], (1, keras_h5.size_1d(cfg.get("strides", 1))),
                           (1, keras_h5.size_1d(cfg.get("dilation_rate", 1))), cfg["padding"], 0.0)
            y = np.einsum("hwcij,ijco->hwo", win, kern)[0]
            if cfg.get("use_bias", True):
                y = y + w["bias"]
            outs[layer.name + keras_h5.PRE_ACTIVATION] = y
            y = _keras_activation(y, cfg.get("activation"))
        elif cls in ("MaxPooling1D", "AveragePooling1D"):
            pool = keras_h5.size_1d(cfg.get("pool_size", 2))
            stride = keras_h5.size_1d(cfg.get("strides") or pool)
            padding = cfg.get("padding", "valid")
            if cls == "MaxPooling1D":
                y = _windows(y[None], (1, pool), (1, stride), (1, 1), padding, -np.inf).max(axis=(3, 4))[0]
            elif padding == "same":
                y = _avg_same(y[None], (1, pool), (1, stride))[0]
            else:
                y = _windows(y[None], (1, pool), (1, stride), (1, 1), "valid", 0.0).mean(axis=(3, 4))[0]
        elif cls == "GlobalAveragePooling1D":
            y = y.mean(axis=0)
        elif cls in ("Conv2D", "DepthwiseConv2D"):
            s, d = pair(cfg.get("strides", 1)), pair(cfg.get("dilation_rate", 1))
            if cls == "Conv2D":
                kern = w["kernel"].astype(np.float64)               # KH KW I O
                win = _windows(y, kern.shape[:2], s, d, cfg["padding"], 0.0)
                y = np.einsum("hwcij,ijco->hwo", win, kern)
            else:
                kern = w.get("depthwise_kernel", w.get("kernel")).astype(np.float64)   # KH KW C M
                win = _windows(y, kern.shape[:2], s, d, cfg["padding"], 0.0)
                y = np.einsum("hwcij,ijcm->hwcm", win, kern).reshape(win.shape[0], win.shape[1], -1)
            if cfg.get("use_bias", True):
                y = y + w["bias"]
            outs[layer.name + keras_h5.PRE_ACTIVATION] = y
            y = _keras_activation(y, cfg.get("activation"))
        elif cls == "Dense":
            y = y @ w["kernel"].astype(np.float64)
            if cfg.get("use_bias", True):
                y = y + w["bias"]
            outs[layer.name + keras_h5.PRE_ACTIVATION] = y
            if cfg.get("activation") in ("softmax", "sigmoid"):
                outs[layer.name + PRE_SOFTMAX] = y
            y = _keras_activation(y, cfg.get("activation"))
        elif cls == "BatchNormalization":
            c = y.shape[-1]
            gamma = w["gamma"] if cfg.get("scale", True) else np.ones(c)
            beta = w["beta"] if cfg.get("center", True) else np.zeros(c)
            y = (y - w["moving_mean"]) / np.sqrt(w["moving_variance"].astype(np.float64) + cfg["epsilon"]) * gamma + beta
        elif cls == "MaxPooling2D":
            pool = pair(cfg["pool_size"])
            strides = pair(cfg.get("strides") or pool)
            y = _windows(y, pool, strides, (1, 1), cfg["padding"], -np.inf).max(axis=(3, 4))
        elif cls == "AveragePooling2D":
            pool = pair(cfg["pool_size"])
            strides = pair(cfg.get("strides") or pool)
            if cfg.get("padding", "valid") == "same":
                y = _avg_same(y, pool, strides)
            else:
                y = _windows(y, pool, strides, (1, 1), "valid", 0.0).mean(axis=(3, 4))
        elif cls == "GlobalAveragePooling2D":
            y = y.mean(axis=(0, 1))
        elif cls == "Softmax":
            e = np.exp(y - y.max(axis=-1, keepdims=True))
            y = e / e.sum(axis=-1, keepdims=True)
        elif cls == "ZeroPadding2D":
            p = cfg["padding"]
            (t, b), (l, r) = p if isinstance(p[0], (list, tuple)) else ((p[0], p[0]), (p[1], p[1]))
            y = np.pad(y, ((t, b), (l, r), (0, 0)))
        elif cls == "Flatten":
            y = y.reshape(-1)
        elif cls == "ReLU":
            mx, slope, thr = cfg.get("max_value"), cfg.get("negative_slope", 0.0), cfg.get("threshold", 0.0)
            y = np.where(y >= thr, y, slope * (y - thr))
            if mx is not None:
                y = np.minimum(y, mx)
        elif cls == "LeakyReLU":
            y = np.where(y >= 0, y, cfg.get("alpha", cfg.get("negative_slope", 0.3)) * y)
        elif cls == "Activation":
            y = _keras_activation(y, cfg["activation"])
        elif cls in keras_h5.IDENTITY:
            pass
        else:
            raise ValueError(f"{layer.name}: no reference for layer type {cls}")
        outs[layer.name] = y
    return outs


def tflite_reference(path: str | Path, x: np.ndarray) -> dict[int, np.ndarray]:
    """Every tensor of a TFLite model after one invoke of the default interpreter (`x` a list
    for a model with several inputs)."""
    from dtpu.tflite import Interpreter
    it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    details = it.get_input_details()
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if len(xs) != len(details):
        raise ValueError(f"{path}: {len(details)} inputs; got {len(xs)} arrays")
    for d, xi in zip(details, xs):
        xi = np.asarray(xi)
        if xi.ndim == len(d["shape"]) - 1:
            xi = xi[None]
        if d["dtype"] == np.int8 and xi.dtype.kind == "f":
            scale, zp = d["quantization"]
            xi = quantize(xi, scale, zp)
        it.set_tensor(d["index"], xi.astype(d["dtype"]).reshape(d["shape"]))
    it.invoke()
    out = {}
    for t in it.get_tensor_details():
        try:
            out[t["index"]] = it.get_tensor(t["index"])
        except ValueError:
            continue
    return out


# -- comparison -------------------------------------------------------------------------------------

def _compare(name: str, kind: str, got: np.ndarray, ref: np.ndarray, quantized: bool) -> Check:
    got = np.asarray(got)
    ref = np.asarray(ref)
    if got.size != ref.size:
        raise ValueError(f"{name}: machine output has {got.size} values, the reference {ref.size}")
    got, ref = got.reshape(ref.shape), ref
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    err = float(diff.max(initial=0.0))
    scale = float(np.abs(ref.astype(np.float64)).max(initial=0.0))
    exact = err == 0.0
    ok = exact if quantized else err <= RTOL * max(scale, 1.0)
    return Check(name, kind, err, scale, exact, ok)


def against_keras(bundle: Bundle, result: Result, model: keras_h5.KerasModel, x: np.ndarray) -> list[Check]:
    ref = keras_reference(model, x)
    checks = []
    heads = bundle.meta.get("heads") or []
    for layer in bundle.layers:
        if layer["kind"] == "input":         # written by the host, not computed
            continue
        got = to_framework(result.layers[layer["name"]], layer["output"]["flat"])[0]
        want = ref.get(layer["name"])
        if heads and layer is bundle.layers[-1]:            # the value the host head starts from
            want = ref.get(layer["name"] + PRE_SOFTMAX, want)
        if want is None and ".border" in layer["name"]:
            want = ref[layer["name"].split(".border")[0]]          # a border copy of that layer
        checks.append(_compare(layer["name"], layer["kind"], got, want, False))
    if heads:
        checks.append(_compare(heads[-1]["name"] + " (host)", "host", result.output[0],
                               ref[model.layers[-1].name], False))
    return checks


def against_tflite(bundle: Bundle, result: Result, path: str | Path, x: np.ndarray) -> list[Check]:
    meta_in = bundle.meta["input"]
    if bundle.meta.get("tflite", {}).get("host_quantize") and np.asarray(x).dtype.kind in "iu":
        # the model takes real values; the chip's image holds them quantized
        x = (np.asarray(x, np.float32) - meta_in["zero_point"]) * np.float32(meta_in["scale"])
    ref = tflite_reference(path, x)
    overwritten = _in_place(path, ref)
    checks = []
    quantized = bundle.fmt is Fmt.I8
    offset = bundle.meta["output"].get("offset", 0)     # a uint8 model: every uint8 tensor stored 128 lower
    for layer in bundle.layers:
        if layer["kind"] == "input":
            continue
        uint8 = layer["tensor"] is not None and layer["tensor"] in ref and ref[layer["tensor"]].dtype == np.uint8
        got = to_framework(result.layers[layer["name"]], layer["output"]["flat"], offset if uint8 else 0)
        if layer["tensor"] is None:
            checks.append(Check(layer["name"], layer["kind"], 0.0, 0.0, False, True,
                                note="a border copy of the model input (the interpreter has no such tensor)"))
            continue
        if layer["tensor"] in overwritten:
            checks.append(Check(layer["name"], layer["kind"], 0.0, 0.0, False, True,
                                note=f"TFLite computed {overwritten[layer['tensor']]} in place over this "
                                     f"tensor; its consumer is compared instead"))
            continue
        checks.append(_compare(layer["name"], layer["kind"], got, ref[layer["tensor"]], quantized))
    heads = bundle.meta.get("heads") or []
    if heads and result.chip_output is not None:
        out_t = bundle.meta["tflite"]["output_tensor"]
        checks.append(_compare(heads[-1]["name"] + " (host)", "host", result.output, ref[out_t], quantized))
    return checks


def _in_place(path, ref: dict) -> dict[int, str]:
    """Tensors whose buffer TFLite 2.14 reuses for an ADD's, MUL's or SOFTMAX's output even with
    all tensors preserved (the in-place optimization): their recorded value is the op's result."""
    from dtpu.isro import tflite_model
    model = tflite_model.read(path)
    out = {}
    for op in model.ops:
        if op.opcode not in ("ADD", "MUL", "SOFTMAX") or len(op.outputs) != 1:
            continue
        y = ref.get(op.outputs[0])
        for t in op.inputs:
            r = ref.get(t)
            if r is not None and y is not None and r.shape == y.shape and np.array_equal(r, y):
                out[t] = f"op {op.index} ({op.opcode})"
    return out


def source_path(bundle: Bundle, source: str | Path | None = None) -> Path:
    """The model to verify against: `source` when given, else the path meta.json recorded at
    compile time; checked before anything runs, so a wrong path costs no run and writes nothing."""
    if source:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"verify: model {str(path)!r} (given to --verify) does not exist; "
                                    f"accepted: the .h5, .keras or .tflite file the bundle was compiled from")
        return path
    recorded = bundle.meta.get("source", {}).get("path", "")
    if not recorded or not Path(recorded).is_file():
        raise FileNotFoundError(f"verify: the bundle's source model {recorded!r} (recorded in meta.json) is "
                                f"not here; pass it: --verify MODEL")
    return Path(recorded)


def verify(bundle: Bundle, result: Result, x: np.ndarray, source: str | Path | None = None) -> list[Check]:
    """Compare every layer with the oracle matching the bundle's source model."""
    src = bundle.meta.get("source", {})
    path = source_path(bundle, source)
    if src.get("kind") == "tflite" or path.suffix == ".tflite":
        return against_tflite(bundle, result, path, x)
    return against_keras(bundle, result, keras_h5.read(path), x)
