"""The Python side of the delegate's C invoke path (delegate/dtpu_cpath.c).

A partition compiled as a command list needs no decision at an invoke once its first invoke ran
on the Python path (which loaded the prologue and produced the report fields' memo): C copies
the inputs into the DDR image, makes them visible to the device, rings the doorbell, waits,
reads CL_STATUS and the counters and copies the outputs out. This module sets that up per
partition (:class:`PartitionCPath`: where each tensor sits in the image, the register offsets,
how C reaches the registers) and reads back what C recorded per run, which the runtime folds
into the same reports the Python path builds.

How C reaches the registers is the transport's choice (``Transport.c_register_io``): a mapped
window (the board), the Verilated core's own C API (backend=rtl), or, by default, this module's
callbacks into the transport's ``read_reg`` / ``write_reg`` / ``wait_list`` (the golden model,
the emulated board): slow, but the C code that runs is the one the board runs. How it keeps a
non-coherent DDR image coherent is the transport's choice too (``Transport.c_buffer_sync``): XRT's
xclSyncBO called from C (the board under pynq 3.0, the emulated board set to that ABI), a copy
in C (the emulated board's mirror of host cache and DDR), or the buffer's own flush / invalidate
called back in Python (pynq 3.1 and later, whose XRT buffer objects live inside pyxrt).
"""
from __future__ import annotations

import itertools
import logging
from typing import Any

from dtpu.driver.transport import Transport

log = logging.getLogger("dtpu.delegate")

#: runs a partition keeps before C hands them to Python (one crossing per this many invokes)
#: when every invoke's report is kept (report=summary); with report=none C keeps the latest
#: runs, as many as the report store (dtpu.report.KEEP), and Python folds them only when a
#: report is read (:func:`capacity`)
CAPACITY = 64

_REGS = ("CL_BASE", "DOORBELL", "CL_STATUS", "CL_ERR", "IRQ", "CL_ERR_PC", "CL_ERR_TAG",
         "CL_CYCLES_LO", "CL_CYCLES_HI", "IDLE_LO", "IDLE_HI")
_STAT_LISTS, _STAT_CYCLES, _STAT_FLUSHED, _STAT_INVALIDATED = 0, 1, 3, 4
_FIELDS = ("seq", "enter_ns", "start_ns", "end_ns", "exit_ns", "device_ns", "cycles", "idle",
           "reads", "writes", "doorbells", "status")

_ids = itertools.count(1)
#: handle (the C side's Python-callback context) -> the partition path whose transport it is
HANDLES: dict[int, "PartitionCPath"] = {}
#: dtpu.so's cffi lib, once loaded (dtpu.delegate.glue.install)
LIB: Any = None


def capacity(lazy: bool) -> int:
    """Runs C keeps per partition: with `lazy` (runs folded only when a report is read) the
    report store's size, so that a read finds every report it would have kept."""
    from dtpu.report import KEEP

    return max(1, KEEP) if lazy else CAPACITY


class Unsupported(Exception):
    """Why a partition stays on the Python path (logged once, at debug level)."""


class Record:
    """One C run as Python reads it (the fields of dtpu_cl_record)."""

    __slots__ = _FIELDS

    def __init__(self, raw) -> None:
        for name in _FIELDS:
            setattr(self, name, int(getattr(raw, name)))


