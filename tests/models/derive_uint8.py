#!/usr/bin/env python3
"""uint8 twins of the zoo's int8 ImageNet MobileNets, without TensorFlow (issue #25 item 4:
"MobileNet v1 and v2 1.0 224 (int8 and uint8)").

Why this exists: make_imagenet.py's uint8 models come from an int8 *per-tensor* conversion
(TFLite's uint8 convolutions take one weight scale), which needs TensorFlow's converter; the
zoo only commits the per-channel int8 MobileNet v1 / v2 1.0 224 and a uint8 MobileNet v1 0.5.
A uint8 MobileNet 1.0 224 is ~4 MB, and the committed zoo is at its size budget, so the twins
are written into the model cache (tests/models/cache, git-ignored; $DTPU_MODEL_CACHE) on first
use, in seconds, by this rewrite of the committed int8 file:

- every INT8 activation becomes UINT8 with its zero point + 128 (same scale);
- each convolution's per-channel weights become per-tensor: scale s = max_c s_c, values
  round(q * s_c / s) (a channel with a smaller range loses precision, as a per-tensor
  converter would make it), then + 128 and moved by up to 6 more towards the side with room
  (zero points 122..134, as make_zoo.uint8_from_int8 does), bias round(b * s_c / s) at scale
  s_in * s (TFLite checks that for uint8);
- FULLY_CONNECTED's per-tensor int8 weights + 128; int32 constants (paddings, axes) unchanged.

The result is a different model from the int8 one (not the int8 one + 128): the tests compare it
with TFLite's own uint8 kernels, which is the oracle. Deterministic: the same bytes each time.

    PYTHONPATH=pylib .venv/bin/python tests/models/derive_uint8.py    # writes both, ~10 s
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT / "pylib") not in sys.path:
    sys.path.insert(0, str(ROOT / "pylib"))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dtpu import tflite_model  # noqa: E402
from dtpu.tflite_writer import Tensor, write, Node  # noqa: E402
from tests.models import zoo  # noqa: E402

#: uint8 twin name -> the committed int8 model it is derived from
TWINS = {"mobilenet_v1_224__uint8_derived": "mobilenet_v1_224__int8",
         "mobilenet_v2_224__uint8_derived": "mobilenet_v2_224__int8"}
WEIGHT_SHIFT = 6
CONVS = ("CONV_2D", "DEPTHWISE_CONV_2D")


def _options(op, sg) -> dict:
    """The writer's options for a parsed operator (the opcodes of the MobileNets)."""
    o = op.options
    act = str(o.get("fused_activation_function", "NONE")).lower()
    if op.opcode in CONVS:
        out = {"padding": o["padding"], "stride": (o["stride_h"], o["stride_w"]),
               "dilation": (o["dilation_h_factor"], o["dilation_w_factor"]), "activation": act}
        if op.opcode == "DEPTHWISE_CONV_2D":
            out["depth_multiplier"] = o["depth_multiplier"]
        return out
    if op.opcode in ("ADD", "FULLY_CONNECTED"):
        return {"activation": act}
    if op.opcode == "MEAN":
        return {"keep_dims": bool(o["keep_dims"])}
    if op.opcode == "RESHAPE":
        return {"new_shape": list(sg.tensors[op.outputs[0]].shape)}
    if op.opcode == "STRIDED_SLICE":
        return {k: o[k] for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                  "shrink_axis_mask")}
    if op.opcode == "PACK":
        return {"values_count": o["values_count"], "axis": o["axis"]}
    if op.opcode in ("PAD", "SHAPE", "SOFTMAX"):
        return {}
    raise ValueError(f"operator {op.index} {op.opcode}: not rewritten here; accepted: CONV_2D, "
                     f"DEPTHWISE_CONV_2D, ADD, FULLY_CONNECTED, MEAN, RESHAPE, STRIDED_SLICE, "
                     f"PACK, PAD, SHAPE, SOFTMAX")


