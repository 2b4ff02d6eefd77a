"""Keras front end: h5py reads the architecture and the weights; TensorFlow is never imported.

Three files are read: the legacy HDF5 `.h5` written by Keras 2 or by Keras 3 (`model_config`
attribute, `model_weights` group), and the Keras 3 `.keras` zip (`config.json` and
`model.weights.h5`, whose weights are stored per layer object, in layer order, under
snake_case class names rather than layer names).

The ISRO compiler's users train in Keras and hand over the legacy HDF5 file, so this reads that
format directly (a flight-software build has no TensorFlow). Sequential models and functional
models are accepted as DAGs (branches joined by Add), with one or more inputs; anything else is
refused, naming the layer.
"""
from __future__ import annotations

import json
import logging
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dtpu.isro.ir import Builder, CompileError
from dtpu.isro.isa import Fmt

log = logging.getLogger(__name__)

IDENTITY = {"Dropout", "SpatialDropout1D", "SpatialDropout2D", "GaussianDropout", "GaussianNoise",
            "AlphaDropout", "ActivityRegularization"}
SUPPORTED = ("InputLayer", "Conv2D", "DepthwiseConv2D", "Conv2DTranspose", "Conv1D", "BatchNormalization",
             "MaxPooling2D", "MaxPooling1D", "AveragePooling2D", "AveragePooling1D", "GlobalAveragePooling2D",
             "GlobalAveragePooling1D", "Add", "Multiply", "Concatenate", "UpSampling2D", "Reshape (views)",
             "ZeroPadding2D", "Flatten", "Dense", "ReLU", "LeakyReLU", "Activation",
             "Softmax (last layer, on the host)") + tuple(sorted(IDENTITY))
# activations the chip evaluates as a LUT layer (F32: its float unit) after the layer they follow
FUNCTIONS = {"sigmoid": "sigmoid", "tanh": "tanh", "hard_swish": "hswish", "hard_silu": "hswish"}
# the name of a layer's value before such an activation (keras_reference records it too)
PRE_ACTIVATION = "/pre_activation"


@dataclass
class KerasLayer:
    class_name: str
    name: str
    config: dict[str, Any]
    weights: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class KerasModel:
    name: str
    input_shape: tuple[int, ...]           # without the batch axis
    layers: list[KerasLayer]               # in execution order, InputLayer excluded
    inbound: dict[str, list[str]] | None = None   # functional graphs: layer -> input layers
    input_name: str = "input"
    extra_inputs: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)   # (name, shape) after the first
    extra_outputs: list[str] = field(default_factory=list)   # output layers besides the last layer


def read(path: str | Path) -> KerasModel:
    """The model's architecture and weights; any file that is not a readable Keras 2 HDF5 model
    (missing, truncated, another HDF5 file, a Keras 3 .keras zip) is a CompileError naming it."""
    path = Path(path)
    if not path.is_file():
        raise CompileError(f"{path}: no such model file")
    try:
        return _read(path)
    except CompileError:
        raise
    except (OSError, KeyError, ValueError, TypeError, IndexError, AttributeError, RuntimeError,
            zipfile.BadZipFile) as exc:      # RuntimeError: h5py on a corrupt B-tree
        head = path.read_bytes()[:4]
        if head == b"PK\x03\x04":
            hint = (f"a zip archive that is not a readable Keras 3 .keras file "
                    f"({' '.join(str(exc).split())})")
        elif head != b"\x89HDF":
            hint = "not an HDF5 file"
        else:
            hint = f"an HDF5 file that is truncated, corrupt or not a Keras model ({' '.join(str(exc).split())})"
        raise CompileError(f"{path}: cannot read a Keras model: {hint}; accepted: model.save('x.h5') "
                           f"(Keras 2 or 3) and model.save('x.keras') (Keras 3) files") from None


