"""MEAN over H and W with keep_dims true (MobileNet v1's and VWW's global pool) on the vector
unit: TFLite 2.14 computes it with optimized_ops::Mean, whose integers (a float32 bias and
multiplier, no input offset) differ from keep_dims false's; the unit's formula is the same.
The integers are checked against the interpreter on random one-op graphs, the claim on a
convolution -> MEAN -> convolution graph (one partition, bit-exact)."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.reference import vector as rv
from dtpu.tflite_writer import GraphWriter, Tensor
from tests.delegate_util import dtpu_so, run, tfl  # noqa: F401
from dtpu.delegate.vector_claim import PROVEN_RUNTIMES
from dtpu.tflite import RUNTIME

#: graphs whose MEAN, MUL, LOGISTIC... the CPU computes under LiteRT go through XNNPACK in the
#: default interpreter, whose rounding is not TFLite 2.14's builtin kernels' (a MUL off by one:
#: dtpu.delegate.vector_claim.PROVEN_RUNTIMES); the oracle here is the builtin kernels
BUILTIN_ORACLE = pytest.mark.skipif(RUNTIME not in PROVEN_RUNTIMES,
                                    reason=f"{RUNTIME}: XNNPACK computes the CPU's side")


def _case(rng, ties: bool):
    """`ties`: power-of-two scales and counts, so that the rounding of the scaled sum and of
    the zero-point term meets exact halves (where a rounding shift and TFLite's
    RoundingDivideByPOT would differ)."""
    dt = str(rng.choice(["int8", "uint8"]))
    lo, hi = (-128, 127) if dt == "int8" else (0, 255)
    if ties:
        shape = (1, int(rng.choice([1, 2, 4, 8])), int(rng.choice([1, 2, 3, 4, 8])),
                 int(rng.integers(1, 40)))
        si = 2.0 ** -int(rng.integers(3, 10))
        so = si * 2.0 ** int(rng.integers(-3, 4))
    else:
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 15)), int(rng.integers(1, 15)),
                 int(rng.integers(1, 40)))
        si = float(np.float32(10 ** rng.uniform(-3, 0)))
        so = float(np.float32(si * 10 ** rng.uniform(-1.5, 1.5)))
    return dt, lo, hi, shape, si, so, int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))


@pytest.mark.parametrize("seed", range(4))
@BUILTIN_ORACLE
def test_keep_dims_integers_are_the_interpreters(seed, tfl):
    """Random scales (output/input 0.03..30), zero points, shapes (depths past NEON's 16);
    odd seeds on exact halves."""
    rng = np.random.default_rng(seed)
    for trial in range(40):
        dt, lo, hi, shape, si, so, zi, zo = _case(rng, ties=bool(seed % 2))
        w = GraphWriter()
        x = w.tensor(Tensor(shape, dt, si, zi, name="x"))
        y = w.tensor(Tensor((shape[0], 1, 1, shape[3]), dt, so, zo, name="y"))
        w.op("MEAN", [x, w.const("axes", np.array([1, 2]))], [y], keep_dims=True)
        it = tfl.Interpreter(model_content=w.to_bytes([x], [y]))
        it.allocate_tensors()
        xv = rng.integers(lo, hi + 1, shape).astype(dt)
        it.set_tensor(it.get_input_details()[0]["index"], xv)
        it.invoke()
        want = it.get_tensor(it.get_output_details()[0]["index"])
        p = rv.mean_keep_dims_params(si, zi, so, zo, shape[1] * shape[2], np.dtype(dt))
        got = rv.mean_hw(xv, p).reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=f"trial {trial}: {dt} {shape} "
                                      f"s {si}/{so} zp {zi}/{zo}")


def _graph(dt: str) -> bytes:
    """x -> CONV 3x3 -> MEAN (keep_dims) -> CONV 1x1: one partition with the unit."""
    rng = np.random.default_rng(3)
    zp = -5 if dt == "int8" else 120
    w = GraphWriter()
    x = w.tensor(Tensor((1, 9, 9, 3), dt, 0.05, zp, name="x"))
    wd = "int8" if dt == "int8" else "uint8"
    wz = 0 if dt == "int8" else 128
    f1 = w.const("f1", rng.integers(-100, 100, (16, 3, 3, 3)) + wz, wd, scale=0.01, zero_point=wz)
    h = w.tensor(Tensor((1, 9, 9, 16), dt, 0.04, zp + 3, name="h"))
    w.op("CONV_2D", [x, f1, w.const("b1", rng.integers(-900, 900, 16))], [h], padding="SAME")
    m = w.tensor(Tensor((1, 1, 1, 16), dt, 0.02, zp - 2, name="pooled"))
    w.op("MEAN", [h, w.const("axes", np.array([1, 2]))], [m], keep_dims=True)
    f2 = w.const("f2", rng.integers(-100, 100, (10, 1, 1, 16)) + wz, wd, scale=0.01, zero_point=wz)
    y = w.tensor(Tensor((1, 1, 1, 10), dt, 0.03, zp, name="y"))
    w.op("CONV_2D", [m, f2, w.const("b2", rng.integers(-900, 900, 10))], [y], padding="VALID")
    return w.to_bytes([x], [y])


@pytest.mark.parametrize("dt", ["int8", "uint8"])
@BUILTIN_ORACLE
def test_a_global_pool_that_keeps_dims_joins_the_partition(dt, dtpu_so, tfl, tmp_path):
    import dtpu

    path = tmp_path / f"gap_{dt}.tflite"
    path.write_bytes(_graph(dt))
    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, {"backend": "model"})
    ours.allocate_tensors()
    info = np.iinfo(dt)
    for seed in range(3):
        x = np.random.default_rng(seed).integers(info.min, info.max + 1, (1, 9, 9, 3)).astype(dt)
        for got, want in zip(run(ours, [x]), run(cpu, [x])):
            assert len(np.unique(want)) > 3, want      # not a saturated, constant output
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}")
    report = dtpu.last_report()
    assert report.partitions == 1 and report.rejected == [], report.rejected
    assert [n.op for n in report.nodes] == ["conv2d", "mean", "conv2d"]
    assert report.nodes[1].output_shape == (1, 1, 1, 16)
