"""The delegate claims the vector unit's nodes (ADD, SUB, MUL, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN)
where they join convolutions, and runs them in the partition's command list: outputs equal to
TFLite's CPU kernels (int8 and uint8, conv -> vector node -> conv chains written with
tests/vector_graphs.py), on the Python invoke path and on the C one, with the node's cycles in
the report. A vector node that would be a partition of its own stays on the CPU, as do the nodes
of targets without the unit, each with its reason."""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

import dtpu
from dtpu.delegate import runtime as rt
from dtpu.delegate.support import NO_VECTOR_UNIT
from dtpu.delegate.vector_claim import PROVEN_RUNTIMES
from dtpu.tflite import RUNTIME
from tests.vector_graphs import Op, T, graph_model, one_op_model, run_cpu

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

VEC_OPS = {"add", "sub", "mul", "average_pool_2d", "max_pool_2d", "mean"}
#: the twins are TFLite 2.14's builtin kernels; LiteRT hands these nodes to XNNPACK
PROVEN = RUNTIME in PROVEN_RUNTIMES


class _Graph:
    """A graph under construction: tensors by index, nodes, graph inputs."""

    def __init__(self, dtype: str, seed) -> None:
        self.dt = np.dtype(dtype)
        self.r = np.random.default_rng(zlib.crc32(repr(seed).encode()))
        self.tensors: list[T] = []
        self.ops: list[Op] = []
        self.inputs: list[int] = []

    def add(self, t: T) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def q(self) -> tuple[float, int]:
        info = np.iinfo(self.dt)
        return (float(np.float32(10 ** self.r.uniform(-2.5, -0.5))),
                int(self.r.integers(info.min // 2, info.max // 2 + 1)))

    def input(self, shape) -> int:
        s, z = self.q()
        i = self.add(T(tuple(shape), self.dt.name, s, z))
        self.inputs.append(i)
        return i

    def conv(self, x: int, cout: int, activation: str = "none") -> int:
        """A 1x1 CONV_2D over tensor `x` (int8: per-channel filter scales; uint8: per tensor)."""
        t = self.tensors[x]
        cin = t.shape[-1]
        if self.dt == np.int8:
            w = self.r.integers(-127, 128, (cout, 1, 1, cin)).astype(np.int8)
            ws = [float(np.float32(v)) for v in 10 ** self.r.uniform(-3, -1.5, cout)]
            wt = T(w.shape, "int8", ws, 0, data=w)
        else:
            w = self.r.integers(0, 256, (cout, 1, 1, cin)).astype(np.uint8)
            ws = [float(np.float32(10 ** self.r.uniform(-3, -1.5)))]
            wt = T(w.shape, "uint8", ws[0], int(self.r.integers(100, 156)), data=w)
        wi = self.add(wt)
        bias_scale = [t.scale * s for s in ws]
        b = self.r.integers(-2000, 2000, cout).astype(np.int32)
        bi = self.add(T((cout,), "int32", bias_scale if len(ws) > 1 else bias_scale[0], 0,
                        data=b))
        y_scale = float(np.float32(t.scale * float(np.mean(ws)) * 60 * np.sqrt(cin)))
        y = self.add(T((1,) + tuple(t.shape[1:3]) + (cout,), self.dt.name, y_scale,
                       int(self.q()[1])))
        self.ops.append(Op("CONV_2D", [x, wi, bi], [y], {"activation": activation}))
        return y

    def fc(self, x: int, units: int) -> int:
        t = self.tensors[x]
        cin = t.shape[-1]
        zw = 0 if self.dt == np.int8 else 128
        info = np.iinfo(self.dt)
        w = self.r.integers(info.min + (self.dt == np.int8), info.max + 1, (units, cin)
                            ).astype(self.dt)
        ws = float(np.float32(10 ** self.r.uniform(-3, -1.5)))
        wi = self.add(T(w.shape, self.dt.name, ws, zw, data=w))
        bi = self.add(T((units,), "int32", t.scale * ws, 0,
                        data=self.r.integers(-2000, 2000, units).astype(np.int32)))
        y = self.add(T((1, units), self.dt.name, float(np.float32(t.scale * ws * 60 * np.sqrt(cin))),
                       int(self.q()[1])))
        self.ops.append(Op("FULLY_CONNECTED", [x, wi, bi], [y], {}))
        return y

    def node(self, op: str, inputs: list[int], shape, q=None, **attrs) -> int:
        s, z = q if q is not None else self.q()
        y = self.add(T(tuple(shape), self.dt.name, s, z))
        self.ops.append(Op(op, list(inputs), [y], attrs))
        return y

    def model(self, outputs: list[int]) -> bytes:
        return graph_model(self.tensors, self.ops, self.inputs, outputs)

    def feeds(self) -> list[np.ndarray]:
        info = np.iinfo(self.dt)
        return [self.r.integers(info.min, info.max + 1, self.tensors[i].shape).astype(self.dt)
                for i in self.inputs]


def chain(op: str, dtype: str, variant: str = "", activation: str = "none") -> _Graph:
    """conv -> `op` -> conv (MEAN: conv -> MEAN -> FULLY_CONNECTED). Binary ops read two
    convolutions' outputs; `variant` "second" / "first": that operand is a 1x1xC vector (a
    convolution over a second graph input of 1x1xC), broadcast over H and W."""
    g = _Graph(dtype, (op, dtype, variant, activation))
    c, h = 16, 9
    x = g.input((1, h, h, c))
    a = g.conv(x, c)
    if op in ("ADD", "SUB", "MUL"):
        if variant in ("first", "second"):
            b = g.conv(g.input((1, 1, 1, c)), c)
        else:
            b = g.conv(x, c, "relu")
        ins = [b, a] if variant == "first" else [a, b]
        y = g.node(op, ins, (1, h, h, c), activation=activation)
        return _finish(g, g.conv(y, 8))
    if op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        filt, stride, padding = {"": ((3, 3), (2, 2), "SAME"), "valid": ((2, 2), (2, 2), "VALID"),
                                 "global": ((h, h), (1, 1), "VALID")}[variant]
        oh = -(-h // stride[0]) if padding == "SAME" else (h - filt[0]) // stride[0] + 1
        t = g.tensors[a]
        y = g.node(op, [a], (1, oh, oh, c), q=(t.scale, t.zero_point), filter=filt,
                   stride=stride, padding=padding, activation=activation)
        return _finish(g, g.conv(y, 8))
    assert op == "MEAN"
    axes = g.add(T((2,), "int32", data=np.array([1, 2], np.int32)))
    if variant == "keep_dims":
        y = g.node("MEAN", [a, axes], (1, 1, 1, c), keep_dims=True)
        return _finish(g, g.conv(y, 8))
    y = g.node("MEAN", [a, axes], (1, c), keep_dims=False)
    return _finish(g, g.fc(y, 8))


def _finish(g: _Graph, out: int) -> _Graph:
    g.out = out
    return g


CASES = [(op, dt, v) for dt in ("int8", "uint8")
         for op, v in (("ADD", ""), ("ADD", "second"), ("SUB", "first"), ("SUB", ""),
                       ("MUL", ""), ("MUL", "second"), ("AVERAGE_POOL_2D", ""),
                       ("AVERAGE_POOL_2D", "global"), ("MAX_POOL_2D", "valid"),
                       ("MAX_POOL_2D", ""), ("MEAN", ""), ("MEAN", "keep_dims"))]


def _graph_state():
    with rt.LOCK:
        graphs = [g for s in rt.DELEGATES.values() for g in s.graphs.values()]
        return max(graphs, key=lambda g: g.id)


def _run(content: bytes, feeds, options):
    it = dtpu.make_interpreter(content, options)
    it.allocate_tensors()
    outs = []
    for _ in range(2):          # the first invoke on the Python path, the second in C
        for d, x in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], x)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).copy())
    return it, outs


