"""CONCATENATION along channels on the DTPU (contract 2.1): a convolution whose output only the
concatenation reads writes its channel slice of the wider tensor itself (its store unit's CH0 /
CH1 / DSTC: no copy, no descriptor); any other input (a vector-unit node's output, a partition
input, a tensor read elsewhere too) is moved by the vector unit's COPY kind. Graphs written with
dtpu.tflite_writer, through the compiler and the executor, and through the delegate, against the
interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu import tflite_writer as tw
from dtpu.hw.config import get_config
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listcompiler import ListBuilder, compile_program
from dtpu.hw.listformat import Format, ListFault
from dtpu.hw.units import store as store_unit
from dtpu.hw.units import vector as vu
from dtpu.hw.vec_compiler import graph_partitions_of
from dtpu.hw.vec_lower import lower_copy
from dtpu.tflite_model import parse
from tests.test_vector_const import _conv, _q, _rng
from tests.vector_graphs import run_cpu

CFG = get_config()
FMT = Format(CFG)
BASE = 0x1000_0000


def _copy(shape, dstc, dst_off, a):
    """One COPY + END list: (the destination bytes, RunResult, the decoded job)."""
    ddr = Ddr(BASE, 1 << 22)
    src, dst, lst = BASE, BASE + (1 << 20) + dst_off, BASE + (3 << 20)
    ddr.write(src, a.view(np.uint8).reshape(-1))
    ddr.write(BASE + (1 << 20), np.full(1 << 16, 0xA5, np.uint8))
    fields = lower_copy(shape, dstc, a.dtype, CFG)
    lb = ListBuilder(FMT)
    lb.vec(fields, src, 0, dst, tag=3)
    lb.end()
    ddr.write(lst, np.frombuffer(lb.data(), np.uint8))
    r = Executor(Core(CFG), FMT, vector_unit=True).run(ddr, lst)
    d = {k: FMT.fields_of(k, FMT.word(k, **v)) for k, v in fields.items()}
    d["VEC1"] = {"SRC_A": src, "SRC_B": 0}
    d["VEC2"]["DST"] = dst
    d.setdefault("VEC4", {})
    return ddr.read(BASE + (1 << 20), 1 << 16).copy(), r, vu.decode(FMT, d)


@pytest.mark.parametrize("shape,dstc,off", [((1, 3, 5, 7), 20, 5), ((2, 4, 4, 16), 48, 16),
                                            ((1, 1, 9, 3), 3, 0)])
def test_copy_writes_a_channel_slice(shape, dstc, off):
    a = _rng("copy", shape).integers(-128, 128, shape).astype(np.int8)
    got, res, job = _copy(shape, dstc, off, a)
    assert res.error == 0, res.message
    want = np.full(1 << 16, 0xA5, np.uint8)
    pix = int(np.prod(shape[:3]))
    rows = want[off:off + pix * dstc].reshape(pix, dstc)
    rows[:, :shape[3]] = a.view(np.uint8).reshape(pix, shape[3])
    np.testing.assert_array_equal(got, want)     # the bytes between the slices untouched
    # the cycles: the store unit's simulation of the pixel words (units.vector._copy_step;
    # equal to the Verilog's, sim/test_vec.py test_vec_copy_cycles): one operation a pixel
    # word, the writes as the store unit's write queue makes them (runs, gap words written)
    m = FMT.mem
    c = vu.cost(job, 8)
    words = int(np.prod(shape[:3])) * -(-shape[3] // 8)
    assert c.read_beats == -(-a.size // 8) and c.ops == words
    assert res.compute_cycles == words + int(m["LAT_VEC"])
    runs = store_unit.write_runs(vu.copy_chunks(job).tolist(), int(m["MEM_BURST_BEATS"]),
                                 int(m["SEQ_STORE_GAP"]))
    assert res.wr_beats == sum(runs)
    header = int(m["SEQ_FETCH_START"]) + int(m["MEM_READ_LATENCY"]) + FMT.length("VEC") - 1 + \
        int(m["SEQ_DECODE"])
    # the last word's write is answered MEM_WRITE_LATENCY after it at the earliest, and the unit
    # is done LAT_VEC after it: a COPY's writes are the store unit's, they do not wait for done
    # (LAT_VEC, 16 since the requantizers were pipelined, covers the element-wise lanes)
    assert res.cycles >= header + int(m["SEQ_VEC_START"]) + int(m["MEM_READ_LATENCY"]) + words \
        + max(int(m["LAT_VEC"]), int(m["MEM_WRITE_LATENCY"])) + int(m["IRQ_LATENCY"])


def test_copy_fields_are_checked():
    fields = lower_copy((1, 2, 2, 8), 4, np.int8, CFG)        # OW < C
    d = {k: FMT.fields_of(k, FMT.word(k, **v)) for k, v in fields.items()}
    d["VEC1"] = {"SRC_A": 0, "SRC_B": 0}
    d["VEC4"] = {}
    with pytest.raises(ListFault, match="OW=4: accepted OW >= C"):
        vu.decode(FMT, d)


def inception(dtype: str, shared: bool = False, seed=0) -> tuple[bytes, list]:
    """conv a, conv b and MAX_POOL_2D (SAME 3x3 stride 1) of conv c, concatenated along
    channels, then a convolution; `shared`: conv b's output is a graph output too (the host
    reads it: it cannot live only in its slice)."""
    r = _rng("inception", dtype, shared, seed)
    dt = np.dtype(dtype)
    info = np.iinfo(dt)
    g = tw.GraphWriter()
    x = g.tensor(tw.Tensor((1, 6, 5, 16), dtype, *_q(r, dt), name="x"))
    a = _conv(g, x, 24, dtype, r)
    b = _conv(g, x, 13, dtype, r)
    c = _conv(g, x, 16, dtype, r)
    # every input shares the output's quantization (the converter's concatenations do)
    qy = (g.tensors[a].scale, g.tensors[a].zero_point)
    for i in (b, c):
        g.tensors[i].scale, g.tensors[i].zero_point = qy
    p = g.tensor(tw.Tensor(g.tensors[c].shape, dtype, *qy, name="pool"))
    g.op("MAX_POOL_2D", [c], [p], padding="SAME", stride=(1, 1), filter=(3, 3))
    cat = g.tensor(tw.Tensor((1, 6, 5, 24 + 13 + 16), dtype, *qy, name="cat"))
    g.op("CONCATENATION", [a, b, p], [cat], axis=3)
    y = _conv(g, cat, 8, dtype, r)
    outs = [y, b] if shared else [y]
    feeds = [r.integers(info.min, info.max + 1, (1, 6, 5, 16)).astype(dt)]
    return g.to_bytes([x], outs, "dtpu concatenation test"), feeds


def _run_partition(content: bytes, feeds, keep_last: bool):
    model = parse(content)
    [nodes] = graph_partitions_of(model, CFG)
    keep = [[len(nodes) - 1]] if keep_last else None
    prog = compile_program([nodes], CFG, keep=keep)
    [part] = prog.partitions
    ddr = Ddr(prog.base, prog.size, prog.image)
    ex = Executor(Core(CFG), vector_unit=True)
    assert ex.run(ddr, prog.prologue_addr).error == 0
    for buf, x in zip(part.inputs, feeds):
        ddr.write(buf.addr, x.reshape(-1).view(np.uint8))
    res = ex.run(ddr, part.list_addr)
    assert res.error == 0, res.message
    out = part.outputs[-1]
    return ddr.read(out.addr, out.nbytes).view(out.dtype).copy(), res, nodes


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_convolutions_write_their_slices_in_place(dtype):
    content, feeds = inception(dtype)
    want = run_cpu(content, feeds).reshape(-1)
    got, res, nodes = _run_partition(content, feeds, keep_last=True)
    assert [nd.vec.op if nd.vec else nd.spec.kind.value for nd in nodes][-2:] == \
        ["CONCATENATION", "conv2d"]
    np.testing.assert_array_equal(got, want)
    # every output read back by the host: the convolutions' too, so each input is copied
    got_all, res_all, _ = _run_partition(content, feeds, keep_last=False)
    np.testing.assert_array_equal(got_all, want)
    assert res_all.descs - res.descs == 2        # the two COPYs the slices in place saved


@pytest.mark.parametrize("shared", [False, True])
def test_concatenation_inside_the_delegate_equals_tflite(shared):
    import dtpu
    from tests.test_vector_delegate import PROVEN, _graph_state

    content, feeds = inception("int8", shared)
    it = dtpu.make_interpreter(content, {"backend": "model"})
    it.allocate_tensors()
    cpu = __import__("dtpu.tflite", fromlist=["Interpreter"]).Interpreter(model_content=content)
    cpu.allocate_tensors()
    for _ in range(2):       # the Python invoke path, then the C one
        for interp in (it, cpu):
            interp.set_tensor(interp.get_input_details()[0]["index"], feeds[0])
            interp.invoke()
        for d_ours, d_cpu in zip(it.get_output_details(), cpu.get_output_details()):
            np.testing.assert_array_equal(it.get_tensor(d_ours["index"]),
                                          cpu.get_tensor(d_cpu["index"]))
    graph = _graph_state()
    if PROVEN:
        assert len(graph.kernels) == 1 and graph.rejected == [], graph.rejected
        assert "concatenation" in [n.op for n in dtpu.last_report().nodes]
    del it


def test_inception_is_one_partition():
    """The Inception-like zoo model: its five CONCATENATIONs (and the pools around them) join
    the convolutions' partition (6 partitions before), and 18 of their 19 inputs are written in
    place by the convolutions that make them (the max pool's is copied)."""
    import dtpu
    from dtpu.hw.listcompiler import DdrImage, plan_concats
    from tests.test_vector_delegate import PROVEN, ZOO, _graph_state

    path = ZOO / "inception_like_224__int8.tflite"
    parts = graph_partitions_of(path, CFG)
    assert len(parts) == 1
    bufs, slices = plan_concats(parts, [[len(parts[0]) - 1]], DdrImage(0))
    assert len(bufs) == 5 and len(slices) == 18
    it = dtpu.make_interpreter(str(path), {"backend": "model"})
    it.allocate_tensors()
    graph = _graph_state()
    if PROVEN:
        assert len(graph.kernels) == 1 and graph.rejected == [], graph.rejected
    else:
        assert {r["op"] for r in graph.rejected} >= {"CONCATENATION"}
    del it


@pytest.mark.slow
def test_inception_through_the_delegate_is_bit_exact():
    import dtpu
    from dtpu.tflite import Interpreter
    from tests.test_vector_delegate import ZOO

    path = str(ZOO / "inception_like_224__int8.tflite")
    cpu = Interpreter(path)
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, {"backend": "model"})
    ours.allocate_tensors()
    d = cpu.get_input_details()[0]
    x = _rng("inception zoo").integers(-128, 128, d["shape"]).astype(d["dtype"])
    outs = []
    for it in (cpu, ours):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    np.testing.assert_array_equal(outs[1], outs[0])
    del ours


