"""Heads the chip cannot run, computed by the host after the chip, as the source framework does.

A classifier usually ends in softmax, which needs exp and a division the chip does not have. The
compiler stops the program before such a head (trailing ops only, recorded in meta.json
``heads``) and :func:`apply` finishes on the host:

- ``softmax`` int8 (TFLite): TFLite 2.14's x86 kernel, ``optimized_ops::Softmax`` with the
  256-entry float table of ``PopulateSoftmaxLookupTable`` (``expf(-input_scale * beta * d)``),
  the float sum in element order, ``1 / (sum * output_scale)``, ``lrint`` and the output zero
  point; the tests compare it with the interpreter bit for bit.
- ``softmax`` float32 (TFLite, Keras): ``exp(x - max) / sum``, as both frameworks define it
  (compared within float tolerance).
- ``sigmoid`` int8 (TFLite LOGISTIC): the kernel's 256-entry table (``LUTPopulate``: dequantize
  in float32, ``1 / (1 + expf(-v))``, ``round(t / output_scale) + zero_point``, clamp), then a
  lookup; float32 (TFLite, Keras): ``1 / (1 + exp(-x))``.
"""
from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

KINDS = ("softmax", "sigmoid")


def _softmax_int8(x: np.ndarray, h: dict) -> np.ndarray:
    scale = np.float32(-np.float32(h["input_scale"]) * np.float32(h["beta"]))
    d = np.arange(256, dtype=np.float32)
    table = np.empty(256, np.float32)
    table[255 - np.arange(256)] = np.exp(scale * d).astype(np.float32)      # expf(scale * val)
    flat = x.reshape(-1, x.shape[-1]).astype(np.int32)
    out = np.empty(flat.shape, np.int8)
    out_scale, zp = np.float32(h["output_scale"]), int(h["output_zero_point"])
    for r, row in enumerate(flat):
        offset = 255 - int(row.max())
        vals = table[offset + row]
        total = np.float32(0.0)
        for v in vals:                      # the kernel's sequential float sum
            total = np.float32(total + v)
        inv = np.float32(np.float32(1.0) / np.float32(total * out_scale))
        q = np.rint((vals * inv).astype(np.float32)).astype(np.int64) + zp
        out[r] = np.clip(q, -128, 127)
    return out.reshape(x.shape)


def _softmax_float(x: np.ndarray, h: dict) -> np.ndarray:
    z = x.astype(np.float64) * h.get("beta", 1.0)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def sigmoid_table(h: dict) -> np.ndarray:
    """TFLite's int8 LOGISTIC table, indexed by the input value + 128."""
    vals = np.arange(-128, 128, dtype=np.int32)
    deq = (np.float32(h["input_scale"]) * (vals - int(h["input_zero_point"])).astype(np.float32)).astype(np.float32)
    t = (np.float32(1.0) / (np.float32(1.0) + np.exp(-deq).astype(np.float32))).astype(np.float32)
    inv = np.float32(np.float32(1.0) / np.float32(h["output_scale"]))
    q = _round_half_away((t * inv).astype(np.float32)).astype(np.int64) + int(h["output_zero_point"])
    return np.clip(q, -128, 127).astype(np.int8)


def _sigmoid_float(x: np.ndarray, h: dict) -> np.ndarray:
    with np.errstate(over="ignore"):          # exp(-x) = inf for x < -709: the sigmoid is 0, as it should
        return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


def apply(heads: list[dict], y: np.ndarray) -> np.ndarray:
    """Run `heads` in order on the chip's output `y` (framework layout)."""
    for h in heads:
        if h["kind"] not in KINDS:
            raise ValueError(f"head {h.get('name')}: kind {h['kind']!r}; accepted: {', '.join(KINDS)}")
        if h["kind"] == "sigmoid":
            y = (sigmoid_table(h)[y.astype(np.int32) + 128] if h.get("dtype") == "int8"
                 else _sigmoid_float(y, h))
        else:
            y = _softmax_int8(y, h) if h.get("dtype") == "int8" else _softmax_float(y, h)
        log.info("host head %s (%s) after the chip", h.get("name"), h["kind"])
    return y


def describe(heads: list[dict]) -> str:
    return ", ".join(f"{h['kind']} ({h.get('name')}, {h.get('dtype')})" for h in heads)
