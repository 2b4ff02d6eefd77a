"""The simulated core in this process: dtpu_axi built as a shared library, driven via ctypes.

The cocotb transport needs the simulator to host Python, so it only exists inside a simulation
started by `dtpu run --backend rtl` or :func:`dtpu.rtl.run_in_simulation`. Code that creates
backend=rtl in its own process (a notebook, ``dtpu.make_interpreter(..., {"backend": "rtl"})``
in a script) gets this transport instead: the same Verilog, Verilated into a library
(:func:`dtpu.rtl.build.build_native`) whose clock loop, AXI4-Lite master and stream queues are
C++ (native.cpp), so Python runs once per register access or stream, not once per cycle.

It follows the cocotb transport's protocol choices (:mod:`dtpu.rtl.transport`): START goes out
after the job's streams are queued (so a prefetching job has both input streams from its first
cycle), DONE is awaited on the interrupt line, every wait is bounded in
simulated cycles and in wall time, `recv` returns every complete packet, `reset` drops what the
queues hold. The two transports are independent implementations of the same bus behaviour, and
the tests hold both to backend=model's words and cycles.
"""
from __future__ import annotations

import ctypes
import logging
import time
from pathlib import Path

import numpy as np

from dtpu.driver.transport import DtpuTimeout
from dtpu.hw.config import HwConfig
from dtpu.rtl.build import BuildInfo, SimConfig, build_native
from dtpu.rtl.session import DEFAULT_TIMEOUT_CYCLES, DEFAULT_TIMEOUT_S, SimulatedTransport

log = logging.getLogger(__name__)

_U64 = np.dtype("<u8")
_STREAMS = {"wgt": 0, "act": 1}
#: simulated cycles run per call between wall-clock checks
_CHUNK_CYCLES = 50_000
#: an AXI4-Lite access that takes longer than this means the register file is hung
_BUS_CYCLES = 1_000

_libs: dict[str, ctypes.CDLL] = {}


def _load(path: Path) -> ctypes.CDLL:
    key = str(path)
    if key not in _libs:
        lib = ctypes.CDLL(key)
        vp, u32, u64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
        sigs = {
            "dtpu_new": ([ctypes.c_char_p], vp), "dtpu_delete": ([vp], None),
            "dtpu_traced": ([vp], i32), "dtpu_reset": ([vp, i32], None),
            "dtpu_write": ([vp, u32, u32, u64], i32),
            "dtpu_read": ([vp, u32, ctypes.POINTER(u32), u64], i32),
            "dtpu_push": ([vp, i32, ctypes.POINTER(u64), u64], None),
            "dtpu_run": ([vp, u64, i32], u64), "dtpu_irq": ([vp], i32),
            "dtpu_cycle": ([vp], u64), "dtpu_pending": ([vp, i32], u64),
            "dtpu_result_words": ([vp], u64), "dtpu_partial_words": ([vp], u64),
            "dtpu_take_results": ([vp, ctypes.POINTER(u64), u64], u64),
            "dtpu_flush": ([vp], None), "dtpu_trace_flush": ([vp], None),
        }
        for name, (args, res) in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        _libs[key] = lib
    return _libs[key]


