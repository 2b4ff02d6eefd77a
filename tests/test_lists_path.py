"""The delegate on contract 2.0: each delegated partition runs as one command list.

What must hold (issue 14): the path is picked from the core's VERSION (backend=model and the
emulated board are 2.0 cores, backend=rtl's Verilog is 1.2 until issue 15), outputs stay
bit-exact with TFLite's CPU kernels, and an invoke costs the host O(1) operations per partition
whatever the model's size: 5 register reads, 3 writes, 1 doorbell, no DMA start, no transform.
The job-by-job path (path=jobs) stays available and exact, and the two can share one core.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.delegate_util import assert_matches, dtpu_so, emulated_board, run, tfl  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "models" / "zoo"
VWW = ZOO / "mobilenet_v1_025_96__int8.tflite"
RESNET8 = ROOT / "tests" / "isro" / "resnet8_int8.tflite"
VECTOR_NODES = {"add", "sub", "mul", "average_pool_2d", "max_pool_2d", "mean"}   # NodeRecord.op
SMALL = ["mobilenet_like__int8", "mobilenet_like__uint8", "mobilenet_like__int16x8",
         "mobilenet_like__int8_per_tensor", "dscnn_like__int8", "dscnn_like__uint8"]
PER_PARTITION = {"mmio_reads": 5, "mmio_writes": 3, "doorbells": 1, "dma_starts": 0,
                 "transforms": 0}


def _inputs(interpreter, seed):
    rng = np.random.default_rng(seed)
    out = []
    for d in interpreter.get_input_details():
        info = np.iinfo(d["dtype"])
        out.append(rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"]))
    return out


def _compare(path, options, tfl, invokes=2):
    import dtpu

    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, options)
    ours.allocate_tensors()
    for seed in range(invokes):
        x = _inputs(ours, seed)
        for got, want in zip(run(ours, x), run(cpu, x)):
            assert_matches(got, want, f"{path.name} seed {seed} {options}")
    return dtpu.last_report()


def _per_partition(report):
    assert not report.first, "the steady-state invoke was expected"
    kernels = report.kernels
    assert kernels >= 1
    h = report.host
    got = {k: h[k] for k in PER_PARTITION}
    assert got == {k: v * kernels for k, v in PER_PARTITION.items()}, (got, kernels)
    assert h["us"] is not None and h["us"] >= 0


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    """The emulated board with the contract-2.0 design (the default, make -C hw/overlays: DTPU
    master on HP0, no DMAs), written explicitly; the 1.2 design (make CONTRACT=1) is written
    where a test needs it."""
    for _ in emulated_board(tmp_path_factory.mktemp("overlay12")):
        from dtpu.board import emulate

        yield emulate.write_design(tmp_path_factory.mktemp("overlay2"), contract=2)


@pytest.mark.parametrize("name", SMALL)
def test_small_models_run_as_lists_bit_exact_with_constant_host_work(name, dtpu_so, tfl):
    report = _compare(ZOO / f"{name}.tflite", {"backend": "model", "path": "lists"}, tfl)
    _per_partition(report)
    hw = report.hw
    assert hw["cycles"] > 0 and hw["idle_cycles"] is not None and hw["idle_cycles"] >= 0
    # the nodes' shares add up to the lists' CL_CYCLES; the golden model keeps the split
    assert sum(n.hw["cycles"] for n in report.nodes) == hw["cycles"]
    # (the vector unit's nodes multiply-accumulate nothing on the MXU)
    assert all(n.hw["cycles"] and (n.hw["macs"] or n.op in VECTOR_NODES) for n in report.nodes)


@pytest.mark.parametrize("path", [VWW, RESNET8], ids=["vww96", "resnet8"])
def test_mlperf_tiny_nets_on_model_and_emulated_board(path, emu, dtpu_so, tfl):
    whole = _compare(path, {"backend": "model"}, tfl)
    _per_partition(whole)
    # with the vector unit, ResNet-8's residual ADDs and its pool, VWW's MEAN (keep_dims) and
    # the shape chain of its head (evaluated at Prepare) join the convolutions: one partition,
    # SOFTMAX alone on the CPU (tests/test_one_kick.py: every canonical model)
    assert whole.kernels == 1 and {r["op"] for r in whole.rejected} <= {"SOFTMAX"}
    # the convolutions alone (ops listed) on both: the same lists, the vector unit's part aside
    # (tests/test_one_kick.py runs the whole models on the board)
    ops = {"ops": "conv2d,depthwise_conv2d"}
    model = _compare(path, {"backend": "model", **ops}, tfl)
    board = _compare(path, {"backend": "pynq", "bitstream": str(emu), **ops}, tfl)
    for r in (model, board):
        _per_partition(r)
    # the same lists on both: same cycles, idle and host operations
    assert board.hw["cycles"] == model.hw["cycles"] and board.hw["idle_cycles"] == model.hw["idle_cycles"]
    assert board.kernels == model.kernels
    util = sum(n.hw["macs"] for n in model.nodes) / (model.hw["cycles"] * 64)
    assert util > 0.5, util


def test_path_jobs_is_the_job_by_job_protocol(dtpu_so, tfl):
    report = _compare(ZOO / "mobilenet_like__int8.tflite", {"backend": "model", "path": "jobs"}, tfl)
    h = report.host
    # one START per job, streams moved by DMA transfers, host layout steps between jobs
    assert h["doorbells"] > report.kernels and h["dma_starts"] > 0 and h["transforms"] > 0


def test_path_follows_the_cores_version(emu, dtpu_so, tfl, tmp_path):
    """A 1.2 bitstream (the default design: DMAs, a 1.2 core) runs job by job under path=auto
    and refuses path=lists at load; the 2.0 design has no DMAs and refuses path=jobs."""
    import dtpu
    from dtpu.board import emulate

    bit12 = emulate.write_design(tmp_path, contract=1)
    report = _compare(ZOO / "mobilenet_like__int8.tflite", {"backend": "pynq", "bitstream": str(bit12)}, tfl)
    assert report.host["doorbells"] > report.kernels and report.host["dma_starts"] > 0
    with pytest.raises(ValueError, match=r"path=lists.*contract 1.2"):
        dtpu.make_interpreter(ZOO / "mobilenet_like__int8.tflite",
                              {"backend": "pynq", "bitstream": str(bit12), "path": "lists"})
    with pytest.raises(ValueError, match=r"path=jobs.*no stream DMAs"):
        dtpu.make_interpreter(ZOO / "mobilenet_like__int8.tflite",
                              {"backend": "pynq", "bitstream": str(emu), "path": "jobs"})


def test_bad_path_option_names_it(dtpu_so):
    import dtpu

    with pytest.raises(ValueError, match=r"option 'path'='fast'.*auto, lists or jobs"):
        dtpu.make_interpreter(ZOO / "mobilenet_like__int8.tflite", {"path": "fast"})


def test_forced_precision_refuses_lists_and_auto_runs_jobs(dtpu_so, tfl):
    import dtpu

    with pytest.raises(ValueError, match=r"path=lists with precision=int16"):
        dtpu.make_interpreter(ZOO / "mobilenet_like__int8.tflite",
                              {"backend": "model", "precision": "int16", "path": "lists"})
    report = _compare(ZOO / "mobilenet_like__int8.tflite", {"backend": "model", "precision": "int16"}, tfl)
    assert report.host["dma_starts"] > 0    # job by job


def test_two_graphs_share_one_core(dtpu_so, tfl):
    """Two interpreters on one delegate (one backend, one core): each program's prologue runs
    again after the other graph's lists wrote the on-chip memories."""
    import dtpu
    from dtpu import tflite

    a_path, b_path = ZOO / "mobilenet_like__int8.tflite", ZOO / "dscnn_like__int8.tflite"
    delegate = dtpu.load_delegate({"backend": "model"})
    a = tflite.Interpreter(model_path=str(a_path), experimental_delegates=[delegate])
    b = tflite.Interpreter(model_path=str(b_path), experimental_delegates=[delegate])
    cpus = {}
    for p in (a_path, b_path):
        cpus[p] = tfl.Interpreter(model_path=str(p))
        cpus[p].allocate_tensors()
    a.allocate_tensors()
    b.allocate_tensors()
    for seed in range(3):
        for it, p in ((a, a_path), (b, b_path)):
            x = _inputs(it, seed)
            for got, want in zip(run(it, x), run(cpus[p], x)):
                assert_matches(got, want, f"{p.name} seed {seed}")
            r = dtpu.last_report()
            if seed:   # the other graph ran in between: this one's prologue runs again
                assert r.host["doorbells"] == r.kernels + 1, (p.name, r.host)


