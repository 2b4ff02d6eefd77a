"""The simulated 2.0 device's sequencer: a command list decoded *from the DDR bytes* (so the binary
format is what is tested), its data moved as the load and store units move it, every job's
arithmetic run on the 1.2 core model (:mod:`dtpu.hw.fast`'s compiled jobs, the datapath
backend=model uses, so outputs are bit-identical), and the list timed by
:class:`~dtpu.hw.timeline.Timeline`. The reference the RTL's dtpu_cl_top is compared with.

What the Timeline is told of each descriptor is derived in :mod:`dtpu.hw.step_timing`; what a
list did is a :class:`~dtpu.hw.list_result.RunResult`; a list run again replays its data path
through :mod:`dtpu.hw.replay`.
"""
from __future__ import annotations

import gc
import logging
from contextlib import contextmanager

import numpy as np

from dtpu.hw import fast, kernels, step_timing
from dtpu.hw.config import ceil_div, out_lanes
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr, DdrFault
from dtpu.hw.list_result import RunResult, tag_span
from dtpu.hw.listformat import Format, ListFault
from dtpu.hw.replay import ListReplay, replayable
from dtpu.hw.step_timing import replay_call, timing_of
from dtpu.hw.timeline import Timeline
from dtpu.hw.units.load import act_schedule, pointwise_window, window_index
from dtpu.hw.units.store import result_gaps
from dtpu.hw.units import vector as vector_unit

log = logging.getLogger(__name__)

_U64 = np.dtype("<u8")