class NativeTransport(SimulatedTransport):
    """dtpu.driver's Transport over an in-process Verilated dtpu_axi (see the module doc)."""

    def __init__(self, cfg: HwConfig, library: str | Path, *, vcd: str | Path | None = None,
                 timeout_cycles: int = DEFAULT_TIMEOUT_CYCLES,
                 timeout_s: float = DEFAULT_TIMEOUT_S, start_with_streams: bool = True,
                 recv_cycles: int = 64) -> None:
        super().__init__(cfg, timeout_cycles, timeout_s, start_with_streams, recv_cycles)
        self._lib = _load(Path(library))
        self._h = self._lib.dtpu_new(str(vcd).encode() if vcd else None)
        if vcd and not self._lib.dtpu_traced(self._h):
            log.warning("%s was built without tracing: no waveform in %s", library, vcd)
        self._lib.dtpu_reset(self._h, 4)

    @property
    def cycle(self) -> int:
        """Clock cycles since the core was created."""
        return int(self._lib.dtpu_cycle(self._h))

    # -- the bus ----------------------------------------------------------------------------

    def _write(self, offset: int, value: int) -> None:
        if self._lib.dtpu_write(self._h, offset, value & 0xFFFFFFFF, _BUS_CYCLES):
            raise DtpuTimeout(f"AXI4-Lite write of {value:#x} to {offset:#x} not answered within "
                              f"{_BUS_CYCLES} cycles")

    def _flush_start(self) -> None:
        if self._start_value is not None:
            value, self._start_value = self._start_value, None
            self._write(self.cfg.REG_CTRL, value)
            self._job_cycle0 = self.cycle

    # -- the five methods ---------------------------------------------------------------------

    def write_reg(self, offset: int, value: int) -> None:
        value = int(value) & 0xFFFFFFFF
        if offset == self.cfg.REG_CTRL and value & self._start_bit:
            value |= self._irq_bit
            self.jobs += 1
            self._flush_start()
            if self.start_with_streams:
                self._start_value = value
                return
            self._write(offset, value)
            self._job_cycle0 = self.cycle
            return
        self._flush_start()
        self._write(offset, value)

    def read_reg(self, offset: int) -> int:
        if self._start_value is not None:
            if offset == self.cfg.REG_STATUS:
                return self._busy_bit    # as the cocotb transport: what a job past CONFIG reads
            self._flush_start()
        out = ctypes.c_uint32()
        if self._lib.dtpu_read(self._h, offset, ctypes.byref(out), _BUS_CYCLES):
            raise DtpuTimeout(f"AXI4-Lite read of {offset:#x} not answered within {_BUS_CYCLES} cycles")
        return int(out.value)

    def send(self, stream: str, words: np.ndarray) -> None:
        index = _STREAMS.get(stream)
        if index is None:
            raise ValueError(f"unknown input stream {stream!r}; accepted: {', '.join(_STREAMS)}")
        data = np.ascontiguousarray(np.asarray(words, dtype=_U64))
        if data.size:
            self._lib.dtpu_push(self._h, index, data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                data.size)
        # a held START waits for the job's other streams (flushed by the next non-send call)

    def wait_done(self, timeout_s: float) -> bool:
        self._flush_start()
        deadline = time.monotonic() + min(float(timeout_s), self.timeout_s)
        limit = self._job_cycle0 + self.timeout_cycles
        while True:
            if self._lib.dtpu_irq(self._h) and self.read_reg(self.cfg.REG_STATUS) & self._done_bit:
                return True
            now = self.cycle
            if now >= limit or time.monotonic() >= deadline:
                return False
            if not self._lib.dtpu_run(self._h, min(limit - now, _CHUNK_CYCLES), 1):
                self._lib.dtpu_run(self._h, 1, 0)   # irq high but not DONE yet: move on

    def recv(self, stream: str, n: int) -> np.ndarray:
        if stream != "res":
            raise ValueError(f"unknown output stream {stream!r}; accepted: res")
        waited = 0
        while not self._lib.dtpu_result_words(self._h) and waited < self.recv_cycles:
            self._lib.dtpu_run(self._h, 1, 0)
            waited += 1
        count = int(self._lib.dtpu_result_words(self._h))
        if not count:
            partial = int(self._lib.dtpu_partial_words(self._h))
            raise DtpuTimeout(f"m_axis_{stream}: no packet ended with tlast within {self.recv_cycles} "
                              f"cycles after DONE ({n} words expected, {partial} without tlast)")
        out = np.empty(count, _U64)
        self._lib.dtpu_take_results(self._h, out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), count)
        return out

    # -- hooks ----------------------------------------------------------------------------------

    def pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        return {s: n for s, i in _STREAMS.items() if (n := int(self._lib.dtpu_pending(self._h, i)))}

    def reset(self) -> None:
        self._start_value = None
        self._write(self.cfg.REG_CTRL, self.cfg.encode("CTRL", SOFT_RESET=1))
        self._lib.dtpu_flush(self._h)
        self._lib.dtpu_run(self._h, 2, 0)

    def describe(self) -> str:
        h, lib = self._h, self._lib
        queued = ", ".join(f"s_axis_{s}: {lib.dtpu_pending(h, i)} words queued" for s, i in _STREAMS.items())
        return (f"native transport: cycle {self.cycle} (job started at {self._job_cycle0}, bound "
                f"{self.timeout_cycles} cycles), {queued}, m_axis_res: "
                f"{lib.dtpu_result_words(h)} words received, {lib.dtpu_partial_words(h)} without tlast")

    def close(self) -> None:
        if self._h:
            self._lib.dtpu_delete(self._h)
            self._h = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# -- contract 2.0: dtpu_cl_top with its memory in this process -------------------------------