def uint8_per_tensor(content: bytes, description: str) -> bytes:
    """The uint8 per-tensor rewrite of an int8 (per-channel) model (module docstring)."""
    model = tflite_model.parse(content)
    sg = model.main
    role = {}                       # tensor index -> ("w", conv op) / ("b", conv op)
    for op in sg.operators:
        if op.opcode in CONVS:
            role[op.inputs[1]] = ("w", op)
            if len(op.inputs) > 2 and op.inputs[2] >= 0:
                role[op.inputs[2]] = ("b", op)
    new_w_scale = {}                # conv op index -> per-tensor weight scale
    for op in sg.operators:
        if op.opcode in CONVS:
            new_w_scale[op.index] = float(np.max(sg.tensors[op.inputs[1]].quantization.scale))
    tensors = []
    for t in sg.tensors:
        q = t.quantization
        kind, op = role.get(t.index, (None, None))
        if kind == "w":
            s_c = q.scale.astype(np.float64)
            s = new_w_scale[op.index]
            axis = q.quantized_dimension
            shape = [1] * len(t.shape)
            shape[axis] = -1
            vals = np.clip(np.round(t.data.astype(np.float64) * (s_c / s).reshape(shape)),
                           -127, 127).astype(np.int64)
            lo, hi = -128 - int(vals.min()), 127 - int(vals.max())
            shift = int(np.clip(WEIGHT_SHIFT * (1 if hi >= -lo else -1), lo, hi))
            data = (vals + 128 + shift).astype(np.uint8)
            tensors.append(Tensor(t.shape, "uint8", s, 128 + shift, data=data, name=t.name))
        elif kind == "b":
            x = sg.tensors[op.inputs[0]].quantization
            w = sg.tensors[op.inputs[1]].quantization
            s = new_w_scale[op.index]
            ratio = w.scale.astype(np.float64) / s
            data = np.round(t.data.astype(np.float64) * ratio).astype(np.int32)
            s_b = float(np.float32(x.scale[0]) * np.float32(s))
            tensors.append(Tensor(t.shape, "int32", s_b, 0, data=data, name=t.name))
        elif t.type_name == "INT8":
            if q.per_channel:
                raise ValueError(f"tensor {t.index} {t.name!r}: per-channel int8 outside a "
                                 f"convolution's weights; accepted: per-tensor")
            data = None if t.data is None else (t.data.astype(np.int64) + 128).astype(np.uint8)
            tensors.append(Tensor(t.shape, "uint8", float(q.scale[0]),
                                  int(q.zero_point[0]) + 128, data=data, name=t.name))
        elif t.type_name in ("INT32", "INT64"):
            scale = None if q is None else [float(v) for v in q.scale]
            zp = 0 if q is None else [int(v) for v in q.zero_point]
            data = None if t.data is None else np.asarray(t.data).copy()
            tensors.append(Tensor(t.shape, t.type_name.lower(), scale, zp, data=data,
                                  name=t.name))
        else:
            raise ValueError(f"tensor {t.index} {t.name!r}: type {t.type_name}; accepted: "
                             f"INT8, INT32, INT64")
    nodes = [Node(op.opcode, list(op.inputs), list(op.outputs), _options(op, sg))
             for op in sg.operators]
    return write(tensors, nodes, list(sg.inputs), list(sg.outputs), description)


def twin_path(name: str) -> Path:
    """The cached uint8 twin `name` (a key of TWINS), written on first use."""
    if name not in TWINS:
        raise ValueError(f"uint8 twin {name!r}; accepted: {', '.join(TWINS)}")
    path = zoo.cache_dir() / f"{name}.tflite"
    if not path.is_file():
        source = zoo.model_path(TWINS[name])
        buf = uint8_per_tensor(source.read_bytes(),
                               f"dtpu tests/models/derive_uint8.py: uint8 per-tensor twin of "
                               f"{source.name}")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(buf)
        tmp.replace(path)           # another process may write the same bytes at once
    return path


def main() -> int:
    for name in TWINS:
        print(twin_path(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