def _read(path: Path) -> KerasModel:
    import h5py
    with open(path, "rb") as fh:
        if fh.read(4) == b"PK\x03\x04":
            return _read_keras3(path)
    with h5py.File(path, "r") as f:
        raw = f.attrs.get("model_config")
        if raw is None:
            raise CompileError(f"{path}: no 'model_config' attribute; save the model with "
                               f"model.save('x.h5') (a weights-only file has no architecture)")
        cfg = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
        weights_root = f["model_weights"] if "model_weights" in f else f
        layers_cfg, input_shape, inbound, input_name, extra, extra_out = _graph(cfg, path)
        layers = []
        for lc in layers_cfg:
            name = lc["config"]["name"]
            weights = {}
            if name in weights_root:
                g = weights_root[name]
                for wn in g.attrs.get("weight_names", []):
                    wn = wn.decode() if isinstance(wn, bytes) else str(wn)
                    short = wn.split("/")[-1].split(":")[0]
                    weights[short] = np.asarray(g[wn])
            layers.append(KerasLayer(lc["class_name"], name, lc["config"], weights))
    return KerasModel(cfg["config"].get("name", path.stem), input_shape, layers, inbound, input_name, extra,
                      extra_out)


# Keras 3 .keras: the variables of each layer object, in the order the layer creates them
_VARS = {"Conv2D": ("kernel", "bias"), "DepthwiseConv2D": ("depthwise_kernel", "bias"),
         "Dense": ("kernel", "bias"), "BatchNormalization": ("gamma", "beta", "moving_mean", "moving_variance")}


def _snake(name: str) -> str:
    """Keras 3's to_snake_case (Conv2D -> conv2d, BatchNormalization -> batch_normalization)."""
    import re
    s = re.sub(r"\W+", "", name)
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", s)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


def _read_keras3(path: Path) -> KerasModel:
    """A Keras 3 `.keras` zip: config.json plus model.weights.h5 (layers/<object name>/vars/<i>)."""
    import io
    import h5py
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        if "config.json" not in names or "model.weights.h5" not in names:
            raise CompileError(f"{path}: a zip without config.json and model.weights.h5 is not a Keras 3 "
                               f".keras file (it has {', '.join(sorted(names)[:5]) or 'nothing'})")
        cfg = json.loads(z.read("config.json"))
        weights_blob = z.read("model.weights.h5")
    layers_cfg, input_shape, inbound, input_name, extra, extra_out = _graph(cfg, path)
    counts: dict[str, int] = {}
    layers = []
    with h5py.File(io.BytesIO(weights_blob), "r") as f:
        root = f["layers"]
        for lc in cfg["config"]["layers"]:
            base = _snake(lc["class_name"])
            k = counts.get(base, 0)
            counts[base] = k + 1
            obj = base if k == 0 else f"{base}_{k}"
            if lc["class_name"] == "InputLayer":
                continue
            c = lc["config"]
            wanted = list(_VARS.get(lc["class_name"], ()))
            if lc["class_name"] == "BatchNormalization":
                wanted = [w for w in wanted if not (w == "gamma" and not c.get("scale", True))
                          and not (w == "beta" and not c.get("center", True))]
            if "bias" in wanted and not c.get("use_bias", True):
                wanted.remove("bias")
            weights = {}
            vars_ = root[obj]["vars"] if obj in root else {}
            if len(vars_) != len(wanted):
                raise CompileError(f"{c['name']}: model.weights.h5 holds {len(vars_)} variables for "
                                   f"layers/{obj}, a {lc['class_name']} has {len(wanted)} ({', '.join(wanted) or 'none'})")
            for i, w in enumerate(wanted):
                weights[w] = np.asarray(vars_[str(i)])
            layers.append(KerasLayer(lc["class_name"], c["name"], c, weights))
    return KerasModel(cfg["config"].get("name", path.stem), input_shape, layers, inbound, input_name, extra,
                      extra_out)


