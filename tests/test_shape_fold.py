"""Issue #25, "whole models in one partition": SHAPE -> STRIDED_SLICE -> PACK chains evaluated
at the partition's Prepare, their RESHAPE a view (dtpu.shape_fold). The evaluator is
checked against TFLite's own kernels on one-op graphs; the delegate on a squeeze-excite-like
graph (bit-exact, one partition, after a batch resize too) and on graphs where a CPU node
reads the chain's value (it stays on the CPU, with the reason)."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu import shape_fold
from dtpu.delegate.graph import NodeInfo
from dtpu.tflite_writer import GraphWriter, Tensor
from tests.delegate_util import dtpu_so, run, tfl  # noqa: F401
from dtpu.delegate.vector_claim import PROVEN_RUNTIMES
from dtpu.tflite import RUNTIME

#: graphs whose MEAN, MUL, LOGISTIC... the CPU computes under LiteRT go through XNNPACK in the
#: default interpreter, whose rounding is not TFLite 2.14's builtin kernels' (a MUL off by one:
#: dtpu.delegate.vector_claim.PROVEN_RUNTIMES); the oracle here is the builtin kernels
BUILTIN_ORACLE = pytest.mark.skipif(RUNTIME not in PROVEN_RUNTIMES,
                                    reason=f"{RUNTIME}: XNNPACK computes the CPU's side")

SHAPE_IN = (2, 3, 4, 5)


def _slice_graph(begin, end, strides, masks) -> bytes:
    """x (int8, SHAPE_IN) -> SHAPE -> STRIDED_SLICE -> output."""
    w = GraphWriter()
    x = w.tensor(Tensor(SHAPE_IN, "int8", 0.1, 0, name="x"))
    s = w.tensor(Tensor((4,), "int32", name="shape"))
    b, e, st = (w.const(n, np.array([v])) for n, v in (("b", begin), ("e", end), ("s", strides)))
    out_shape = () if masks.get("shrink_axis_mask") else (0,)
    y = w.tensor(Tensor(out_shape, "int32", name="sliced"))
    w.op("SHAPE", [x], [s])
    w.op("STRIDED_SLICE", [s, b, e, st], [y], **masks)
    return w.to_bytes([x], [y])


SLICES = [(0, 1, 1, {"shrink_axis_mask": 1}), (-1, 0, 1, {"shrink_axis_mask": 1}),
          (1, 3, 1, {}), (0, 0, 1, {"end_mask": 1}), (-3, -1, 1, {}), (3, 0, -1, {}),
          (0, 0, -1, {"begin_mask": 1, "end_mask": 1}), (0, 4, 2, {}), (1, 0, 2, {"end_mask": 1}),
          (-2, 0, -2, {"end_mask": 1}), (5, 9, 1, {}), (-9, 2, 1, {}), (2, 2, 1, {})]


@pytest.mark.parametrize("begin, end, stride, masks", SLICES)
def test_strided_slice_of_a_shape_is_tflites(begin, end, stride, masks, tfl, tmp_path):
    """evaluate() against the interpreter's own SHAPE and STRIDED_SLICE kernels."""
    path = tmp_path / "slice.tflite"
    path.write_bytes(_slice_graph(begin, end, stride, masks))
    it = tfl.Interpreter(model_path=str(path))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.zeros(SHAPE_IN, np.int8))
    it.invoke()
    out = it.get_output_details()[0]["index"]
    shape = tuple(it._get_tensor_details(out, 0)["shape"])   # get_tensor refuses empty ones
    want = np.zeros(shape, np.int32) if 0 in shape else it.get_tensor(out)
    params = {k: masks.get(k, 0) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                           "new_axis_mask", "shrink_axis_mask")}
    consts = {1: np.array([SHAPE_IN], np.int32).reshape(-1), 2: np.array([begin], np.int32),
              3: np.array([end], np.int32), 4: np.array([stride], np.int32)}
    node = NodeInfo(1, shape_fold.STRIDED_SLICE, 1, (1, 2, 3, 4), (5,), dict(params, offset=False))
    got = shape_fold.evaluate(node, consts.get, lambda t: (), "int32")
    assert got.dtype == np.int32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_what_is_not_evaluated_says_why():
    consts = {1: np.array([1, 8], np.int32), 2: np.array([0], np.int32),
              3: np.array([1], np.int32), 4: np.array([1], np.int32)}
    base = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0,
            "shrink_axis_mask": 1, "offset": False}

    def node(**change):
        return NodeInfo(1, shape_fold.STRIDED_SLICE, 1, (1, 2, 3, 4), (5,), dict(base, **change))

    assert shape_fold.evaluate(node(), consts.get, lambda t: (), "int32") == 1
    for change, reason in [({"ellipsis_mask": 1}, "ellipsis_mask 1"), ({"offset": True}, "offset"),
                           ({"new_axis_mask": 1}, "new_axis_mask")]:
        with pytest.raises(shape_fold.NotFolded, match=reason):
            shape_fold.evaluate(node(**change), consts.get, lambda t: (), "int32")
    with pytest.raises(shape_fold.NotFolded, match="computed at run time"):
        shape_fold.evaluate(node(), {**consts, 1: None}.get, lambda t: (), "int32")
    with pytest.raises(shape_fold.NotFolded, match="int64, not int32"):
        shape_fold.evaluate(node(), consts.get, lambda t: (), "int64")
    pack = NodeInfo(2, shape_fold.PACK, 1, (2, 3), (6,), {"values_count": 2, "axis": 0})
    np.testing.assert_array_equal(
        shape_fold.evaluate(pack, consts.get, lambda t: (), "int32"), [[0], [1]])
    assert shape_fold.reshaped(np.array([2, -1, 1, 4]), 24) == (2, 3, 1, 4)
    for bad, reason in [([-1, -1], "at most one -1"), ([5, -1], "does not divide"),
                        ([2, 2], "holds 4 elements")]:
        with pytest.raises(shape_fold.NotFolded, match=reason):
            shape_fold.reshaped(np.array(bad), 24)


