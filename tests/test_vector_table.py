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
from dtpu.delegate.vector_claim import PROVEN_RUNTIMES
from dtpu.tflite import RUNTIME
from tests.vector_graphs import run_cpu

CFG = get_config()
#: TFLite 2.14's builtin kernels: each of these operators is a function of the element's byte
PROVEN = RUNTIME in PROVEN_RUNTIMES
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
        try:
            table = vector_table(op, dtype, out_dtype, qx, qy, options)
        except ValueError as e:   # LiteRT's XNNPACK QUANTIZE: its body and tail differ
            assert not PROVEN, e
            pytest.skip(f"{RUNTIME}: {e}")
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


@pytest.mark.skipif(not PROVEN, reason=f"{RUNTIME}'s LOGISTIC takes other output scales")
def test_a_logistic_scale_tflite_refuses_raises():
    """TFLite's LOGISTIC Prepare insists on an output scale of 1/256: the table is not made."""
    with pytest.raises((RuntimeError, ValueError)):
        vector_table("LOGISTIC", "int8", "int8", (0.05, 3), (0.01, 0))


# -- the delegate claims them where they join convolutions ---------------------------------------

class _Chain:
    """A graph of 1x1 convolutions and table operators written with dtpu.tflite_writer."""

    def __init__(self, dtype: str, seed) -> None:
        self.dt = np.dtype(dtype)
        self.r = _rng(seed)
        self.g = tw.GraphWriter()
        self.inputs: list[int] = []

    def q(self, dtype=None) -> tuple[float, int]:
        info = np.iinfo(dtype or self.dt)
        return (float(np.float32(10 ** self.r.uniform(-2.5, -0.5))),
                int(self.r.integers(info.min // 2, info.max // 2 + 1)))

    def input(self, shape) -> int:
        i = self.g.tensor(tw.Tensor(tuple(shape), self.dt.name, *self.q(), name="x"))
        self.inputs.append(i)
        return i

    def conv(self, x: int, cout: int) -> int:
        t = self.g.tensors[x]
        cin = t.shape[-1]
        if self.dt == np.int8:
            w = self.r.integers(-127, 128, (cout, 1, 1, cin))
            ws = [float(np.float32(v)) for v in 10 ** self.r.uniform(-3, -1.5, cout)]
            wi = self.g.const(f"w{x}", w, "int8", scale=ws, zero_point=[0] * cout)
        else:
            w = self.r.integers(0, 256, (cout, 1, 1, cin))
            ws = [float(np.float32(10 ** self.r.uniform(-3, -1.5)))]
            wi = self.g.const(f"w{x}", w, "uint8", scale=ws[0], zero_point=int(self.r.integers(100, 156)))
        bs = [t.scale * s for s in ws]
        bi = self.g.const(f"b{x}", self.r.integers(-2000, 2000, cout), "int32",
                          scale=bs if len(bs) > 1 else bs[0], zero_point=[0] * len(bs) if len(bs) > 1 else 0)
        ys = float(np.float32(t.scale * float(np.mean(ws)) * 60 * np.sqrt(cin)))
        y = self.g.tensor(tw.Tensor((1,) + tuple(t.shape[1:3]) + (cout,), self.dt.name, ys,
                                    self.q()[1], name=f"c{x}"))
        self.g.op("CONV_2D", [x, wi, bi], [y], padding="VALID")
        return y

    def table(self, op: str, x: int, out_dtype: str | None = None, **options) -> int:
        t = self.g.tensors[x]
        qx, qy = quantization(op, t.dtype, out_dtype or t.dtype, self.r)
        qy = (qy[0], qy[1])
        y = self.g.tensor(tw.Tensor(t.shape, out_dtype or t.dtype, *qy, name=f"{op.lower()}{x}"))
        self.g.op(op, [x], [y], **options)
        return y

    def mul(self, a: int, b: int) -> int:
        t = self.g.tensors[a]
        y = self.g.tensor(tw.Tensor(t.shape, t.dtype, *self.q(), name=f"mul{a}"))
        self.g.op("MUL", [a, b], [y])
        return y

    def model(self, out: int) -> bytes:
        return self.g.to_bytes(self.inputs, [out], "dtpu table test")

    def feeds(self) -> list[np.ndarray]:
        info = np.iinfo(self.dt)
        return [self.r.integers(info.min, info.max + 1, self.g.tensors[i].shape).astype(self.dt)
                for i in self.inputs]


def chain(op: str, dtype: str) -> tuple[bytes, _Chain]:
    """conv -> `op` -> conv; "SWISH": conv -> LOGISTIC -> MUL(conv, LOGISTIC) -> conv;
    "QUANTIZE_OUT": conv -> QUANTIZE to the other 8-bit type, the graph's output."""
    c = _Chain(dtype, (op, dtype))
    a = c.conv(c.input((1, 7, 7, 16)), 16)
    if op == "SWISH":
        return c.model(c.conv(c.mul(a, c.table("LOGISTIC", a)), 8)), c
    if op == "QUANTIZE_OUT":
        return c.model(c.table("QUANTIZE", a, "uint8" if dtype == "int8" else "int8")), c
    options = {"alpha": 0.1875} if op == "LEAKY_RELU" else {}
    return c.model(c.conv(c.table(op, a, **options), 8)), c


DELEGATE_CASES = [(op, dt) for dt in ("int8", "uint8") for op in TABLE_OPS + ("SWISH", "QUANTIZE_OUT")]


@pytest.mark.parametrize("op,dtype", DELEGATE_CASES)
def test_table_node_inside_a_conv_chain_equals_tflite(op, dtype):
    from tests.test_vector_delegate import PROVEN, _graph_state, _run

    content, c = chain(op, dtype)
    feeds = c.feeds()
    want = run_cpu(content, feeds)
    it, outs = _run(content, feeds, {"backend": "model"})
    graph = _graph_state()
    for got in outs:          # the Python invoke path, then the C one
        np.testing.assert_array_equal(got, want)
    if not PROVEN:
        assert all("XNNPACK" in r["reason"] for r in graph.rejected), graph.rejected
        del it
        return
    assert len(graph.kernels) == 1 and graph.rejected == [], graph.rejected
    import dtpu
    ops = [n.op for n in dtpu.last_report().nodes]
    table_op = "logistic" if op == "SWISH" else "quantize" if op == "QUANTIZE_OUT" else op.lower()
    [node] = [n for n in dtpu.last_report().nodes if n.op == table_op]
    assert node.hw["cycles"] and node.hw["cycles"] > 0, ops
    del it


def _prepared(name: str):
    import dtpu
    from tests.test_vector_delegate import ZOO, _graph_state

    it = dtpu.make_interpreter(str(ZOO / f"{name}.tflite"), {"backend": "model"})
    it.allocate_tensors()
    return it, _graph_state()


def test_efficientnet_swish_and_gates_join_the_partitions():
    """EfficientNet-B0: every LOGISTIC (swish and squeeze-excite gates) and the MULs and MEANs
    around them on the vector unit, and each squeeze-excite block's SHAPE -> STRIDED_SLICE ->
    PACK -> RESHAPE evaluated at Prepare (a view): one partition (74 without the unit, 65
    before tables, 17 before the shape chains)."""
    from tests.test_vector_delegate import PROVEN

    it, graph = _prepared("efficientnet_b0_224__int8")
    ops = {r["op"] for r in graph.rejected}
    if not PROVEN:
        assert "LOGISTIC" in ops
        del it
        return
    assert graph.rejected == [] and len(graph.kernels) == 1, graph.rejected
    del it


@pytest.mark.slow
def test_efficientnet_through_the_delegate_is_bit_exact():
    import dtpu
    from tests.test_vector_delegate import ZOO
    from dtpu.tflite import Interpreter

    path = str(ZOO / "efficientnet_b0_224__int8.tflite")
    cpu = Interpreter(path)
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, {"backend": "model"})
    ours.allocate_tensors()
    d = cpu.get_input_details()[0]
    for seed in range(2):
        x = _rng("effnet", seed).integers(-128, 128, d["shape"]).astype(d["dtype"])
        outs = []
        for it in (cpu, ours):
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
        np.testing.assert_array_equal(outs[1], outs[0], err_msg=f"seed {seed}")
    del ours