def _sources(lc: dict) -> list[str]:
    """The layers a functional layer reads: Keras 2 [[name, node, tensor, kwargs], ...] or
    Keras 3 {"args": [keras tensors, or a list of them], "kwargs": {}}."""
    nodes = lc.get("inbound_nodes", [])
    if len(nodes) != 1:
        raise CompileError(f"{lc['config']['name']}: called {len(nodes)} times (a shared layer); "
                           f"each layer must be used once")
    node = nodes[0]
    if isinstance(node, dict):
        found = []

        def walk(v):
            if isinstance(v, dict) and v.get("class_name") == "__keras_tensor__":
                found.append(v["config"]["keras_history"][0])
            elif isinstance(v, (list, tuple)):
                for item in v:
                    walk(item)
        walk(node.get("args", []))
        return found
    return [n[0] for n in node]


def _graph(cfg: dict, path: Path):
    """The layers in execution order, with each layer's inputs for a functional graph."""
    cls = cfg.get("class_name")
    layers = list(cfg["config"]["layers"])
    inbound = None
    input_name = "input"
    extra, extra_out = [], []
    if cls in ("Functional", "Model"):
        inbound = {}
        seen = set()
        inputs = {}
        for lc in layers:
            name = lc["config"]["name"]
            if lc["class_name"] == "InputLayer":
                inputs[name] = lc
                seen.add(name)
                continue
            srcs = _sources(lc)
            missing = [s for s in srcs if s not in seen]
            if missing:
                raise CompileError(f"{name}: reads {missing}, which is not computed before it")
            inbound[name] = srcs
            seen.add(name)
        outs = cfg["config"].get("output_layers", [])
        outs = [outs[0]] if outs and isinstance(outs[0], str) else [o[0] for o in outs]
        if not outs:
            raise CompileError(f"{path}: no model output")
        if layers and layers[-1]["config"]["name"] not in outs:
            raise CompileError(f"{path}: the model outputs {outs} do not include the last layer "
                               f"({layers[-1]['config']['name']})")
        extra_out = [o for o in outs if o != layers[-1]["config"]["name"]]
        # the model's inputs in its own order (input_layers), the first one the Builder's input,
        # each further one a frame tensor of its own
        listed = cfg["config"].get("input_layers") or []
        if listed and isinstance(listed[0], str):
            listed = [listed]                                   # Keras 3, one input: [name, 0, 0]
        order = [o[0] for o in listed if o and o[0] in inputs]
        order += [n for n in inputs if n not in order]
        if order:
            input_name = order[0]
            extra = [(n, _input_shape(inputs[n]["config"], path, n)) for n in order[1:]]
            layers = [inputs[order[0]]] + [lc for lc in layers if lc["class_name"] != "InputLayer"]
    elif cls != "Sequential":
        raise CompileError(f"{path}: model class {cls!r}; accepted: Sequential, Functional")
    shape = None
    if layers and layers[0]["class_name"] == "InputLayer":
        c0 = layers[0]["config"]
        shape = c0.get("batch_input_shape", c0.get("batch_shape"))
        layers = layers[1:]
    elif layers:
        shape = layers[0]["config"].get("batch_input_shape", layers[0]["config"].get("batch_shape"))
    if shape is None:
        shape = cfg["config"].get("build_input_shape")
    if not shape or any(v is None for v in shape[1:]):
        raise CompileError(f"{path}: the model's input shape {shape} is not fully known; build it "
                           f"with a fixed Input(shape=...)")
    for lc in layers:
        if lc["class_name"] in ("Sequential", "Functional", "Model"):
            raise CompileError(f"{lc['config']['name']}: nested models are not supported; flatten "
                               f"the model into one chain")
    return layers, tuple(int(v) for v in shape[1:]), inbound, input_name, extra, extra_out


def _input_shape(c: dict, path: Path, name: str) -> tuple[int, ...]:
    shape = c.get("batch_input_shape", c.get("batch_shape"))
    if not shape or any(v is None for v in shape[1:]):
        raise CompileError(f"{path}: model input {name}'s shape {shape} is not fully known; build it "
                           f"with a fixed Input(shape=...)")
    return tuple(int(v) for v in shape[1:])


# -- to the builder ---------------------------------------------------------------------------------

