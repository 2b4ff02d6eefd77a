"""Issue 27.2, no uncached reads on the hot path: on the board the command-list buffer is
cacheable (pynq.allocate(cacheable=True)), an invoke flushes exactly its inputs' bytes before the
doorbell and invalidates exactly its outputs' bytes after the completion. The emulated board's
stale-cache model (dtpu.board.emulate.board.Ddr) makes each missing step fail: the device reading
bytes the host did not flush raises, the host reading bytes it did not invalidate gets the
previous invoke's outputs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.delegate_util import dtpu_so, emulated_board, tfl  # noqa: F401
from tests.test_lists_path import _node


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    yield from emulated_board(tmp_path_factory.mktemp("overlay"))


@pytest.fixture
def board(emu):
    """A pynq backend on the emulated 2.0 board with one compiled partition of one conv, and the
    reference outputs of two different inputs."""
    from dtpu.backends import get
    from dtpu.backends.base import Probes
    from dtpu.backends.reference import ReferenceBackend
    from dtpu.hw.listcompiler import NodeIn

    be, ref = get("pynq")({"bitstream": str(emu)}), ReferenceBackend({})
    spec, w, b = _node(4)
    prog = be.prepare_partitions([[NodeIn(spec, w, b)]])
    rng = np.random.default_rng(7)
    xs = [rng.integers(-128, 128, spec.input_shape).astype(np.int8) for _ in range(2)]
    wants = [ref.invoke(ref.prepare(spec, w, b), x, Probes())[0] for x in xs]
    assert not np.array_equal(wants[0], wants[1])
    yield be, prog, spec, xs, wants
    be.release_partitions(prog)
    be.close()


def _invoke(be, prog, spec, x):
    from dtpu.backends.base import Probes

    out = np.zeros(spec.output_shape, np.int8)
    be.invoke_partition(prog, 0, [x], {0: out}, Probes())
    return out


def test_the_list_buffer_is_cacheable_and_an_invoke_maintains_exactly_the_bytes_moved(board):
    from dtpu.board.emulate import current_board

    be, prog, spec, xs, wants = board
    assert prog.buf.buf.cacheable                   # not pynq's uncached default
    part = prog.program.partitions[0]
    for x, want in zip(xs, wants):
        trace = current_board().trace
        trace.clear()
        np.testing.assert_array_equal(_invoke(be, prog, spec, x), want)
        ops = [(a.op, a.offset, a.value) for a in trace if a.device == "cache"]
        assert ops == ([("flush", b.addr, b.nbytes) for b in part.inputs]
                       + [("invalidate", b.addr, b.nbytes) for b in part.outputs])
        # the maintenance brackets the list: flush before the doorbell, invalidate after it
        kinds = [a.op if a.device == "cache" else "reg" for a in trace]
        assert kinds[0] == "flush" and kinds[-1] == "invalidate"


def test_a_missing_flush_raises_where_the_device_reads(board, monkeypatch):
    from dtpu.board.emulate.board import StaleCacheError
    from dtpu.board.transport import PynqDdrBuffer

    be, prog, spec, xs, wants = board
    np.testing.assert_array_equal(_invoke(be, prog, spec, xs[0]), wants[0])
    monkeypatch.setattr(PynqDdrBuffer, "flush", lambda self, offset=0, nbytes=None: None)
    with pytest.raises(StaleCacheError, match="the host wrote and did not flush"):
        _invoke(be, prog, spec, xs[1])


def test_a_flush_one_byte_short_names_the_byte(board, monkeypatch):
    from dtpu.board.emulate.board import StaleCacheError
    from dtpu.board.transport import PynqDdrBuffer

    be, prog, spec, xs, wants = board
    np.testing.assert_array_equal(_invoke(be, prog, spec, xs[0]), wants[0])
    flush = PynqDdrBuffer.flush
    monkeypatch.setattr(PynqDdrBuffer, "flush",
                        lambda self, offset=0, nbytes=None: flush(self, offset, nbytes - 1))
    x = xs[1].copy()
    inp = prog.program.partitions[0].inputs[0]
    last = inp.addr + inp.nbytes - 1
    x.reshape(-1)[-1] = np.int8(~int(xs[0].reshape(-1)[-1]) & 0x7F)  # the last byte changes
    with pytest.raises(StaleCacheError, match=rf"1 of which .* \(the first at {last:#x}"):
        _invoke(be, prog, spec, x)


def test_a_missing_invalidate_reads_the_previous_outputs(board, monkeypatch):
    from dtpu.board.transport import PynqDdrBuffer

    be, prog, spec, xs, wants = board
    np.testing.assert_array_equal(_invoke(be, prog, spec, xs[0]), wants[0])
    monkeypatch.setattr(PynqDdrBuffer, "invalidate", lambda self, offset=0, nbytes=None: None)
    stale = _invoke(be, prog, spec, xs[1])
    np.testing.assert_array_equal(stale, wants[0])   # the host's cached copy, not the result
    monkeypatch.undo()
    np.testing.assert_array_equal(_invoke(be, prog, spec, xs[1]), wants[1])


def test_a_pynq_without_cacheable_falls_back_to_its_default_buffer(emu, caplog):
    """An older pynq whose allocate takes no `cacheable` still runs (uncached, slower), and says so."""
    from dtpu.board import load_overlay
    from dtpu.board.transport import PynqTransport

    calls = []

    def allocate(shape, dtype):
        calls.append(shape)
        return _FakeBuffer(np.zeros(shape, dtype))

    t = PynqTransport(load_overlay(emu), allocate=allocate)
    with caplog.at_level("WARNING", logger="dtpu"):
        buf = t.alloc_buffer(100)
    assert calls == [(100,)] and buf.array.size == 100
    assert "does not take cacheable=True" in caplog.text and "uncached" in caplog.text


class _FakeBuffer(np.ndarray):
    def __new__(cls, a):
        obj = np.asarray(a).view(cls)
        obj.physical_address = 0x1000
        return obj

    def __array_finalize__(self, obj):
        self.physical_address = getattr(obj, "physical_address", 0)


def test_the_c_path_flushes_and_invalidates_exactly_the_bytes_moved_in_c(emu, dtpu_so, tfl):  # noqa: F811
    """Issue 27.3: on the delegate's C invoke path the cache maintenance runs in C too (the
    emulated board's mirror of cache and DDR, behind the same flush / invalidate calls the board
    uses), not through pynq's Python: no cache operation reaches the board's trace, C counts
    exactly the partition's input bytes flushed and output bytes invalidated per run, and every
    output equals the CPU's. Without the flush the device's read of the input raises
    StaleCacheError (the invoke fails); without the invalidate the host reads the previous
    invoke's outputs (they differ here: new inputs every invoke)."""
    import dtpu
    from dtpu.board.emulate import current_board
    from dtpu.delegate import runtime as rt
    from tests.delegate_util import random_inputs, run

    model = ZOO / "mobilenet_like__int8.tflite"
    it = dtpu.make_interpreter(model, {"backend": "pynq", "bitstream": str(emu), "invoke": "c"})
    it.allocate_tensors()
    cpu = tfl.Interpreter(model_path=str(model))
    cpu.allocate_tensors()
    outs = []
    for seed in range(4):
        x = random_inputs(it, seed)
        trace = current_board().trace
        trace.clear()
        got = run(it, x)
        for a, b in zip(got, run(cpu, x)):
            np.testing.assert_array_equal(a, b, err_msg=f"invoke {seed}: C path vs CPU")
        outs.append(got[0])
        if seed:    # the first invoke ran in Python (pynq's flush and invalidate, traced)
            assert not [a for a in trace if a.device == "cache"], "cache maintenance left C"
    assert not np.array_equal(outs[-1], outs[-2])
    paths = [k.cpath for k in rt.KERNELS.values() if k.cpath is not None]
    assert len(paths) == 1
    (path,) = paths
    part = path.program.program.partitions[path.index]
    runs = 3
    # the partition's input and its result, the bytes copied in and out (not its intermediates)
    assert path.synced_bytes() == (runs * part.input.nbytes, runs * part.output.nbytes)