def _node(seed):
    from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant

    rng = np.random.default_rng(seed)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 6, 6, 16), (24, 3, 3, 16), padding=Padding.SAME,
                    input_q=Quant((0.02,), (-3,)),
                    filter_q=Quant(tuple(rng.uniform(0.005, 0.02, 24)), (0,) * 24),
                    output_q=Quant((0.4,), (5,)))
    w = rng.integers(-127, 128, spec.filter_shape).astype(np.int8)
    b = rng.integers(-2000, 2000, 24).astype(np.int32)
    return spec, w, b


def test_jobs_after_lists_reload_the_resident_weights():
    """The backend API: a node prepared for the 1.2 path, a command list that overwrites the
    on-chip memories, then the node again: it must reload its weights, not use the list's."""
    from dtpu.backends.base import Probes
    from dtpu.backends.model import ModelBackend
    from dtpu.backends.reference import ReferenceBackend
    from dtpu.hw.listcompiler import NodeIn

    be, ref = ModelBackend({}), ReferenceBackend({})
    spec, w, b = _node(1)
    other, ow, ob = _node(2)
    handle = be.prepare(spec, w, b)
    x = np.random.default_rng(0).integers(-128, 128, spec.input_shape).astype(np.int8)
    want, _ = ref.invoke(ref.prepare(spec, w, b), x, Probes())
    ox = np.random.default_rng(1).integers(-128, 128, other.input_shape).astype(np.int8)
    owant, _ = ref.invoke(ref.prepare(other, ow, ob), ox, Probes())
    y1, _ = be.invoke(handle, x, Probes())
    prog = be.prepare_partitions([[NodeIn(other, ow, ob)]])
    out = np.zeros(other.output_shape, np.int8)
    be.invoke_partition(prog, 0, [ox], {0: out}, Probes())
    np.testing.assert_array_equal(out, owant)
    y2, _ = be.invoke(handle, x, Probes())
    np.testing.assert_array_equal(y1, want)
    np.testing.assert_array_equal(y2, want)
    # and the list again after the jobs: its prologue runs again (prologue + list)
    counters = be.invoke_partition(prog, 0, [ox], {0: out}, Probes())
    np.testing.assert_array_equal(out, owant)
    assert counters[-1].host["doorbells"] == 2
    be.release_partitions(prog)
    be.close()