def size_1d(v) -> int:
    """A 1-D layer's size (Keras writes [k] or k)."""
    return int(v[0]) if isinstance(v, (list, tuple)) else int(v)


def size_2d(v) -> tuple[int, int]:
    """A 2-D layer's (height, width) size (Keras writes [h, w], or k for both)."""
    if isinstance(v, (list, tuple)):
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _activation(name: str, act: str | None, b: Builder | None = None, is_last: bool = False):
    """A Keras activation name as (leaky, clamp) for the chip's activation stage; softmax on the
    model's last layer becomes a host head."""
    if act in (None, "linear"):
        return None, None
    if act in ("softmax", "sigmoid") and is_last and b is not None:
        b.heads.append({"kind": act, "name": f"{name} ({act})", "dtype": "float32", "beta": 1.0})
        return None, None
    if act == "relu":
        return (0.0, 0.0), None
    if act == "relu6":
        return (0.0, 0.0), (-np.inf, 6.0)
    raise CompileError(f"{name}: activation {act!r} is not supported; accepted: linear, relu, relu6 "
                       f"(and ReLU/LeakyReLU layers; softmax or sigmoid on the last layer, on the host)")


def _activate(b: Builder, name: str, act: str | None, is_last: bool) -> None:
    """Fold `act` into the layer just described, or, for sigmoid/tanh/hard-swish inside the
    network, follow it with a LUT layer that takes the Keras layer's name."""
    if act in FUNCTIONS and not (act == "sigmoid" and is_last):
        b.producer().name = name + PRE_ACTIVATION
        b.lut(name, func=FUNCTIONS[act])
        return
    leaky, clamp = _activation(name, act, b, is_last)
    b.activation(name, leaky=leaky, clamp=clamp)


def check_channels_last(layer: KerasLayer) -> None:
    """Refuse a layer whose data is channels-first: the compilers read NHWC only."""
    fmt = layer.config.get("data_format", "channels_last")
    if fmt not in (None, "channels_last"):
        raise CompileError(f"{layer.name}: data_format {fmt!r}; only channels_last is supported")


def build(model: KerasModel) -> Builder:
    """Describe the model to a Builder; a functional graph layer by layer in its saved order
    (topological), each layer reading the builder values of its inbound layers."""
    b = _builder(model)
    values = {model.input_name: b.value}
    for name, shape in model.extra_inputs:
        if len(shape) == 3:
            h, w, c = shape
            values[name] = b.add_input(name, (c, h, w))
        elif len(shape) == 1:
            values[name] = b.add_input(name, (shape[0], 1, 1), flat=True)
        else:
            raise CompileError(f"{name}: input shape {shape}; accepted: (H, W, C) images or (N,) vectors")
    last = model.layers[-1].name if model.layers else None
    for layer in model.layers:
        srcs = model.inbound[layer.name] if model.inbound is not None else None
        if layer.class_name == "Add":
            if srcs is None or len(srcs) != 2:
                raise CompileError(f"{layer.name}: Add of {len(srcs or [])} tensors; the chip adds two")
            b.eadd(layer.name, values[srcs[0]], values[srcs[1]])
        elif layer.class_name == "Multiply":
            if srcs is None or len(srcs) != 2:
                raise CompileError(f"{layer.name}: Multiply of {len(srcs or [])} tensors; the chip multiplies two")
            first, second = values[srcs[0]], values[srcs[1]]
            if np.prod(first.shape) < np.prod(second.shape):
                first, second = second, first             # the broadcast operand second
            b.emul(layer.name, first, second)
        elif layer.class_name == "Concatenate":
            if srcs is None or len(srcs) < 2:
                raise CompileError(f"{layer.name}: Concatenate of {len(srcs or [])} tensors; accepted: two or more")
            if layer.config.get("axis", -1) not in (-1, len(model.input_shape)):
                raise CompileError(f"{layer.name}: concatenation along axis {layer.config.get('axis')}; "
                                   f"accepted: the channel (last) axis")
            b.concat(layer.name, [values[s] for s in srcs])
        else:
            if srcs is not None:
                if len(srcs) != 1:
                    raise CompileError(f"{layer.name}: {layer.class_name} with {len(srcs)} inputs "
                                       f"{srcs}; accepted: one (two for Add and Multiply, several for "
                                       f"Concatenate)")
                b.value = values[srcs[0]]
            _layer(b, layer, is_last=layer.name == last)
        values[layer.name] = b.value
    final = b.value
    for name in model.extra_outputs:
        if name not in values:
            raise CompileError(f"{name}: a model output that is not a layer of the model")
        b.mark_output(values[name], name)
    b.value = final
    return b


