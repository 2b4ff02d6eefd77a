"""Issue 28.2's operators from Keras .h5 files (F32), each network within float tolerance of
the numpy Keras reference layer by layer: Concatenate, UpSampling2D (nearest and bilinear),
Conv2DTranspose, Multiply (squeeze-excite), sigmoid/tanh inside the network, SAME
AveragePooling2D, and Conv1D with 1-D pooling. The files are written with h5py, as Keras 2
writes them (tests/test_isro_compiler.py's write_h5)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import compile_h5, keras_h5, run, verify
from dtpu.isro.check import check_bundle
from dtpu.isro.ir import CompileError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_isro_compiler import conv, layer, write_h5  # noqa: E402
from tests import isro_fuzz


def _w(rng, *shape):
    return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))).astype(np.float32)


def _verified(path, shape, seeds=2):
    bundle = None
    for seed in range(seeds):
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        bundle = compile_h5(path, x)
        assert check_bundle(bundle) == []
        result = run(bundle)
        checks = verify.against_keras(bundle, result, keras_h5.read(path), x)
        assert checks and all(c.ok for c in checks), "\n".join(map(str, checks))
    return bundle


def test_keras_unet(tmp_path):
    rng = np.random.default_rng(1)
    layers = [conv("c1", 6, 3, padding="same", activation="relu"),
              layer("MaxPooling2D", "p1", pool_size=[2, 2], strides=[2, 2], padding="valid"),
              conv("c2", 8, 3, padding="same", activation="relu"),
              layer("UpSampling2D", "up_n", size=[2, 2], interpolation="nearest"),
              layer("UpSampling2D", "up_b", size=[2, 2], interpolation="bilinear"),
              layer("Concatenate", "cat", axis=-1),
              layer("Conv2DTranspose", "tc", filters=5, kernel_size=[3, 3], strides=[2, 2], padding="same",
                    activation="sigmoid", use_bias=True),
              conv("c3", 4, 3, padding="same", activation="tanh"),
              conv("out", 2, 1)]
    weights = {"c1": {"kernel": _w(rng, 3, 3, 3, 6), "bias": _w(rng, 6)},
               "c2": {"kernel": _w(rng, 3, 3, 6, 8), "bias": _w(rng, 8)},
               "tc": {"kernel": _w(rng, 3, 3, 5, 22), "bias": _w(rng, 5)},
               "c3": {"kernel": _w(rng, 3, 3, 5, 4), "bias": _w(rng, 4)},
               "out": {"kernel": _w(rng, 1, 1, 4, 2), "bias": _w(rng, 2)}}
    inbound = {"c1": ["input"], "p1": ["c1"], "c2": ["p1"], "up_n": ["c2"], "up_b": ["c2"],
               "cat": ["up_n", "c1", "up_b"], "tc": ["cat"], "c3": ["tc"], "out": ["c3"]}
    path = write_h5(tmp_path / "unet.h5", (8, 8, 3), layers, weights, inbound)
    bundle = _verified(path, (8, 8, 3))
    ops = bundle.meta["stats"]["by_op"]
    assert ops["cat"] == 3 and ops["resize"] == 2 and ops["tconv"] == 1 and ops["lut"] == 2


def test_keras_squeeze_excite_and_same_average_pooling(tmp_path):
    rng = np.random.default_rng(2)
    layers = [conv("c1", 8, 3, padding="same", activation="relu"),
              layer("GlobalAveragePooling2D", "gap"),
              layer("Dense", "fc1", units=2, activation="relu", use_bias=True),
              layer("Dense", "fc2", units=8, activation="sigmoid", use_bias=True),
              layer("Reshape", "r", target_shape=[1, 1, 8]),
              layer("Multiply", "se"),
              layer("AveragePooling2D", "ap", pool_size=[3, 3], strides=[2, 2], padding="same"),
              layer("Activation", "act", activation="tanh"),
              layer("Flatten", "f"),
              layer("Dense", "logits", units=3, activation="linear", use_bias=True)]
    weights = {"c1": {"kernel": _w(rng, 3, 3, 3, 8), "bias": _w(rng, 8)},
               "fc1": {"kernel": _w(rng, 8, 2), "bias": _w(rng, 2)},
               "fc2": {"kernel": _w(rng, 2, 8), "bias": _w(rng, 8)},
               "logits": {"kernel": _w(rng, 4 * 4 * 8, 3), "bias": _w(rng, 3)}}
    inbound = {"c1": ["input"], "gap": ["c1"], "fc1": ["gap"], "fc2": ["fc1"], "r": ["fc2"],
               "se": ["c1", "r"], "ap": ["se"], "act": ["ap"], "f": ["act"], "logits": ["f"]}
    path = write_h5(tmp_path / "se.h5", (7, 7, 3), layers, weights, inbound)
    bundle = _verified(path, (7, 7, 3))
    ops = bundle.meta["stats"]["by_op"]
    assert ops["emul"] == 1 and ops["lut"] == 2


def test_keras_time_series(tmp_path):
    rng = np.random.default_rng(3)
    layers = [layer("Conv1D", "c1", filters=6, kernel_size=[5], strides=[1], padding="same", dilation_rate=[1],
                    activation="relu", use_bias=True),
              layer("MaxPooling1D", "p1", pool_size=[2], strides=[2], padding="valid"),
              layer("Conv1D", "c2", filters=8, kernel_size=[3], strides=[2], padding="valid", dilation_rate=[1],
                    activation="tanh", use_bias=True),
              layer("AveragePooling1D", "p2", pool_size=[3], strides=[2], padding="same"),
              layer("GlobalAveragePooling1D", "g"),
              layer("Dense", "out", units=3, activation="linear", use_bias=True)]
    weights = {"c1": {"kernel": _w(rng, 5, 4, 6), "bias": _w(rng, 6)},
               "c2": {"kernel": _w(rng, 3, 6, 8), "bias": _w(rng, 8)},
               "out": {"kernel": _w(rng, 8, 3), "bias": _w(rng, 3)}}
    path = write_h5(tmp_path / "ts.h5", (30, 4), layers, weights)
    bundle = _verified(path, (30, 4))
    assert bundle.meta["input"]["shape"] == [4, 1, 30]


def test_keras_refusals_name_the_layer(tmp_path):
    rng = np.random.default_rng(4)
    path = write_h5(tmp_path / "bad.h5", (8, 8, 3),
                    [conv("c1", 4, 3, padding="same"), layer("Reshape", "r", target_shape=[4, 16, 4])],
                    {"c1": {"kernel": _w(rng, 3, 3, 3, 4), "bias": _w(rng, 4)}})
    with pytest.raises(CompileError, match="r: Reshape of a 8x8x4 tensor to"):
        compile_h5(path)
    path = write_h5(tmp_path / "bad2.h5", (8, 8, 3),
                    [conv("c1", 4, 3, padding="same"), layer("UpSampling2D", "u", size=[2, 2], interpolation="area")],
                    {"c1": {"kernel": _w(rng, 3, 3, 3, 4), "bias": _w(rng, 4)}})
    with pytest.raises(CompileError, match="u: UpSampling2D interpolation 'area'; accepted: nearest, bilinear"):
        compile_h5(path)


def test_random_damage_to_a_keras_file_with_the_new_layers_fails_cleanly(tmp_path, capsys):
    """The Keras front end's new paths under seeded damage: one line and exit 2, or it runs."""
    rng = np.random.default_rng(5)
    layers = [conv("c1", 4, 3, padding="same", activation="relu"),
              layer("UpSampling2D", "up", size=[2, 2], interpolation="bilinear"),
              layer("Conv2DTranspose", "tc", filters=4, kernel_size=[3, 3], strides=[2, 2], padding="same",
                    activation="tanh", use_bias=True),
              layer("MaxPooling2D", "p", pool_size=[2, 2], strides=[2, 2], padding="valid"),
              layer("Concatenate", "cat", axis=-1),
              layer("Multiply", "m")]
    weights = {"c1": {"kernel": _w(rng, 3, 3, 3, 4), "bias": _w(rng, 4)},
               "tc": {"kernel": _w(rng, 3, 3, 4, 4), "bias": _w(rng, 4)}}
    inbound = {"c1": ["input"], "up": ["c1"], "tc": ["up"], "p": ["tc"], "cat": ["p", "up"], "m": ["cat", "cat"]}
    src = write_h5(tmp_path / "src.h5", (4, 4, 3), layers, weights, inbound).read_bytes()
    for trial in range(16):
        p = tmp_path / f"{trial}.h5"
        p.write_bytes(isro_fuzz.damage(src, rng))
        rc, err = isro_fuzz.compile_and_run(p, tmp_path / f"o{trial}", capsys)
        assert isro_fuzz.one_clean_line(rc, err), (trial, err)
