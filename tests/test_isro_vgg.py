"""VGG-16 and VGG-19 written by dtpu.isro.vgg_models (no TensorFlow, no committed file): the real
layer shapes with seeded int8 weights, compiled on the default profile (staged through external
memory, weights streamed per output-channel chunk, the program streamed through instruction
memory) and checked against TFLite's CPU kernels layer by layer."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.isro import Op, compile_model, run, verify, vgg_models
from dtpu.isro.bundle import bundle_profile
from dtpu.isro.check import check_bundle
from dtpu.isro.performance import figures
from dtpu.tflite import Interpreter


def _bit_exact(path, size: int, seed: int = 9):
    bundle = compile_model(path)
    assert bundle.meta["staged"] and check_bundle(bundle) == []
    x = np.random.default_rng(seed).integers(-128, 128, (1, size, size, 3)).astype(np.int8)
    result = run(bundle, x)
    checks = verify.against_tflite(bundle, result, path, x)
    assert len(checks) == len(bundle.layers) and all(c.exact for c in checks), \
        "\n".join(str(c) for c in checks if not c.exact)
    ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
    np.testing.assert_array_equal(result.output, ref)
    return bundle, result, ref


def test_vgg16_layer_shapes_and_activations_spread(tmp_path):
    path = tmp_path / "vgg16_32.tflite"
    path.write_bytes(vgg_models.build(16, 32))
    it = Interpreter(str(path), experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    x = np.random.default_rng(1).integers(-128, 128, (1, 32, 32, 3)).astype(np.int8)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    shapes = {d["name"]: tuple(d["shape"]) for d in it.get_tensor_details()}
    assert shapes["block1_conv1/weights"] == (64, 3, 3, 3) and shapes["block5_conv3/weights"] == (512, 3, 3, 512)
    assert shapes["fc1/weights"] == (4096, 512) and shapes["predictions"] == (1, 1000)
    convs = [n for n in shapes if n.endswith("/weights") and n.startswith("block")]
    assert len(convs) == 13
    for d in it.get_tensor_details():      # neither saturated nor collapsed onto the zero point
        if d["name"].startswith("block") and "/" not in d["name"]:
            v = it.get_tensor(d["index"])
            assert 0.05 < np.mean(v > -128) < 0.95 and np.mean(v == 127) < 0.05, d["name"]


def test_vgg16_small_input_staged_bit_exact(tmp_path):
    """The real 3x3 convolutions (15 M weights: past filter memory, so staged) on a 32x32 input."""
    path = tmp_path / "vgg16_32.tflite"
    path.write_bytes(vgg_models.build(16, 32))
    bundle, result, _ = _bit_exact(path, 32)
    assert max(layer["staging"]["chunks"] for layer in bundle.layers) > 1
    # lanes and tap tiles (docs/isro_isa.md §6): every convolution past the first runs at the
    # ideal MACs / pe cycles; the first (27-MAC block, 9 lanes) at 8 steps for its 64 channels
    convs = [layer for layer in bundle.layers if layer["kind"] == "conv"]
    for layer in convs:
        a, z = layer["instructions"]
        cycles = sum(result.trace[i].cycles for i in range(a, z + 1) if bundle.program[i].op is Op.CONV)
        want = 8 * 32 * 32 if layer is convs[0] else layer["macs"] // 256
        assert cycles == want, layer["name"]


@pytest.mark.parametrize("args, message", [(["17"], "VGG depth 17; accepted: 16, 19"),
                                           (["x"], "invalid literal"), (["16", "0"], "VGG depth 0")])
def test_vgg_models_script_refuses_bad_arguments_in_one_line(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DTPU_CACHE", str(tmp_path))
    assert vgg_models.main(args) == 2
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out and not list(tmp_path.rglob("*.tflite"))
    with pytest.raises(ValueError, match="input size 40"):
        vgg_models.build(16, 40)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [16, 19])
def test_vgg_224_on_the_default_profile_bit_exact_against_tflite(depth):
    """About a minute each: 15.5 (19.6) G MACs on the machine model, 138 (144) M weights streamed."""
    bundle, result, _ = _bit_exact(vgg_models.cached(depth), 224)
    assert bundle.meta["program"]["memory"] == "external"         # 10,254 instructions for VGG-16
    assert len(bundle.layers) == {16: 13, 19: 16}[depth] + 5 + 3        # convolutions, poolings, dense
    assert result.counters.macs == sum(layer["macs"] for layer in bundle.layers)
    # RC64's 80 % of peak, on the machine model's cycles at batch 1 (docs/isro_isa.md §0): VGG-19
    # meets it; VGG-16's fully connected layers (15.7 M cycles of weight streaming) hold it lower
    fig = figures(result.counters, bundle_profile(bundle.meta), "i8", bundle.meta["pe"], result.schedule)
    assert fig.utilization >= {16: 0.77, 19: 0.81}[depth], fig.utilization