def _builder(model: KerasModel) -> Builder:
    shape = model.input_shape
    if len(shape) == 3:
        h, w, c = shape
        b = Builder(Fmt.F32, (c, h, w), input_name=model.input_name)
    elif len(shape) == 2:                          # a sequence (L, C): stored C x 1 x L
        n, c = shape
        b = Builder(Fmt.F32, (c, 1, n), input_name=model.input_name)
    elif len(shape) == 1:
        b = Builder(Fmt.F32, (shape[0], 1, 1), flat_input=True, input_name=model.input_name)
    else:
        raise CompileError(f"{model.name}: input shape {shape}; accepted: (H, W, C) images, (L, C) "
                           f"sequences or (N,) vectors")
    return b


def _layer(b: Builder, layer: KerasLayer, is_last: bool = False) -> None:
    cls, cfg, name, wts = layer.class_name, layer.config, layer.name, layer.weights
    if cls in IDENTITY:
        b.identity(name)
        return
    if cls in ("Conv2D", "DepthwiseConv2D"):
        check_channels_last(layer)
        if cfg.get("groups", 1) != 1:
            raise CompileError(f"{name}: grouped convolution (groups={cfg['groups']}) is not supported")
        if cls == "Conv2D":
            k = wts["kernel"]                                  # (KH, KW, I, O)
            w = k.transpose(3, 2, 0, 1)                       # filter -> channel -> height -> width
            mult = None
        else:
            k = wts["depthwise_kernel"] if "depthwise_kernel" in wts else wts["kernel"]   # (KH, KW, C, M)
            mult = int(cfg.get("depth_multiplier", 1))
            kh, kw, c, m = k.shape
            w = k.reshape(kh, kw, c * m).transpose(2, 0, 1)    # output channel c*M + m
        bias = wts.get("bias") if cfg.get("use_bias", True) else None
        cout = w.shape[0]
        dsp = (np.ones(cout, np.float32), np.zeros(cout, np.float32),
               np.zeros(cout, np.float32) if bias is None else bias.astype(np.float32))
        b.conv(name, w.astype(np.float32), stride=size_2d(cfg.get("strides", 1)),
               dilation=size_2d(cfg.get("dilation_rate", 1)), padding=cfg.get("padding", "valid"),
               depthwise_mult=mult, dsp=dsp)
        _activate(b, name, cfg.get("activation"), is_last)
        return
    if cls == "Conv1D":
        check_channels_last(layer)
        if cfg.get("padding", "valid") not in ("valid", "same") or cfg.get("groups", 1) != 1:
            raise CompileError(f"{name}: Conv1D with padding {cfg.get('padding')!r}, groups "
                               f"{cfg.get('groups', 1)}; accepted: valid or same, groups 1")
        k = wts["kernel"]                                      # (K, I, O)
        bias = wts.get("bias") if cfg.get("use_bias", True) else None
        cout = k.shape[2]
        dsp = (np.ones(cout, np.float32), np.zeros(cout, np.float32),
               np.zeros(cout, np.float32) if bias is None else bias.astype(np.float32))
        b.conv(name, k.transpose(2, 1, 0)[:, :, None, :].astype(np.float32), stride=(1, size_1d(cfg.get("strides", 1))),
               dilation=(1, size_1d(cfg.get("dilation_rate", 1))), padding=cfg["padding"], dsp=dsp)
        _activate(b, name, cfg.get("activation"), is_last)
        return
    if cls == "Conv2DTranspose":
        check_channels_last(layer)
        if cfg.get("output_padding") not in (None, [None, None]) or size_2d(cfg.get("dilation_rate", 1)) != (1, 1):
            raise CompileError(f"{name}: Conv2DTranspose with output_padding or dilation; accepted: neither")
        k = wts["kernel"]                                      # (KH, KW, O, I)
        kh, kw, cout, _ = k.shape
        sh, sw = size_2d(cfg.get("strides", 1))
        c, h, w_ = b.shape
        same = cfg.get("padding", "valid") == "same"
        oh, ow = (h * sh, w_ * sw) if same else ((h - 1) * sh + max(kh, sh), (w_ - 1) * sw + max(kw, sw))
        pads = []
        for out, kk, st in ((oh, kh, sh), (ow, kw, sw)):
            fwd = -(-out // st) if same else (out - kk) // st + 1
            pads.append(max((fwd - 1) * st + kk - out, 0) // 2)
        bias = wts.get("bias") if cfg.get("use_bias", True) else None
        dsp = (np.ones(cout, np.float32), np.zeros(cout, np.float32),
               np.zeros(cout, np.float32) if bias is None else bias.astype(np.float32))
        b.tconv(name, k.transpose(2, 3, 0, 1).astype(np.float32), (oh, ow), stride=(sh, sw),
                pad_before=tuple(pads), dsp=dsp)
        _activate(b, name, cfg.get("activation"), is_last)
        return
    if cls == "UpSampling2D":
        check_channels_last(layer)
        interp = cfg.get("interpolation", "nearest")
        if interp not in ("nearest", "bilinear"):
            raise CompileError(f"{name}: UpSampling2D interpolation {interp!r}; accepted: nearest, bilinear")
        sh, sw = size_2d(cfg.get("size", 2))
        c, h, w_ = b.shape
        # Keras resizes with tf.image.resize: half-pixel centers, no corner alignment
        b.resize(name, (h * sh, w_ * sw), bilinear=interp == "bilinear", align=False, half=True)
        return
    if cls == "Reshape":
        target = tuple(int(v) for v in cfg["target_shape"])
        c, h, w_ = b.shape
        if b.flattened or len(target) < 1 or target[-1] != c or int(np.prod(target[:-1])) != h * w_ \
                or [v for v in target[:-1] if v != 1] != [v for v in (h, w_) if v != 1]:
            raise CompileError(f"{name}: Reshape of a {h}x{w_}x{c} tensor to {target}; accepted: adding or "
                               f"removing axes of size 1, channels last")
        b.identity(name)
        return
    if cls == "Dense":
        if not b.flattened and b.shape[1] * b.shape[2] > 1:
            raise CompileError(f"{name}: Dense on a {b.shape[1]}x{b.shape[2]} feature map applies per "
                               f"pixel; add a Flatten before it")
        k = wts["kernel"]                                      # (N, units)
        bias = wts.get("bias") if cfg.get("use_bias", True) else None
        units = k.shape[1]
        dsp = (np.ones(units, np.float32), np.zeros(units, np.float32),
               np.zeros(units, np.float32) if bias is None else bias.astype(np.float32))
        b.dense(name, k.T.astype(np.float32), dsp=dsp)
        _activate(b, name, cfg.get("activation"), is_last)
        return
    if cls == "BatchNormalization":
        axis = cfg.get("axis", -1)
        axis = axis[0] if isinstance(axis, list) and len(axis) == 1 else axis
        after_dense = b.producer() is not None and b.producer().flat_out
        if not (axis == -1 or (axis == 3 and not after_dense) or (axis == 1 and after_dense)):
            raise CompileError(f"{name}: batch normalization over axis {cfg.get('axis')}; only the "
                               f"channel axis folds into per-channel DSP parameters")
        c = b.shape[0]
        gamma = wts.get("gamma", np.ones(c)) if cfg.get("scale", True) else np.ones(c)
        beta = wts.get("beta", np.zeros(c)) if cfg.get("center", True) else np.zeros(c)
        b.batchnorm(name, gamma, beta, wts["moving_mean"], wts["moving_variance"], float(cfg.get("epsilon", 1e-3)))
        return
    if cls in ("MaxPooling1D", "AveragePooling1D"):
        check_channels_last(layer)
        pool = size_1d(cfg.get("pool_size", 2))
        stride = size_1d(cfg.get("strides") or pool)
        pool_fn = b.maxpool if cls == "MaxPooling1D" else b.avgpool
        pool_fn(name, (1, pool), (1, stride), cfg.get("padding", "valid"))
        return
    if cls == "GlobalAveragePooling1D":
        if cfg.get("keepdims"):
            raise CompileError(f"{name}: GlobalAveragePooling1D(keepdims=True); accepted: keepdims=False")
        c, h, w_ = b.shape
        b.avgpool(name, (h, w_), (1, 1), "valid", flat=True)
        return
    if cls == "MaxPooling2D":
        check_channels_last(layer)
        pool = size_2d(cfg.get("pool_size", 2))
        strides = cfg.get("strides") or pool
        b.maxpool(name, pool, size_2d(strides), cfg.get("padding", "valid"))
        return
    if cls == "AveragePooling2D":
        check_channels_last(layer)
        pool = size_2d(cfg.get("pool_size", 2))
        b.avgpool(name, pool, size_2d(cfg.get("strides") or pool), cfg.get("padding", "valid"))
        return
    if cls == "GlobalAveragePooling2D":
        check_channels_last(layer)
        if cfg.get("keepdims"):
            raise CompileError(f"{name}: GlobalAveragePooling2D(keepdims=True); accepted: keepdims=False")
        c, h, w = b.shape
        b.avgpool(name, (h, w), (1, 1), "valid", flat=True)
        return
    if cls == "Softmax":
        if not is_last:
            raise CompileError(f"{name}: softmax inside the network; the chip has no exp, only a "
                               f"softmax as the model's last layer runs (on the host)")
        axis = cfg.get("axis", -1)
        if axis not in (-1, [-1]):
            raise CompileError(f"{name}: softmax over axis {axis}; accepted: the last axis")
        b.heads.append({"kind": "softmax", "name": name, "dtype": "float32", "beta": 1.0})
        b.identity(name)
        return
    if cls == "ZeroPadding2D":
        check_channels_last(layer)
        p = cfg.get("padding", 1)
        if isinstance(p, int):
            t = bo = l = r = p
        elif isinstance(p[0], (list, tuple)):
            (t, bo), (l, r) = p
        else:
            t = bo = int(p[0])
            l = r = int(p[1])
        b.pad(name, t, bo, l, r)
        return
    if cls == "Flatten":
        check_channels_last(layer)
        b.flatten(name)
        return
    if cls == "ReLU":
        mx, slope, thr = cfg.get("max_value"), float(cfg.get("negative_slope", 0.0)), float(cfg.get("threshold", 0.0))
        if slope != 0.0 and thr != 0.0:
            raise CompileError(f"{name}: ReLU with both negative_slope {slope} and threshold {thr} "
                               f"is slope*(x-threshold) below the threshold; the chip computes a2*x")
        clamp = None if mx is None else (-np.inf, float(mx))
        b.activation(name, leaky=(thr, slope), clamp=clamp)
        return
    if cls == "LeakyReLU":
        alpha = float(cfg.get("alpha", cfg.get("negative_slope", 0.3)))
        b.activation(name, leaky=(0.0, alpha))
        return
    if cls == "Activation":
        act = cfg.get("activation")
        if act in FUNCTIONS and not (act == "sigmoid" and is_last):
            b.lut(name, func=FUNCTIONS[act])
            return
        leaky, clamp = _activation(name, act, b, is_last)
        b.activation(name, leaky=leaky, clamp=clamp)
        return
    raise CompileError(f"{name}: layer type {cls} is not supported by the ISRO-ASIC; accepted: "
                       f"{', '.join(SUPPORTED)}")
