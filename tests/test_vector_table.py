"""The vector unit's TABLE kind (contract 2.1): one-input int8/uint8 operators (LOGISTIC, TANH,
HARD_SWISH, LEAKY_RELU, RELU, RELU6, RELU_N1_TO_1, QUANTIZE) run as a 256-byte table that TFLite's
own kernel filled (dtpu.unary_tables.vector_table). VEC descriptors through the executor against
the interpreter on one-op graphs written with dtpu.tflite_writer, the cycle formula, the fields a
TABLE refuses."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from dtpu import tflite_writer as tw
from dtpu.hw.config import get_config
from dtpu.hw.listformat import Format, ListFault
from dtpu.hw.units import vector as vu
from dtpu.hw.vec_lower import TABLE_OPS, VecSpec, lower_vec, vec_reason
from dtpu.unary_tables import vector_table
from tests.test_vector_unit import _formula, run_vec
from tests.vector_graphs import run_cpu

CFG = get_config()
FMT = Format(CFG)


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def quantization(op: str, dtype: str, out_dtype: str, r) -> tuple[tuple, tuple]:
    """(input, output) quantization TFLite's Prepare accepts for `op` (LOGISTIC and TANH fix
    their output's), drawn from `r`."""
    info, oinfo = np.iinfo(dtype), np.iinfo(out_dtype)
    qx = (float(np.float32(10 ** r.uniform(-2.5, -0.5))), int(r.integers(info.min // 2, info.max // 2 + 1)))
    signed = oinfo.min < 0
    if op == "LOGISTIC":
        return qx, (1 / 256, -128 if signed else 0)
    if op == "TANH":
        return qx, (1 / 128, 0 if signed else 128)
    scale = float(np.float32(qx[0] * 10 ** r.uniform(-0.5, 0.5)))
    return qx, (scale, int(r.integers(oinfo.min // 2, oinfo.max // 2 + 1)))


def one_op(op: str, shape, dtype: str, out_dtype: str, qx, qy, options=None) -> bytes:
    tensors = [tw.Tensor(tuple(shape), dtype, qx[0], qx[1], name="x"),
               tw.Tensor(tuple(shape), out_dtype, qy[0], qy[1], name="y")]
    return tw.write(tensors, [tw.Node(op, [0], [1], options or {})], [0], [1])


CASES = [(op, dt, dt) for op in TABLE_OPS for dt in ("int8", "uint8")] + \
        [("QUANTIZE", "int8", "uint8"), ("QUANTIZE", "uint8", "int8")]


@pytest.mark.parametrize("op,dtype,out_dtype", CASES)
def test_table_through_the_unit_equals_tflite(op, dtype, out_dtype):
    r = _rng(op, dtype, out_dtype)
    for trial in range(3):
        shape = (1, int(r.integers(1, 9)), int(r.integers(1, 9)), int(r.integers(1, 40)))
        qx, qy = quantization(op, dtype, out_dtype, r)
        options = {"alpha": float(np.float32(r.uniform(0.01, 0.5)))} if op == "LEAKY_RELU" else None
        table = vector_table(op, dtype, out_dtype, qx, qy, options)
        odt = np.dtype(out_dtype)
        spec = VecSpec(op, np.dtype(dtype), shape, qx, qy, table=table,
                       out_dtype=odt if out_dtype != dtype else None)
        assert vec_reason(spec, CFG) is None
        info = np.iinfo(dtype)
        # the 256 values in turn (each of them when the tensor holds 256 or more), shuffled
        a = r.permutation(np.resize(np.arange(info.min, info.max + 1), int(np.prod(shape))))
        a = a.astype(dtype).reshape(shape)
        got, res = run_vec(spec, a, np.frombuffer(table, np.uint8))
        assert res.error == 0, res.message
        got = got.view(odt)
        want = run_cpu(one_op(op, shape, dtype, out_dtype, qx, qy, options), [a])
        np.testing.assert_array_equal(got, want, err_msg=f"{op} {dtype}->{out_dtype} {qx} {qy}")


def test_a_table_covers_all_256_inputs():
    """Entry i is the output of the input whose byte is i: an int8 tensor of all 256 values
    through the interpreter, compared entry by entry."""
    qx, qy = (0.03, 5), (1 / 256, -128)
    table = np.frombuffer(vector_table("LOGISTIC", "int8", "int8", qx, qy), np.int8)
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 16, 16)
    want = run_cpu(one_op("LOGISTIC", x.shape, "int8", "int8", qx, qy), [x]).reshape(-1)
    np.testing.assert_array_equal(table[x.view(np.uint8).reshape(-1)], want)


def test_table_cycles_follow_the_formula():
    """The table's 32 words are read before A, one result word a cycle after: read-bound,
    ceil(|A| / 8) + 32 beats."""
    table = vector_table("TANH", "int8", "int8", (0.05, 3), (1 / 128, 0))
    spec = VecSpec("TANH", np.dtype(np.int8), (1, 7, 7, 24), (0.05, 3), (1 / 128, 0), table=table)
    a = _rng("cycles").integers(-128, 128, spec.a_shape).astype(np.int8)
    _, res = run_vec(spec, a, np.frombuffer(table, np.uint8))
    fields, _ = lower_vec(spec, CFG)
    d = {k: FMT.fields_of(k, FMT.word(k, **v)) for k, v in fields.items()}
    d["VEC1"] = {"SRC_A": 0, "SRC_B": 0}
    d["VEC2"]["DST"] = 0
    job = vu.decode(FMT, d)
    c = vu.cost(job, 8)
    assert c.read_beats == 7 * 7 * 24 // 8 + 32 and c.ops == 7 * 7 * 24 // 8
    assert res.cycles == _formula(job)
    assert res.compute_cycles == c.stall_free(int(FMT.mem["LAT_VEC"]))


def test_table_fields_are_checked():
    table = vector_table("RELU", "int8", "int8", (0.05, 3), (0.05, 3))
    spec = VecSpec("RELU", np.dtype(np.int8), (1, 2, 2, 8), (0.05, 3), (0.05, 3), table=table)
    fields, _ = lower_vec(spec, CFG)
    fields["VEC0"]["BMODE"] = 1
    d = {k: FMT.fields_of(k, FMT.word(k, **v)) for k, v in fields.items()}
    d["VEC1"] = {"SRC_A": 0, "SRC_B": 0}
    with pytest.raises(ListFault, match="BMODE=1 with TABLE"):
        vu.decode(FMT, d)
    d["VEC0"]["BMODE"] = 0
    d["VEC1"] = {"SRC_A": 0, "SRC_B": 4}
    with pytest.raises(ListFault, match="TABLE at SRC_B=0x4"):
        vu.decode(FMT, d)


def test_reasons_name_what_a_table_cannot_take():
    i8 = np.dtype(np.int8)
    assert "without its 256-entry table" in vec_reason(
        VecSpec("LOGISTIC", i8, (1, 2, 2, 2), (0.1, 0), (1 / 256, -128)), CFG)
    assert "one type in and out" in vec_reason(
        VecSpec("RELU", i8, (1, 2, 2, 2), (0.1, 0), (0.1, 0), table=bytes(256),
                out_dtype=np.dtype(np.uint8)), CFG)
    assert "int16" in vec_reason(
        VecSpec("QUANTIZE", i8, (1, 2, 2, 2), (0.1, 0), (0.1, 0), table=bytes(256),
                out_dtype=np.dtype(np.int16)), CFG)


def test_a_logistic_scale_tflite_refuses_raises():
    """TFLite's LOGISTIC Prepare insists on an output scale of 1/256: the table is not made."""
    with pytest.raises((RuntimeError, ValueError)):
        vector_table("LOGISTIC", "int8", "int8", (0.05, 3), (0.01, 0))
