"""Vector-unit nodes inside partitions (contract 2.1, golden model): zoo models split into fewer
partitions when ADD, MEAN, MAX_POOL_2D and AVERAGE_POOL_2D join them, and every node of every
partition, run as one command list from DDR, equals the interpreter's own tensor.

TFLite 2.14 runs ADD in place (its output takes an input's buffer) even with
experimental_preserve_all_tensors, so the interpreter's copy of such an input is the ADD's
result: those tensors are compared with the chain of reference kernels instead (dtpu.reference
for the convolutions, dtpu.reference.vector for the rest, both proven against the interpreter),
and a partition fed by one is checked against that chain alone."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu import reference
from dtpu.hw.config import get_config
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listcompiler import compile_program
from dtpu.hw.vec_compiler import graph_partitions_of, partition_tensors
from dtpu.tflite_model import partitions_of

ZOO = Path(__file__).parent / "models" / "zoo"
CFG = get_config()


def _interpreter_tensors(path: Path, seed: int = 3) -> tuple[dict[int, np.ndarray], set]:
    """Every tensor after one invoke on random input, and the tensors whose buffer a later
    tensor took over (in-place ADD: the interpreter no longer holds their values)."""
    from dtpu.tflite import Interpreter
    it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    for d in it.get_input_details():
        info = np.iinfo(d["dtype"])
        x = np.random.default_rng(seed).integers(info.min, info.max + 1, d["shape"])
        it.set_tensor(d["index"], x.astype(d["dtype"]))
    it.invoke()
    out, at = {}, {}
    for d in it.get_tensor_details():
        try:
            out[d["index"]] = it.get_tensor(d["index"]).copy()
            view = it.tensor(d["index"])()
        except ValueError:
            continue
        if view.size:
            at.setdefault(view.ctypes.data, []).append(d["index"])
    # the tensor written last keeps a shared buffer; a tensor is written by the op that outputs it
    order = {t: i for i, op in enumerate(it._get_ops_details()) for t in op["outputs"]}
    clobbered = set()
    for ts in at.values():
        if len(ts) > 1:
            last = max(ts, key=lambda t: order.get(t, -1))
            clobbered |= set(ts) - {last}
    return out, clobbered


def _chain(nodes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The partition's node outputs by the reference kernels, from its inputs."""
    from dtpu.reference import vector as rv
    outs: list[np.ndarray] = []

    def get(src):
        return inputs[-1 - src] if src < 0 else outs[src]

    for nd in nodes:
        if nd.vec is None:
            x = get(nd.src).reshape(nd.spec.input_shape)
            outs.append(reference.run(nd.spec, x, nd.filters, nd.bias).reshape(-1))
            continue
        v, dt = nd.vec, np.dtype(nd.vec.dtype)
        a = get(nd.src).reshape(v.a_shape)
        if v.binary:
            b = get(nd.src2).reshape(v.b_shape)
            if v.op == "MUL":
                y = rv.mul(a, b, rv.mul_params(*v.a_q, *v.b_q, *v.out_q, dt, v.activation))
            else:
                y = rv.add(a, b, rv.add_params(*v.a_q, *v.b_q, *v.out_q, dt, v.activation,
                                               sub=v.op == "SUB"))
        elif v.op == "MEAN":
            y = rv.mean_hw(a, rv.mean_params(*v.a_q, *v.out_q, v.a_shape[1] * v.a_shape[2], dt))
        else:
            lo, hi = rv.activation_bounds(v.activation, *v.out_q, dt)
            y = (rv.average_pool if v.op == "AVERAGE_POOL_2D" else rv.max_pool)(
                a, v.geometry(), lo, hi)
        outs.append(y.reshape(-1))
    return outs


def _check_model(name: str) -> tuple[int, int, list]:
    """Every partition of `name` with the vector unit run from DDR against the interpreter;
    (partitions without the vector unit, with it, the vector nodes' opcodes)."""
    path = ZOO / f"{name}.tflite"
    parts = graph_partitions_of(path, CFG)
    io = partition_tensors(path, CFG)
    ref, clobbered = _interpreter_tensors(path)
    prog = compile_program(parts, CFG)
    ddr = Ddr(prog.base, prog.size, prog.image)
    ex = Executor(Core(CFG), vector_unit=True)
    assert ex.run(ddr, prog.prologue_addr).error == 0
    vec_ops = []
    checked = 0
    for part, nodes, (ins, outs) in zip(prog.partitions, parts, io):
        if any(t in clobbered for t in ins):
            continue        # its input's values are gone from the interpreter
        for buf, t in zip(part.inputs, ins):
            ddr.write(buf.addr, ref[t].reshape(-1).view(np.uint8))
        r = ex.run(ddr, part.list_addr)
        assert r.error == 0, r.message
        chain = _chain(nodes, [ref[t] for t in ins])
        for buf, t, nd, want in zip(part.outputs, outs, nodes, chain):
            got = ddr.read(buf.addr, buf.nbytes).view(buf.dtype)
            np.testing.assert_array_equal(got, want, err_msg=f"{name}: {nd.name} (reference)")
            if t not in clobbered:
                np.testing.assert_array_equal(got, ref[t].reshape(-1), err_msg=f"{name}: {nd.name}")
                checked += 1
            if nd.vec is not None:
                vec_ops.append(nd.vec.op)
    assert checked >= sum(len(p) for p in parts) // 2, "too few nodes checked against TFLite"
    return len(partitions_of(path, CFG)), len(parts), vec_ops


def test_dscnn_average_pool_joins_its_partition_bit_exact():
    before, after, ops = _check_model("dscnn_like__int8")
    assert ops == ["AVERAGE_POOL_2D"] and after == before   # the pool joins; RESHAPE still cuts before FC


def test_uint8_average_pool_joins_its_partition_bit_exact():
    _, _, ops = _check_model("dscnn_like__uint8")
    assert ops == ["AVERAGE_POOL_2D"]


def test_mobilenet_like_mean_joins_its_partition_bit_exact():
    before, after, ops = _check_model("mobilenet_like__int8")
    assert ops == ["MEAN"] and (before, after) == (2, 1)   # MEAN joined the convolutions and the FC


def test_without_the_vector_unit_the_partitions_are_the_convolution_chains():
    path = ZOO / "mobilenet_like__int8.tflite"
    parts = graph_partitions_of(path, CFG, vector_unit=False)
    assert [len(p) for p in parts] == [len(p) for p in partitions_of(path, CFG)]
    assert all(nd.vec is None for p in parts for nd in p)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v2_224__int8", "resnet18_half_224__int8"])
def test_imagenet_nets_fewer_partitions_bit_exact(name):
    before, after, ops = _check_model(name)
    assert after < before
    assert "ADD" in ops and "MEAN" in ops