@pytest.mark.parametrize("graph", ["concatenation", "table", "constant"])
def test_refused_lists_run_each_vector_node_as_its_own_list(graph, monkeypatch):
    """When the compiler refuses a graph's lists, the job path runs each vector node as a list
    of its own: a CONCATENATION's inputs all copied, a table and a constant operand written
    into that list's image; still exact."""
    import dtpu
    from dtpu.backends.model import ModelBackend
    from dtpu.hw.listformat import CmdlistError
    from tests.test_vector_const import _graph
    from tests.test_vector_delegate import PROVEN
    from tests.test_vector_table import chain

    if not PROVEN:
        pytest.skip("vector nodes stay on the CPU under this runtime (XNNPACK)")
    if graph == "concatenation":
        content, feeds = inception("int8")
    elif graph == "table":
        content, c = chain("SWISH", "int8")
        feeds = c.feeds()
    else:
        content, feeds = _graph("SUB", "int8", (1, 4, 4, 16), (16,), 0, _rng("own list"),
                                conv=True)
    compile_lists = ModelBackend.prepare_partitions

    def refuse(self, partitions, keep=None):
        if any(nd.vec is None for part in partitions for nd in part):
            raise CmdlistError("refused by the test")
        return compile_lists(self, partitions, keep)

    monkeypatch.setattr(ModelBackend, "prepare_partitions", refuse)
    want = run_cpu(content, feeds)
    it = dtpu.make_interpreter(content, {"backend": "model"})
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], feeds[0])
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), want)
    report = dtpu.last_report()
    assert report.path == "jobs"
    assert {"concatenation": "concatenation", "table": "logistic", "constant": "sub"}[graph] in \
        [n.op for n in report.nodes]
    del it
