"""The contract's memory model as a cocotb AXI4 slave, for the cocotb lists transport.

Why not cocotbext-axi's AxiRam: its read and write processes answer one burst at a time after
a latency of a cycle or two, and its channel sinks raise READY from their queue state, so the
cycle a burst's first beat arrives is not the contract's (``contract2.memory_model``: first beat
exactly MEM_READ_LATENCY after the AR handshake, at most MEM_READ_OUTSTANDING bursts accepted,
bursts in order, B exactly MEM_WRITE_LATENCY after the last W beat). For CL_CYCLES to be
comparable with the in-process harness, this is a line-by-line port of the C++ model
(``axi_mem.h``, ``dtpu::AxiMem``) without its disorder knobs: the same state, the same
``drive`` (outputs from the state), the same retire order (R, AR, B, W, AW).

One cycle, as the C++ harness's tick: at the falling edge the outputs are driven from the
state; at ReadOnly of that time step (everything settled, nothing changes until the rising
edge) every handshake is sampled (valid && ready, the values the core's flops see at the
rising edge) and retired into the state. The image is the host's numpy array (the DDR buffers
of :class:`dtpu.rtl.native.SimDdr`), read and written in place; DECERR outside the image or
outside the allocated windows, as the C++ model.
"""
from __future__ import annotations

import logging
from collections import deque

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

log = logging.getLogger(__name__)

OKAY, SLVERR, DECERR = 0, 2, 3