_CL_SIGS = {
    "dtpu_has_axi_wr": ([], ctypes.c_int),
    "dtpu_mem_image": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64], None),
    "dtpu_mem_timing": ([ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                         ctypes.c_uint32, ctypes.c_uint32, ctypes.c_double, ctypes.c_uint32,
                         ctypes.c_uint64], None),
    "dtpu_mem_ranges": ([ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64),
                         ctypes.c_uint64], None),
    "dtpu_mem_count": ([ctypes.c_void_p, ctypes.c_int], ctypes.c_uint64),
    "dtpu_mem_violation": ([ctypes.c_void_p], ctypes.c_char_p),
    "dtpu_mem_log": ([ctypes.c_void_p, ctypes.c_int], None),
    "dtpu_mem_events": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64], ctypes.c_uint64),
    "dtpu_run_until_done": ([ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_int,
                             ctypes.c_uint64, ctypes.c_uint64], ctypes.c_int),
    "dtpu_peek": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint32,
                   ctypes.POINTER(ctypes.c_uint32), ctypes.c_int], ctypes.c_int),
    "dtpu_trace_init": ([ctypes.c_void_p], ctypes.c_int),
    "dtpu_error": ([ctypes.c_void_p], ctypes.c_char_p),
    "dtpu_trace_events": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p,
                           ctypes.c_uint64], ctypes.c_uint64),
}

#: entry points a library built from an older harness lacks (then list_trace() is None)
_CL_OPTIONAL = ("dtpu_trace_init", "dtpu_error", "dtpu_trace_events")

#: axi_mem.h AxiEvent, and its kinds
EVENT_DTYPE = np.dtype([("cycle", "<u8"), ("kind", "<u4"), ("beats", "<u4"), ("addr", "<u8"),
                        ("resp", "<u4"), ("pad", "<u4")])
EVENT_KINDS = ("AR", "R_FIRST", "R_LAST", "AW", "W_LAST", "B")
_MEM_COUNTS = ("rd_beats", "wr_beats", "rd_bursts", "wr_bursts", "violations", "reads_in_flight",
               "writes_in_flight", "cycle")
#: simulated cycles run per call while a list runs, between wall-clock checks
_LIST_CHUNK_CYCLES = 200_000
#: bound of one command list in simulated cycles (MobileNet v2 224's partition: about 5 M)
DEFAULT_LIST_TIMEOUT_CYCLES = 100_000_000
#: CL_STATUS is polled this often (cycles) while waiting for a list without the interrupt
_POLL_CYCLES = 64


def _load_cl(path: Path) -> ctypes.CDLL:
    lib = _load(path)
    if not hasattr(lib, "_dtpu_cl"):
        for name, (args, res) in _CL_SIGS.items():
            fn = getattr(lib, name, None)
            if fn is None and name in _CL_OPTIONAL:
                continue
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        lib._dtpu_cl = True
    return lib


