"""The vector unit's numpy twins (dtpu.reference.vector) against TFLite's CPU kernels: one-op
graphs written by tests/vector_graphs.py, random scales, zero points, shapes, broadcasts, fused
activations and paddings, int8 and uint8, plus the exact quantization of the zoo models' ADD,
MEAN, MAX_POOL_2D and AVERAGE_POOL_2D nodes."""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from dtpu import tflite_model
from dtpu.reference import vector as v
from tests.vector_graphs import T, one_op_model, run_cpu

ZOO = Path(__file__).parent / "models" / "zoo"
ACTS = ["none", "relu", "relu6", "relu_n1_to_1"]
AXES_HW = np.array([1, 2], np.int32)


def _rand(r, shape, dtype):
    info = np.iinfo(dtype)
    return r.integers(info.min, info.max + 1, shape).astype(dtype)


def _scale(r):
    return float(np.float32(10 ** r.uniform(-3, 0)))


def _zp(r, dtype):
    info = np.iinfo(dtype)
    return int(r.integers(info.min, info.max + 1))


def _shape(r):
    return (1, int(r.integers(1, 9)), int(r.integers(1, 9)), int(r.integers(1, 20)))


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("broadcast", ["none", "1x1xC", "HxWxC_second"])
def test_binary_matches_tflite(op, dtype, broadcast):
    r = np.random.default_rng(zlib.crc32(repr((op, dtype, broadcast)).encode()))
    nd = np.dtype(dtype)
    for trial in range(12):
        act = ACTS[trial % 4]
        shape = _shape(r)
        shape2 = {"none": shape, "1x1xC": (1, 1, 1, shape[3]),
                  "HxWxC_second": (1, shape[1], shape[2], shape[3])}[broadcast]
        a, b = _rand(r, shape, nd), _rand(r, shape2, nd)
        s1, z1, s2, z2, so, zo = _scale(r), _zp(r, nd), _scale(r), _zp(r, nd), _scale(r), _zp(r, nd)
        if op == "MUL":
            so = float(np.float32(s1 * s2 * 10 ** r.uniform(-1, 2)))
            got = v.mul(a, b, v.mul_params(s1, z1, s2, z2, so, zo, nd, act))
        else:
            got = v.add(a, b, v.add_params(s1, z1, s2, z2, so, zo, nd, act, sub=op == "SUB"))
        model = one_op_model(op, [T(shape, dtype, s1, z1), T(shape2, dtype, s2, z2)],
                             T(shape, dtype, so, zo), activation=act)
        ref = run_cpu(model, [a, b])
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref, err_msg=f"{op} {dtype} {act} {shape}")


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pool_matches_tflite(op, dtype, padding):
    r = np.random.default_rng(zlib.crc32(repr((op, dtype, padding)).encode()))
    nd = np.dtype(dtype)
    done = 0
    while done < 12:
        shape = _shape(r)
        fh, fw, sh, sw = (int(x) for x in r.integers(1, 4, 4))
        try:
            g = v.pool_geometry(shape[1], shape[2], (fh, fw), (sh, sw), padding)
        except ValueError:
            continue
        act = ACTS[done % 4]
        s, z = _scale(r), _zp(r, nd)
        a = _rand(r, shape, nd)
        lo, hi = v.activation_bounds(act, s, z, nd)
        got = (v.average_pool if op == "AVERAGE_POOL_2D" else v.max_pool)(a, g, lo, hi)
        model = one_op_model(op, [T(shape, dtype, s, z)], T((1, g.oh, g.ow, shape[3]), dtype, s, z),
                             activation=act, padding=padding, stride=(sh, sw), filter=(fh, fw))
        np.testing.assert_array_equal(got, run_cpu(model, [a]),
                                      err_msg=f"{op} {dtype} {padding} {shape} f{fh}x{fw} s{sh}x{sw}")
        done += 1


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("scales", ["equal", "requantizing"])
def test_mean_matches_tflite(dtype, scales):
    r = np.random.default_rng(zlib.crc32(repr((dtype, scales)).encode()))
    nd = np.dtype(dtype)
    for _ in range(16):
        shape = _shape(r)
        s, z = _scale(r), _zp(r, nd)
        so, zo = (s, z) if scales == "equal" else (_scale(r), _zp(r, nd))
        a = _rand(r, shape, nd)
        got = v.mean_hw(a, v.mean_params(s, z, so, zo, shape[1] * shape[2], nd))
        model = one_op_model("MEAN", [T(shape, dtype, s, z), T((2,), "int32", data=AXES_HW)],
                             T((1, shape[3]), dtype, so, zo), keep_dims=False)
        np.testing.assert_array_equal(got, run_cpu(model, [a]), err_msg=f"MEAN {shape}")