class ContractMem:
    """AXI4 slave on ``m_axi_*`` of `dut` serving `image` (uint8, at address `base`)."""

    def __init__(self, dut, image: np.ndarray, base: int, timing: dict, prefix: str = "m_axi",
                 windows=None) -> None:
        self.dut, self.p = dut, prefix
        self.image, self.base, self.size = image, int(base), int(image.size)
        self.rd_latency = int(timing["MEM_READ_LATENCY"])
        self.rd_outstanding = int(timing["MEM_READ_OUTSTANDING"])
        self.wr_latency = int(timing["MEM_WRITE_LATENCY"])
        self.wr_outstanding = int(timing["MEM_WRITE_OUTSTANDING"])
        self.max_burst = int(timing["MEM_BURST_BEATS"])
        self.windows = windows            # callable -> [(lo, hi)] or None (the whole image)
        self.cycle = 0
        self.rd_beats = self.wr_beats = self.rd_bursts = self.wr_bursts = 0
        self.violations: list[str] = []
        self.rq: deque = deque()          # [id, addr, len, sent, ready]
        self.wq: deque = deque()          # [id, addr, len, got, resp]
        self.bq: deque = deque()          # (id, ready, resp)
        self.has_wr = hasattr(dut, f"{prefix}_awvalid")
        s = lambda n: getattr(dut, f"{prefix}_{n}")  # noqa: E731
        self._in = {n: s(n) for n in ("arvalid", "araddr", "arlen", "arsize", "arburst", "arid",
                                      "rready")}
        self._out = {n: s(n) for n in ("arready", "rvalid", "rdata", "rresp", "rlast", "rid")}
        if self.has_wr:
            self._in.update({n: s(n) for n in ("awvalid", "awaddr", "awlen", "awsize", "awburst",
                                               "awid", "wvalid", "wdata", "wstrb", "wlast",
                                               "bready")})
            self._out.update({n: s(n) for n in ("awready", "wready", "bvalid", "bresp", "bid")})
        for sig in self._out.values():
            sig.value = 0
        self._task = cocotb.start_soon(self._run())

    # -- the C++ model's checks
    def _check(self, a: int) -> int:
        lo = a & ~7
        if lo < self.base or lo + 8 > self.base + self.size:
            return DECERR
        if self.windows is not None:
            if not any(w0 <= lo and lo + 8 <= w1 for w0, w1 in self.windows()):
                return DECERR
        return OKAY

    def _monitor(self, addr: int, beats: int, size: int, burst: int, ch: str) -> None:
        if size != 3 or burst != 1 or addr % 8:
            self.violations.append(f"{ch} at {addr:#x}: not 8-byte INCR beats")
        if (addr & 0xFFF) + 8 * beats > 0x1000:
            self.violations.append(f"{ch} at {addr:#x} of {beats} beats crosses a 4 KiB boundary")
        if beats > self.max_burst:
            self.violations.append(f"{ch} at {addr:#x} of {beats} beats > {self.max_burst}")

    def _word(self, a: int) -> int:
        o = (a & ~7) - self.base
        return int(self.image[o:o + 8].view("<u8")[0])

    async def _run(self) -> None:
        clk = self.dut.clk
        i, o = self._in, self._out
        while True:
            await FallingEdge(clk)
            # drive: the outputs of this cycle from the state
            arready = len(self.rq) < self.rd_outstanding
            rvalid = False
            if self.rq and self.rq[0][4] <= self.cycle:
                bid, addr, n, sent, _ = self.rq[0]
                a = addr + 8 * sent
                rresp = self._check(a)
                o["rdata"].value = self._word(a) if rresp == OKAY else 0
                o["rresp"].value = rresp
                o["rlast"].value = int(sent + 1 == n)
                o["rid"].value = bid
                rvalid = True
            o["arready"].value = int(arready)
            o["rvalid"].value = int(rvalid)
            if self.has_wr:
                awready = len(self.wq) + len(self.bq) < self.wr_outstanding
                wready = len(self.wq) > 0
                bvalid = bool(self.bq) and self.bq[0][1] <= self.cycle
                if bvalid:
                    o["bresp"].value = self.bq[0][2]
                    o["bid"].value = self.bq[0][0]
                o["awready"].value = int(awready)
                o["wready"].value = int(wready)
                o["bvalid"].value = int(bvalid)
            await ReadOnly()
            # sample every handshake of this cycle (what the core's flops see at the rising edge)
            fire_ar = arready and int(i["arvalid"].value)
            fire_r = rvalid and int(i["rready"].value)
            if self.has_wr:
                fire_aw = awready and int(i["awvalid"].value)
                fire_w = wready and int(i["wvalid"].value)
                fire_b = bvalid and int(i["bready"].value)
                if fire_aw:
                    aw = (int(i["awid"].value), int(i["awaddr"].value), int(i["awlen"].value) + 1,
                          int(i["awsize"].value), int(i["awburst"].value))
                if fire_w:
                    w = (int(i["wdata"].value), int(i["wstrb"].value), int(i["wlast"].value))
            if fire_ar:
                ar = (int(i["arid"].value), int(i["araddr"].value), int(i["arlen"].value) + 1,
                      int(i["arsize"].value), int(i["arburst"].value))
            # retire, in the C++ harness's order: R, AR, B, W, AW
            if fire_r:
                b = self.rq[0]
                b[3] += 1
                self.rd_beats += 1
                if b[3] == b[2]:
                    self.rq.popleft()
            if fire_ar:
                self._monitor(ar[1], ar[2], ar[3], ar[4], "AR")
                self.rq.append([ar[0], ar[1], ar[2], 0, self.cycle + self.rd_latency])
                self.rd_bursts += 1
            if self.has_wr:
                if fire_b:
                    self.bq.popleft()
                if fire_w:
                    b = self.wq[0]
                    a = b[1] + 8 * b[3]
                    resp = self._check(a)
                    if resp == OKAY:
                        off = (a & ~7) - self.base
                        data, strb = w[0], w[1]
                        for k in range(8):
                            if strb >> k & 1:
                                self.image[off + k] = (data >> (8 * k)) & 0xFF
                    b[4] = max(b[4], resp)
                    b[3] += 1
                    self.wr_beats += 1
                    if bool(w[2]) != (b[3] == b[2]):
                        self.violations.append(f"WLAST on beat {b[3]} of a {b[2]}-beat burst at "
                                               f"{b[1]:#x}")
                    if b[3] == b[2]:
                        self.bq.append((b[0], self.cycle + self.wr_latency, b[4]))
                        self.wq.popleft()
                if fire_aw:
                    self._monitor(aw[1], aw[2], aw[3], aw[4], "AW")
                    self.wq.append([aw[0], aw[1], aw[2], 0, OKAY])
                    self.wr_bursts += 1
            self.cycle += 1

    def counts(self) -> dict[str, int]:
        return {"rd_beats": self.rd_beats, "wr_beats": self.wr_beats, "rd_bursts": self.rd_bursts,
                "wr_bursts": self.wr_bursts, "violations": len(self.violations),
                "reads_in_flight": len(self.rq), "writes_in_flight": len(self.wq) + len(self.bq),
                "cycle": self.cycle}


__all__ = ["ContractMem"]