def _se_graph(shape_output: str = "", mul: bool = True) -> bytes:
    """A squeeze-excite head as Keras writes it: CONV 1x1 -> MEAN (H, W) -> SHAPE ->
    STRIDED_SLICE [0] -> PACK (n, 1, 1, C) -> RESHAPE -> CONV 1x1 -> MUL with the first
    convolution's output. `shape_output`: "pack", the PACK's value is a graph output too;
    "add", an int32 ADD (a CPU node) reads it and is one; `mul`: without the MUL the graph ends at the gate (the unit's broadcast takes
    batch 1 only)."""
    rng = np.random.default_rng(7)
    w = GraphWriter()
    c = 8
    x = w.tensor(Tensor((1, 6, 6, 4), "int8", 0.05, -3, name="x"))
    w1 = w.const("w1", rng.integers(-100, 100, (c, 1, 1, 4)), "int8", scale=0.01, zero_point=0)
    b1 = w.const("b1", rng.integers(-500, 500, c))
    h = w.tensor(Tensor((1, 6, 6, c), "int8", 0.04, 2, name="h"))
    w.op("CONV_2D", [x, w1, b1], [h], padding="VALID")
    axes = w.const("axes", np.array([1, 2]))
    m = w.tensor(Tensor((1, c), "int8", 0.03, -1, name="mean"))
    w.op("MEAN", [h, axes], [m])
    s = w.tensor(Tensor((2,), "int32", name="shape"))
    w.op("SHAPE", [m], [s])
    n = w.tensor(Tensor((), "int32", name="n"))
    zero, one = w.const("zero", np.array([0])), w.const("one", np.array([1]))
    w.op("STRIDED_SLICE", [s, zero, one, one], [n], shrink_axis_mask=1)
    # scalars (GraphWriter.const makes arrays at least 1-D)
    ones, cc = (w.tensor(Tensor((), "int32", data=np.array(v, np.int32), name=f"dim{v}"))
                for v in (1, c))
    p = w.tensor(Tensor((4,), "int32", name="packed"))
    w.op("PACK", [n, ones, ones, cc], [p], values_count=4)
    r = w.tensor(Tensor((1, 1, 1, c), "int8", 0.03, -1, name="reshaped"))
    w.op("RESHAPE", [m, p], [r], new_shape=[1, 1, 1, c])
    w2 = w.const("w2", rng.integers(-100, 100, (c, 1, 1, c)), "int8", scale=0.01, zero_point=0)
    b2 = w.const("b2", rng.integers(-500, 500, c))
    g = w.tensor(Tensor((1, 1, 1, c), "int8", 0.02, 0, name="gate"))
    w.op("CONV_2D", [r, w2, b2], [g], padding="VALID")
    y = g
    if mul:
        y = w.tensor(Tensor((1, 6, 6, c), "int8", 0.05, 1, name="y"))
        w.op("MUL", [h, g], [y])
    outputs = [y]
    if shape_output == "pack":
        outputs.append(p)
    elif shape_output == "add":
        q = w.tensor(Tensor((4,), "int32", name="shape_plus_1"))
        w.op("ADD", [p, w.const("ones", np.ones(4))], [q])
        outputs.append(q)
    return w.to_bytes([x], outputs)


