"""The contract-2.0 host side: a graph's partitions prepared once as command lists in DDR, an
invoke is a memcpy, one doorbell and one completion per partition (docs/contract2.md).

Written once over :class:`~dtpu.driver.transport.Transport` plus two hooks a 2.0 target offers,
so the golden model and the PYNQ-Z2 (real or emulated, through ``pynq``) run the same code:

* ``alloc_buffer(nbytes)``: a DDR buffer with ``addr`` (what the core's memory port uses),
  ``array`` (the host's uint8 view), ``flush()`` / ``invalidate()`` (cache maintenance around
  the device's accesses) and ``free()``: ``pynq.allocate`` on the board, a
  :class:`~dtpu.hw.ddr.DdrPool` buffer on the model;
* ``wait_list(timeout_s)`` (optional): wait for the list's completion (the board's interrupt);
  without it the driver polls CL_STATUS.DONE with a deadline.

The compilation is :func:`dtpu.hw.listcompiler.compile_program`, the golden model's: the words the
device executes are the ones the executor is proven bit-exact on. The image is compiled for the
buffer's address (addresses are in the descriptors): when the buffer does not land where the
first compilation assumed, it is compiled again for the address it got.
"""
from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass

import numpy as np

from dtpu.driver.registers import register_type
from dtpu.driver.transport import DtpuHardwareError, DtpuTimeout, Transport
from dtpu.hw.listcompiler import Buffer, NodeIn, compile_program
from dtpu.hw.listformat import Format

log = logging.getLogger(__name__)

DEFAULT_LIST_TIMEOUT_S = 30.0
_program_ids = itertools.count(1)


def lists_supported(t: Transport) -> bool:
    """The core reports contract 2.0 in VERSION (1.2 cores run job by job)."""
    c = t.cfg
    return c.VERSION2 is not None and t.read_reg(c.REG_VERSION) == c.VERSION2


class DtpuListError(DtpuHardwareError):
    """A command list ended with CL_ERR set; `err`, `pc`, `tag` are the registers' values."""

    def __init__(self, msg: str, err: int, pc: int, tag: int) -> None:
        super().__init__(msg)
        self.err, self.pc, self.tag = err, pc, tag


@dataclass
class ListRun:
    """What the core's counters say about one list (CL_CYCLES, IDLE)."""

    cycles: int
    idle_cycles: int