class SimBuffer:
    """A DDR buffer of the simulated memory: ``addr`` (what the core's master uses), ``array``
    (the host's uint8 view: the very bytes the memory model serves), ``flush`` / ``invalidate``
    (nothing to do: no caches between the host and this memory, as the model's DdrPool),
    ``free``."""

    coherent = True   # the memory model serves the host's bytes: nothing to flush

    def __init__(self, ddr: "SimDdr", addr: int, array: np.ndarray) -> None:
        self.ddr, self.addr, self.array = ddr, addr, array

    def flush(self, offset: int = 0, nbytes: int | None = None) -> None:
        pass

    def invalidate(self, offset: int = 0, nbytes: int | None = None) -> None:
        pass

    def free(self) -> None:
        self.ddr.free(self.addr)


class SimDdr:
    """The DDR image of the simulated memory: one host-owned byte array at `base` that the C++
    memory model reads and writes in place; buffers allocated first fit, 4 KiB aligned, like the
    golden model's :class:`~dtpu.hw.ddr.DdrPool`. With `strict` (default) only allocated
    buffers answer the core (anything else DECERR, as DdrPool); else the whole image does."""

    def __init__(self, nbytes: int, base: int, on_change, strict: bool = True) -> None:
        if base % 4096 or nbytes % 4096 or nbytes <= 0:
            raise ValueError(f"DDR image {nbytes} bytes at {base:#x}; accepted: 4 KiB multiples")
        if base + nbytes > 1 << 32:
            raise ValueError(f"DDR image {base:#x}+{nbytes} beyond the 32-bit address space")
        self.base, self.size = int(base), int(nbytes)
        self.image = np.zeros(self.size, np.uint8)
        self.bufs: dict[int, int] = {}       # addr -> size
        self.strict = strict
        self._on_change = on_change

    def windows(self) -> list[tuple[int, int]]:
        if not self.strict:
            return []
        out = [(a, a + n) for a, n in sorted(self.bufs.items())]
        return out or [(0, 0)]               # nothing allocated: nothing answers

    def alloc(self, nbytes: int) -> SimBuffer:
        size = -(-max(int(nbytes), 1) // 4096) * 4096
        addr = self.base
        for start in sorted(self.bufs):
            if start - addr >= size:
                break
            addr = max(addr, start + self.bufs[start])
        if addr + size > self.base + self.size:
            raise MemoryError(f"{nbytes} bytes do not fit the simulated DDR ({self.size} bytes at "
                              f"{self.base:#x}, {sum(self.bufs.values())} allocated); open the "
                              f"transport with a larger ddr_bytes")
        self.bufs[addr] = size
        o = addr - self.base
        view = self.image[o:o + size]
        view[:] = 0
        self._on_change()
        return SimBuffer(self, addr, view)

    def free(self, addr: int) -> None:
        if self.bufs.pop(addr, None) is not None:
            self._on_change()

    def view(self, addr: int, nbytes: int) -> np.ndarray:
        """The host's view of [addr, addr + nbytes) (inside the image, allocated or not)."""
        o = addr - self.base
        if o < 0 or o + nbytes > self.size:
            raise ValueError(f"{addr:#x}+{nbytes} outside the simulated DDR {self.base:#x}+{self.size}")
        return self.image[o:o + nbytes]


class NativeListTransport(NativeTransport):
    """The contract-2.0 test top (dtpu_cl_top) in this process, its AXI4 master on the C++
    memory model of axi_mem.h over a DDR image this object owns (:class:`SimDdr`).

    What the lists driver (:class:`dtpu.driver.lists.ListProgram`) needs: the registers
    (1.2 and 2.0, one AXI4-Lite), ``alloc_buffer`` (buffers in the simulated DDR) and
    ``wait_list`` (the clock runs in C++ until CL_STATUS.DONE or the interrupt; past
    `list_timeout_cycles` it raises :class:`DtpuTimeout` naming the state). The 1.2 protocol
    (streams, CTRL.START) works as on :class:`NativeTransport`.

    Memory timing: contract.json ``contract2.memory_model`` (MEM_READ_LATENCY, ...) unless
    `timing` overrides some of them; `stall` (probability per cycle of a stalled ready/valid on
    each channel) and `extra_latency` (uniform extra cycles per burst) add disorder, seeded
    by `seed`.

    VERSION is the RTL's own: 2.0 on dtpu_cl_top (dtpu_regfile CONTRACT2), 1.2 on dtpu_axi.
    """

    command_lists = True

    def __init__(self, cfg: HwConfig, library: str | Path, *, ddr_bytes: int = 64 << 20,
                 ddr_base: int | None = None, strict: bool = True,
                 timing: dict | None = None, stall: float = 0.0, extra_latency: int = 0,
                 seed: int = 1,
                 list_timeout_cycles: int = DEFAULT_LIST_TIMEOUT_CYCLES, **options) -> None:
        from dtpu.hw.listformat import DEFAULT_DDR_BASE, Format

        self._lib = _load_cl(Path(library))   # before the base class opens the core
        super().__init__(cfg, library, **options)
        self.fmt = Format(cfg)
        if int(list_timeout_cycles) < 1:
            raise ValueError(f"list_timeout_cycles={list_timeout_cycles!r}; accepted: an integer >= 1")
        self.list_timeout_cycles = int(list_timeout_cycles)
        self._reg = {n: self.fmt.reg_offset(n) for n in self.fmt.regs}
        st = self.fmt.regs["CL_STATUS"]["fields"]
        self._cl_done_lsb = next(f["lsb"] for f in st if f["name"] == "DONE")
        base = DEFAULT_DDR_BASE if ddr_base is None else int(ddr_base)
        self.ddr = SimDdr(int(ddr_bytes), base, self._update_windows, strict)
        self._lib.dtpu_mem_image(self._h, self.ddr.image.ctypes.data, self.ddr.base, self.ddr.size)
        self.set_timing(timing, stall=stall, extra_latency=extra_latency, seed=seed)
        self._update_windows()
        self.lists_run = 0
        self.list_cycles = 0       # simulated cycles spent in wait_list
        # the per-node record (native_cl.cpp Tracer): on when the build has its signals public
        has = hasattr(self._lib, "dtpu_trace_init")
        self.traced = has and bool(self._lib.dtpu_trace_init(self._h))
        if not has:
            log.warning("%s: a harness without the per-node record; list_trace() is None", library)
        elif not self.traced:
            log.warning("%s: no per-node record of lists (%s); list_trace() is None", library,
                        self._lib.dtpu_error(self._h).decode())

    # -- the memory model ---------------------------------------------------------------------

    @property
    def has_axi_wr(self) -> bool:
        """The build serves AXI4 write channels (the Verilated top has m_axi_aw*/w*/b*)."""
        return bool(self._lib.dtpu_has_axi_wr())

    def set_timing(self, timing: dict | None = None, *, stall: float = 0.0,
                   extra_latency: int = 0, seed: int = 1) -> dict:
        """The memory model's parameters: contract2.memory_model, `timing` overriding any of
        MEM_READ_LATENCY, MEM_READ_OUTSTANDING, MEM_WRITE_LATENCY, MEM_WRITE_OUTSTANDING,
        MEM_BURST_BEATS; plus the disorder knobs. Returns the values in use."""
        m = {k: int(v) for k, v in self.fmt.mem.items()}
        unknown = set(timing or {}) - set(m)
        if unknown:
            raise ValueError(f"memory timing {sorted(unknown)}; accepted: {sorted(m)}")
        m.update({k: int(v) for k, v in (timing or {}).items()})
        if not 0.0 <= float(stall) < 1.0:
            raise ValueError(f"stall={stall!r}; accepted: a probability in [0, 1)")
        self._lib.dtpu_mem_timing(self._h, m["MEM_READ_LATENCY"], m["MEM_READ_OUTSTANDING"],
                                  m["MEM_WRITE_LATENCY"], m["MEM_WRITE_OUTSTANDING"],
                                  m["MEM_BURST_BEATS"], float(stall), int(extra_latency),
                                  int(seed) & 0xFFFFFFFFFFFFFFFF)
        self.timing = dict(m, stall=float(stall), extra_latency=int(extra_latency), seed=int(seed))
        return self.timing

    def _ranges(self, kind: int, ranges) -> None:
        flat = np.ascontiguousarray(np.asarray(list(ranges), np.uint64).reshape(-1))
        self._lib.dtpu_mem_ranges(self._h, kind, flat.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                  flat.size // 2)

    def _update_windows(self) -> None:
        if getattr(self, "_h", None):
            self._ranges(0, self.ddr.windows())

    def inject(self, slverr=(), hang=()) -> None:
        """Fault injection: [lo, hi) address ranges answering SLVERR, and ranges that never
        answer (the core's TIMEOUT); replaces the previous ones."""
        self._ranges(1, slverr)
        self._ranges(2, hang)

    def mem_counts(self) -> dict[str, int]:
        """The memory model's counters (beats, bursts, protocol violations, in flight, cycle)."""
        return {n: int(self._lib.dtpu_mem_count(self._h, i)) for i, n in enumerate(_MEM_COUNTS)}

    def violation(self) -> str:
        """The first protocol violation the memory's monitor saw ('' if none)."""
        return self._lib.dtpu_mem_violation(self._h).decode()

    def log_events(self, on: bool = True) -> None:
        """Record every AR / R / AW / W / B handshake with its cycle (clears the record)."""
        self._lib.dtpu_mem_log(self._h, int(on))

    def events(self) -> np.ndarray:
        """The recorded handshakes (EVENT_DTYPE; kind indexes EVENT_KINDS)."""
        n = 1 << 16
        while True:
            out = np.zeros(n, EVENT_DTYPE)
            got = int(self._lib.dtpu_mem_events(self._h, out.ctypes.data, n))
            if got < n:
                return out[:got]
            n *= 4

    # -- the core's memories, read through VPI -------------------------------------------------

    def peek(self, name: str, index: int, words: int = 2) -> int:
        """Element `index` of the public array `name` (VPI name, e.g.
        ``dtpu_cl_top.core_inst.wmem_inst.bank[0].ram_inst.mem``)."""
        out = (ctypes.c_uint32 * words)()
        n = self._lib.dtpu_peek(self._h, name.encode(), int(index), out, words)
        if n < 0:
            raise KeyError(f"no public signal {name!r}[{index}] in the build (public: dtpu_bram.mem)")
        return sum(int(out[i]) << (32 * i) for i in range(n))

    def weights(self) -> np.ndarray:
        """The weight memory (WEIGHT_WORDS uint64 words, address order: bank = address % COLS)."""
        c = self.cfg
        names = [f"dtpu_cl_top.core_inst.wmem_inst.bank[{b}].ram_inst.mem" for b in range(c.COLS)]
        out = np.zeros(c.WEIGHT_WORDS, _U64)
        for a in range(c.WEIGHT_WORDS):
            out[a] = self.peek(names[a % c.COLS], a // c.COLS)
        return out

    def params(self) -> np.ndarray:
        """The parameter memory: PARAM_ENTRIES x (bias word, requantization word)."""
        c = self.cfg
        out = np.zeros((c.PARAM_ENTRIES, 2), _U64)
        pm = "dtpu_cl_top.core_inst.pmem_inst.bank[{}].{}_inst.mem"
        for e in range(c.PARAM_ENTRIES):
            out[e, 0] = self.peek(pm.format(e % 8, "bias"), e // 8)
            out[e, 1] = self.peek(pm.format(e % 8, "rq"), e // 8)
        return out

    # -- the lists driver's hooks -----------------------------------------------------------

    def alloc_buffer(self, nbytes: int) -> SimBuffer:
        """A buffer in the simulated DDR (the memory model serves its bytes in place)."""
        return self.ddr.alloc(nbytes)

    def wait_list(self, timeout_s: float) -> bool:
        """After DOORBELL: the clock until the interrupt (IRQ.DONE_EN) or CL_STATUS.DONE (polled
        every few cycles), at most `list_timeout_cycles` simulated cycles and the longer of
        `timeout_s` (the driver's bound, meant for a board: 30 s) and the transport's own
        `timeout_s` (a whole MobileNet partition is millions of cycles, about a minute here);
        past either, :class:`DtpuTimeout` with the list's state (never a hang). A list cannot
        wait on memory forever anyway: the core's TIMEOUT register ends it with CL_ERR.TIMEOUT."""
        self._flush_start()
        deadline = time.monotonic() + max(float(timeout_s), self.timeout_s)
        c0 = self.cycle
        limit = c0 + self.list_timeout_cycles
        try:
            while True:
                now = self.cycle
                if now >= limit or time.monotonic() >= deadline:
                    break
                r = self._lib.dtpu_run_until_done(self._h, self._reg["CL_STATUS"], self._cl_done_lsb,
                                                  1, _POLL_CYCLES, min(limit - now, _LIST_CHUNK_CYCLES))
                if r < 0:
                    raise DtpuTimeout(f"AXI4-Lite read of CL_STATUS not answered while waiting for "
                                      f"a list; {self.describe()}")
                if r == 1:
                    self.lists_run += 1
                    return True
        finally:
            self.list_cycles += self.cycle - c0
        st = self.read_reg(self._reg["CL_STATUS"])
        raise DtpuTimeout(f"command list at {self.read_reg(self._reg['CL_BASE']):#x}: no CL_STATUS."
                          f"DONE within {self.cycle - c0} simulated cycles (bound "
                          f"{self.list_timeout_cycles}, {max(timeout_s, self.timeout_s)} s); "
                          f"CL_STATUS={st:#x}, DESCS="
                          f"{self.read_reg(self._reg['DESCS'])}; {self.describe()}")

    def c_register_io(self) -> dict | None:
        """The harness's own C API for the delegate's C invoke path: the AXI4-Lite calls and
        the clock loop of :meth:`wait_list` (same bounds), by their addresses in the loaded
        library. A held 1.2 START (the job path) must be flushed first: None then."""
        if self._start_value is not None or not self._h:
            return None
        lib = self._lib

        def addr(name: str) -> int:
            return int(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)

        return {"kind": "verilator", "sim": int(self._h), "write": addr("dtpu_write"),
                "read": addr("dtpu_read"), "run_until_done": addr("dtpu_run_until_done"),
                "cycle": addr("dtpu_cycle"), "bus_cycles": _BUS_CYCLES,
                "poll_cycles": _POLL_CYCLES, "chunk_cycles": _LIST_CHUNK_CYCLES,
                "limit_cycles": self.list_timeout_cycles, "timeout_s": float(self.timeout_s)}

    def add_c_runs(self, lists: int, cycles: int) -> None:
        """Lists the C invoke path waited for on this core, and their cycles (kept in
        :attr:`lists_run` and :attr:`list_cycles` as :meth:`wait_list`'s own)."""
        self.lists_run += int(lists)
        self.list_cycles += int(cycles)

    def wait_done(self, timeout_s: float) -> bool:
        """A 1.2 job's DONE: STATUS polled every few cycles (this top does not route the 1.2
        core's interrupt, CTRL.IRQ_EN, to its irq pin), bounded like the 1.2 transport's."""
        self._flush_start()
        deadline = time.monotonic() + min(float(timeout_s), self.timeout_s)
        limit = self._job_cycle0 + self.timeout_cycles
        while True:
            now = self.cycle
            if now >= limit or time.monotonic() >= deadline:
                return bool(self.read_reg(self.cfg.REG_STATUS) & self._done_bit)
            r = self._lib.dtpu_run_until_done(self._h, self.cfg.REG_STATUS,
                                              self._done_bit.bit_length() - 1, 0, 8,
                                              min(limit - now, _CHUNK_CYCLES))
            if r < 0:
                raise DtpuTimeout(f"AXI4-Lite read of STATUS not answered; {self.describe()}")
            if r == 1:
                return True

    def trace_events(self) -> tuple[dict, np.ndarray]:
        """The simulated RTL's record of the last list: (``lists`` ended so far, ``done`` 1 when
        the last one ran to its end, its ``cycles`` and ``idle`` (CL_CYCLES, IDLE), ``events``
        recorded) and one :data:`dtpu.rtl.nodetrace.EVENT_DTYPE` row per LOAD / RUN / POST."""
        from dtpu.rtl.nodetrace import EVENT_DTYPE

        head = (ctypes.c_uint64 * 5)()
        self._lib.dtpu_trace_events(self._h, head, None, 0)
        n = int(head[4])
        out = np.zeros(n, EVENT_DTYPE)
        if n:
            self._lib.dtpu_trace_events(self._h, head, out.ctypes.data, n)
        info = dict(zip(("lists", "done", "cycles", "idle", "events"), (int(v) for v in head)))
        return info, out

    def list_trace(self):
        """The simulated RTL's per-node record of the last list as a
        :class:`dtpu.hw.list_result.RunResult` (``cycles`` = CL_CYCLES, ``idle_cycles`` = IDLE,
        ``tags`` per descriptor TAG as the golden model's; :mod:`dtpu.rtl.nodetrace`), so that
        ``node_cycles`` / ``node_words`` split the partition by node; None when the build has
        no record or no list ran to its end."""
        from dtpu.rtl.nodetrace import run_result

        if not self.traced:
            return None
        info, events = self.trace_events()
        return run_result(info, events) if info["done"] else None

    def describe(self) -> str:
        m = self.mem_counts()
        return (super().describe() + f", memory: {m['rd_beats']} read beats, {m['wr_beats']} write "
                f"beats, {m['reads_in_flight']} reads and {m['writes_in_flight']} writes in flight, "
                f"{m['violations']} protocol violations")


def open_native_lists(config: SimConfig | None = None, *, progress: bool | None = None,
                      vcd: str | Path | None = None, **options
                      ) -> tuple[NativeListTransport, BuildInfo]:
    """Build (or find) dtpu_cl_top's library for `config` and open a fresh core with its memory
    (`options`: :class:`NativeListTransport`'s)."""
    from dtpu.rtl.build import build_native_cl

    from dtpu.rtl.build import VEC_UNIT

    config = config or SimConfig()
    info = build_native_cl(config, progress=progress)
    t = NativeListTransport(config.hw_config(), info.product, vcd=vcd, **options)
    if config.vec_en:       # the target declares the unit it was built with
        t.vector_unit, t.vector_build = True, VEC_UNIT
    return t, info


def open_native(config: SimConfig | None = None, *, progress: bool | None = None,
                vcd: str | Path | None = None, **options) -> tuple[NativeTransport, BuildInfo]:
    """Build (or find) the library for `config` and open a fresh simulated core on it."""
    config = config or SimConfig()
    info = build_native(config, progress=progress)
    return NativeTransport(config.hw_config(), info.product, vcd=vcd, **options), info


__all__ = ["EVENT_DTYPE", "EVENT_KINDS", "NativeListTransport", "NativeTransport", "SimBuffer",
           "SimDdr", "open_native", "open_native_lists"]
