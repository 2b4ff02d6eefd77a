"""Per-descriptor event cycles of dtpu_cl_top next to the golden model's Timeline (a debugging
helper for docs/rtl.md "RUN / POST cycles against the Timeline").

:class:`Probe` watches internal signals of dtpu_cl_top through cocotb handles while one list
runs and records, per descriptor, the cycle (counted like CL_CYCLES: cycles with the
sequencer busy, the first is 0) of

* ``head``: the sequencer takes the header (state S_HEAD, d_valid), with the opcode;
* ``start``: CTRL.START reaches the core (a LOAD's 1.2 job or a RUN);
* ``ar``: the load unit's first read request (la_req handshake) after the start;
* ``act``: the first activation word into the core (s_axis_act handshake);
* ``res``: the core's last result word (m_axis_res handshake) so far;
* ``done``: the core's DONE;
* ``aw``: the last write burst request so far;
* ``wlast`` / ``b``: the last write beat and the last write response seen so far.

The model's side is ``Executor.events`` (the Timeline's ``head`` / ``load`` / ``run`` /
``end`` records). :func:`table` puts both side by side per descriptor; nothing is asserted
here (the regressions assert CL_CYCLES, IDLE, RD_BEATS, WR_BEATS)."""
from __future__ import annotations

import cocotb
from cocotb.triggers import RisingEdge

S_HEAD = 2


class Probe:
    def __init__(self, dut, bus: bool = False):
        self.dut = dut
        self.descs: list[dict] = []      # one dict per descriptor taken
        self.wlast = self.b = None
        self.n = -1
        self._task = None
        #: with bus=True: (cycle, "AR", address, beats) and (cycle, "R0") of every read burst
        self.bus: list | None = [] if bus else None
        self._r_first = True

    def start(self) -> None:
        self._task = cocotb.start_soon(self._watch())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _watch(self) -> None:
        d = self.dut
        seq = d.seq_inst
        cur: dict | None = None
        while True:
            await RisingEdge(d.clk)
            busy = int(seq.busy.value)
            if busy:
                self.n += 1
            elif self.n < 0:
                continue
            n = self.n
            if int(seq.state.value) == S_HEAD and int(seq.d_valid.value):
                op = int(seq.d_data.value) & 0xFF
                cur = {"op": op, "head": n}
                self.descs.append(cur)
            if cur is None:
                continue
            if int(d.core_inst.start.value) and "start" not in cur:
                cur["start"] = n
            if int(d.la_req_valid.value) and int(d.la_req_ready.value) and "ar" not in cur:
                cur["ar"] = n
            if int(d.c_act_tvalid.value) and int(d.c_act_tready.value):
                cur.setdefault("act", n)
                cur.setdefault("act_t", []).append(n)
            if self.bus is not None:
                if int(d.m_axi_arvalid.value) and int(d.m_axi_arready.value):
                    self.bus.append((n, "AR", int(d.m_axi_araddr.value),
                                     int(d.m_axi_arlen.value) + 1))
                if int(d.m_axi_rvalid.value) and int(d.m_axi_rready.value):
                    if self._r_first:
                        self.bus.append((n, "R0"))
                    self._r_first = bool(int(d.m_axi_rlast.value))
            if int(d.c_res_tvalid.value) and int(d.c_res_tready.value):
                cur["res"] = n
                cur.setdefault("res_t", []).append(n)
            if int(d.m_axi_awvalid.value) and int(d.m_axi_awready.value):
                cur["aw"] = n
            if int(d.core_done.value) and "done" not in cur:
                cur["done"] = n
            if int(d.m_axi_wvalid.value) and int(d.m_axi_wready.value) \
                    and int(d.m_axi_wlast.value):
                self.wlast = n
                cur["wlast"] = n
            if int(d.m_axi_bvalid.value) and int(d.m_axi_bready.value):
                self.b = n
                cur["b"] = n
            if not busy:
                return


OPS = {0: "END", 1: "LOAD", 2: "REGS", 3: "RUN", 4: "POST"}

