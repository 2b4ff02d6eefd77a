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
"""
from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

KINDS = ("softmax",)


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


def apply(heads: list[dict], y: np.ndarray) -> np.ndarray:
    """Run `heads` in order on the chip's output `y` (framework layout)."""
    for h in heads:
        if h["kind"] != "softmax":
            raise ValueError(f"head {h.get('name')}: kind {h['kind']!r}; accepted: {', '.join(KINDS)}")
        y = _softmax_int8(y, h) if h.get("dtype") == "int8" else _softmax_float(y, h)
        log.info("host head %s (%s) after the chip", h.get("name"), h["kind"])
    return y


def describe(heads: list[dict]) -> str:
    return ", ".join(f"{h['kind']} ({h.get('name')}, {h.get('dtype')})" for h in heads)