@pytest.mark.parametrize("op,dtype,variant", CASES)
def test_vector_node_inside_a_conv_chain_equals_tflite(op, dtype, variant):
    g = chain(op, dtype, variant, activation="relu" if variant == "" else "none")
    content = g.model([g.out])
    for seed in range(2):
        feeds = g.feeds()
        want = run_cpu(content, feeds)
        it, outs = _run(content, feeds, {"backend": "model"})
        graph = _graph_state()
        for got in outs:
            np.testing.assert_array_equal(got, want)
        if not PROVEN:   # (MEAN's FULLY_CONNECTED, alone then, stays on the CPU too)
            [r] = [r for r in graph.rejected if r["op"] == op]
            assert "XNNPACK" in r["reason"], r
            assert {r["op"] for r in graph.rejected} <= {op, "FULLY_CONNECTED"}
            continue
        assert len(graph.kernels) == 1 and graph.rejected == [], graph.rejected
        report = dtpu.last_report()
        vec = [n for n in report.nodes if n.op in VEC_OPS]
        assert [n.op for n in vec] == [op.lower()], [n.op for n in report.nodes]
        assert vec[0].hw["cycles"] and vec[0].hw["cycles"] > 0
        assert report.path == "lists"
        del it


@pytest.mark.skipif(not PROVEN, reason=f"{RUNTIME}: vector nodes stay on the CPU (XNNPACK)")
def test_the_second_invoke_runs_in_c():
    g = chain("ADD", "int8")
    content = g.model([g.out])
    it, _ = _run(content, g.feeds(), {"backend": "model"})
    graph = _graph_state()
    assert graph.kernels[0].cpath is not None, "the partition was not armed for the C path"
    del it


