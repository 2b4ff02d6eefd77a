#!/usr/bin/env python3
"""Write the MLPerf Tiny anomaly-detection autoencoder into the zoo, without TensorFlow.

The zoo's other nets come from Keras through TensorFlow's converter (make_zoo.py); this one is
ten FULLY_CONNECTED layers and nothing else, so :mod:`dtpu.tflite_writer` writes it directly,
the way the converter would: the reference network's shapes (ToyADMOS, 640 log-mel features:
640-128-128-128-128-8-128-128-128-128-640, BatchNormalization folded into each hidden layer's
weights and bias, ReLU fused, the last layer linear), full-integer int8 post-training
quantization with int8 input and output, per-tensor symmetric int8 weights (TF 2.x writes
FULLY_CONNECTED weights per tensor), int32 bias at input x weight scale, and activation ranges
calibrated on 16 seeded inputs uniform in [-1, 1] (the zoo's convention). Weights (He-normal),
the batch-norm statistics and the calibration data are seeded by the model's name, so the file
is reproducible: tests/models/test_autoencoder.py regenerates it and compares bytes.

    PYTHONPATH=pylib python tests/models/make_autoencoder.py   # writes zoo/<NAME>.tflite + its index entry
"""
from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ZOO = HERE / "zoo"
INDEX = ZOO / "index.json"
NAME = "autoencoder_toyadmos__int8"
KIND = "dense"
#: the reference network's layer widths, input first
WIDTHS = (640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640)
BN_EPS = 1e-3            # Keras BatchNormalization's default
CALIBRATION = 16


def _seed(text: str) -> int:
    return zlib.crc32(text.encode())