class PartitionCPath:
    """Partition `index` of `program` (a :class:`dtpu.driver.lists.ListProgram`) as C runs it
    for `kernel` (whose C struct gathers TFLite's data pointers at every invoke)."""

    def __init__(self, ffi, lib, kernel, program, index: int, backend, eager: bool,
                 lazy: bool = False, clock_mhz: float = 0.0) -> None:
        self.ffi, self.lib = ffi, lib
        self.program, self.index, self.backend = program, index, backend
        self.kernel_struct = kernel.struct
        self.t: Transport = backend.transport
        self.buf = program.buf
        self.handle = next(_ids)
        self.cp = ffi.NULL
        part = program.program.partitions[index]
        base = program.program.base
        slots = {slot.index: i for i, slot in enumerate(kernel.io)}
        ins = []
        for tensor, b in zip(kernel.list_inputs, part.inputs):
            ins.append(self._io(kernel, slots, tensor, b, base))
        outs = [self._io(kernel, slots, y, part.outputs[node], base)
                for node, y in sorted(kernel.list_outputs.items())]
        if len(ins) != len(part.inputs):
            raise Unsupported(f"{len(kernel.list_inputs)} inputs for {len(part.inputs)} buffers")
        array = self.buf.array
        if array.dtype.itemsize != 1 or not array.flags.c_contiguous or array.size < program.size:
            raise Unsupported("the DDR buffer's host view is not one contiguous byte array")
        self.eager = bool(eager)
        self.lazy = bool(lazy) and not self.eager
        self.capacity = capacity(self.lazy)
        cp = lib.dtpu_cpath_new(self.handle, len(ins), len(outs), self.capacity)
        if cp == ffi.NULL:
            raise MemoryError("dtpu_cpath_new")
        self.cp = cp
        lib.dtpu_cpath_keep_latest(cp, int(self.lazy), float(clock_mhz))
        try:
            self._set_up(ins, outs, part.list_addr)
        except BaseException:
            self.close()
            raise
        self.io_bytes = (sum(n for _, _, n in ins), sum(n for _, _, n in outs))
        self.expected: tuple[int, int] | None = None
        self._stats = (0, 0)

    @staticmethod
    def _io(kernel, slots: dict, tensor: int, b, base: int) -> tuple[int, int, int]:
        slot = slots.get(tensor)
        if slot is None:
            raise Unsupported(f"tensor {tensor} is not gathered at the kernel's invoke")
        s = kernel.io[slot]
        if s.dtype != b.dtype or s.nbytes != b.nbytes or b.nbytes == 0:
            raise Unsupported(f"tensor {tensor} ({s.dtype}, {s.nbytes} bytes) against its "
                              f"buffer ({b.dtype}, {b.nbytes} bytes)")
        return slot, b.addr - base, b.nbytes

    def _set_up(self, ins, outs, list_addr: int) -> None:
        ffi, lib, cp, program = self.ffi, self.lib, self.cp, self.program
        ptr = ffi.cast("uint8_t*", self.buf.array.ctypes.data)
        if lib.dtpu_cpath_set_image(cp, ptr, program.size, list_addr) != 0:
            raise Unsupported(f"image of {program.size} bytes, list at {list_addr:#x}")
        for is_out, group in ((0, ins), (1, outs)):
            for i, (slot, offset, nbytes) in enumerate(group):
                if lib.dtpu_cpath_set_io(cp, is_out, i, slot, offset, nbytes) != 0:
                    raise Unsupported(f"tensor slot {slot} at image offset {offset} "
                                      f"(+{nbytes}) outside the image of {program.size} bytes")
        fields = {f["name"]: f["lsb"] for f in program.fmt.regs["CL_STATUS"]["fields"]}
        names = [""] * 32
        for name, mask in program.fmt.errors.items():
            names[int(mask).bit_length() - 1] = name
        offsets = ffi.new("uint32_t[]", [program.reg_offsets[n] for n in _REGS])
        if lib.dtpu_cpath_set_regs(cp, offsets, 1 << fields["DONE"], 1 << fields["ERROR"],
                                   program.irq_done_en | program.irq_pending, float(program.timeout_s),
                                   ",".join(names).encode()) != 0:
            raise Unsupported("register set-up refused")
        info = self.t.c_register_io()
        if info is None:
            HANDLES[self.handle] = self
            waits = type(self.t).wait_list is not Transport.wait_list
            rc = lib.dtpu_cpath_regs_python(cp, self.handle, int(bool(self.t.simulated)),
                                            int(waits))
        elif info["kind"] == "verilator":
            rc = lib.dtpu_cpath_regs_verilator(
                cp, info["sim"], info["write"], info["read"], info["run_until_done"],
                info["cycle"], info["bus_cycles"], info["poll_cycles"], info["chunk_cycles"],
                info["limit_cycles"], info["timeout_s"])
        elif info["kind"] == "mmio":
            rc = lib.dtpu_cpath_regs_mmio(cp, info["base"], info["size"])
        else:
            raise Unsupported(f"register access of kind {info['kind']!r}; known: mmio, verilator")
        if rc != 0:
            raise Unsupported(f"register access {info and info['kind']!r} refused")
        self._set_up_sync()

    def _set_up_sync(self) -> None:
        """How C keeps the DDR image coherent with the device: nothing for a coherent buffer;
        in C where the transport says how (``Transport.c_buffer_sync``: the emulated board's
        mirror); else the buffer's own flush / invalidate, called back in Python."""
        if bool(getattr(self.buf, "coherent", False)):
            return
        sync = self.t.c_buffer_sync(self.buf)
        if sync is None:
            HANDLES[self.handle] = self
            rc = self.lib.dtpu_cpath_sync_python(self.cp, self.handle)
        elif sync["kind"] == "mirror":
            rc = self.lib.dtpu_cpath_sync_mirror(self.cp, sync["host"], sync["device"],
                                                 sync["synced"], sync["size"])
        elif sync["kind"] == "xcl":
            rc = self.lib.dtpu_cpath_sync_xcl(self.cp, sync["fn"], sync["handle"], sync["bo"],
                                              sync["offset"])
        else:
            raise Unsupported(f"buffer maintenance of kind {sync['kind']!r}; known: mirror, xcl")
        if rc != 0:
            raise Unsupported(f"buffer maintenance {sync and sync['kind']!r} refused")

    def synced_bytes(self) -> tuple[int, int]:
        """Bytes C flushed and invalidated so far (its buffer maintenance, any kind)."""
        if self.cp == self.ffi.NULL:
            return 0, 0
        return (int(self.lib.dtpu_cpath_stat(self.cp, _STAT_FLUSHED)),
                int(self.lib.dtpu_cpath_stat(self.cp, _STAT_INVALIDATED)))

    # -- state ------------------------------------------------------------------------------

    def arm(self, run) -> None:
        """Let C run the partition while the backend's core holds this program (its
        ``owner_cell``), expecting `run`'s counters (another run is handed over at once: its
        report needs the target's record of it, which the next run overwrites)."""
        cycles, idle = int(run.cycles or 0), int(run.idle_cycles or 0)
        self.expected = (cycles, idle)
        cell = self.backend.owner_cell
        owner = self.ffi.cast("int64_t*", cell.ctypes.data)
        self.lib.dtpu_cpath_arm(self.cp, owner, self.program.cid, cycles, idle, int(self.eager))
        self.kernel_struct.cpath = self.cp

    def pending(self) -> int:
        return int(self.lib.dtpu_cpath_pending(self.cp)) if self.cp != self.ffi.NULL else 0

    def take(self) -> tuple[list[Record], int]:
        """The runs C kept since the last take, oldest first, and how many older runs it
        dropped unread before them (a lazy path's full ring: their reports would have left
        the report store already)."""
        if self.cp == self.ffi.NULL:
            return [], 0
        out = self.ffi.new("dtpu_cl_record[]", self.capacity)
        dropped = self.ffi.new("int64_t*")
        n = self.lib.dtpu_cpath_take(self.cp, out, self.capacity, dropped)
        records = [Record(out[i]) for i in range(n)]
        stats = (int(self.lib.dtpu_cpath_stat(self.cp, _STAT_LISTS)),
                 int(self.lib.dtpu_cpath_stat(self.cp, _STAT_CYCLES)))
        self.t.add_c_runs(stats[0] - self._stats[0], stats[1] - self._stats[1])
        self._stats = stats
        return records, int(dropped[0])

    def error(self) -> str:
        return self.ffi.string(self.lib.dtpu_cpath_error(self.cp)).decode("utf-8", "replace")

    def close(self) -> None:
        """Detach from the kernel and free the C side (its records must have been taken)."""
        HANDLES.pop(self.handle, None)
        struct = self.kernel_struct
        if struct is not None and struct.cpath == self.cp:
            struct.cpath = self.ffi.NULL
        self.kernel_struct = None
        if self.cp != self.ffi.NULL:
            self.lib.dtpu_cpath_free(self.cp)
            self.cp = self.ffi.NULL