def _delegated(path, tfl, batch=1):
    import dtpu

    cpu = tfl.Interpreter(model_path=str(path))
    ours = dtpu.make_interpreter(path, {"backend": "model"})
    for it in (cpu, ours):
        if batch != 1:
            it.resize_tensor_input(it.get_input_details()[0]["index"], [batch, 6, 6, 4])
        it.allocate_tensors()
    for seed in (0, 1):
        x = np.random.default_rng(seed).integers(-128, 128, (batch, 6, 6, 4)).astype(np.int8)
        for got, want in zip(run(ours, [x]), run(cpu, [x])):
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed} batch {batch}")
    return dtpu.last_report()


@BUILTIN_ORACLE
@pytest.mark.parametrize("batch", [1, 2])
def test_a_squeeze_excite_head_is_one_partition(batch, dtpu_so, tfl, tmp_path):
    """The chain evaluated at Prepare from the current shapes: after a resize to batch 2 the
    RESHAPE's output is (2, 1, 1, C), as TFLite's kernels compute it at Eval."""
    path = tmp_path / "se.tflite"
    path.write_bytes(_se_graph(mul=batch == 1))
    report = _delegated(path, tfl, batch)
    assert report.partitions == 1 and report.rejected == [], report.rejected
    assert [n.op for n in report.nodes] == ["conv2d", "mean", "conv2d", "mul"][:4 - (batch > 1)]
    assert report.nodes[2].input_shape[0] == batch


@BUILTIN_ORACLE
def test_a_shape_value_the_cpu_reads_stays_on_the_cpu(dtpu_so, tfl, tmp_path):
    """An int32 ADD (on the CPU) reads the PACK's value: the chain and its RESHAPE stay on the
    CPU, each saying why; the outputs are the CPU's."""
    path = tmp_path / "se_add.tflite"
    path.write_bytes(_se_graph(shape_output="add"))
    report = _delegated(path, tfl)
    reasons = {r["op"]: r["reason"] for r in report.rejected}
    assert reasons["PACK"] == ("not evaluated at Prepare: its value is read by ADD node 8, "
                               "which stays on the CPU")
    assert reasons["STRIDED_SLICE"].startswith("not evaluated at Prepare: its value is read by "
                                               "PACK")
    assert reasons["RESHAPE"].startswith("not a view: its shape 'packed' is computed at run time")


@BUILTIN_ORACLE
def test_a_shape_value_leaving_the_partition_is_written_by_the_host(dtpu_so, tfl, tmp_path):
    """The PACK's value a graph output: TFLite makes it an output of the partition, and the
    host writes the value evaluated at Prepare (equal to the CPU's)."""
    path = tmp_path / "se_out.tflite"
    path.write_bytes(_se_graph(shape_output="pack"))
    report = _delegated(path, tfl)
    assert report.partitions == 1 and report.rejected == [], report.rejected
