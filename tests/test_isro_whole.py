"""Whole networks (issue 16): residual adds, average and global average pooling, branching
graphs, host heads; MLPerf-Tiny-class int8 models layer by layer against TFLite, bit for bit.

- resnet8 (tests/isro, MLPerf Tiny's image-classification ResNet-8 at its real 16/32/64 width):
  residual ADDs with 1x1 stride-2 projections, AVERAGE_POOL_2D, softmax head;
- dscnn_like (zoo, MLPerf Tiny keyword spotting shape): depthwise-separable, AVERAGE_POOL_2D;
- mobilenet_v1_025_96 (zoo, MLPerf Tiny visual wake words' network): MEAN keep_dims, shape
  arithmetic before the final RESHAPE, softmax head;
- mobilenet_s (tests/isro): an inverted-residual ADD, MEAN without keep_dims, softmax.
Every layer the chip writes is compared with the interpreter's tensor, and the host head's
output with the model output, on the default chip profile (so splitting and the profile's
memories are in play).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import compile_tflite, run, verify
from dtpu.isro.check import check_bundle
from dtpu.isro.isa import Op
from dtpu.isro.tflite_model import read

HERE = Path(__file__).resolve().parent
INT8 = {
    "resnet8": HERE / "isro" / "resnet8_int8.tflite",
    "mobilenet_s": HERE / "isro" / "mobilenet_s_int8.tflite",
    "dscnn_like": HERE / "models" / "zoo" / "dscnn_like__int8.tflite",
    "mobilenet_v1_025_96": HERE / "models" / "zoo" / "mobilenet_v1_025_96__int8.tflite",
}
EXPECT_OPS = {"resnet8": {Op.EADD, Op.AVGPOOL}, "mobilenet_s": {Op.EADD, Op.AVGPOOL},
              "dscnn_like": {Op.AVGPOOL, Op.DWCONV}, "mobilenet_v1_025_96": {Op.AVGPOOL, Op.DWCONV}}


@pytest.mark.parametrize("name", sorted(INT8))
def test_int8_whole_network_bit_exact_layer_by_layer(name):
    path = INT8[name]
    model = read(path)
    bundle = compile_tflite(path)
    assert EXPECT_OPS[name] <= {i.op for i in bundle.program}
    assert bundle.meta["heads"] and bundle.meta["heads"][0]["kind"] == "softmax"
    assert check_bundle(bundle) == []
    shape = model.tensors[model.inputs[0]].shape
    for seed in range(2):
        x = np.random.default_rng(seed).random(shape).astype(np.float32)
        if model.tensors[model.inputs[0]].dtype == np.int8 and seed:
            x = np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)
        result = run(bundle, x)
        checks = verify.against_tflite(bundle, result, path, x)
        compared = [c for c in checks if not c.note]
        bad = [str(c) for c in compared if not c.exact]
        assert not bad, "\n".join(bad)
        assert len(compared) >= len(bundle.layers) - 3          # only ADD-in-place inputs skipped
        assert compared[-1].kind == "host"                       # the softmax head, bit for bit
        ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
        np.testing.assert_array_equal(result.output, ref)


def test_split_and_reuse_do_not_change_resnet8():
    path = INT8["resnet8"]
    x = np.random.default_rng(3).random((1, 32, 32, 3)).astype(np.float32)
    base = run(compile_tflite(path, pe=None, reuse=False), x)
    for pe, reuse in ((16, True), (100, None)):
        b = compile_tflite(path, pe=pe, reuse=reuse)
        assert check_bundle(b) == []
        r = run(b, x)
        np.testing.assert_array_equal(r.output, base.output)
        for name, y in base.layers.items():
            np.testing.assert_array_equal(r.layers[name], y)
    shared = compile_tflite(path, reuse=True)
    kept = compile_tflite(path, reuse=False)
    assert shared.meta["frame_bytes"] < kept.meta["frame_bytes"] / 2


def test_residual_block_input_is_stored_once_per_border():
    """The block input of a downsampling stage is read by a SAME 3x3/2 conv (border 0,1,0,1) and a
    VALID 1x1/2 projection (no border): stored bare, copied once with the border."""
    b = compile_tflite(INT8["resnet8"])
    copies = [m for m in b.layers if ".border" in m["name"]]
    assert len(copies) == 2 and all(m["kind"] == "maxpool" for m in copies)
    assert all(m["output"]["pad"] == [0, 1, 0, 1] for m in copies)
