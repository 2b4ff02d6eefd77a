"""F32 at ImageNet size against Keras (issue 28.1): a VGG of realistic width (64/128/256 channels)
at 224x224, whose activations (12.8 MB in float32) and weights exceed the default chip, staged
through external memory and compared layer by layer with the numpy Keras reference
(dtpu.isro.verify's tolerance, relative to each layer's largest value: float32 sums in another order).

The TFLite zoo's 224 models are int8 only (their float originals are not in the repository), so
the F32 path at this size is judged on a Keras file written here; the small staged F32 nets are
in tests/test_isro_staging.py (the fast representatives)."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.isro import compile_h5, keras_h5, run, verify
from dtpu.isro.check import check_bundle
from dtpu.isro.profile import load
from tests.test_isro_compiler import conv, layer, write_h5


def _vgg_224(path, rng, widths=(64, 128, 256)):
    layers, weights, cin = [], {}, 3
    for bi, ch in enumerate(widths, 1):
        for ci in (1, 2):
            name = f"b{bi}c{ci}"
            layers.append(conv(name, ch, 3, padding="same", activation="relu"))
            weights[name] = {"kernel": rng.normal(0, (2 / (9 * cin)) ** 0.5, (3, 3, cin, ch)),
                             "bias": rng.normal(0, 0.05, ch)}
            cin = ch
        layers.append(layer("MaxPooling2D", f"b{bi}p", pool_size=[2, 2], strides=[2, 2], padding="valid"))
    layers += [layer("Flatten", "flat"), layer("Dense", "fc", units=10, activation="softmax", use_bias=True)]
    weights["fc"] = {"kernel": rng.normal(0, 0.002, (28 * 28 * cin, 10)), "bias": np.zeros(10)}
    return write_h5(path, (224, 224, 3), layers, weights)


@pytest.mark.slow
def test_f32_vgg_of_realistic_width_at_224_staged_within_tolerance_of_keras(tmp_path):
    rng = np.random.default_rng(5)
    path = _vgg_224(tmp_path / "vgg224.h5", rng)
    x = rng.random((1, 224, 224, 3)).astype(np.float32)
    bundle = compile_h5(path, x)
    default = load()
    assert bundle.meta["staged"] and bundle.fmt.name == "F32" and check_bundle(bundle) == []
    assert bundle.meta["frame_bytes"] <= default.frame_bytes and bundle.meta["filter_bytes"] <= default.filter_bytes
    result = run(bundle)
    checks = verify.against_keras(bundle, result, keras_h5.read(path), x[0])
    assert len(checks) >= 10 and all(c.ok for c in checks), [str(c) for c in checks if not c.ok]