#: cycles cocotbext-axi's channels add to sim/dtpu_sim/axi_mem.py's latency: a read burst's first
#: beat comes `lat` + 2 cycles after its AR handshake, a write response `lat` + 2 after the last
#: W beat (measured; the C++ memory of pylib/dtpu/rtl/axi_mem.h adds none)
AXI_MEM_SKEW = 2


def contract_lat(fmt) -> tuple[int, int]:
    """axi_mem.Mem's `lat` that makes it the contract's memory model: every read burst's first
    beat MEM_READ_LATENCY after its AR handshake (MEM_READ_LATENCY = MEM_WRITE_LATENCY here)."""
    rl = int(fmt.mem["MEM_READ_LATENCY"])
    assert rl == int(fmt.mem["MEM_WRITE_LATENCY"]), "one latency for both channels"
    return (rl - AXI_MEM_SKEW,) * 2


def table(probe: Probe, events: list) -> list[str]:
    """Lines: per descriptor the RTL's events and the model's (head, and for a RUN / POST its
    start, first activation beat, end, write response due)."""
    model: list[dict] = []
    for e in events:
        if e[0] == "head":
            model.append({"head": e[1]})
        elif e[0] == "run" and model:
            model[-1].update(start=e[1], act=e[2], done=e[3], b=e[4])
        elif e[0] == "load" and model:
            model[-1].update(first=e[1], last=e[2], done=e[3])
        elif e[0] == "end":
            model.append({"END(cycles)": e[1]})
    out = []
    for i in range(max(len(probe.descs), len(model))):
        r = probe.descs[i] if i < len(probe.descs) else {}
        m = model[i] if i < len(model) else {}
        op = OPS.get(r.get("op"), "?")
        keys = ("head", "start", "ar", "act", "res", "done", "aw", "wlast", "b")
        rs = " ".join(f"{k}={r[k]}" for k in keys if k in r)
        ms = " ".join(f"{k}={v}" for k, v in m.items())
        diff = ""
        if "head" in r and "head" in m:
            diff = f" dHEAD={r['head'] - m['head']:+d}"
            if "done" in r and "done" in m and op in ("RUN", "POST"):
                diff += f" dDONE={r['done'] - m['done']:+d}"
        out.append(f"{i:3d} {op:5s} RTL[{rs}]  MODEL[{ms}]{diff}")
    if len(model) > len(probe.descs) and "END(cycles)" in model[-1]:
        pass
    return out


# ------------------------------------------------------------------------ in process (C++ memory)

def run_diffs(model_events: list, trace_events) -> list[tuple]:
    """Per RUN / POST of the last list, the model's (start, first beat, end) next to the RTL's
    end and busy / stall cycles: `model_events` is ``Executor.events`` (the Timeline's record),
    `trace_events` the rows of ``NativeListTransport.trace_events()[1]`` (dtpu.rtl.nodetrace).
    Rows (op, model start, model first beat, model end, RTL end, RTL - model, RTL busy, RTL
    stall); the first row with a non-zero difference is where the two timelines part
    (docs/rtl.md "ACC RUNs and POST")."""
    runs_m = [e for e in model_events if e[0] == "run"]
    runs_r = [e for e in trace_events if int(e["op"]) in (3, 4)]
    return [(int(r["op"]), m[1], m[2], m[3], int(r["end"]), int(r["end"]) - m[3],
             int(r["busy"]), int(r["stall"])) for m, r in zip(runs_m, runs_r)]


def axi_log(events, kinds=("AR", "R_FIRST", "R_LAST", "AW", "W_LAST", "B"), offset: int = 0,
            base: int = 0) -> list[str]:
    """``NativeListTransport.events()`` (its AXI handshakes, after ``log_events(True)``) as
    "cycle:KIND:beats:address" strings, the cycle shifted by `offset` (the model's cycles are
    CL_CYCLES': the list's first AR is SEQ_FETCH_START after DOORBELL) and the address relative
    to `base`."""
    if len(events) == 0:
        return []
    c0 = int(events["cycle"][0])
    return [f"{int(e['cycle']) - c0 + offset}:{kinds[int(e['kind'])]}:{int(e['beats'])}:"
            f"{int(e['addr']) - base:#x}" for e in events]
