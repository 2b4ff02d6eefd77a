"""VGG-16 and VGG-19 at 224x224 as int8 .tflite files, written without TensorFlow.

Why: the seed report sets the ISRO-ASIC beside RC64's published VGG-19 figures, and issue 28
asks for VGG-16 at 224 on the default profile, yet no VGG model file is in the zoo (138 M and
144 M weights: far too large to commit) and TensorFlow is not installed. The layer shapes are
the real ones (Simonyan and Zisserman, 2015: 3x3 SAME convolutions with ReLU in five blocks
closed by 2x2 max pooling, then 4096-4096-1000 fully connected); the weights are seeded random
integers, which is all a bit-exactness and timing check needs.

Quantization is the converter's scheme (per-channel symmetric int8 convolution weights,
per-tensor fully connected ones, int32 biases at input scale x weight scale, asymmetric int8
activations). The activation ranges follow from the weights' construction instead of a
calibration run: weights drawn as He's initialisation keep a ReLU layer's mean square equal to
its input's, so every ReLU output gets the range [0, 6 x the input's RMS]. Values then spread
over the int8 range instead of saturating or collapsing to the zero point, which would make a
bit-exactness check weak.

Files are written once into a cache (``~/.cache/dtpu/isro``, ``DTPU_CACHE`` overrides the base)
and reused: ``python -m dtpu.isro.vgg_models 16 19`` writes both and prints their paths.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import numpy as np

from dtpu import tflite_writer as tw

log = logging.getLogger(__name__)

# output channels per 3x3 convolution; "M" a 2x2 max pooling (stride 2)
LAYERS = {
    16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    19: [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
         512, 512, 512, 512, "M"],
}
UNITS = (4096, 4096, 1000)
INPUT_SCALE = 1.0 / 128           # inputs in [-1, 1)
INPUT_RMS = 1.0 / np.sqrt(3.0)    # of a uniform [-1, 1) input
RANGE_RMS = 6.0                   # a ReLU output's range in RMS units


def cache_dir() -> Path:
    return Path(os.environ.get("DTPU_CACHE", Path.home() / ".cache" / "dtpu")) / "isro"


def _relu_quant(rms: float) -> tuple[float, int]:
    """(scale, zero point) of a ReLU output [0, RANGE_RMS x rms]: zero at -128."""
    return RANGE_RMS * rms / 255.0, -128


def build(depth: int = 16, size: int = 224, seed: int = 0, classes: int = UNITS[-1]) -> bytes:
    """The int8 flatbuffer of VGG-`depth` on `size` x `size` x 3 inputs."""
    if depth not in LAYERS:
        raise ValueError(f"VGG depth {depth!r}; accepted: {', '.join(map(str, LAYERS))}")
    if size < 32 or size % 32:
        raise ValueError(f"input size {size!r}; accepted: a multiple of 32 (five 2x2 poolings), at least 32")
    rng = np.random.default_rng(seed)
    g = tw.GraphWriter()
    h = w = size
    c = 3
    x = g.tensor(tw.Tensor((1, h, w, c), "int8", INPUT_SCALE, 0, name="input"))
    sx, rms = INPUT_SCALE, INPUT_RMS
    conv, block = 0, 1
    for item in LAYERS[depth]:
        if item == "M":
            h, w = h // 2, w // 2
            zp = -128 if conv else 0
            y = g.tensor(tw.Tensor((1, h, w, c), "int8", sx, zp, name=f"block{block}_pool"))
            g.op("MAX_POOL_2D", [x], [y], padding="VALID", stride=(2, 2), filter=(2, 2))
            x, block, conv = y, block + 1, 0
            continue
        conv += 1
        cout, fan_in = int(item), 9 * c
        bound = np.sqrt(6.0 / fan_in)                     # He: uniform with variance 2 / fan_in
        wq = rng.integers(-127, 128, (cout, 3, 3, c), dtype=np.int8)
        sw = np.full(cout, bound / 127.0)
        wt = g.const(f"block{block}_conv{conv}/weights", wq, "int8", scale=[float(v) for v in sw],
                     zero_point=[0] * cout, axis=0)
        sb = sx * sw
        bias = np.round(rng.normal(0.0, 0.1 * rms, cout) / sb).astype(np.int32)
        bt = g.const(f"block{block}_conv{conv}/bias", bias, "int32", scale=[float(v) for v in sb],
                     zero_point=[0] * cout, axis=0)
        so, zo = _relu_quant(rms)
        y = g.tensor(tw.Tensor((1, h, w, cout), "int8", so, zo, name=f"block{block}_conv{conv}"))
        g.op("CONV_2D", [x, wt, bt], [y], padding="SAME", stride=(1, 1), activation="relu")
        x, sx, c = y, so, cout
    n = h * w * c
    y = g.tensor(tw.Tensor((1, n), "int8", sx, -128, name="flatten"))
    shape = g.const("flatten/shape", np.array([1, n]), "int32")
    g.op("RESHAPE", [x, shape], [y], new_shape=[1, n])
    x = y
    units = UNITS[:-1] + (classes,)
    for i, u in enumerate(units):
        last = i == len(units) - 1
        bound = np.sqrt(6.0 / n)
        wq = rng.integers(-127, 128, (u, n), dtype=np.int8)
        sw = bound / 127.0
        name = "predictions" if last else f"fc{i + 1}"
        wt = g.const(f"{name}/weights", wq, "int8", scale=sw, zero_point=0)
        sb = sx * sw
        bias = np.round(rng.normal(0.0, 0.1 * rms, u) / sb).astype(np.int32)
        bt = g.const(f"{name}/bias", bias, "int32", scale=sb, zero_point=0)
        if last:          # no ReLU: symmetric around zero, the pre-activation's RMS is sqrt(2) x the input's
            so, zo = 2 * RANGE_RMS * np.sqrt(2.0) * rms / 255.0, 0
        else:
            so, zo = _relu_quant(rms)
        y = g.tensor(tw.Tensor((1, u), "int8", so, zo, name=name))
        g.op("FULLY_CONNECTED", [x, wt, bt], [y], activation="none" if last else "relu")
        x, sx, n = y, so, u
    return g.to_bytes([0], [x], description=f"dtpu VGG-{depth} {size}x{size} int8, seeded random weights (seed {seed})")


def cached(depth: int = 16, size: int = 224, seed: int = 0) -> Path:
    """The cached file of VGG-`depth`, written first if absent (atomically: a stopped write leaves
    no half file behind)."""
    path = cache_dir() / f"vgg{depth}_{size}_int8_seed{seed}.tflite"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        data = build(depth, size, seed)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(path)
        log.info("wrote %s (%d B)", path, len(data))
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        depths = [int(a) for a in args] or [16]
        for d in depths:                 # every argument checked before anything is written
            if d not in LAYERS:
                raise ValueError(f"VGG depth {d}; accepted: {', '.join(map(str, LAYERS))}")
        for d in depths:
            print(cached(d))
    except ValueError as e:
        print(f"dtpu.isro.vgg_models: {e}; usage: python -m dtpu.isro.vgg_models [16] [19]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