def _qparams(lo: float, hi: float) -> tuple[float, int]:
    """The converter's asymmetric int8 activation quantization of the range [lo, hi] (widened
    to hold 0): scale, zero point."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 or 1.0
    zp = int(np.clip(np.round(-128 - lo / scale), -128, 127))
    return float(np.float32(scale)), zp


def float_layers(name: str = NAME) -> list[tuple[np.ndarray, np.ndarray, bool]]:
    """(weights [out, in], bias, relu) per layer, batch norm folded in: the float network the
    file quantizes."""
    rng = np.random.default_rng(_seed(name))
    layers = []
    for i, (n_in, n_out) in enumerate(zip(WIDTHS[:-1], WIDTHS[1:])):
        w = rng.normal(0.0, np.sqrt(2.0 / n_in), (n_out, n_in))
        b = rng.normal(0.0, 0.05, n_out)
        last = i == len(WIDTHS) - 2
        if not last:    # Dense -> BatchNormalization -> ReLU, folded as the converter does
            gamma = rng.uniform(0.5, 1.5, n_out)
            beta = rng.normal(0.0, 0.1, n_out)
            mean = rng.normal(0.0, 0.1, n_out)
            var = rng.uniform(0.5, 1.5, n_out)
            k = gamma / np.sqrt(var + BN_EPS)
            w, b = w * k[:, None], (b - mean) * k + beta
        layers.append((w, b, not last))
    return layers


def build(name: str = NAME, per_channel: bool = False) -> bytes:
    """The int8 .tflite of the autoencoder; `per_channel`: one weight scale per output channel
    (what newer converters can write; the committed file has per-tensor weights)."""
    from dtpu import tflite_writer as tw

    layers = float_layers(name)
    x = np.random.default_rng(_seed(name + "/calibration")).uniform(-1.0, 1.0, (CALIBRATION, WIDTHS[0]))
    ranges = [(-1.0, 1.0)]
    for w, b, relu in layers:
        x = x @ w.T + b
        if relu:
            x = np.maximum(x, 0.0)
        ranges.append((float(x.min()), float(x.max())))
    g = tw.GraphWriter()
    s, z = _qparams(*ranges[0])
    act = g.tensor(tw.Tensor((1, WIDTHS[0]), "int8", scale=s, zero_point=z, name="input_1"))
    first = act
    for i, ((w, b, relu), rng_out) in enumerate(zip(layers, ranges[1:])):
        peak = np.abs(w).max(axis=1) if per_channel else np.array([np.abs(w).max()])
        s_w = (np.maximum(peak, 1e-9) / 127.0).astype(np.float32)
        wq = np.clip(np.round(w / s_w[:, None].astype(np.float64)), -127, 127).astype(np.int8)
        s_b = np.float32(s) * s_w
        bq = np.round(b / s_b.astype(np.float64)).astype(np.int32)
        if not per_channel:
            s_w, s_b = float(s_w[0]), float(s_b[0])
        else:
            s_w, s_b = [float(v) for v in s_w], [float(v) for v in s_b]
        wi = g.const(f"dense_{i}/kernel", wq, "int8", scale=s_w, zero_point=0)
        bi = g.const(f"dense_{i}/bias", bq, "int32", scale=s_b, zero_point=0)
        s, z = _qparams(*rng_out)
        out = g.tensor(tw.Tensor((1, WIDTHS[i + 1]), "int8", scale=s, zero_point=z,
                                 name=f"dense_{i}/{'Relu' if relu else 'BiasAdd'}"))
        g.op("FULLY_CONNECTED", [act, wi, bi], [out], activation="relu" if relu else "none")
        act = out
    return g.to_bytes([first], [act], description="MLPerf Tiny AD autoencoder (ToyADMOS), "
                      "seeded weights, written by tests/models/make_autoencoder.py")


def entry(buf: bytes, name: str = NAME) -> dict:
    """The model's zoo index entry, read back from the flatbuffer through the interpreter."""
    from dtpu.tflite import Interpreter

    it = Interpreter(model_content=buf)
    it.allocate_tensors()

    def info(d):
        scale, zp = d["quantization"]
        return {"shape": [int(v) for v in d["shape"]], "dtype": np.dtype(d["dtype"]).name,
                "scale": float(scale), "zero_point": int(zp)}

    ops = [o["op_name"] for o in it._get_ops_details()]
    params = sum(a * b + b for a, b in zip(WIDTHS[:-1], WIDTHS[1:]))
    return {"name": name, "file": f"{name}.tflite", "mode": "int8", "kind": KIND,
            "params": {"input_shape": [1, WIDTHS[0]], "batch": 1, "widths": list(WIDTHS),
                       "parameters": params,
                       "architecture": "MLPerf Tiny anomaly detection (ToyADMOS) autoencoder: "
                       "dense 640-128x4-8-128x4-640, BatchNormalization folded, ReLU"},
            "op_counts": {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 0},
            "all_op_counts": {op: ops.count(op) for op in sorted(set(ops))}, "ops": ops,
            "inputs": [info(d) for d in it.get_input_details()],
            "outputs": [info(d) for d in it.get_output_details()], "conv_ops": [],
            "size_bytes": len(buf),
            "notes": "written by make_autoencoder.py (no TensorFlow): seeded He-normal weights and "
                     "batch-norm statistics, full integer int8 in/out, per-tensor int8 weights "
                     "(zero point 0), int32 bias, activation ranges from 16 inputs uniform in [-1, 1]"}


def main() -> int:
    buf = build()
    (ZOO / f"{NAME}.tflite").write_bytes(buf)
    entries = json.loads(INDEX.read_text())
    new = entry(buf)
    entries = [new if e["name"] == NAME else e for e in entries]
    if not any(e["name"] == NAME for e in json.loads(INDEX.read_text())):
        entries.append(new)
    INDEX.write_text("[\n" + ",\n".join(json.dumps(e, separators=(",", ":")) for e in entries) + "\n]\n")
    print(f"{NAME}: {len(buf)} bytes, {len(WIDTHS) - 1} FULLY_CONNECTED")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parents[1] / "pylib"))
    sys.exit(main())