def test_the_emulated_board_sees_one_doorbell_per_partition_and_no_dma(emu, dtpu_so, tfl):
    """What the board's bus carried during one steady-state invoke: the DTPU's registers only
    (CL_BASE, DOORBELL, CL_STATUS, counters, IRQ), no DMA engine touched."""
    from dtpu.board.emulate import current_board
    from dtpu.hw.listformat import Format

    import dtpu

    path = ZOO / "mobilenet_like__int8.tflite"
    it = dtpu.make_interpreter(path, {"backend": "pynq", "bitstream": str(emu)})
    it.allocate_tensors()
    run(it, _inputs(it, 0))
    board = current_board()
    board.trace.clear()
    run(it, _inputs(it, 1))
    r = dtpu.last_report()
    trace = [a for a in board.trace]
    fmt = Format()
    doorbell = fmt.reg_offset("DOORBELL")
    assert [a.device for a in trace if a.op == "dma" or a.device.startswith("dma")] == []
    dt = [a for a in trace if a.device == "dtpu"]
    assert sum(1 for a in dt if a.op == "w" and a.offset == doorbell) == r.kernels
    assert sum(1 for a in dt if a.op == "w") == 3 * r.kernels
    # the board's reads include nothing but the record's (the emulated completion is immediate)
    assert sum(1 for a in dt if a.op == "r") == 5 * r.kernels