#: element dtype of a lane by its byte size (the units move bytes; signedness is the core's)
_EDT = {1: np.dtype("u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}


def list_words_of(ddr: "Ddr", list_addr: int, fmt: Format, limit: int = 1 << 16) -> int | None:
    """Words of the list at `list_addr` up to and including END, following the headers' LEN as
    the fetcher's END scan does; None when the chain hits an unknown opcode, LEN 0 or a fault
    first (the list fails; its blocks are then read as needed)."""
    pc, n = list_addr, 0
    try:
        for _ in range(limit):
            h = fmt.fields_of("HEADER", int(ddr.read(pc, 8).view(_U64)[0]))
            op = fmt.opnames.get(h["OP"])
            if op is None or h["LEN"] == 0:
                return None
            n += h["LEN"]
            if op == "END":
                return n
            pc += 8 * h["LEN"]
    except DdrFault:
        return None
    return None


class Executor:
    """Runs command lists from DDR on a 1.2 core model (the datapath) plus the 2.0 units."""

    MAX_DESCS = 1 << 16
    #: compiled forms kept per register set (a streamed node's pages sharing a scratch half)
    MAX_VARIANTS = 32
    #: gather WINDOWS streams with kernels.c when it is built (False: numpy's index, the
    #: reference tests/test_gather.py compares it with)
    kernels_ok = True
    #: a list run again replays its data path from operations prepared once
    #: (:mod:`dtpu.hw.replay`); False: it takes its decoded steps one by one, the reference
    #: tests/test_list_replay.py compares the replay with
    replay = True
    #: Python's cyclic garbage collector is paused while a list's timeline is computed
    #: (:func:`collector_paused`)
    pause_collector = True

    def __init__(self, core: Core | None = None, fmt: Format | None = None,
                 fast_path: bool = True, *, vector_unit: bool = False) -> None:
        """`fast_path` False runs every job through the core's register/stream protocol (START,
        push, pop) instead of :mod:`dtpu.hw.fast`'s compiled jobs: the reference the fast path
        is proven equal to (tests/test_cmdlist.py); jobs the fast path does not compile run
        that way anyway. `vector_unit`: the core has contract 2.1's optional vector unit; without
        it (today's RTL and board) a VEC descriptor is BAD_OPCODE, as dtpu_cl_seq answers it."""
        self.vector_unit = vector_unit
        self.core = core or Core()
        self.fmt = fmt or Format(self.core.cfg)
        self.fast_path = fast_path
        self._compiled: dict = {}
        #: id of a RUN descriptor's fields -> (them, its registers, the compiled form it ran)
        self._last_form: dict = {}
        #: per RUN's ACT fields, the gather index :meth:`gather` computed (reused when the
        #: same descriptor runs again; testbenches clear it to time the index's computation)
        self.gather_cache: dict = {}
        #: id of a RUN's ACT2 fields -> (its ACT0..ACT3, the bound C gather, words' shape)
        self.gather_runs: dict = {}
        #: list address -> (its bytes, decoded steps, ..., the recorded timeline): a list run
        #: again with the same bytes replays its decoding and its timeline
        self.decoded: dict = {}
        #: a list to collect the Timeline's per-descriptor events into (None: off; a list's
        #: events are recorded only when its timeline is computed, not when reused)
        self.events: list | None = None
        self._res_gaps: tuple | None = None
        c = self.core.cfg
        self._job_regs = {reg.offset: reg.name for reg in c.registers if reg.access == "rw"
                          and reg.name not in ("CTRL",)}

    def run(self, ddr: Ddr, list_addr: int) -> RunResult:
        """Fetch, decode and execute the list at `list_addr`.

        Emulation speed, not semantics: the decoding of a list that reached its END is kept
        with the list's bytes and reused while they are unchanged (compared on every run), and
        so is its timeline once a run of it succeeded: the memory model's figures are a function
        of the descriptors alone, so a later run of the same bytes moves the data and computes
        without redoing them. Should that run fail at descriptor k, the timeline up to k is
        rebuilt from the recorded memory-model steps, as a run that decoded it would have it."""
        f = self.fmt
        r = RunResult()
        regs: dict[int, int] = {}
        cached = self.decoded.get(list_addr)
        entry = None
        if cached is not None:
            try:
                if ddr.read(list_addr, len(cached[0])).tobytes() == cached[0]:
                    entry = cached
            except DdrFault:
                entry = None
        tl: Timeline | None = None
        if entry is None or entry[3] is None:   # the timeline is computed (else replayed)
            if entry is not None and entry[1] and entry[1][-1][2] == "END":
                words = sum(st[3] for st in entry[1])
            else:
                words = list_words_of(ddr, list_addr, f)
            tl = Timeline(f, list_words=words, events=self.events, list_addr=list_addr)
        k = 0
        try:
            if entry is None:
                with collector_paused(self.pause_collector):
                    self._decode_list(ddr, list_addr, r, tl, regs)
            elif entry[3] is None:   # decoded, never ran to the end: record its timeline
                calls: list = []
                with collector_paused(self.pause_collector):
                    for step in entry[1]:
                        self._step(ddr, list_addr, step, r, tl, regs, calls)
                entry[2][:] = calls
                entry[3] = timing_of(r, tl)
            elif not self.replay or not replayable(ddr):
                for k, step in enumerate(entry[1]):
                    self._step(ddr, list_addr, step, r, None, regs)
            else:   # the data path alone, prepared once per list and DDR layout
                plan = entry[4]
                if plan is None or not plan.usable(ddr):
                    plan = entry[4] = ListReplay(self, ddr, entry[1])
                at = [0]
                try:
                    plan.run(self, ddr, list_addr, r, at)
                finally:
                    k = at[0]
        except (ListFault, DdrFault) as e:
            r.error |= f.errors[e.kind]
            r.message = str(e)
            if tl is None:
                tl = self._timeline_upto(entry, k, r, list_addr)
        if tl is None:
            cycles, compute, rd, wr, descs, runs, tags = entry[3]
            r.cycles, r.compute_cycles, r.idle_cycles = cycles, compute, cycles - compute
            r.rd_beats, r.wr_beats, r.descs, r.runs, r.tags = rd, wr, descs, runs, tags
        else:
            end = tl.end()
            r.cycles = end
            r.compute_cycles = tl.compute
            r.idle_cycles = end - tl.compute
            r.rd_beats = tl.rd_beats
            r.wr_beats = tl.wr_beats
        if r.error:
            log.warning("command list at %#x failed at offset %d (tag %#x): %s", list_addr,
                        r.error_pc, r.error_tag, r.message)
        return r

    def _timeline_upto(self, entry, k: int, r: RunResult,
                       list_addr: int | None = None) -> "Timeline":
        """The timeline of a run that failed at step k: the recorded memory-model steps before
        it, then k's fetch (what :meth:`_step` had done when k's data movement failed)."""
        words = sum(st[3] for st in entry[1]) if entry[1][-1][2] == "END" else None
        tl = Timeline(self.fmt, list_words=words, list_addr=list_addr)
        r.descs, r.runs, r.tags = 0, 0, {}
        for call in entry[2][:k]:
            replay_call(tl, r, call)
        tl.fetch(entry[1][k][3])
        r.descs += 1
        return tl

    def _decode_list(self, ddr: Ddr, list_addr: int, r: RunResult, tl: "Timeline",
                     regs: dict) -> list:
        """Decode descriptor by descriptor from DDR, executing each as it comes (an error stops
        the list where it is); returns the steps once END is reached, and caches them."""
        f = self.fmt
        pc = list_addr
        steps = []
        calls: list = []
        while True:
            if len(steps) >= self.MAX_DESCS:
                raise ListFault("BAD_LENGTH", f"no END within {self.MAX_DESCS} descriptors")
            head = int(ddr.read(pc, 8).view(_U64)[0])
            h = f.fields_of("HEADER", head)
            r.error_pc, r.error_tag = pc - list_addr, h["TAG"]
            op = f.opnames.get(h["OP"])
            if op is None:
                raise ListFault("BAD_OPCODE", f"opcode {h['OP']} at list offset {pc - list_addr}; "
                               f"accepted: {f.opcodes}")
            if op == "VEC" and not self.vector_unit:
                raise ListFault("BAD_OPCODE", f"VEC at list offset {pc - list_addr}: this core "
                               f"has no vector unit (contract 2.1's optional unit)")
            n = h["LEN"]
            ok = (n == f.length(op)) if op != "REGS" else n >= 2
            if not ok:
                raise ListFault("BAD_LENGTH", f"{op} with LEN={n}; its layout has "
                               f"{f.length(op) if op != 'REGS' else '>= 2'} words")
            body = ddr.read(pc, 8 * n).view(_U64)[1:]
            if op == "LOAD":
                payload = (f.fields_of("LOAD1", body[0]), f.fields_of("LOAD2", body[1]))
            elif op == "REGS":
                payload = [(f.field("REG", w, "OFFSET"), f.field("REG", w, "VALUE")) for w in body]
            elif op == "POST":
                payload = {k: f.fields_of(k, w) for k, w in zip(f.layout["POST"][1:], body)}
            elif op == "VEC":
                payload = {k: f.fields_of(k, w) for k, w in zip(f.layout["VEC"][1:], body)}
            elif op == "RUN":
                payload = {k: f.fields_of(k, w) for k, w in zip(f.layout["RUN"][1:], body)}
                payload["FIRST"] = bool(h["FLAGS"] & f.flag_first)
            else:
                payload = None
            step = (pc - list_addr, h, op, n, payload)
            steps.append(step)
            pc += 8 * n
            if op == "END":
                # cached before END runs: a list that decodes whole keeps its decoding even
                # if a step failed (its timeline is recorded by a run that succeeds)
                if len(self.decoded) > 256:
                    self.decoded.clear()
                self.decoded[list_addr] = [ddr.read(list_addr, pc - list_addr).tobytes(), steps,
                                            [], None, None]
            self._step(ddr, list_addr, step, r, tl, regs, calls)
            if op == "END":
                break
        entry = self.decoded[list_addr]
        entry[2][:] = calls
        entry[3] = timing_of(r, tl)
        return steps

    def step_data(self, ddr: Ddr, list_addr: int, step: tuple, r: RunResult, regs: dict) -> None:
        """One decoded descriptor's data movement and computation (`regs`: the job registers in
        force, updated by a REGS), as a run that replays the list's timeline takes it."""
        self._step(ddr, list_addr, step, r, None, regs)

    def last_form(self, d: dict):
        """The compiled form (a :class:`fast.CompiledJob` or "protocol") the RUN whose decoded
        fields are `d` ran last, None if it has not run since the cache was cleared."""
        last = self._last_form.get(id(d))
        return last[2] if last is not None and last[0] is d else None

    def _step(self, ddr: Ddr, list_addr: int, step: tuple, r: RunResult, tl: "Timeline | None",
              regs: dict, calls: list | None = None) -> None:
        """One descriptor: its data movement and computation, and (with `tl`) its memory-model
        step, recorded into `calls` for :func:`~dtpu.hw.step_timing.replay_call`; without `tl`, the data only."""
        f = self.fmt
        off, h, op, n, payload = step
        r.error_pc, r.error_tag = off, h["TAG"]
        if tl is not None:
            t_fetch = tl.fetch(n)
            r.descs += 1
        call = None
        if op == "END":
            call = ("F", n)
        elif op == "LOAD":
            l1, l2 = payload
            self._load(ddr, l1, l2)
            if tl is not None:
                tl.load(t_fetch, l1["COUNT"], l2["AFTER"])
                tag_span(r, h["TAG"], None, wgt=l1["COUNT"])
                call = ("L", n, l1["COUNT"], l2["AFTER"], h["TAG"])
        elif op == "REGS":
            job_names = self._job_regs
            for reg_off, val in payload:
                if reg_off not in job_names:
                    raise ListFault("BAD_FIELD", f"REGS offset {reg_off:#x} is not a job register; "
                                   f"accepted: {sorted(hex(o) for o in job_names)}")
                regs[reg_off] = val
            if tl is not None:
                tl.regs(t_fetch, len(payload))
            call = ("G", n, len(payload))
        elif op == "POST":
            cycles, beats, src, dst = self.post(ddr, regs, payload, r)
            if tl is not None:
                # the store unit writes the packed results as its write queue does: the
                # words of the items' bytes, gaps of up to SEQ_STORE_GAP words filled
                post = step_timing.post_timing(f, self.core.cfg, regs, payload)
                wbeats = post[7]
                tl.run(t_fetch, src, dst, beats, wbeats, cycles, post=post)
                r.runs += 1
                tag_span(r, h["TAG"], tl.core_free, cycles)   # the post unit: no stream
                call = ("R", n, src, dst, beats, wbeats, cycles, 0, h["TAG"], False, None, None,
                        post)
        elif op == "VEC":
            job = vector_unit.decode(f, payload)
            vector_unit.execute(ddr, job)
            if tl is not None:
                end, free = vector_unit.timeline_step(tl, t_fetch, job)
                tag_span(r, h["TAG"], end, free)
                call = ("V", n, job, h["TAG"])
        else:
            d = payload
            cycles, act_beats, res_beats, src, dst = self._run(ddr, regs, d, h, r)
            if tl is not None:
                cfg, setup, index_cache = self.core.cfg, self._res_setup, self.gather_cache
                store_reads, wr, part, beat_word = step_timing.res_beats(f, d, res_beats)
                act_req = (step_timing.act_req(f, d),
                           step_timing.act_read_beats(f, d, act_beats, index_cache), wr, part,
                           step_timing.act_stream(f, cfg, d, act_beats, self.act_sched, setup,
                                                  index_cache, res_beats))
                gaps = self._res_gaps
                if gaps is not None and beat_word is not None:   # beats from the end -> words
                    gaps = tuple(gaps[min(k, len(gaps) - 1)] for k in beat_word)
                self._res_gaps = gaps
                acc = step_timing.acc_timing(f, cfg, d, res_beats, setup)
                if acc is not None:
                    act_req = act_req + acc
                # the store unit's write queue, one model a RUN (docs/rtl.md "The store unit's
                # write queue in the Timeline"): a depthwise stream with short write runs has it
                # inside stream_sim (dw_timing's result words), other scattered writes store_sim
                stream = act_req[4]
                dw_res = stream is not None and len(stream) > 4 and stream[4] is not None
                store = (step_timing.store_plan(f, cfg, d, res_beats, setup)
                         if acc is None and not dw_res else None)
                tl.run(t_fetch, src, dst, act_beats, res_beats, cycles, store_reads=store_reads,
                       act_req=act_req, res_gaps=gaps, store=store)
                r.runs += 1
                tag_span(r, h["TAG"], tl.core_free, cycles, act_beats, res_beats)
                call = ("R", n, src, dst, act_beats, res_beats, cycles, store_reads, h["TAG"], True,
                        act_req, self._res_gaps, None, store)
        if calls is not None:
            calls.append(call)

    # -- load unit

    def _load(self, ddr: Ddr, l1: dict, l2: dict) -> None:
        c = self.core.cfg
        count, addr, mem = l1["COUNT"], l2["ADDR"], l2["MEM"]
        if l1["SRC"] % 8:
            raise ListFault("BAD_FIELD", f"LOAD SRC {l1['SRC']:#x} is not 8-byte aligned")
        limit = c.WEIGHT_WORDS if mem == 0 else 2 * c.PARAM_ENTRIES if mem == 1 else -1
        if limit < 0:
            raise ListFault("BAD_FIELD", f"LOAD MEM={mem}; accepted: 0 (weights), 1 (parameters)")
        if mem == 1 and (addr * 2 + count > limit or count % 2):
            raise ListFault("BAD_FIELD", f"LOAD of {count} parameter words at entry {addr}: past "
                           f"{c.PARAM_ENTRIES} entries or not whole entries")
        if mem == 0 and addr + count > limit:
            raise ListFault("BAD_FIELD", f"LOAD of {count} weight words at {addr}: past {limit}")
        words = ddr.read(l1["SRC"], 8 * count).view(_U64)
        # (the memories are written by assignment: a copy, so the DDR view is handed on as is)
        self.core.write_memory("LOAD_WGT" if mem == 0 else "LOAD_PARAM", addr, words)

    def gather(self, ddr: Ddr, act_src: dict, act_shape: dict, act_win: dict, act_span: dict,
               act_valid: dict) -> np.ndarray:
        """The activation words the load unit streams to the core for one RUN."""
        f = self.fmt
        mode, L, es = act_src["MODE"], act_src["LANES"], act_src["ESIZE"]
        if mode == f.act_modes["NONE"]:
            return np.zeros(0, _U64)
        if es not in _EDT or L * es != 8:
            raise ListFault("BAD_FIELD", f"ACT LANES={L} x ESIZE={es} is not one 64-bit word")
        edt = _EDT[es]
        pad = edt.type(act_src["PAD"] & ((1 << (8 * es)) - 1))
        n, h, w, ch = act_shape["N"], act_shape["H"], act_shape["W"], act_shape["C"]
        x = ddr.read(act_src["SRC"], n * h * w * ch * es).view(edt).reshape(n, h, w, ch)
        if mode == f.act_modes["WINDOWS"]:
            k0, k1 = act_span["K0"], act_span["K1"]
            if not 0 <= k0 < k1 <= act_span["KP"] // L or act_span["KP"] % L:
                raise ListFault("BAD_FIELD", f"ACT words K0={k0}..K1={k1} outside "
                                f"KP={act_span['KP']} lanes")
            if pointwise_window(act_win, h, w) and act_span["KP"] >= ch:
                # a 1x1 window over the whole image (pointwise convolutions, FULLY_CONNECTED):
                # each pixel's K-vector is its channels, the rest PAD; no index to gather by
                lanes = np.empty((n * h * w, act_span["KP"]), edt)
                lanes[:, :ch] = x.reshape(-1, ch)
                lanes[:, ch:] = pad
                return np.ascontiguousarray(lanes[:, k0 * L:k1 * L]).view(_U64).reshape(-1)
            kern = kernels.get() if self.kernels_ok else None
            if kern is not None:
                return self.gather_c(kern, x, act_src, act_shape, act_win, act_span, L, es)
            key = ("w", tuple(sorted(act_shape.items())), tuple(sorted(act_win.items())), act_span["KP"])
            index = self.gather_cache.get(key)
            if index is None:
                if len(self.gather_cache) > 64:
                    self.gather_cache.clear()
                index = self.gather_cache[key] = window_index(act_shape, act_win, act_span["KP"])
            flat = np.empty(n * h * w * ch + 1, edt)
            flat[:-1] = x.reshape(-1)
            flat[-1] = pad
            lanes = flat.take(index)                    # (pixels, KP)
            lanes = np.ascontiguousarray(lanes[:, k0 * L:k1 * L])
            return lanes.view(_U64).reshape(-1)
        if mode == f.act_modes["CHANNELS"]:
            rep, ch0, chans = act_span["KP"], act_span["K0"], act_span["K1"]
            nchunk, cv = act_span["NCHUNK"], act_valid["CV"]
            if rep < 1 or nchunk < 1 or chans % (nchunk * L) or cv != ch * rep:
                raise ListFault("BAD_FIELD", f"ACT CHANNELS: REP={rep}, CHANNELS={chans}, "
                               f"NCHUNK={nchunk}, CV={cv} for C={ch}, {L} lanes")
            if n != 1:
                raise ListFault("BAD_FIELD", f"ACT CHANNELS takes one image (N=1), got N={n}")
            img = x[0]
            if rep > 1:
                img = np.repeat(img, rep, axis=2)
            cp = ceil_div(ch0 + chans, L) * L
            if cp > cv:
                img = np.concatenate([img, np.full((h, w, cp - cv), pad, edt)], axis=2)
            img = img[:, :, ch0:ch0 + chans]
            if nchunk > 1:
                img = img.reshape(h, w, nchunk, chans // nchunk).transpose(2, 0, 1, 3)
            return np.ascontiguousarray(img).view(_U64).reshape(-1)
        raise ListFault("BAD_FIELD", f"ACT MODE={mode}; accepted: {f.act_modes}")

    def gather_c(self, kern, x: np.ndarray, act_src: dict, act_shape: dict, act_win: dict,
                  act_span: dict, L: int, es: int) -> np.ndarray:
        """:meth:`gather`'s WINDOWS stream by kernels.c (the numpy index's words, tests/
        test_gather.py). A list run again hands in the same decoded field dicts: their runner
        is bound once (held with the dicts, so their ids stay theirs while cached)."""
        # (testbenches build an Executor with __new__ and only the format: the cache then
        # starts here)
        runs = vars(self).setdefault("gather_runs", {})
        hit = runs.get(id(act_win))
        if (hit is not None and hit[0] is act_src and hit[1] is act_shape and hit[2] is act_win
                and hit[3] is act_span):
            run, shape, sig = hit[4], hit[5], hit[6]
        else:
            kp, k = act_span["KP"], act_win["KH"] * act_win["KW"] * act_shape["C"]
            if kp < k:
                raise ListFault("BAD_FIELD", f"ACT KP={kp} lanes < K={k}")
            j0, j1 = act_span["K0"] * L, act_span["K1"] * L
            run = kern.gather_fn(es, act_shape, act_win, j0, j1, act_src["PAD"])
            shape = (act_shape["N"] * act_win["OH"] * act_win["OW"] * (j1 - j0) * es // 8,)
            sig = (tuple(act_src.values()), tuple(act_shape.values()), tuple(act_win.values()),
                   kp, j0, j1)
            if len(runs) > 4096:
                runs.clear()
            runs[id(act_win)] = (act_src, act_shape, act_win, act_span, run, shape, sig)
        # the pages of a streamed node are RUNs of the same stream over the same input: the
        # last stream's words are handed out again while its fields and input bytes are equal
        # (read-only, so that no consumer can change what a later RUN is given)
        last = vars(self).get("_last_gather")
        xb = x.tobytes()        # one copy and a memcmp: faster than np.array_equal here
        if last is not None and last[0] == sig and last[1] == xb:
            return last[2]
        words = np.empty(shape, _U64)
        run(x, words)
        words.flags.writeable = False
        self._last_gather = (sig, xb, words)
        return words

    # -- store unit

    def scatter(self, ddr: Ddr, r0: dict, r1: dict, r2: dict, words: np.ndarray,
                first: bool = False) -> None:
        """The store unit's writes of a RUN's result `words` to DDR as RES0..RES2 say
        (`first`: an ACC RUN's FIRST flag, which writes the sums instead of adding them): the
        reference the RTL's store unit is compared with byte for byte."""
        # a list run again hands in the same decoded field dicts: their checks and geometry
        # are worked out once (held with the dicts, so their ids stay theirs while cached)
        plans = vars(self).setdefault("_scatter_plans", {})
        plan = plans.get(id(r0))
        if plan is None or plan[0] is not r0 or plan[1] is not r1 or plan[2] is not r2:
            if len(plans) > 4096:
                plans.clear()
            plan = plans[id(r0)] = (r0, r1, r2, self.scatter_plan(r0, r1, r2))
        geometry = plan[3]
        if geometry is None:    # RES MODE NONE
            return
        acc, edt, es, outer, pix, inner, wpi, lanes, gw, ch0, hi, dstc = geometry
        if words.size != outer * pix * inner * wpi:
            raise ListFault("BAD_FIELD", f"RES {outer}x{pix}x{inner} items of {wpi} words = "
                           f"{outer * pix * inner * wpi}, the job produced {words.size}")
        if hi > dstc or ch0 >= hi:
            raise ListFault("BAD_FIELD", f"RES channels {ch0}..{hi} outside DSTC={dstc}")
        vals = words.view(edt).reshape(outer, pix, inner, wpi * lanes)[..., :gw]
        vals = vals.transpose(1, 0, 2, 3).reshape(pix, outer * inner * gw)
        if acc:
            dst = ddr.read(r0["DST"], pix * dstc * 8).view("<i8").reshape(pix, dstc)
            if first:
                dst[:, ch0:hi] = vals[:, :hi - ch0]
            else:
                dst[:, ch0:hi] += vals[:, :hi - ch0]
            return
        dst = ddr.read(r0["DST"], pix * dstc * es).view(edt).reshape(pix, dstc)
        dst[:, ch0:hi] = vals[:, :hi - ch0]

    def scatter_plan(self, r0: dict, r1: dict, r2: dict) -> tuple | None:
        """What :meth:`scatter` takes from RES0..RES2 (None for MODE NONE), the checks that do
        not depend on the result words made."""
        f = self.fmt
        mode, lanes, es = r0["MODE"], r0["LANES"], r0["ESIZE"]
        if mode == f.res_modes["NONE"]:
            return None
        acc = mode == f.res_modes["ACC"]
        if mode not in (f.res_modes["ITEMS"], f.res_modes["ACC"]):
            raise ListFault("BAD_FIELD", f"RES MODE={mode}; accepted: {f.res_modes}")
        if lanes not in (1, 2, 4, 8) or (es != 8 if acc else (es not in _EDT or lanes * es != 8)):
            raise ListFault("BAD_FIELD", f"RES LANES={lanes} x ESIZE={es}: "
                           f"{'ACC sums are 8-byte' if acc else 'not one 64-bit word'}")
        edt = np.dtype(f"<i{8 // lanes}") if acc else _EDT[es]
        pix, outer, inner = r1["PIX"], r1["OUTER"], r1["INNER"]
        gw, ch0, ch1, dstc = r2["GW"], r2["CH0"], r2["CH1"], r2["DSTC"]
        wpi = ceil_div(gw, lanes)
        hi = min(ch1, ch0 + outer * inner * gw)     # the channels the items give, up to CH1
        return acc, edt, es, outer, pix, inner, wpi, lanes, gw, ch0, hi, dstc

    # -- the post unit on partial sums

    def post(self, ddr: Ddr, regs: dict, d: dict, r: RunResult) -> tuple:
        """The post unit on a POST descriptor `d`: int64 partial sums read from DDR,
        requantized with the core's post unit and parameter memory (`regs`: the job registers
        in force), the outputs written to DST; the reference the RTL's post unit is compared
        with. Raises :class:`~dtpu.hw.listformat.ListFault` or :class:`~dtpu.hw.ddr.DdrFault`."""
        core, c = self.core, self.core.cfg
        p1, p2, p3 = d["POST1"], d["POST2"], d["POST3"]
        pix, ch0, ch, dstc = p2["PIX"], p2["CH0"], p2["CH"], p3["DSTC"]
        job = c.decode("JOB", regs.get(c.REG_JOB, 0))
        prec = next((p for p in c.ENABLED if c.prec_code(p) == job["PREC"]), None)
        if prec is None or job["OUT_MODE"] != c.OUT_MODE_REQUANT or prec.is_float:
            raise ListFault("BAD_FIELD", f"POST with JOB.PREC={job['PREC']}, OUT_MODE="
                           f"{job['OUT_MODE']}; accepted: an enabled integer precision, REQUANT")
        if not c.rq_built(job["RQ_VARIANT"]):
            raise ListFault("BAD_FIELD", f"POST with JOB.RQ_VARIANT={job['RQ_VARIANT']}; accepted: "
                           f"the variants built (RQ_EN={c.RQ_EN}: {', '.join(c.rq_variants)})")
        pb = regs.get(c.REG_PARAM_BASE, 0)
        if ch < 1 or ch0 + ch > dstc or pb + ch > c.PARAM_ENTRIES:
            raise ListFault("BAD_FIELD", f"POST channels {ch0}+{ch} of {dstc}, parameter entries "
                           f"{pb}+{ch} of {c.PARAM_ENTRIES}")
        sums = ddr.read(p1["SRC"], pix * dstc * 8).view("<i8").reshape(pix, dstc)[:, ch0:ch0 + ch]
        params = core.post_params(pb, ch, prec, c.OUT_MODE_REQUANT)
        y, err = core.post(sums, prec, c.OUT_MODE_REQUANT, job["RQ_VARIANT"], params, 0,
                            regs.get(c.REG_ACT_MIN, 0), regs.get(c.REG_ACT_MAX, 0))
        if err & c.ERR_FATAL_MASK:
            r.job_err = err
            bits = [n for n, b in c.errors.items() if err & (1 << b)]
            raise ListFault("JOB", f"POST: ERR={err:#x} ({', '.join(bits)})")
        _, dt = out_lanes(c, prec, c.OUT_MODE_REQUANT)
        dt = np.dtype(dt)
        dst = ddr.read(p1["DST"], pix * dstc * dt.itemsize).view(dt).reshape(pix, dstc)
        dst[:, ch0:ch0 + ch] = y
        beats = pix * ch
        cycles = c.CFG_CYCLES + beats + c.LAT_POST
        return (cycles, beats, (p1["SRC"], p1["SRC"] + pix * dstc * 8),
                (p1["DST"], p1["DST"] + pix * dstc * dt.itemsize))

    # -- the core

    def _run_protocol(self, regs: dict, ddr: Ddr, d: dict, r: RunResult):
        """One RUN through the 1.2 protocol: job registers (JOB last), START, the gathered words
        on s_axis_act, DONE, ERR, the result words from m_axis_res."""
        core, c = self.core, self.core.cfg
        for off, v in sorted(regs.items(), key=lambda kv: kv[0] == c.REG_JOB):
            core.write(off, v)
        core.write(c.REG_CTRL, c.encode("CTRL", START=1))
        st = c.reg("STATUS")
        failed_config = not core.pending and core.regs[c.REG_STATUS] & st.field("ERROR").mask
        words = np.zeros(0, _U64)
        if not failed_config:
            try:   # the result words' timing for the Timeline (as the fast path's setup has it)
                setup = core.configure(core.regs)
                self._res_setup = setup
                self._res_gaps = result_gaps(c, setup, 4 * int(self.fmt.mem["MEM_BURST_BEATS"]))
                self.act_sched = act_schedule(setup)
            except Exception:   # noqa: BLE001  (CONFIG failed: no results)
                pass
            try:
                words = self.gather(ddr, d["ACT0"], d["ACT1"], d["ACT2"], d["ACT3"], d["ACT4"])
            except (ListFault, DdrFault):
                # the stream feeding a started job failed: the unit aborts the core (1.2 SOFT_RESET)
                core.write(c.REG_CTRL, c.encode("CTRL", SOFT_RESET=1))
                raise
            if words.size:
                core.push("act", words)
            left = core.available("act")
            if core.pending or left:
                core.write(c.REG_CTRL, c.encode("CTRL", SOFT_RESET=1))
                what = f"{left} left over" if left else "the job still waits for more"
                raise ListFault("BAD_FIELD", f"RUN: the ACT fields give {words.size} words, the "
                               f"job's registers take another count ({what})")
        err = core.read(c.REG_ERR)
        cycles = core.read(c.REG_JOB_CYCLES)
        if err & c.ERR_FATAL_MASK:
            r.job_err = err
            core.write(c.REG_ERR, err)
            bits = [n for n, b in c.errors.items() if err & (1 << b)]
            raise ListFault("JOB", f"RUN: the job set ERR={err:#x} ({', '.join(bits)})")
        if err:
            core.write(c.REG_ERR, err)
        res = core.pop()
        return res if res.size else None, words, cycles

    def _run(self, ddr: Ddr, regs: dict, d: dict, head: dict, r: RunResult):
        c = self.core.cfg
        cj = None
        self._res_gaps = None       # the result words' timing for the Timeline
        #: the running GEMM job's activation schedule (:func:`~dtpu.hw.units.load.act_schedule`:
        #: KW, NT, step period, M), which :func:`~dtpu.hw.step_timing.act_stream` times the stream against
        self.act_sched = None
        self._res_setup = None      # the job's setup (the ACC store's rate, :func:`~dtpu.hw.step_timing.acc_timing`)
        if self.fast_path:
            # the same registers run over different memory contents: the pages of a streamed
            # node that land in the same scratch half; one compiled form per content seen
            # (each keeps a snapshot of what it read, :meth:`fast.CompiledJob.valid`)
            # the form this descriptor ran last time first: a streamed page written back into
            # the same place matches it, where the list of variants holds every page (its
            # registers compared as a dict: equal dicts are equal sorted items, without sorting)
            last = self._last_form.get(id(d))
            if last is not None and last[0] is d and last[1] == regs and \
                    (last[2] == "protocol" or last[2].valid(self.core)):
                cj = last[2]
            else:
                variants = self._compiled.setdefault(tuple(sorted(regs.items())), [])
                cj = next((v for v in variants if v == "protocol" or v.valid(self.core)), None)
                self._last_form.pop(id(d), None)
            if cj is None:
                names = {reg.offset: reg.name for reg in c.registers}
                try:
                    cj = fast.compile_job(self.core, tuple((names[o], v) for o, v in sorted(regs.items())
                                                           if names[o] != "JOB")
                                          + (("JOB", regs.get(c.REG_JOB, 0)),))
                except fast.Unsupported:
                    cj = "protocol"
                if len(variants) >= self.MAX_VARIANTS:
                    variants.pop(0)
                variants.append(cj)
            if id(d) not in self._last_form:
                if len(self._last_form) > 4096:
                    self._last_form.clear()
                self._last_form[id(d)] = (d, dict(regs), cj)    # d held: its id stays its own
        if not self.fast_path or cj == "protocol":
            res, words, cycles = self._run_protocol(regs, ddr, d, r)
            if res is not None:
                self.scatter(ddr, d["RES0"], d["RES1"], d["RES2"], res, d.get("FIRST", False))
            return self._run_result(d, cycles, words, res)
        if cj.error:   # failed in CONFIG: the core takes nothing, the units move nothing
            _, err = fast.execute(self.core, cj, None)
            r.job_err = err
            bits = [n for n, b in c.errors.items() if err & (1 << b)]
            raise ListFault("JOB", f"RUN: the job failed in CONFIG, ERR={err:#x} ({', '.join(bits)})")
        words = self.gather(ddr, d["ACT0"], d["ACT1"], d["ACT2"], d["ACT3"], d["ACT4"])
        if cj.setup is not None:
            self._res_setup = cj.setup
            if cj.list_timing is None:
                cj.list_timing = (result_gaps(c, cj.setup, 4 * int(self.fmt.mem["MEM_BURST_BEATS"])),
                                  act_schedule(cj.setup))
            self._res_gaps, self.act_sched = cj.list_timing
        if cj.pf_count:
            raise ListFault("BAD_FIELD", f"RUN with PF_COUNT={cj.pf_count}: prefetch rides on LOAD "
                           f"descriptors in contract 2.0; accepted: 0")
        if cj.n_in != words.size:
            raise ListFault("BAD_FIELD", f"RUN: the ACT fields give {words.size} words, the job's "
                           f"registers take {cj.n_in}")
        res, err = fast.execute(self.core, cj, words if cj.n_in else None)
        if err & c.ERR_FATAL_MASK:
            r.job_err = err
            bits = [n for n, b in c.errors.items() if err & (1 << b)]
            raise ListFault("JOB", f"RUN: the job set ERR={err:#x} ({', '.join(bits)})")
        if res is not None:
            self.scatter(ddr, d["RES0"], d["RES1"], d["RES2"], res, d.get("FIRST", False))
        return self._run_result(d, cj.cycles, words, res)

    @staticmethod
    def _run_result(d: dict, cycles: int, words: np.ndarray, res) -> tuple:
        n_res = 0 if res is None else int(res.size)
        act_src, act_shape, r0 = d["ACT0"], d["ACT1"], d["RES0"]
        pixels = act_shape["N"] * act_shape["H"] * act_shape["W"]
        src = (act_src["SRC"], act_src["SRC"] + pixels * act_shape["C"] * act_src["ESIZE"])
        dst = (r0["DST"], r0["DST"] + d["RES1"]["PIX"] * d["RES2"]["DSTC"] * r0["ESIZE"])
        return cycles, int(words.size), n_res, src, dst


@contextmanager
def collector_paused(pause: bool = True):
    """Python's cyclic garbage collector off inside the block (if it was on). Computing a
    large list's timeline builds millions of short-lived tuples and lists beside the long-lived
    decoded lists and compiled jobs; each of the many young-generation collections that
    triggers traverses the big containers under construction, and on ResNet-50 most of the
    first invoke's CPU time went there. The model makes no reference cycles worth collecting
    meanwhile; the collector runs again as usual afterwards."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