ZOO = Path(__file__).resolve().parent / "models" / "zoo"


@pytest.fixture
def xcl_abi(emu):
    """The emulated board's device as the PYNQ v3.0 image's pynq drives XRT: the C path's cache
    maintenance is a call of xclSyncBO(handle, bo, direction, size, offset) from C."""
    from dtpu.board.emulate.device import device

    dev = device()
    dev.sync_abi = "xcl"
    yield dev
    dev.sync_abi = "mirror"


def _c_invokes(emu, tfl, seeds):  # noqa: F811
    """(per invoke: the emulated board's cache operations, in order), the C path and the
    interpreter (which keeps it alive), after checking every output against the CPU's."""
    import dtpu
    from dtpu.board.emulate import current_board
    from dtpu.delegate import runtime as rt
    from tests.delegate_util import random_inputs, run

    model = ZOO / "mobilenet_like__int8.tflite"
    it = dtpu.make_interpreter(model, {"backend": "pynq", "bitstream": str(emu), "invoke": "c"})
    it.allocate_tensors()
    cpu = tfl.Interpreter(model_path=str(model))
    cpu.allocate_tensors()
    ops = []
    for seed in seeds:
        x = random_inputs(it, seed)
        trace = current_board().trace
        trace.clear()
        got = run(it, x)
        for a, b in zip(got, run(cpu, x)):
            np.testing.assert_array_equal(a, b, err_msg=f"invoke {seed}: C path vs CPU")
        ops.append([(a.op, a.offset, a.value) for a in trace if a.device == "cache"])
    (path,) = [k.cpath for k in rt.KERNELS.values() if k.cpath is not None]
    return ops, path, it


