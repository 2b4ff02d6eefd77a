"""The report's verification on AlexNet-, VGG- and ResNet-style networks (and a mixed one).

Every layer the machine writes is compared with an oracle: the float64 numpy Keras reference
(itself checked against TensorFlow's own output, stored by tests/isro/make_fixtures.py) for the
.h5 models, the TFLite interpreter's intermediate tensors for the converted models: within float
tolerance for float32, bit for bit for int8. Splitting for few processing elements must not
change a quantized result at all, nor a float one beyond summation order.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import Op, compile_h5, compile_tflite, keras_h5, run, verify
from dtpu.isro.profile import unlimited

FIXTURES = Path(__file__).resolve().parent / "isro"
INDEX = json.loads((FIXTURES / "fixtures.json").read_text())
EXPECTED = np.load(FIXTURES / "expected.npz")
NETS = ("alexnet_s", "vgg_s", "resnet_s")
SMALL_PE = 64


def net_input(name: str) -> np.ndarray:
    """The input make_fixtures.py fed TensorFlow for expected.npz."""
    shape = tuple(INDEX[name]["input_shape"])
    return np.random.default_rng(int(EXPECTED["seed"])).random((1,) + shape, dtype=np.float64).astype(np.float32)


def _assert_ok(checks, exact=False):
    bad = [str(c) for c in checks if not (c.exact if exact else c.ok)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", NETS + ("mix_s",))
def test_numpy_keras_reference_reproduces_tensorflow(name):
    model = keras_h5.read(FIXTURES / f"{name}.h5")
    ref = verify.keras_reference(model, net_input(name)[0])
    np.testing.assert_allclose(ref[model.layers[-1].name], EXPECTED[name][0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NETS + ("mix_s",))
def test_h5_every_layer_matches_keras_split_or_not(name):
    x = net_input(name)
    model = keras_h5.read(FIXTURES / f"{name}.h5")
    runs = {}
    for pe in (None, SMALL_PE):
        bundle = compile_h5(FIXTURES / f"{name}.h5", x, chip=unlimited(), pe=pe)
        result = run(bundle)
        _assert_ok(verify.against_keras(bundle, result, model, x[0]))
        np.testing.assert_allclose(result.output, EXPECTED[name], rtol=1e-4, atol=1e-5)
        assert result.counters.macs == bundle.meta["stats"]["macs"]
        assert result.counters.instructions == len(bundle.program) == bundle.meta["stats"]["instructions"]
        runs[pe] = (bundle, result)
    (b0, r0), (b1, r1) = runs[None], runs[SMALL_PE]
    assert Op.ADD not in [i.op for i in b0.program] and Op.ADD in [i.op for i in b1.program]
    assert b1.frame == b0.frame and b1.filter == b0.filter          # splitting adds only scratch
    for layer in r0.layers:
        np.testing.assert_allclose(r1.layers[layer], r0.layers[layer], rtol=1e-5, atol=1e-6)
    # nothing is silently dropped: every Keras layer is accounted for in some hardware layer
    covered = {s for m in b0.layers for s in m["sources"]}
    assert covered == {layer.name for layer in model.layers}


@pytest.mark.parametrize("name", NETS + ("mix_s",))
def test_float_tflite_every_layer_matches_the_interpreter(name):
    x = net_input(name)
    path = FIXTURES / f"{name}_f32.tflite"
    for pe in (None, SMALL_PE):
        bundle = compile_tflite(path, x, pe=pe)
        _assert_ok(verify.against_tflite(bundle, run(bundle), path, x))


@pytest.mark.parametrize("name", NETS)
def test_int8_tflite_every_layer_bit_exact_and_split_identical(name):
    x = net_input(name)
    path = FIXTURES / f"{name}_int8.tflite"
    results = []
    for pe in (None, SMALL_PE, 7):
        bundle = compile_tflite(path, x, pe=pe)
        result = run(bundle)
        _assert_ok(verify.against_tflite(bundle, result, path, x), exact=True)
        results.append(result)
    for other in results[1:]:
        assert other.layers.keys() == results[0].layers.keys()
        for layer in results[0].layers:
            np.testing.assert_array_equal(other.layers[layer], results[0].layers[layer])


def test_int8_inputs_may_be_given_quantized_or_real():
    name = "alexnet_s"                         # int8 input tensor: the host quantizes real inputs
    path = FIXTURES / f"{name}_int8.tflite"
    x = net_input(name)
    bundle = compile_tflite(path)
    q = np.frombuffer(compile_tflite(path, x).frame, np.int8)
    real, quantized = run(bundle, x), run(bundle, q[:x.size].reshape(3, 67, 67).transpose(1, 2, 0))
    np.testing.assert_array_equal(real.output, quantized.output)
    with pytest.raises(ValueError, match=r"input: shape \(32, 32, 3\) \(HWC\) does not match the model.s \(67, 67, 3\)"):
        run(bundle, net_input("vgg_s"))