def test_a_failing_list_raises_with_its_descriptor_and_the_next_invoke_runs():
    """A bus error response on the memory port (SLVERR injected on a partition's input buffer):
    the invoke raises DtpuListError naming the bit, the descriptor's offset and tag; CL_ERR is
    cleared, and once the fault is gone the same partition runs and is exact."""
    from dtpu.backends.base import Probes
    from dtpu.backends.model import ModelBackend
    from dtpu.backends.reference import ReferenceBackend
    from dtpu.driver.lists import DtpuListError
    from dtpu.hw.listcompiler import NodeIn

    be, ref = ModelBackend({}), ReferenceBackend({})
    spec, w, b = _node(3)
    prog = be.prepare_partitions([[NodeIn(spec, w, b)]])
    x = np.random.default_rng(0).integers(-128, 128, spec.input_shape).astype(np.int8)
    want, _ = ref.invoke(ref.prepare(spec, w, b), x, Probes())
    out = np.zeros(spec.output_shape, np.int8)
    inp = prog.program.partitions[0].input
    pool = be.transport.list_window.ddr
    pool.slverr.append((inp.addr, inp.addr + 8))
    with pytest.raises(DtpuListError, match=r"SLVERR.*tag 0x0 \(partition 0, node 0\)") as info:
        be.invoke_partition(prog, 0, [x], {0: out}, Probes())
    assert info.value.tag == 0 and info.value.err
    assert be.transport.read_reg(prog.fmt.reg_offset("CL_ERR")) == 0
    pool.slverr.clear()
    be.invoke_partition(prog, 0, [x], {0: out}, Probes())
    np.testing.assert_array_equal(out, want)


def test_ddr_pool_reuses_freed_ranges():
    """Re-prepared programs (resize, new graphs) free their images: the model's DDR must reuse
    the addresses, or a long-running process would leave the 32-bit address space."""
    from dtpu.hw.ddr import DdrFault, DdrPool

    pool = DdrPool()
    a = pool.alloc(3 << 20)
    b = pool.alloc(1 << 20)
    a.free()
    for _ in range(2000):    # 2000 x 3 MiB = 6 GB if nothing were reused
        c = pool.alloc(3 << 20)
        assert c.addr == a.addr
        c.free()
    assert pool.alloc(100).addr == a.addr and b.addr == a.addr + (3 << 20)
    with pytest.raises(DdrFault):
        pool.read(b.addr + (1 << 20), 8)


def test_a_graph_is_compiled_once_by_prepare(monkeypatch, dtpu_so, tfl):
    """TFLite's delegate contract: Prepare compiles the graph's partitions into one program
    (allocate_tensors), an invoke only runs it; the first invoke still reports the prepare
    time (first=True), the next ones do not."""
    import dtpu
    from dtpu.backends.model import ModelBackend

    calls = []
    compile_partitions = ModelBackend.prepare_partitions

    def counted(self, partitions, keep=None):
        calls.append(len(partitions))
        return compile_partitions(self, partitions, keep)

    monkeypatch.setattr(ModelBackend, "prepare_partitions", counted)
    it = dtpu.make_interpreter(ZOO / "mobilenet_like__int8.tflite", {"backend": "model"})
    it.allocate_tensors()
    assert len(calls) == 1 and calls[0] >= 1, calls
    for seed in range(2):
        run(it, _inputs(it, seed))
        assert dtpu.last_report().first == (seed == 0) and dtpu.last_report().path == "lists"
    assert len(calls) == 1, "an invoke compiled again"


def test_nodes_are_not_prepared_one_by_one_on_the_lists_path(monkeypatch, dtpu_so, tfl):
    """The claim only checks a node (Backend.check): no node is lowered, placed or loaded for
    the job path when the graph runs as command lists. A graph the compiler refuses runs job by
    job, its nodes prepared then, and stays exact."""
    import dtpu
    from dtpu.backends.model import ModelBackend
    from dtpu.hw.listformat import CmdlistError

    prepared = []
    prepare = ModelBackend.prepare

    def counted(self, spec, filters, bias):
        prepared.append(spec.name)
        return prepare(self, spec, filters, bias)

    monkeypatch.setattr(ModelBackend, "prepare", counted)
    path = ZOO / "mobilenet_like__int8.tflite"
    report = _compare(path, {"backend": "model"}, tfl)
    assert report.path == "lists" and prepared == []

    compile_lists = ModelBackend.prepare_partitions

    def refuse(self, partitions, keep=None):
        """The graph's lists refused; a vector node's list of its own, which is how the job
        path runs it (the unit has no job-by-job interface), compiled."""
        if any(nd.vec is None for part in partitions for nd in part):
            raise CmdlistError("refused by the test")
        return compile_lists(self, partitions, keep)

    monkeypatch.setattr(ModelBackend, "prepare_partitions", refuse)
    report = _compare(path, {"backend": "model"}, tfl)
    vec = [n for n in report.nodes if n.op == "mean"]
    assert report.path == "jobs" and len(vec) == 1 and vec[0].hw["cycles"] > 0
    assert len(prepared) == len(report.nodes) - len(vec) > 0
