"""ADD, SUB and MUL with a constant operand on the vector unit (contract 2.1): the constant (a
scalar, a per-channel vector, or the other operand's shape) becomes a buffer of the DDR image
written at Prepare, read as operand B (BMODE 1 for a vector broadcast over N, H, W). Through the
command-list compiler and the executor against the interpreter on one-op graphs, and through the
delegate inside convolution chains (EfficientNet's input rescaling: MUL by a scalar, SUB of a
1x1x1x3 mean)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from dtpu import tflite_writer as tw
from dtpu.hw.config import get_config
from dtpu.hw.vec_lower import VecSpec, constant_operand, vec_reason
from tests.vector_graphs import run_cpu

CFG = get_config()

# (operator, shape of the activation, shape of the constant, which operand is the constant)
CASES = [("MUL", (1, 5, 6, 3), (), 1), ("SUB", (1, 5, 6, 3), (1, 1, 1, 3), 1),
         ("SUB", (1, 4, 4, 16), (16,), 0), ("ADD", (1, 4, 4, 16), (1, 4, 4, 16), 1),
         ("MUL", (1, 3, 7, 24), (1, 1, 1, 24), 0), ("ADD", (1, 2, 3, 5), (1,), 0)]


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _q(r, dt):
    info = np.iinfo(dt)
    return (float(np.float32(10 ** r.uniform(-2.5, -0.5))),
            int(r.integers(info.min // 2, info.max // 2 + 1)))


def _graph(op, dtype, shape, cshape, which, r, conv: bool):
    """[conv ->] op(x, const) (or op(const, x)) [-> conv]: (flatbuffer, feeds)."""
    dt = np.dtype(dtype)
    info = np.iinfo(dt)
    g = tw.GraphWriter()
    x = g.tensor(tw.Tensor(shape, dtype, *_q(r, dt), name="x"))
    a = x
    if conv:
        a = _conv(g, x, shape[-1], dtype, r)
    cq = _q(r, dt)
    cdata = r.integers(info.min, info.max + 1, cshape)
    k = g.const("k", cdata, dtype, scale=cq[0], zero_point=cq[1])
    yq = _q(r, dt)
    if op == "MUL":
        yq = (float(np.float32(g.tensors[a].scale * cq[0] * 10 ** r.uniform(0, 2))), yq[1])
    y = g.tensor(tw.Tensor(shape, dtype, *yq, name="y"))
    g.op(op, [a, k] if which == 1 else [k, a], [y])
    out = _conv(g, y, 8, dtype, r) if conv else y
    feeds = [r.integers(info.min, info.max + 1, shape).astype(dt)]
    return g.to_bytes([x], [out], "dtpu const operand test"), feeds


def _conv(g, x, cout, dtype, r):
    t = g.tensors[x]
    cin = t.shape[-1]
    if dtype == "int8":
        w = r.integers(-127, 128, (cout, 1, 1, cin))
        ws = [float(np.float32(v)) for v in 10 ** r.uniform(-3, -1.5, cout)]
        wi = g.const(f"w{x}", w, "int8", scale=ws, zero_point=[0] * cout)
        bi = g.const(f"b{x}", r.integers(-2000, 2000, cout), "int32",
                     scale=[t.scale * s for s in ws], zero_point=[0] * cout)
    else:
        w = r.integers(0, 256, (cout, 1, 1, cin))
        ws = [float(np.float32(10 ** r.uniform(-3, -1.5)))]
        wi = g.const(f"w{x}", w, "uint8", scale=ws[0], zero_point=int(r.integers(100, 156)))
        bi = g.const(f"b{x}", r.integers(-2000, 2000, cout), "int32", scale=t.scale * ws[0],
                     zero_point=0)
    ys = float(np.float32(t.scale * float(np.mean(ws)) * 60 * np.sqrt(cin)))
    y = g.tensor(tw.Tensor(tuple(t.shape[:3]) + (cout,), dtype, ys, int(r.integers(-20, 20)) +
                           (0 if dtype == "int8" else 128), name=f"c{x}"))
    g.op("CONV_2D", [x, wi, bi], [y], padding="VALID")
    return y


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("op,shape,cshape,which", CASES)
def test_constant_operand_through_the_unit_equals_tflite(op, shape, cshape, which, dtype):
    from tests.test_vector_delegate import PROVEN

    if not PROVEN:
        pytest.skip("the unit's formulas are TFLite 2.14's builtin kernels; this runtime's "
                    "XNNPACK rounds MUL otherwise (its vector nodes stay on the CPU)")
    """The one-op graph's partition compiled by vec_compiler (the constant in the image) and run
    by the golden model against the interpreter."""
    from dtpu.hw.core import Core
    from dtpu.hw.ddr import Ddr
    from dtpu.hw.executor import Executor
    from dtpu.hw.listcompiler import compile_program
    from dtpu.hw.vec_compiler import graph_partitions_of
    from dtpu.tflite_model import parse

    r = _rng(op, shape, cshape, which, dtype)
    content, feeds = _graph(op, dtype, shape, cshape, which, r, conv=False)
    [nodes] = graph_partitions_of(parse(content), CFG)
    [node] = nodes
    assert node.vec.const is not None and node.vec.const[0] == which and node.src2 is None
    prog = compile_program([nodes], CFG)
    [part] = prog.partitions
    ddr = Ddr(prog.base, prog.size, prog.image)
    ddr.write(part.inputs[0].addr, feeds[0].reshape(-1).view(np.uint8))
    res = Executor(Core(CFG), vector_unit=True).run(ddr, part.list_addr)
    assert res.error == 0, res.message
    got = ddr.read(part.output.addr, part.output.nbytes).view(part.output.dtype)
    np.testing.assert_array_equal(got.reshape(shape), run_cpu(content, feeds))


def test_constant_operands_the_unit_cannot_read_are_named():
    with pytest.raises(ValueError, match="accepted: that shape, or one broadcast"):
        constant_operand(np.zeros((1, 4, 1, 8), np.int8), (1, 4, 4, 8))
    with pytest.raises(ValueError, match="accepted: that shape, or one broadcast"):
        constant_operand(np.zeros((1, 1, 1, 8), np.int8), (1, 4, 4, 1))   # would enlarge it
    shape, raw = constant_operand(np.array(7, np.int8), (1, 2, 2, 3))
    assert shape == (1, 1, 1, 3) and raw == bytes([7, 7, 7])
    i8 = np.dtype(np.int8)
    bad = VecSpec("ADD", i8, (1, 2, 2, 3), (0.1, 0), (0.1, 0), b_shape=(1, 1, 1, 3), b_q=(0.1, 0),
                  const=(1, bytes(2)))
    assert "constant operand 1 of 2 bytes" in vec_reason(bad, CFG)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("op,shape,cshape,which", CASES[:4])
def test_constant_operand_inside_a_conv_chain_equals_tflite(op, shape, cshape, which, dtype):
    import dtpu
    from tests.test_vector_delegate import PROVEN, _graph_state, _run

    r = _rng("delegate", op, shape, cshape, which, dtype)
    content, feeds = _graph(op, dtype, shape, cshape, which, r, conv=True)
    want = run_cpu(content, feeds)
    it, outs = _run(content, feeds, {"backend": "model"})
    graph = _graph_state()
    for got in outs:          # the Python invoke path, then the C one
        np.testing.assert_array_equal(got, want)
    if PROVEN:
        assert len(graph.kernels) == 1 and graph.rejected == [], graph.rejected
        assert [n.op for n in dtpu.last_report().nodes] == ["conv2d", op.lower(), "conv2d"]
    del it