def test_mean_keep_dims_is_not_this_formula():
    """keep_dims true reaches TFLite's optimized MEAN, whose integers are not keep_dims
    false's: the twin gives it others (mean_keep_dims_params, tests/test_mean_keep_dims.py),
    and this shows why it must."""
    r = np.random.default_rng(7)
    bad = 0
    for _ in range(10):
        shape = (1, 5, 7, 24)
        s, z, so, zo = _scale(r), _zp(r, np.int8), _scale(r), _zp(r, np.int8)
        a = _rand(r, shape, np.int8)
        model = one_op_model("MEAN", [T(shape, "int8", s, z), T((2,), "int32", data=AXES_HW)],
                             T((1, 1, 1, 24), "int8", so, zo), keep_dims=True)
        got = v.mean_hw(a, v.mean_params(s, z, so, zo, 35, np.int8))
        bad += int((got != run_cpu(model, [a]).reshape(1, -1)).sum())
    assert bad > 0


def _zoo_case(name: str, opcode: str):
    m = tflite_model.load(ZOO / f"{name}.tflite")
    g = m.main
    op = next(o for o in g.operators if o.opcode == opcode)
    return g, op


def _qt(t, dtype):
    return T(tuple(t.shape), dtype, float(t.quantization.scale[0]), int(t.quantization.zero_point[0]))


@pytest.mark.parametrize("name,opcode", [
    ("mobilenet_v2_224__int8", "ADD"), ("mobilenet_v2_224__int8", "MEAN"),
    ("resnet18_half_224__int8", "ADD"), ("resnet18_half_224__int8", "MAX_POOL_2D"),
    ("resnet18_half_224__int8", "MEAN"), ("dscnn_like__int8", "AVERAGE_POOL_2D"),
    ("dscnn_like__uint8", "AVERAGE_POOL_2D"), ("mobilenet_like__int8", "MEAN"),
])
def test_zoo_quantization_matches_tflite(name, opcode):
    """The zoo nodes' own scales, zero points, shapes and options, random inputs."""
    g, op = _zoo_case(name, opcode)
    x, out = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    dtype = x.type_name.lower()
    nd = np.dtype(dtype)
    r = np.random.default_rng(11)
    a = _rand(r, x.shape, nd)
    act = op.options.get("fused_activation_function", "NONE").lower()
    xs, xz = float(x.quantization.scale[0]), int(x.quantization.zero_point[0])
    os_, oz = float(out.quantization.scale[0]), int(out.quantization.zero_point[0])
    if opcode == "ADD":
        y = g.tensors[op.inputs[1]]
        b = _rand(r, y.shape, nd)
        got = v.add(a, b, v.add_params(xs, xz, float(y.quantization.scale[0]),
                                       int(y.quantization.zero_point[0]), os_, oz, nd, act))
        model = one_op_model("ADD", [_qt(x, dtype), _qt(y, dtype)], _qt(out, dtype), activation=act)
        feeds = [a, b]
    elif opcode == "MEAN":
        assert op.options["keep_dims"] is False
        got = v.mean_hw(a, v.mean_params(xs, xz, os_, oz, x.shape[1] * x.shape[2], nd))
        model = one_op_model("MEAN", [_qt(x, dtype), T((2,), "int32", data=AXES_HW)],
                             _qt(out, dtype), keep_dims=False)
        feeds = [a]
    else:
        o = op.options
        geo = v.pool_geometry(x.shape[1], x.shape[2], (o["filter_height"], o["filter_width"]),
                              (o["stride_h"], o["stride_w"]), o["padding"])
        lo, hi = v.activation_bounds(act, os_, oz, nd)
        got = (v.average_pool if opcode == "AVERAGE_POOL_2D" else v.max_pool)(a, geo, lo, hi)
        model = one_op_model(opcode, [_qt(x, dtype)], _qt(out, dtype), activation=act,
                             padding=o["padding"], stride=(o["stride_h"], o["stride_w"]),
                             filter=(o["filter_height"], o["filter_width"]))
        feeds = [a]
    np.testing.assert_array_equal(got, run_cpu(model, feeds))


def test_bad_values_are_named():
    with pytest.raises(ValueError, match="int16"):
        v.dtype_range(np.int16)
    with pytest.raises(ValueError, match="SAME, VALID"):
        v.pool_geometry(4, 4, (2, 2), (1, 1), "FULL")
    with pytest.raises(ValueError, match="RELU6"):
        v.activation_bounds("tanh", 0.1, 0, np.int8)
