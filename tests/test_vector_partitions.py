"""Vector-unit nodes inside partitions (contract 2.1, golden model): zoo models split into fewer
partitions when ADD, MEAN, MAX_POOL_2D and AVERAGE_POOL_2D join them, and every node of every
partition, run as one command list from DDR, equals the interpreter's own tensor."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu.hw.config import get_config
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listcompiler import compile_program
from dtpu.hw.vec_compiler import graph_partitions_of, partition_tensors
from dtpu.tflite_model import partitions_of

ZOO = Path(__file__).parent / "models" / "zoo"
CFG = get_config()


def _interpreter_tensors(path: Path, seed: int = 3) -> dict[int, np.ndarray]:
    from dtpu.tflite import Interpreter
    it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    for d in it.get_input_details():
        info = np.iinfo(d["dtype"])
        x = np.random.default_rng(seed).integers(info.min, info.max + 1, d["shape"])
        it.set_tensor(d["index"], x.astype(d["dtype"]))
    it.invoke()
    out = {}
    for d in it.get_tensor_details():
        try:
            out[d["index"]] = it.get_tensor(d["index"]).copy()
        except ValueError:
            pass
    return out


def _check_model(name: str) -> tuple[int, int, list]:
    """Every partition of `name` with the vector unit run from DDR against the interpreter;
    (partitions without the vector unit, with it, the vector nodes' opcodes)."""
    path = ZOO / f"{name}.tflite"
    parts = graph_partitions_of(path, CFG)
    io = partition_tensors(path, CFG)
    ref = _interpreter_tensors(path)
    prog = compile_program(parts, CFG)
    ddr = Ddr(prog.base, prog.size, prog.image)
    ex = Executor(Core(CFG), vector_unit=True)
    assert ex.run(ddr, prog.prologue_addr).error == 0
    vec_ops = []
    for part, nodes, (ins, outs) in zip(prog.partitions, parts, io):
        for buf, t in zip(part.inputs, ins):
            ddr.write(buf.addr, ref[t].reshape(-1).view(np.uint8))
        r = ex.run(ddr, part.list_addr)
        assert r.error == 0, r.message
        for i, (buf, t, nd) in enumerate(zip(part.outputs, outs, nodes)):
            got = ddr.read(buf.addr, buf.nbytes).view(buf.dtype)
            np.testing.assert_array_equal(got, ref[t].reshape(-1), err_msg=f"{name}: {nd.name}")
            if nd.vec is not None:
                vec_ops.append(nd.vec.op)
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
