"""The simulated RTL's per-node record of a command list (backend=rtl, path=lists).

No register of dtpu_cl_top splits CL_CYCLES by node; the golden model keeps that split in
:class:`dtpu.hw.list_result.RunResult` ``tags`` (per descriptor TAG: ``[end of its last job,
stall-free job cycles, act words, res words, wgt words]``, :func:`dtpu.hw.list_result.tag_span`).
The two list transports build the same record from the simulated RTL itself, by watching a few
of its registers while a list runs (the sequencer's state and TAG, CL_CYCLES and IDLE, the 1.2
register file's busy / STALL / WORDS_* counters; the build makes them public):

* in process, the C++ harness (native_cl.cpp ``Tracer``) on the cycles the sequencer's state
  changes, into :data:`EVENT_DTYPE` rows (:meth:`dtpu.rtl.native.NativeListTransport.trace_events`);
* under cocotb, :class:`CocotbTracer` (a coroutine woken by the state's value changes) with the
  same rules, into the same rows.

Per descriptor (an *event*), when the sequencer leaves it:

* LOAD (left through S_LAFTER): the words its 1.2 LOAD job took on s_axis_wgt (WORDS_WGT);
  no cycles (a LOAD's job is IDLE in the contract), no end (the model sets none);
* RUN (S_RRUN left for S_HEAD or S_RCLR: the core's DONE without error): ``end`` = CL_CYCLES'
  counter at that moment, the core's busy cycles (JOB_CYCLES) and STALL cycles since the RUN's
  CTRL.START, its words on s_axis_act / m_axis_res (counted up to the next RUN's start or the
  list's end, so a result word after DONE still counts);
* POST (S_PRUN left for S_HEAD): ``end`` likewise, the post unit's cycles (its start to its
  end) and, as its stall, the cycles of S_PRUN in which it waited for a partial sum (running,
  sums still owed, none valid: the read latency, a slow memory); no core stream words;
* VEC (VEC_EN builds; S_VRUN left for S_HEAD: the vector unit's `done`, the model's end of
  the VEC): ``end`` likewise, as its cycles those the top did not count as IDLE while the
  sequencer waited in S_VRUN (the unit's stall-free cycles, dtpu_vec ``active``); no stall.

:func:`run_result` folds the events per TAG into a RunResult (``cycles`` = CL_CYCLES, ``idle``
= IDLE, both as the RTL counted them at the list's end) so that ``node_cycles`` / ``node_words``
work as on backend=model. ``end`` is on the model's scale: the model's ``end`` of a job
(``Timeline.run``: ``core_free``) is the first cycle after the core's DONE, the cycle the
sequencer has left the RUN (its state changes at the edge that samples DONE), so ``end`` is
CL_CYCLES' counter then, :data:`END_OFFSET` = 0 (checked against branch runexact's Timeline,
where the whole list's cycles are exact: every node's end equal). Each tag's span carries two more entries: ``[5]`` the list cycles the RTL
did not count as IDLE during its jobs, ``[6]`` its RUNs' STALL cycles, ``[7]`` the
stall-free cycles of its POSTs (part of ``[1]``; neither the contract's IDLE nor, since
branch accpost, the RTL's counts them: docs/rtl.md "ACC RUNs and POST").
"""
from __future__ import annotations

import numpy as np

#: native_cl.cpp TraceEvent
EVENT_DTYPE = np.dtype([("end", "<u8"), ("busy", "<u8"), ("stall", "<u8"), ("act", "<u8"),
                        ("res", "<u8"), ("wgt", "<u8"), ("nonidle", "<u8"), ("tag", "<u4"),
                        ("op", "<u4")])
OP_LOAD, OP_RUN, OP_POST, OP_VEC = 1, 3, 4, 5

#: dtpu_cl_seq's state codes the record needs (hw/rtl/dtpu_cl_seq.v; native_cl.cpp's enum)
S_IDLE, S_HEAD, S_LCHK, S_LAFTER = 0, 2, 5, 11
S_RSTART, S_RRUN, S_RCLR, S_PRUN, S_PGO, S_VRUN = 18, 19, 20, 24, 26, 28

#: CL_CYCLES' counter when the sequencer leaves a RUN / POST, minus the model's ``end`` of it
END_OFFSET = 0


def run_result(info: dict, events: np.ndarray):
    """A :class:`dtpu.hw.list_result.RunResult` of the last list from the record (`info` as
    :meth:`NativeListTransport.trace_events` gives it)."""
    from dtpu.hw.list_result import RunResult

    tags: dict = {}
    compute = runs = 0
    for e in events:
        op, tag = int(e["op"]), int(e["tag"])
        span = tags.get(tag)
        if span is None:
            span = tags[tag] = [0, 0, 0, 0, 0, 0, 0, 0]
        if op == OP_LOAD:
            span[4] += int(e["wgt"])
            continue
        cycles = int(e["busy"]) - int(e["stall"])
        span[0] = int(e["end"]) - END_OFFSET
        span[1] += cycles
        span[2] += int(e["act"])
        span[3] += int(e["res"])
        span[5] += int(e["nonidle"])
        if op == OP_POST:
            span[7] += cycles
        else:
            span[6] += int(e["stall"])
        compute += cycles
        runs += 1
    return RunResult(cycles=int(info["cycles"]), idle_cycles=int(info["idle"]),
                     compute_cycles=compute, runs=runs, tags=tags)