def test_a_lone_vector_node_stays_on_the_cpu():
    """One ADD between the graph's inputs and output: claimed, it would be a partition of its
    own (a doorbell and copies for nothing)."""
    x = T((1, 4, 4, 8), "int8", 0.05, 3)
    content = one_op_model("ADD", [x, T((1, 4, 4, 8), "int8", 0.03, -2)],
                           T((1, 4, 4, 8), "int8", 0.07, 1))
    it = dtpu.make_interpreter(content, {"backend": "model"})
    it.allocate_tensors()
    graph = _graph_state()
    assert graph.kernels == []
    [r] = graph.rejected
    assert r["op"] == "ADD" and ("would join no convolution" if PROVEN else "XNNPACK") in r["reason"], r
    del it


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The emulated PYNQ-Z2 with the int16 overlay (hw/overlays OVERLAY=int16: the 2.0 design
    without the vector unit; the default int8 overlay has it)."""
    from tests.delegate_util import emulated_board

    for _ in emulated_board(tmp_path_factory.mktemp("overlay")):
        from dtpu.board import emulate

        yield emulate.write_design(tmp_path_factory.mktemp("overlay_int16"), build="int16")


@pytest.mark.parametrize("backend", ["reference", "pynq"])
def test_targets_without_the_unit_keep_the_nodes_on_the_cpu(backend, request):
    options = {"backend": backend}
    if backend == "pynq":
        options["bitstream"] = str(request.getfixturevalue("board"))
    g = chain("ADD", "int8")
    content = g.model([g.out])
    feeds = g.feeds()
    want = run_cpu(content, feeds)
    it, outs = _run(content, feeds, options)
    graph = _graph_state()
    assert [(r["op"], r["reason"]) for r in graph.rejected] == [("ADD", NO_VECTOR_UNIT)]
    assert len(graph.kernels) == 2
    for got in outs:
        np.testing.assert_array_equal(got, want)
    del it


ZOO = Path(__file__).parent / "models" / "zoo"
#: zoo models with vector nodes that join convolutions and ones that would not (EfficientNet's
#: swish MUL and squeeze-excite MEAN between LOGISTICs and run-time RESHAPEs)
PARTITIONED = ("mobilenet_like__int8", "dscnn_like__uint8", "mobilenet_v1_025_96__int8",
               "mobilenet_v2_224__int8", "resnet18_half_224__int8", "efficientnet_b0_224__int8",
               "inception_like_224__int8")


def _prepared(name: str, backend: str):
    """(interpreter, its GraphState) after Prepare: what TFLite partitioned, nothing invoked."""
    from tests.test_reference import UNLOADABLE

    if any(name in models for (runtime, _), models in UNLOADABLE.items() if runtime == RUNTIME):
        pytest.skip(f"{RUNTIME} cannot load {name} (tests/test_reference.py's UNLOADABLE)")
    it = dtpu.make_interpreter(str(ZOO / f"{name}.tflite"), {"backend": backend})
    it.allocate_tensors()
    return it, _graph_state()


@pytest.mark.parametrize("name", PARTITIONED)
def test_partitions_are_the_ones_tflite_makes(name):
    """The claim's view of TFLite's partitioning (delegate/partitioning.py) is TFLite's own:
    the kernels TFLite created hold exactly the node sets it predicts, and none of them is
    made of vector nodes alone."""
    from dtpu.delegate.graph import NodeInfo
    from dtpu.delegate.partitioning import partitions
    from dtpu.tflite import Interpreter

    cpu = Interpreter(str(ZOO / f"{name}.tflite"))
    nodes = [NodeInfo(d["index"], -1, 1, tuple(int(i) for i in d["inputs"]),
                      tuple(int(o) for o in d["outputs"]), None)
             for d in cpu._get_ops_details()]
    it, graph = _prepared(name, "model")
    made = sorted(sorted(s.node.index for s in k.steps) for k in graph.kernels)
    assert made == sorted(sorted(p) for p in partitions(nodes, graph.claimed))
    for k in graph.kernels:
        assert {s.kind for s in k.steps} - {"vec", "view"}, [s.node.op for s in k.steps]
    del it


@pytest.mark.parametrize("name", PARTITIONED)
def test_the_vector_unit_never_adds_a_partition(name):
    it, graph = _prepared(name, "reference")       # the same claim rules, no vector unit
    without = len(graph.kernels)
    del it
    it, graph = _prepared(name, "model")
    assert len(graph.kernels) <= without
    del it


def test_vector_off_gives_the_partitions_of_a_target_without_the_unit():
    g = chain("ADD", "int8")
    content = g.model([g.out])
    feeds = g.feeds()
    want = run_cpu(content, feeds)
    it, outs = _run(content, feeds, {"backend": "model", "vector": "off"})
    graph = _graph_state()
    [r] = graph.rejected
    assert r["op"] == "ADD" and "vector=on" in r["reason"], r
    assert len(graph.kernels) == 2
    for got in outs:
        np.testing.assert_array_equal(got, want)
    del it


@pytest.mark.skipif(not PROVEN, reason=f"{RUNTIME}: vector nodes stay on the CPU (XNNPACK)")
def test_an_average_pool_beyond_the_units_window_stays_on_the_cpu():
    """conv -> global AVERAGE_POOL_2D of 17 x 17 = 289 taps -> conv: more than VEC_AVG_AREA
    (the unit's reciprocals are exact up to 256 taps), so the pool stays on the CPU with the
    reason naming the limit and the outputs equal TFLite's; the same graph with MAX_POOL_2D,
    which has no such limit, runs the pool on the unit."""
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        g = _Graph("int8", ("limit", op))
        h, c = 17, 16
        a = g.conv(g.input((1, h, h, c)), c)
        t = g.tensors[a]
        y = g.node(op, [a], (1, 1, 1, c), q=(t.scale, t.zero_point), filter=(h, h),
                   stride=(1, 1), padding="VALID")
        g.out = g.conv(y, 8)
        content = g.model([g.out])
        feeds = g.feeds()
        want = run_cpu(content, feeds)
        it, outs = _run(content, feeds, {"backend": "model"})
        graph = _graph_state()
        for got in outs:
            np.testing.assert_array_equal(got, want)
        pooled = [r for r in graph.rejected if r["op"] == op]
        if op == "AVERAGE_POOL_2D":
            assert len(pooled) == 1 and "VEC_AVG_AREA = 256" in pooled[0]["reason"], \
                graph.rejected
        else:
            assert pooled == [] and len(graph.kernels) == 1, graph.rejected
        del it
