"""The emulated 2.0 register window: a 2.0 core as the host sees it over AXI4-Lite (contract2
registers), its DDR and the executor behind the doorbell. The model transport
(:class:`dtpu.driver.model_transport.ModelTransport` with ``lists=True``) and the emulated board put it
behind their register calls, so :class:`dtpu.driver.lists.ListProgram` drives it as it drives
the board.
"""
from __future__ import annotations

import time

from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor, RunResult
from dtpu.hw.listcompiler import Program
from dtpu.hw.listformat import Format


class Device:
    """A 2.0 core as the host sees it: the 2.0 registers (contract2.registers) over AXI4-Lite,
    DDR, and the executor behind the doorbell (synchronous: DONE is set when the write returns;
    `device_s` accumulates the emulation's own time so the host's can be told apart)."""

    def __init__(self, program: Program | None = None, core: Core | None = None,
                 fast_path: bool = True, *, mem=None, vector_unit: bool = False) -> None:
        """Over `program`'s own DDR image (tests, benchmarks), or over `mem` (anything with the
        HP port's ``read(addr, n)`` / ``write(addr, data)`` raising :class:`DdrFault`: a
        :class:`DdrPool` of the model's buffers, the emulated board's DDR) with `core`'s
        memories: a 2.0 core keeps the 1.2 core inside, so lists and 1.2 jobs share them."""
        if program is None and (mem is None or core is None):
            raise ValueError("regwindow.Device needs a program, or a memory and a core")
        cfg = program.cfg if program is not None else core.cfg
        self.fmt = Format(cfg)
        self.ddr = mem if mem is not None else Ddr(program.base, program.size, program.image)
        self.ex = Executor(core or Core(cfg), self.fmt, fast_path, vector_unit=vector_unit)
        self.regs = {name: int(r["reset"]) for name, r in self.fmt.regs.items()}
        self.by_offset = {int(r["offset"]): name for name, r in self.fmt.regs.items()}
        self.last: RunResult | None = None
        self.device_s = 0.0

    def write(self, offset: int, value: int) -> None:
        name = self.by_offset.get(offset)
        if name is None:
            raise KeyError(f"no 2.0 register at offset {offset:#x}")
        f = self.fmt
        if name == "DOORBELL":
            if value & 1:
                t0 = time.perf_counter()
                self._ring()
                self.device_s += time.perf_counter() - t0
            return
        if name == "CL_ERR":
            self.regs[name] &= ~value
            self._status()
            return
        if name == "IRQ":   # DONE_EN read/write, PENDING write-1-to-clear
            en, pend = self.irq_bit("DONE_EN"), self.irq_bit("PENDING")
            self.regs[name] = (self.regs[name] & ~(value & pend) & ~en) | (value & en)
            return
        if f.regs[name]["access"] != "rw":
            raise PermissionError(f"{name} is {f.regs[name]['access']}")
        self.regs[name] = value & 0xFFFFFFFF

    def read(self, offset: int) -> int:
        return self.regs[self.by_offset[offset]]

    def irq_bit(self, field_name: str) -> int:
        """The mask of the IRQ register's field `field_name` (DONE_EN, PENDING): what a host
        writes to enable or acknowledge the interrupt, read from the contract, not hard-coded."""
        return 1 << next(fl["lsb"] for fl in self.fmt.regs["IRQ"]["fields"] if fl["name"] == field_name)

    def _status(self) -> None:
        st = self.regs["CL_STATUS"] & 0b10
        self.regs["CL_STATUS"] = st | (0b100 if self.regs["CL_ERR"] else 0)

    def _ring(self) -> None:
        r = self.last = self.ex.run(self.ddr, self.regs["CL_BASE"])
        self.regs["CL_ERR"] |= r.error
        self.regs["CL_ERR_PC"], self.regs["CL_ERR_TAG"] = r.error_pc, r.error_tag
        self.regs["CL_CYCLES_LO"], self.regs["CL_CYCLES_HI"] = r.cycles & 0xFFFFFFFF, r.cycles >> 32
        self.regs["IDLE_LO"], self.regs["IDLE_HI"] = r.idle_cycles & 0xFFFFFFFF, r.idle_cycles >> 32
        self.regs["RD_BEATS"], self.regs["WR_BEATS"] = r.rd_beats & 0xFFFFFFFF, r.wr_beats & 0xFFFFFFFF
        self.regs["DESCS"] = r.descs
        self.regs["CL_STATUS"] = 0b10
        self._status()
        if self.regs["IRQ"] & self.irq_bit("DONE_EN"):
            self.regs["IRQ"] |= self.irq_bit("PENDING")