class CocotbTracer:
    """The record of native_cl.cpp's Tracer under cocotb: the same registers of `dut`
    (dtpu_cl_top, built with :data:`dtpu.rtl.build.CL_TRACE_VLT` public), the same rules, the
    same rows. :meth:`start` once the simulation runs; a coroutine then wakes on every value
    change of the sequencer's state (a few per descriptor), not every cycle."""

    def __init__(self, dut) -> None:
        seq, rf = dut.seq_inst, dut.regfile_inst
        po = dut.post_inst
        self._h = {"state": seq.state, "tag": seq.tag, "cyc": dut.cl_cycles, "idle": dut.cl_idle,
                   "busy": rf.cycles_reg, "stall": rf.stall_reg, "wgt": rf.words_wgt_reg,
                   "act": rf.words_act_reg, "res": rf.words_res_reg, "p_run": po.run_reg,
                   "p_pix": po.p_reg, "p_npix": po.pix_reg, "p_wvalid": po.w_valid}
        self._clk = dut.clk
        self._p_wait = 0
        self._p_task = None
        self.events: list[tuple] = []
        self.lists = 0
        self.done = False
        self.cycles = self.idle = 0
        self._prev = S_IDLE
        self._s: dict = {}
        self._last_run = -1
        self._task = None

    def _rd(self, name: str) -> int:
        return int(self._h[name].value)

    def start(self) -> None:
        import cocotb

        self._prev = self._rd("state")
        self._task = cocotb.start_soon(self._watch())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _watch(self) -> None:
        try:
            from cocotb.triggers import ValueChange as change
        except ImportError:           # cocotb 1.x
            from cocotb.triggers import Edge as change

        state = self._h["state"]
        while True:
            await change(state)
            st = int(state.value)
            if st != self._prev:
                self._step(st)

    async def _post_waits(self) -> None:
        """While the sequencer is in S_PRUN: per cycle, the post unit waiting for a sum. Read
        where the in-process harness samples (clk low, the memory's outputs driven: ReadOnly
        after the falling edge, as ContractMem samples its handshakes)."""
        from cocotb.triggers import FallingEdge, ReadOnly

        try:
            while True:
                await FallingEdge(self._clk)
                await ReadOnly()
                if int(self._h["state"].value) != S_PRUN:
                    return
                if self._rd("p_run") and self._rd("p_pix") != self._rd("p_npix") \
                        and not self._rd("p_wvalid"):
                    self._p_wait += 1
        finally:
            self._p_task = None

    def _nonidle(self) -> int:
        return self._rd("cyc") - self._rd("idle")

    def _push(self, op: int, busy: int, stall: int, act: int, res: int, wgt: int) -> None:
        self.events.append((self._rd("cyc"), busy, stall, act, res, wgt,
                            self._nonidle() - self._s.get("nonidle", 0), self._rd("tag"), op))

    def _settle_run(self) -> None:
        if self._last_run >= 0:
            e = list(self.events[self._last_run])
            e[3] = self._rd("act") - self._s["r_act"]
            e[4] = self._rd("res") - self._s["r_res"]
            self.events[self._last_run] = tuple(e)

    def _step(self, st: int) -> None:
        prev, s = self._prev, self._s
        if prev == S_IDLE:
            self.events.clear()
            self.done = False
            self._last_run = -1
        if st == S_LCHK:
            s["wgt"], s["nonidle"] = self._rd("wgt"), self._nonidle()
        elif st == S_LAFTER and prev != S_LAFTER:
            self._push(OP_LOAD, 0, 0, 0, 0, self._rd("wgt") - s["wgt"])
        elif st == S_RSTART and prev != S_RSTART:
            self._settle_run()
            s.update(busy=self._rd("busy"), stall=self._rd("stall"), nonidle=self._nonidle(),
                     r_act=self._rd("act"), r_res=self._rd("res"))
        elif prev == S_RRUN and st in (S_HEAD, S_RCLR):
            self._last_run = len(self.events)
            self._push(OP_RUN, self._rd("busy") - s["busy"], self._rd("stall") - s["stall"],
                       self._rd("act") - s["r_act"], self._rd("res") - s["r_res"], 0)
        elif st == S_PGO:
            s["cyc"], s["nonidle"] = self._rd("cyc"), self._nonidle()
            self._p_wait = 0
        elif prev == S_PRUN and st == S_HEAD:
            self._push(OP_POST, self._rd("cyc") - s["cyc"], self._p_wait, 0, 0, 0)
        elif st == S_VRUN and prev != S_VRUN:
            s["nonidle"] = self._nonidle()
        elif prev == S_VRUN and st == S_HEAD:
            self._push(OP_VEC, self._nonidle() - s["nonidle"], 0, 0, 0, 0)
        if st == S_PRUN and self._p_task is None:
            import cocotb

            self._p_task = cocotb.start_soon(self._post_waits())
        if st == S_IDLE:
            self._settle_run()
            self.cycles, self.idle = self._rd("cyc"), self._rd("idle")
            self.done = True
            self.lists += 1
        self._prev = st

    def trace_events(self) -> tuple[dict, np.ndarray]:
        """As :meth:`dtpu.rtl.native.NativeListTransport.trace_events`."""
        info = {"lists": self.lists, "done": int(self.done), "cycles": self.cycles,
                "idle": self.idle, "events": len(self.events)}
        return info, np.array(self.events, EVENT_DTYPE) if self.events else np.zeros(0, EVENT_DTYPE)


__all__ = ["CocotbTracer", "END_OFFSET", "EVENT_DTYPE", "run_result"]
