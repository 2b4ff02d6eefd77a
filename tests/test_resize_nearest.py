"""RESIZE_NEAREST_NEIGHBOR on the vector unit as COPY descriptors (issue #25): the index maps
come from the runtime's own kernel (dtpu.resize_maps), an integer upscale becomes fx + fy
COPYs (dtpu.hw.vec_lower.resize_copies), anything else stays on the CPU with the reason. The
graph is a DeepLab / SSD-style head: an upsampled coarse feature map concatenated with a fine
one, convolutions and LOGISTIC heads, one partition, bit-exact with the CPU."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.resize_maps import integer_factors, nearest_maps
from dtpu.tflite_writer import GraphWriter, Tensor
from tests.delegate_util import dtpu_so, run, tfl  # noqa: F401
from dtpu.delegate.vector_claim import PROVEN_RUNTIMES
from dtpu.tflite import RUNTIME

#: graphs whose MEAN, MUL, LOGISTIC... the CPU computes under LiteRT go through XNNPACK in the
#: default interpreter, whose rounding is not TFLite 2.14's builtin kernels' (a MUL off by one:
#: dtpu.delegate.vector_claim.PROVEN_RUNTIMES); the oracle here is the builtin kernels
BUILTIN_ORACLE = pytest.mark.skipif(RUNTIME not in PROVEN_RUNTIMES,
                                    reason=f"{RUNTIME}: XNNPACK computes the CPU's side")


@pytest.mark.parametrize("align, half, out, factors", [
    (False, False, (10, 9), (2, 3)), (False, True, (10, 9), (2, 3)),
    (True, False, (10, 6), (2, 2))])
def test_an_integer_upscale_is_its_factors(align, half, out, factors):
    maps = nearest_maps("int8", (5, 3), out, align, half)
    assert integer_factors(maps, (5, 3)) == factors
    assert maps[1] == tuple(i // factors[1] for i in range(out[1]))


def test_other_maps_say_why():
    with pytest.raises(ValueError, match="7 output rows from 4: not an integer upscale"):
        integer_factors(nearest_maps("uint8", (4, 4), (7, 8), False, False), (4, 4))
    # align_corners 3 -> 9: scale 2/8, output column 2 rounds 0.5 up to input column 1
    with pytest.raises(ValueError, match="output column 2 copies input column 1, not 0"):
        integer_factors(nearest_maps("int8", (3, 3), (3, 9), True, False), (3, 3))
    # downscales are not a COPY pattern either
    with pytest.raises(ValueError, match="not an integer upscale"):
        integer_factors(nearest_maps("int8", (8, 8), (4, 4), False, False), (8, 8))
    # large sizes: the maps carry 16-bit coordinates
    rows, cols = nearest_maps("int8", (300, 1), (600, 2), False, False)
    assert rows[-1] == 299 and integer_factors((rows, cols), (300, 1)) == (2, 2)


def _head(dt: str, size=(16, 16), align=False, half=False) -> bytes:
    """x -> CONV 3x3 (fine, 16x16x8) -> CONV 3x3 stride 2 (coarse, 8x8x12) -> RESIZE to `size`
    -> CONCATENATION with the fine map -> CONV 1x1 -> LOGISTIC (mask head); and the coarse map
    -> CONV 1x1 -> LOGISTIC (class head)."""
    rng = np.random.default_rng(11)
    zp, wz, wd = (-4, 0, "int8") if dt == "int8" else (124, 128, "uint8")
    sig = (1 / 256, -128 if dt == "int8" else 0)
    w = GraphWriter()

    def conv(x, cin, cout, k, stride, q, name):
        f = w.const(f"{name}_w", rng.integers(-90, 90, (cout, k, k, cin)) + wz, wd, scale=0.02,
                    zero_point=wz)
        b = w.const(f"{name}_b", rng.integers(-400, 400, cout))
        hw = tuple(w.tensors[x].shape[1:3])
        out = (1, -(-hw[0] // stride), -(-hw[1] // stride), cout)
        y = w.tensor(Tensor(out, dt, q[0], q[1], name=name))
        w.op("CONV_2D", [x, f, b], [y], padding="SAME", stride=(stride, stride))
        return y

    x = w.tensor(Tensor((1, 16, 16, 3), dt, 0.05, zp, name="x"))
    q = (0.06, zp + 2)
    fine = conv(x, 3, 8, 3, 1, q, "fine")
    coarse = conv(fine, 8, 12, 3, 2, q, "coarse")
    up = w.tensor(Tensor((1, *size, 12), dt, *q, name="up"))
    w.op("RESIZE_NEAREST_NEIGHBOR", [coarse, w.const("size", np.array(size))], [up],
         align_corners=align, half_pixel_centers=half)
    if tuple(size) == (16, 16):
        cat = w.tensor(Tensor((1, 16, 16, 20), dt, *q, name="cat"))
        w.op("CONCATENATION", [fine, up], [cat], axis=3)
        mask_in, cin = cat, 20
    else:
        mask_in, cin = up, 12
    logits = conv(mask_in, cin, 4, 1, 1, (0.1, zp), "mask_logits")
    mask = w.tensor(Tensor(w.tensors[logits].shape, dt, *sig, name="mask"))
    w.op("LOGISTIC", [logits], [mask])
    cls_logits = conv(coarse, 12, 6, 1, 1, (0.1, zp), "class_logits")
    cls = w.tensor(Tensor(w.tensors[cls_logits].shape, dt, *sig, name="classes"))
    w.op("LOGISTIC", [cls_logits], [cls])
    return w.to_bytes([x], [mask, cls])


def _delegated(content: bytes, tfl, tmp_path, options=None):
    import dtpu

    path = tmp_path / "head.tflite"
    path.write_bytes(content)
    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, options or {"backend": "model"})
    ours.allocate_tensors()
    d = cpu.get_input_details()[0]
    info = np.iinfo(d["dtype"])
    for seed in range(2):
        xs = [np.random.default_rng(seed).integers(info.min, info.max + 1, d["shape"])
              .astype(d["dtype"])]
        for got, want in zip(run(ours, xs), run(cpu, xs)):
            assert len(np.unique(want)) > 4, want      # the heads are not saturated
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}")
    return dtpu.last_report()


@pytest.mark.parametrize("dt, align, half", [("int8", False, False), ("uint8", False, False),
                                             ("int8", True, False), ("int8", False, True)])
@BUILTIN_ORACLE
def test_a_deeplab_ssd_head_is_one_partition(dt, align, half, dtpu_so, tfl, tmp_path):
    report = _delegated(_head(dt, align=align, half=half), tfl, tmp_path)
    assert report.partitions == 1 and report.rejected == [], report.rejected
    ops = [n.op for n in report.nodes]
    assert "resize_nearest_neighbor" in ops and "concatenation" in ops, ops
    assert ops.count("logistic") == 2


@BUILTIN_ORACLE
def test_a_resize_that_is_no_integer_upscale_stays_on_the_cpu(dtpu_so, tfl, tmp_path):
    report = _delegated(_head("int8", size=(12, 12)), tfl, tmp_path)
    [r] = [r for r in report.rejected if r["op"] == "RESIZE_NEAREST_NEIGHBOR"]
    assert r["reason"] == ("RESIZE_NEAREST_NEIGHBOR (8, 8) -> (12, 12): 12 output rows from 8: "
                           "not an integer upscale"), r


@BUILTIN_ORACLE
def test_the_board_without_a_vector_unit_leaves_it_on_the_cpu(dtpu_so, tfl, tmp_path,
                                                              monkeypatch):
    """The board's default int8 overlay (hw/overlays OVERLAY=int8, the default bitstream) has the
    vector unit: the head's RESIZE_NEAREST_NEIGHBOR runs there; its int16 overlay
    (`bitstream=int16`) has none and leaves it on the CPU with the reason."""
    import gc

    monkeypatch.setenv("DTPU_PYNQ_EMULATE", "1")
    report = _delegated(_head("int8"), tfl, tmp_path, {"backend": "pynq"})   # the default: int8
    assert "RESIZE_NEAREST_NEIGHBOR" not in {r["op"] for r in report.rejected}, report.rejected
    assert "resize_nearest_neighbor" in {n.op for n in report.nodes}, [n.op for n in report.nodes]
    gc.collect()        # the first delegate gives the (emulated) board back
    report = _delegated(_head("int8"), tfl, tmp_path, {"backend": "pynq", "bitstream": "int16"})
    reasons = {r["op"]: r["reason"] for r in report.rejected}
    assert reasons["RESIZE_NEAREST_NEIGHBOR"] == "target has no vector unit"
