"""The committed test model zoo: tests/models/zoo/*.tflite described by zoo/index.json.

No TensorFlow here: the models are generated once by make_zoo.py (see README.md) and
committed. Typical use:

    from tests.models.zoo import load_index, model_path
    for e in load_index(mode="int8", kind="conv2d"):
        interp = Interpreter(model_path=str(model_path(e)))
        ...
        assert claimed == e["op_counts"]["CONV_2D"] + e["op_counts"]["DEPTHWISE_CONV_2D"]
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

ZOO_DIR = Path(__file__).resolve().parent / "zoo"
INDEX_PATH = ZOO_DIR / "index.json"
CACHE_ENV = "DTPU_MODEL_CACHE"

MODES = ("int8", "int8_float_io", "int8_per_tensor", "int16x8", "float32", "float16_weights",
         "dynamic_range", "uint8", "uint8_fakequant")
KINDS = ("conv2d", "depthwise_conv2d", "net", "imagenet", "dense")
# ImageNet-scale nets (make_imagenet.py): left out of load_index() unless asked for by kind.
# The per-model sweeps over the zoo were written for models of a few KB; these take seconds to
# minutes per model there, and tests/test_models_at_scale.py covers them.
SMALL_KINDS = ("conv2d", "depthwise_conv2d", "net")

_DTYPES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


def _match(value, want) -> bool:
    if want is None:
        return True
    if isinstance(want, str):
        return value == want
    return value in set(want)


def load_index(mode: str | Iterable[str] | None = None,
               kind: str | Iterable[str] | None = None) -> list[dict]:
    """Index entries (fresh dicts), optionally filtered by mode(s) and kind(s). Without `kind`,
    the SMALL_KINDS: the "imagenet" entries only come when asked for (kind="imagenet" or
    kind=KINDS)."""
    entries = json.loads(INDEX_PATH.read_text())
    return [e for e in entries
            if _match(e["mode"], mode) and _match(e["kind"], SMALL_KINDS if kind is None else kind)]


def get_entry(name: str) -> dict:
    for e in load_index(kind=KINDS):
        if e["name"] == name:
            return e
    raise KeyError(name)


def model_path(entry: dict | str) -> Path:
    """Path of the .tflite file of an index entry (or of the entry with that name)."""
    if isinstance(entry, str):
        entry = get_entry(entry)
    return ZOO_DIR / entry["file"]


def cache_dir() -> Path:
    """Where make_imagenet.py --cache puts the models too big to commit: $DTPU_MODEL_CACHE,
    else tests/models/cache (git-ignored)."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env) if env else Path(__file__).resolve().parent / "cache"


def load_cache_index() -> list[dict]:
    """Entries of the model cache (same format as the zoo's index); [] when it was never
    generated."""
    index = cache_dir() / "index.json"
    return json.loads(index.read_text()) if index.is_file() else []


def cached_model_path(entry: dict) -> Path:
    return cache_dir() / entry["file"]


def quantize(real, info: dict):
    """Real values -> the tensor's storage dtype, per the tensor info of the index
    (entry["inputs"][i] / entry["outputs"][i]: shape, dtype, optional scale/zero_point)."""
    import numpy as np

    real = np.asarray(real, np.float32)
    dt = info["dtype"]
    if dt in ("float32", "float16"):
        return real.astype(dt)
    lo, hi = _DTYPES[dt]
    q = np.round(real / info["scale"]) + info["zero_point"]
    return np.clip(q, lo, hi).astype(dt)


def dequantize(values, info: dict):
    import numpy as np

    values = np.asarray(values)
    if "scale" not in info:
        return values.astype(np.float32)
    return ((values.astype(np.float32) - info["zero_point"]) * info["scale"]).astype(np.float32)


def make_inputs(entry: dict, seed: int = 0, low: float = -1.0, high: float = 1.0) -> list:
    """Deterministic inputs for a model: real values uniform in [low, high] (the range the
    zoo's quantized models were calibrated for), stored in each input's dtype."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [quantize(rng.uniform(low, high, info["shape"]), info) for info in entry["inputs"]]