class ListProgram:
    """Partitions compiled into one DDR image on a 2.0 target, the prologue (resident weights)
    run. One program owns the core's on-chip memories while it is :attr:`loaded`; anything else
    that wrote them (another program, 1.2 jobs) makes the next :meth:`invoke` run the prologue
    again (:meth:`ensure_loaded`)."""

    def __init__(self, t: Transport, partitions: list[list[NodeIn]], *,
                 rounding: str = "default", runtime: str | None = None,
                 timeout_s: float = DEFAULT_LIST_TIMEOUT_S, keep: list | None = None,
                 resident: list | None = None) -> None:
        self.t = t
        self.timeout_s = timeout_s
        #: a positive number naming this program where a word of C memory records which program
        #: the core's memories hold (the delegate's C invoke path, dtpu/delegate/cpath.py)
        self.cid = next(_program_ids)
        #: the counters of the last list :meth:`invoke` ran
        self.last_run: ListRun | None = None
        cfg = t.cfg
        self.fmt = Format(cfg)
        off = self.fmt.reg_offset
        #: the 2.0 registers an invoke touches, by name (the C invoke path writes the same ones)
        self.reg_offsets = {n: off(n) for n in ("CL_BASE", "DOORBELL", "CL_STATUS", "CL_ERR", "IRQ",
                                                "CL_ERR_PC", "CL_ERR_TAG", "CL_CYCLES_LO",
                                                "CL_CYCLES_HI", "IDLE_LO", "IDLE_HI")}
        irq = self.fmt.regs["IRQ"]["fields"]
        #: IRQ.DONE_EN and IRQ.PENDING (written together, they acknowledge a completion)
        self.irq_done_en = 1 << next(f["lsb"] for f in irq if f["name"] == "DONE_EN")
        self.irq_pending = 1 << next(f["lsb"] for f in irq if f["name"] == "PENDING")
        #: CL_STATUS read by field: .running, .done, .error
        self._cl_status = register_type("CL_STATUS", self.fmt.regs["CL_STATUS"]["fields"])
        kw = dict(rounding=rounding, runtime=runtime, keep=keep, resident=resident)
        #: what it was compiled from (a golden-model twin compiles the same at the same base)
        self.partitions_in, self.keep, self.resident = partitions, keep, resident
        #: the same program on the golden model, where a backend runs one beside the target
        #: (backend=rtl: dtpu.backends.model.DeviceBackend.golden_program)
        self.golden: ListProgram | None = None
        prog = compile_program(partitions, cfg, **kw)
        self.buf = t.alloc_buffer(prog.size)
        if self.buf.addr != prog.base:
            prog = compile_program(partitions, cfg, base=self.buf.addr, **kw)
        self.size = prog.size
        self.buf.array[:prog.size] = prog.image
        self.buf.flush()
        # the buffer holds the image from now on: the compiler's copy would double the DDR
        # image in the host's memory (12.9 MB for MobileNet v2 224)
        prog.image = np.zeros(0, np.uint8)
        self.program = prog
        self.loaded = False
        self.memo: dict = {}    # the backend's report fields per distinct run (see DeviceBackend)
        self._io: dict = {}     # per partition: its list, (view, offset, bytes) of its tensors
        self._targets: dict = {}
        t.write_reg(self.reg_offsets["IRQ"], self.irq_done_en)
        self.ensure_loaded()

    # -- views of the image

    def view(self, b: Buffer) -> np.ndarray:
        """The host's view of a tensor buffer of the image (its dtype and shape)."""
        o = b.addr - self.program.base
        return self.buf.array[o:o + b.nbytes].view(b.dtype).reshape(b.shape)

    # -- running lists

    def _target_of(self, t: Transport) -> tuple[bool, object]:
        """(simulated, its wait_list) of a transport, looked up once per transport."""
        hit = self._targets.get(id(t))
        if hit is None or hit[0] is not t:
            hit = self._targets[id(t)] = (t, bool(t.simulated), t.wait_list)
        return hit[1], hit[2]

    def ensure_loaded(self, t: Transport | None = None, ops=None) -> None:
        if not self.loaded:
            self.kick(self.program.prologue_addr, t, ops)
            self.loaded = True

    def kick(self, addr: int, t: Transport | None = None, ops=None) -> ListRun:
        """CL_BASE, DOORBELL, the completion, CL_STATUS, the counters, the acknowledge: 5 reads
        and 3 writes. Raises :class:`DtpuListError` naming the failing descriptor.

        `ops` (a :class:`dtpu.driver.hostops.HostOps`) receives the accesses made here, counted
        call by call (no counting wrapper on this path: it cost more than the protocol), and the
        device's time as :mod:`dtpu.driver.hostops` defines it: on a simulated target the
        register calls (every one of them runs the emulator; the list runs inside the DOORBELL
        write), on a board the completion wait only (its register calls are the host's own
        cost)."""
        t, o = t or self.t, self.reg_offsets
        reads = writes = 0
        simulated, waiter = self._target_of(t)
        t_sim = time.perf_counter()
        try:
            t.write_reg(o["CL_BASE"], addr)
            t0 = time.perf_counter()
            t.write_reg(o["DOORBELL"], 1)
            writes = 2
            if not simulated:
                t0 = time.perf_counter()
            if not waiter(self.timeout_s):
                raise DtpuTimeout(f"command list at {addr:#x}: no completion within "
                                  f"{self.timeout_s} s")
            status = self._cl_status
            st = status(t.read_reg(o["CL_STATUS"]))
            reads += 1
            deadline = None
            while not st.done:
                if deadline is None:
                    deadline = time.monotonic() + self.timeout_s
                elif time.monotonic() > deadline:
                    raise DtpuTimeout(f"command list at {addr:#x}: CL_STATUS={st:#x}, not DONE "
                                      f"within {self.timeout_s} s")
                time.sleep(1e-4)
                st = status(t.read_reg(o["CL_STATUS"]))
                reads += 1
            if ops is not None and not simulated:
                ops.device_s += time.perf_counter() - t0
            if st.error:
                self.loaded = False   # a list stopped half way: what it loaded is not known
                err = t.read_reg(o["CL_ERR"])
                pc, tag = t.read_reg(o["CL_ERR_PC"]), t.read_reg(o["CL_ERR_TAG"])
                reads += 3
                t.write_reg(o["CL_ERR"], err)
                t.write_reg(o["IRQ"], self.irq_done_en | self.irq_pending)
                writes += 2
                names = [n for n, b in self.fmt.errors.items() if err & b]
                raise DtpuListError(f"DTPU command list at {addr:#x} failed: CL_ERR={err:#x} "
                                    f"({', '.join(names)}) at list offset {pc}, tag {tag:#x} "
                                    f"(partition {tag >> 16}, node {tag & 0xFFFF})", err, pc, tag)
            cycles = t.read_reg(o["CL_CYCLES_LO"]) | t.read_reg(o["CL_CYCLES_HI"]) << 32
            idle = t.read_reg(o["IDLE_LO"]) | t.read_reg(o["IDLE_HI"]) << 32
            reads += 4
            t.write_reg(o["IRQ"], self.irq_done_en | self.irq_pending)
            writes += 1
        finally:
            if ops is not None:
                if simulated:
                    ops.device_s += time.perf_counter() - t_sim
                ops.mmio_reads += reads
                ops.mmio_writes += writes
                ops.doorbells += 1 if writes >= 2 else 0
        return ListRun(cycles, idle)

    def invoke(self, index: int, inputs: list[np.ndarray], outputs: dict[int, np.ndarray],
               t: Transport | None = None, ops=None) -> ListRun:
        """Partition `index`: the inputs copied into their buffers, its list run, the outputs
        (node index -> array to fill) copied out. No register access but :meth:`kick`'s."""
        io = self._io.get(index)
        if io is None:
            part = self.program.partitions[index]
            base = self.program.base
            io = self._io[index] = (
                part.list_addr,
                [(self.view(b), b.addr - base, b.nbytes) for b in part.inputs],
                [(self.view(b), b.addr - base, b.nbytes) for b in part.outputs])
        list_addr, ins, outs = io
        if len(inputs) != len(ins):
            raise ValueError(f"partition {index} takes {len(ins)} inputs, got {len(inputs)}")
        for (view, off, nbytes), x in zip(ins, inputs):
            if x.dtype != view.dtype or x.size != view.size:
                raise ValueError(f"partition {index}: input {x.dtype}{list(x.shape)} does not match "
                                 f"its buffer {view.dtype}{list(view.shape)}")
            np.copyto(view, x if x.shape == view.shape else x.reshape(view.shape))
            self.buf.flush(off, nbytes)
        self.ensure_loaded(t, ops)
        run = self.last_run = self.kick(list_addr, t, ops)
        for node, y in outputs.items():
            view, off, nbytes = outs[node]
            self.buf.invalidate(off, nbytes)
            np.copyto(y, view if y.shape == view.shape else view.reshape(y.shape))
        return run

    def free(self) -> None:
        buf, self.buf = getattr(self, "buf", None), None
        if buf is not None:
            buf.free()


__all__ = ["DEFAULT_LIST_TIMEOUT_S", "DtpuListError", "ListProgram", "ListRun", "lists_supported"]