def build(ffi, lib, kernel, program, index: int, backend, eager: bool, lazy: bool = False,
          clock_mhz: float = 0.0) -> PartitionCPath | None:
    """The C path of partition `index` for `kernel`, or None (the reason logged at debug);
    `eager`: every run handed to Python at once; `lazy`: runs kept in C until a report is read
    (the latest ones); `clock_mhz`: the build's clock, for the nap before a polled completion."""
    try:
        return PartitionCPath(ffi, lib, kernel, program, index, backend, eager, lazy, clock_mhz)
    except Unsupported as exc:
        log.debug("nodes %s stay on the Python invoke path: %s", kernel.label, exc)
        return None


# -- the register interface's Python implementation (called from C, see glue.install) -------

def _target(handle: int) -> PartitionCPath:
    path = HANDLES.get(handle)
    if path is None:
        raise LookupError(f"no C invoke path with handle {handle}")
    return path


def reg_read(handle: int, offset: int, value) -> int:
    try:
        value[0] = int(_target(handle).t.read_reg(offset)) & 0xFFFFFFFF
        return 0
    except Exception:
        log.exception("C invoke path: reading register %#x", offset)
        return -1


def reg_write(handle: int, offset: int, value: int) -> int:
    try:
        _target(handle).t.write_reg(offset, value)
        return 0
    except Exception:
        log.exception("C invoke path: writing %#x to register %#x", value, offset)
        return -1


def reg_wait(handle: int, timeout_s: float) -> int:
    try:
        return 1 if _target(handle).t.wait_list(timeout_s) else 0
    except Exception:
        log.exception("C invoke path: waiting for a list")
        return -1


def buf_sync(handle: int, to_device: int, offset: int, nbytes: int) -> int:
    try:
        buf = _target(handle).buf
        (buf.flush if to_device else buf.invalidate)(offset, nbytes)
        return 0
    except Exception:
        log.exception("C invoke path: %s of %d bytes at %d", "flush" if to_device else
                      "invalidate", nbytes, offset)
        return -1


def bind(lib) -> None:
    """Remember the loaded dtpu.so (for :func:`waiting` and the core lock)."""
    global LIB
    LIB = lib


def waiting(lib) -> bool:
    """Whether any C run anywhere waits to be folded into a report."""
    return lib is not None and lib.dtpu_cpath_records_waiting() > 0


__all__: list[Any] = ["CAPACITY", "PartitionCPath", "Record", "build", "capacity"]
