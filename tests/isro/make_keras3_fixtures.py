"""Regenerate the Keras 3 test models (tests/isro/k3net.keras, k3net_k3.h5, k3_expected.npz).

Needs Keras 3 with a backend, so it runs in its own environment, never in the tests:

    python -m venv /work/kvenv && /work/kvenv/bin/pip install "keras==3.*" "numpy<2" h5py scipy "jax[cpu]"
    KERAS_BACKEND=jax /work/kvenv/bin/python tests/isro/make_keras3_fixtures.py

The net has the layer kinds whose Keras 3 storage differs from Keras 2 (depthwise kernels named
`kernel`, batch normalization, a residual Add with Keras 3's inbound-node format, global average
pooling, a softmax layer), random weights and BN statistics, and is saved both as a `.keras` zip
and as a Keras 3 legacy `.h5`. The output for the tests' input (numpy default_rng(SEED)) goes to
k3_expected.npz.
"""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = 2026
L = keras.layers


def k3net():
    inp = keras.Input((12, 12, 3), name="image")
    x = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False, name="stem")(inp)
    x = L.BatchNormalization(name="stem_bn")(x)
    x = L.ReLU(6.0, name="stem_relu")(x)
    y = L.DepthwiseConv2D(3, padding="same", name="dw")(x)
    y = L.BatchNormalization(name="dw_bn")(y)
    y = L.ReLU(name="dw_relu")(y)
    y = L.Conv2D(8, 1, name="pw")(y)
    x = L.Add(name="add")([x, y])
    x = L.LeakyReLU(0.1, name="leaky")(x)
    x = L.MaxPooling2D(2, name="pool")(x)
    x = L.GlobalAveragePooling2D(name="gap")(x)
    x = L.Dense(4, name="logits")(x)
    x = L.Softmax(name="probs")(x)
    return keras.Model(inp, x, name="k3net")


def main() -> None:
    keras.utils.set_random_seed(SEED)
    rng = np.random.default_rng(SEED)
    model = k3net()
    for layer in model.layers:
        ws = layer.get_weights()
        if isinstance(layer, L.BatchNormalization):
            c = ws[0].shape[0]
            ws = [rng.uniform(0.5, 1.5, c), rng.uniform(-0.2, 0.2, c), rng.uniform(-0.2, 0.2, c),
                  rng.uniform(0.5, 2.0, c)]
        else:
            ws = [w if w.ndim > 1 else rng.uniform(-0.1, 0.1, w.shape) for w in ws]
        layer.set_weights([np.asarray(w, np.float32) for w in ws])
    x = np.random.default_rng(SEED).random((1, 12, 12, 3), dtype=np.float64).astype(np.float32)
    model.save(HERE / "k3net.keras")
    model.save(HERE / "k3net_k3.h5")
    np.savez(HERE / "k3_expected.npz", seed=SEED, k3net=np.asarray(model(x)), keras_version=keras.__version__)
    print(f"k3net: {model.count_params()} parameters, Keras {keras.__version__}")


if __name__ == "__main__":
    main()