def test_on_the_pynq_3_0_abi_c_calls_xclsyncbo_for_exactly_the_bytes_moved(xcl_abi, emu, dtpu_so, tfl):  # noqa: F811
    """Where pynq calls XRT's xclSyncBO itself (the PYNQ v3.0 image: pynq/_3rdparty/xrt.py),
    the C path calls that function for the partition's input before the doorbell and its output
    after the completion, exactly their bytes (the emulated board's function runs the device's
    flush and invalidate, traced), counted by C; no Python buffer call in between."""
    from dtpu.board.transport import xcl_sync

    ops, path, _it = _c_invokes(emu, tfl, range(4))
    sync = xcl_sync(path.buf.buf)
    assert sync is not None and sync["kind"] == "xcl" and sync["bo"] == path.buf.addr
    part = path.program.program.partitions[path.index]
    want = [("flush", part.input.addr, part.input.nbytes),
            ("invalidate", part.output.addr, part.output.nbytes)]
    assert ops[1:] == [want] * 3, ops
    assert path.synced_bytes() == (3 * part.input.nbytes, 3 * part.output.nbytes)


def test_on_the_pynq_3_0_abi_a_failing_xclsyncbo_fails_the_invoke(xcl_abi, emu, dtpu_so, tfl, monkeypatch):  # noqa: F811
    """xclSyncBO's failure (a result of 0x80000000 or more, pynq's own check) fails the invoke
    with the range named, instead of running the list on stale bytes."""
    import ctypes

    import dtpu
    from tests.delegate_util import random_inputs, run

    kind = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                            ctypes.c_size_t, ctypes.c_size_t)
    failing = kind(lambda handle, bo, direction, size, offset: 0xFFFFFFF2)   # -EFAULT
    monkeypatch.setattr(type(xcl_abi), "xcl_sync_function",
                        lambda self: ctypes.cast(failing, ctypes.c_void_p).value)
    it = dtpu.make_interpreter(ZOO / "mobilenet_like__int8.tflite",
                               {"backend": "pynq", "bitstream": str(emu), "invoke": "c"})
    it.allocate_tensors()
    run(it, random_inputs(it, 0))          # the Python path (pynq's own flush): sets C up
    with pytest.raises(RuntimeError, match=r"flushing the input at image offset \d+ \(\d+ bytes\) failed"):
        run(it, random_inputs(it, 1))


def test_on_the_pynq_3_0_abi_an_xclsyncbo_that_syncs_nothing_is_caught(xcl_abi, emu, dtpu_so, tfl, monkeypatch, caplog):  # noqa: F811
    """The stale-cache model still judges the maintenance C asks XRT for: an xclSyncBO that
    answers success and flushes nothing leaves the input in the CPU's cache, and the device's
    read of it raises StaleCacheError (the doorbell's write fails, the invoke with it)."""
    import ctypes

    import dtpu
    from tests.delegate_util import random_inputs, run

    kind = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                            ctypes.c_size_t, ctypes.c_size_t)
    idle = kind(lambda handle, bo, direction, size, offset: 0)
    monkeypatch.setattr(type(xcl_abi), "xcl_sync_function",
                        lambda self: ctypes.cast(idle, ctypes.c_void_p).value)
    it = dtpu.make_interpreter(ZOO / "mobilenet_like__int8.tflite",
                               {"backend": "pynq", "bitstream": str(emu), "invoke": "c"})
    it.allocate_tensors()
    run(it, random_inputs(it, 0))
    with caplog.at_level("ERROR"), pytest.raises(RuntimeError, match="register write failed"):
        run(it, random_inputs(it, 1))
    assert "StaleCacheError" in caplog.text and "did not flush" in caplog.text
