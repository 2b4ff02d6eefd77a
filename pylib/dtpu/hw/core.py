"""The DTPU golden model: the core as its register file and streams see it, vectorized per job.

:class:`Core` accepts exactly what the RTL accepts (32-bit AXI4-Lite register writes, 64-bit words
on ``s_axis_wgt`` / ``s_axis_act`` with tlast) and produces exactly what the RTL produces (result
words on ``m_axis_res``, the counters, the ERR flags). It is also the fast simulator behind
``backend=model``, so the datapath of a job is a handful of numpy operations, never a loop over
cycles: the cycle count comes from the closed-form schedule in :func:`gemm_cycles` /
:func:`dw_schedule`, which docs/architecture.md defines and the RTL implements. A START is
decoded by :meth:`Core.configure` (the CONFIG state's checks) into a :class:`JobSetup`, which the
datapath then runs on the stream words; :mod:`dtpu.hw.fast` reuses both to compile a job once and
run it without the register/stream protocol (what backend=model does at every invoke).

Weight prefetch (contract 1.2): a GEMM or DWCONV job with PF_COUNT > 0 also takes PF_COUNT
words from ``s_axis_wgt`` and writes them to weight memory from PF_ADDR on, one per cycle from
the first cycle after CONFIG, while it computes; it ends at max(compute cycles, CFG_CYCLES +
PF_COUNT + LOAD_LATENCY) (:func:`prefetch_cycles`). CONFIG refuses (ERR.WGT_RANGE, nothing
consumed) a range that leaves the memory or overlaps the job's own weight words; PF_ADDR is not
looked at when PF_COUNT is 0. A run-time error (OVERFLOW) does not change the prefetch: its
words are taken and written. A prefetch, like a LOAD_WGT, drops only the decoded weight
matrices whose words it overwrites.

What the model does not do: stalls. Its streams always deliver and accept one word per cycle, so
``STALL`` stays 0 and ``CYCLES`` is the stall-free schedule; the RTL and the board add measured
stalls on top. A job whose input words have not all been pushed cannot finish (the RTL would wait
forever); the model raises :class:`StreamStarved` instead of hanging.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from dtpu.hw.config import HwConfig, ceil_div, get_config, out_lanes
from dtpu.hw.contract_schedules import (DwGeometry, dw_schedule, gemm_cycles,
                                       load_cycles, prefetch_cycles)
from dtpu.hw.dw_format import (DwWeightsPerColumn, dw_conflict, dw_group_words, dw_item_words,  # noqa: F401
                                dw_pe_pairs, dw_rotated, dw_slot_words, dw_weight_layout, dw_weight_phases,
                                dw_weight_words)
from dtpu.hw.units import post as post_unit
from dtpu.hw.units.post import pack_lanes
from dtpu.pack import from_bf16_bits
from dtpu.precision import Precision

log = logging.getLogger(__name__)

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
STREAMS_IN = ("wgt", "act")
STREAM_OUT = "res"
#: the dtype of a 64-bit bus word (little-endian, as on every AXI port)
U64 = np.dtype("<u8")


class StreamStarved(RuntimeError):
    """A started job needs more input words than were pushed (the RTL would stall forever)."""


# ------------------------------------------------------------------------------------------------
# result formats


def mode_is_valid(cfg: HwConfig, prec: Precision, out_mode: int, variant: int) -> bool:
    if out_mode == cfg.OUT_MODE_REQUANT:
        # a variant not built into the post lanes (RQ_EN) is refused like an unknown one
        return prec in (Precision.INT8, Precision.UINT8, Precision.INT16) and cfg.rq_built(variant)
    if out_mode == cfg.OUT_MODE_RAW:
        return not prec.is_float
    if out_mode == cfg.OUT_MODE_FLOAT:
        return prec.is_float
    return False


# ------------------------------------------------------------------------------------------------
# arithmetic of the post unit (bit-exact definitions; docs/architecture.md "Requantization")


def _tree(x: np.ndarray, axis: int) -> np.ndarray:
    """Pairwise adjacent sums, level by level: ((x0+x1)+(x2+x3))+... (fp32, RNE per add)."""
    x = np.moveaxis(x, axis, -1)
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            x = np.concatenate([x, np.zeros(x.shape[:-1] + (1,), x.dtype)], axis=-1)
        x = x[..., 0::2] + x[..., 1::2]
    return x[..., 0]


def _exact_dtype(bound: float) -> np.dtype:
    """Cheapest dtype whose arithmetic on integers of magnitude <= bound never rounds."""
    if bound <= 1 << 24:
        return np.dtype(np.float32)
    if bound <= 1 << 53:
        return np.dtype(np.float64)
    return np.dtype(np.int64)


# ------------------------------------------------------------------------------------------------


@dataclass
class JobRecord:
    """One job as the counters saw it (the delegate's report sums these per node)."""

    opcode: str
    prec: str | None
    cycles: int
    stall_cycles: int = 0
    words_in: dict[str, int] = field(default_factory=dict)
    words_out: int = 0
    error: int = 0


@dataclass
class JobSetup:
    """A START as the CONFIG state latched and checked it: everything the datapath runs on.

    Built by :meth:`Core.configure` from the register file (the protocol path) or from a job's
    register list (:mod:`dtpu.hw.fast`); the job's stall-free cycle count is the closed form."""

    opcode: str                   # NOP, LOAD_WGT, LOAD_PARAM, GEMM, DWCONV
    needs: dict[str, int]         # input words per stream
    prec: Precision | None = None
    out_mode: int = 0
    variant: int = 0
    cycles: int = 0
    words_out: int = 0
    addr: int = 0                 # LOAD_*: LOAD_ADDR, LOAD_COUNT
    count: int = 0
    wb: int = 0                   # WGT_BASE, PARAM_BASE
    pb: int = 0
    in_off: int = 0               # IN_OFFSET, WGT_OFFSET (signed)
    w_off: int = 0
    act_min: int = 0              # ACT_MIN, ACT_MAX as written (32-bit patterns)
    act_max: int = 0
    m: int = 0                    # GEMM_M, GEMM_KW, GEMM_NT
    kw: int = 0
    nt: int = 0
    geom: DwGeometry | None = None
    ww: int = 0                   # DWCONV: weight words from WGT_BASE (dw_weight_words)
    lanes_n: int = 0              # result lanes per word
    wpi: int = 0                  # result words per GEMM step / per DWCONV item
    pf_addr: int = 0              # GEMM/DWCONV prefetch: PF_ADDR, PF_COUNT (0: none)
    pf_count: int = 0


class JobRefused(Exception):
    """A job the core refuses or aborts: ``bits`` are the ERR flags it sets."""

    def __init__(self, bits: int):
        self.bits = bits


class Core:
    """The DTPU core behind its AXI4-Lite register file and AXI4-Stream ports."""

    def __init__(self, cfg: HwConfig | None = None) -> None:
        self.cfg = cfg or get_config()
        c = self.cfg
        self.wmem = np.zeros(c.WEIGHT_WORDS, U64)
        self.pmem = np.zeros((c.PARAM_ENTRIES, 2), U64)
        self._wgen = 0  # bumped by every memory write: keys the decoded-operand caches
        self._pgen = 0
        self._wcache: dict = {}
        self._wrange: dict = {}  # _wcache key -> the weight words [lo, hi) it was decoded from
        self._pcache: dict = {}
        self._dwcache: dict = {}
        self._mem_log: list[tuple[int, str, int, int]] = []  # (epoch, memory, lo, hi) of LOADs
        self.jobs: list[JobRecord] = []
        self._reset_state()

    # -- reset and registers ----------------------------------------------------------------

    def _reset_state(self) -> None:
        c = self.cfg
        self.regs = {r.offset: (r.reset or 0) for r in c.registers}
        self.regs[c.REG_HWCFG0] = c.hwcfg0
        self.regs[c.REG_HWCFG1] = c.hwcfg1
        self._in: dict[str, list[tuple[np.ndarray, bool]]] = {s: [] for s in STREAMS_IN}
        self._out: list[np.ndarray] = []
        self._pending = False
        self._cycles = 0
        self._stalls = 0
        self._words = {"wgt": 0, "act": 0, "res": 0}
        self._hi_latch = {}

    def write(self, offset: int, value: int) -> None:
        c = self.cfg
        reg = c.reg_at(offset)
        value = int(value) & 0xFFFFFFFF
        if reg.access == "ro":
            return
        if reg.access == "w1c":
            self.regs[offset] &= ~value
            self._update_status_error()
            return
        if reg.name == "CTRL":
            f = c.decode("CTRL", value)
            if f["SOFT_RESET"]:
                keep = self.regs[c.REG_CTRL] & c.reg("CTRL").field("IRQ_EN").mask
                self._reset_state()
                self.regs[c.REG_CTRL] = keep
                return
            if f["CLEAR_COUNTERS"]:
                self._cycles = self._stalls = 0
                self._words = {"wgt": 0, "act": 0, "res": 0}
            self.regs[offset] = value & c.reg("CTRL").field("IRQ_EN").mask
            if f["START"]:
                if self._pending:
                    self._flag(c.ERR_BUSY_WRITE)
                    return
                st = self.regs[c.REG_STATUS] & ~(0b11)
                self.regs[c.REG_STATUS] = st | 1  # BUSY, DONE cleared
                self._pending = True
                self.try_run()
            return
        if self._pending:
            self._flag(c.ERR_BUSY_WRITE)
            return
        self.regs[offset] = value

    def read(self, offset: int) -> int:
        reg = self.cfg.reg_at(offset)
        if reg.name in ("STATUS",) or reg.name.startswith(("CYCLES", "STALL", "WORDS", "JOB_CYCLES")):
            self._require_idle()
        return self._read(reg, offset)

    def peek(self, offset: int) -> int:
        """A register read that does not wait for a started job (:meth:`read` raises
        StreamStarved while one waits for input): what the RTL answers then, STATUS with BUSY
        and the counters of the jobs that finished."""
        return self._read(self.cfg.reg_at(offset), offset)

    def _read(self, reg, offset: int) -> int:
        if reg.name == "CYCLES_LO":
            self._hi_latch["CYCLES_HI"] = (self._cycles >> 32) & 0xFFFFFFFF
            return self._cycles & 0xFFFFFFFF
        if reg.name == "STALL_LO":
            self._hi_latch["STALL_HI"] = (self._stalls >> 32) & 0xFFFFFFFF
            return self._stalls & 0xFFFFFFFF
        if reg.name in ("CYCLES_HI", "STALL_HI"):
            return self._hi_latch.get(reg.name, 0)
        if reg.name.startswith("WORDS_"):
            return self._words[reg.name[6:].lower()] & 0xFFFFFFFF
        return self.regs[offset]

    def write_reg(self, name: str, value: int) -> None:
        self.write(self.cfg.reg(name).offset, value)

    def read_reg(self, name: str) -> int:
        return self.read(self.cfg.reg(name).offset)

    @property
    def cycles(self) -> int:
        return self._cycles

    @property
    def stall_cycles(self) -> int:
        return self._stalls

    @property
    def pending(self) -> bool:
        """A START was taken and its job has not run yet (it waits for input words)."""
        return self._pending

    # -- streams ----------------------------------------------------------------------------

    def push(self, stream: str, words, last: bool = True) -> None:
        """Offer words on s_axis_<stream>; `last` raises tlast on the final one."""
        if stream not in STREAMS_IN:
            raise ValueError(f"unknown input stream {stream!r}; accepted: {', '.join(STREAMS_IN)}")
        w = np.asarray(words)
        if w.dtype != U64:
            if w.dtype.kind not in "iu":
                raise ValueError(f"stream words must be uint64, got {w.dtype}")
            w = w.astype(U64)
        if w.size:
            self._in[stream].append((w.reshape(-1), bool(last)))
        if self._pending:
            self.try_run()

    def pop(self, stream: str = STREAM_OUT, n: int | None = None) -> np.ndarray:
        """Take result words from m_axis_res (all available when n is None)."""
        if stream != STREAM_OUT:
            raise ValueError(f"unknown output stream {stream!r}; accepted: {STREAM_OUT}")
        self._require_idle()
        if not self._out:
            words = np.zeros(0, U64)
        else:
            words = np.concatenate(self._out) if len(self._out) != 1 else self._out[0]
        if n is None or n >= words.size:
            if n is not None and n > words.size:
                raise StreamStarved(f"asked for {n} result words, {words.size} available")
            self._out = []
            return words
        self._out = [words[n:]]
        return words[:n]

    def run(self) -> None:
        """Finish a started job (the model runs jobs as soon as their inputs are there)."""
        self._require_idle()

    def available(self, stream: str) -> int:
        """Words pushed on input `stream` that no job has taken yet."""
        return sum(w.size for w, _ in self._in[stream])

    def result_backlog(self) -> int:
        """Result words on m_axis_res not taken yet."""
        return sum(w.size for w in self._out)

    def pop_packet(self) -> np.ndarray | None:
        """The oldest finished job's result words (one tlast-terminated packet, where
        :meth:`pop` merges every queued one), or None while a job is pending or none is queued."""
        if self._pending or not self._out:
            return None
        return self._out.pop(0)

    def _take(self, stream: str, n: int) -> np.ndarray:
        """Consume n words; check tlast sits exactly on the n-th."""
        chunks, got, early = [], 0, False
        q = self._in[stream]
        while got < n:
            w, last = q.pop(0)
            need = n - got
            if w.size > need:
                q.insert(0, (w[need:], last))
                w, last = w[:need], False
            got += w.size
            chunks.append(w)
            if last and got < n:
                early = True
        if early:
            raise JobRefused(self.cfg.ERR_TLAST_EARLY)
        if not last:
            raise JobRefused(self.cfg.ERR_TLAST_MISSING)
        self._words[stream] += n
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)

    def _require_idle(self) -> None:
        if self._pending:
            self.try_run()
            if self._pending:
                need = self._needs()
                have = {s: self.available(s) for s in need}
                raise StreamStarved(
                    f"job {self.opcode_name()} is waiting for input words: needs {need}, "
                    f"pushed {have} (the RTL would stall here)")

    # -- job execution ----------------------------------------------------------------------
    #
    # A START is handled in two steps, shared by the register/stream protocol and the compiled
    # fast path of dtpu.hw.fast: `configure` latches and checks the job registers as the CONFIG state
    # does (-> JobSetup, or JobRefused with the ERR bits), `_run_setup` runs the datapath on the
    # stream words. Nothing below reads the register file after `configure`.

    def _f(self, reg: str, name: str, regs=None) -> int:
        r = self.cfg.reg(reg)
        f = r.field(name)
        return ((self.regs if regs is None else regs)[r.offset] >> f.lsb) & ((1 << f.width) - 1)

    def _r(self, reg: str, signed: bool = False, regs=None) -> int:
        v = (self.regs if regs is None else regs)[self.cfg.reg(reg).offset]
        return v - (1 << 32) if signed and v >= 1 << 31 else v

    def opcode_name(self, regs=None) -> str:
        """JOB.OPCODE of `regs` (default the register file) by its contract name, for reports."""
        code = self._f("JOB", "OPCODE", regs)
        for k, v in self.cfg.enums["OPCODE"].items():
            if v == code:
                return k
        return f"#{code}"

    def _needs(self) -> dict[str, int]:
        """Input words the pending job consumes (0 for a job that fails its checks)."""
        try:
            return self._plan()[1]
        except JobRefused:
            return {}

    def _flag(self, bits: int) -> None:
        self.regs[self.cfg.REG_ERR] |= bits
        self._update_status_error()

    def _update_status_error(self) -> None:
        c = self.cfg
        err = bool(self.regs[c.REG_ERR] & c.ERR_FATAL_MASK)
        st = self.regs[c.REG_STATUS] & ~0b100
        self.regs[c.REG_STATUS] = st | (int(err) << 2)

    def _finish(self, record: JobRecord, keep: bool = True) -> None:
        c = self.cfg
        self._pending = False
        self._cycles += record.cycles
        self._stalls += record.stall_cycles
        self.regs[c.REG_JOB_CYCLES] = min(record.cycles, 0xFFFFFFFF)
        self.regs[c.REG_STATUS] = (self.regs[c.REG_STATUS] & ~0b11) | 0b10  # DONE, not BUSY
        if record.error:
            self._flag(record.error)
        if keep:
            self.jobs.append(record)

    @property
    def idle(self) -> bool:
        """No job pending and no input words queued: a job may run outside the protocol."""
        return not (self._pending or self._in["wgt"] or self._in["act"])

    def count_words(self, stream: str, n: int) -> None:
        """WORDS_<stream> += n, for words a job run outside the protocol moved
        (:func:`dtpu.hw.fast.execute`)."""
        self._words[stream] += n

    def finish_direct(self, cycles: int, error: int) -> None:
        """DONE of a job run outside the protocol (:func:`dtpu.hw.fast.execute`): CYCLES,
        JOB_CYCLES, STATUS and ERR change as :meth:`_finish` changes them, but no JobRecord is
        made (it would cost more than the fast path's whole job)."""
        c, regs = self.cfg, self.regs
        self._cycles += cycles
        regs[c.REG_JOB_CYCLES] = min(cycles, 0xFFFFFFFF)
        regs[c.REG_STATUS] = (regs[c.REG_STATUS] & ~0b11) | 0b10  # DONE, not BUSY
        if error:
            self._flag(error)

    def try_run(self) -> None:
        """Run the started job if its input words are all there (else it stays pending)."""
        c = self.cfg
        try:
            plan, needs = self._plan()
        except JobRefused as e:
            self._finish(JobRecord(self.opcode_name(), None, c.CFG_CYCLES, error=e.bits))
            return
        if any(self.available(s) < n for s, n in needs.items()):
            return  # wait for more pushes
        try:
            record = plan()
        except JobRefused as e:
            record = JobRecord(self.opcode_name(), None, c.CFG_CYCLES, error=e.bits)
        self._finish(record)

    def _plan(self):
        """Check the job registers as the RTL's CONFIG state does; return (runner, words needed)."""
        s = self.configure(self.regs)
        return (lambda: self._run_setup(s)), s.needs

    def configure(self, regs) -> "JobSetup":
        """The CONFIG state: latch the job registers from `regs` (offset -> value), derive the
        job's geometry and run every check, in the RTL's order; raise JobRefused with the ERR bits."""
        c = self.cfg
        op = self._f("JOB", "OPCODE", regs)
        if op == c.OPCODE_NOP:
            return JobSetup("NOP", {}, cycles=c.CFG_CYCLES)
        if op in (c.OPCODE_LOAD_WGT, c.OPCODE_LOAD_PARAM):
            return self._setup_load(op, regs)
        if op not in (c.OPCODE_GEMM, c.OPCODE_DWCONV):
            raise JobRefused(c.ERR_BAD_OPCODE)
        prec = c.prec_of_code(self._f("JOB", "PREC", regs))
        if prec is None or prec not in c.ENABLED:
            raise JobRefused(c.ERR_BAD_PRECISION)
        out_mode, variant = self._f("JOB", "OUT_MODE", regs), self._f("JOB", "RQ_VARIANT", regs)
        if not mode_is_valid(c, prec, out_mode, variant):
            raise JobRefused(c.ERR_BAD_MODE)
        if op == c.OPCODE_GEMM:
            return self._setup_gemm(prec, out_mode, variant, regs)
        return self._setup_dw(prec, out_mode, variant, regs)

    def _setup_load(self, op: int, regs) -> "JobSetup":
        c = self.cfg
        addr, n = self._r("LOAD_ADDR", regs=regs), self._r("LOAD_COUNT", regs=regs)
        if n == 0:
            raise JobRefused(c.ERR_BAD_DIMS)
        if op == c.OPCODE_LOAD_WGT:
            if addr + n > c.WEIGHT_WORDS:
                raise JobRefused(c.ERR_WGT_RANGE)
            return JobSetup("LOAD_WGT", {"wgt": n}, addr=addr, count=n, cycles=load_cycles(c, n))
        if n % 2 or addr + n // 2 > c.PARAM_ENTRIES:
            raise JobRefused(c.ERR_PARAM_RANGE)
        return JobSetup("LOAD_PARAM", {"wgt": n}, addr=addr, count=n, cycles=load_cycles(c, n))

    def _compute_regs(self, prec: Precision, out_mode: int, regs) -> dict:
        """Operand offsets and (unless RAW) the clamp, as the datapath latches them."""
        c = self.cfg
        fields = dict(in_off=self._r("IN_OFFSET", True, regs), w_off=self._r("WGT_OFFSET", True, regs))
        if out_mode != c.OUT_MODE_RAW:
            fields.update(act_min=self._r("ACT_MIN", regs=regs), act_max=self._r("ACT_MAX", regs=regs))
        return fields

    def _setup_prefetch(self, regs, wlo: int, whi: int) -> tuple[int, int]:
        """PF_ADDR / PF_COUNT of a compute job, checked next to its WGT_BASE (ERR.WGT_RANGE):
        the range must lie in weight memory and must not overlap the job's own weight words
        [wlo, whi). PF_ADDR is only latched when PF_COUNT > 0."""
        c = self.cfg
        n = self._r("PF_COUNT", regs=regs)
        if n == 0:
            return 0, 0
        a = self._r("PF_ADDR", regs=regs)
        if a + n > c.WEIGHT_WORDS or (a < whi and wlo < a + n):
            raise JobRefused(c.ERR_WGT_RANGE)
        return a, n

    @staticmethod
    def _compute_needs(act: int, pf_count: int) -> dict[str, int]:
        return {"act": act, "wgt": pf_count} if pf_count else {"act": act}

    def _run_setup(self, s: "JobSetup") -> JobRecord:
        """Run a checked job on the words of its input streams (the protocol path)."""
        c = self.cfg
        if s.opcode == "NOP":
            return JobRecord("NOP", None, c.CFG_CYCLES)
        if s.opcode in ("LOAD_WGT", "LOAD_PARAM"):
            words = self._take("wgt", s.count)
            self.write_memory(s.opcode, s.addr, words)
            return JobRecord(s.opcode, None, s.cycles, words_in={"wgt": s.count})
        if s.pf_count:  # written whatever the compute does (a runtime error included)
            self.write_weights(s.pf_addr, self._take("wgt", s.pf_count))
        act = self._take("act", s.needs["act"])
        words, err = (self.gemm_words if s.opcode == "GEMM" else self.dw_words)(s, act)
        if err & c.ERR_FATAL_MASK:
            raise JobRefused(err)
        self._out.append(words)
        self._words["res"] += words.size
        return JobRecord(s.opcode, s.prec.value, s.cycles, words_in=dict(s.needs),
                         words_out=words.size, error=err)

    def write_weights(self, addr: int, words: np.ndarray) -> None:
        """LOAD_WGT or a compute job's prefetch: words into weight memory from `addr`; drops only
        the decoded weight matrices that overlap the written range (resident nodes keep theirs)."""
        n = words.size
        self.wmem[addr:addr + n] = words
        self._wgen += 1
        stale = [k for k, (lo, hi) in self._wrange.items() if lo < addr + n and addr < hi]
        for k in stale:
            del self._wrange[k]
            self._wcache.pop(k, None)
        self._mem_log.append((self._wgen + self._pgen, "wgt", addr, addr + n))
        if len(self._mem_log) > 256:
            del self._mem_log[:128]

    def write_memory(self, opcode: str, addr: int, words: np.ndarray) -> None:
        """LOAD_WGT / LOAD_PARAM into memory; drops the decoded operands that may be stale."""
        n = words.size
        if opcode == "LOAD_WGT":
            self.write_weights(addr, words)
            return
        else:
            self.pmem[addr:addr + n // 2] = words.reshape(-1, 2)
            self._pgen += 1
            self._pcache.clear()
            self._mem_log.append((self._wgen + self._pgen, "param", addr, addr + n // 2))
        if len(self._mem_log) > 256:
            del self._mem_log[:128]

    @property
    def decoded_weights(self) -> tuple:
        """Keys of the decoded weight matrices kept, ("gemm" | "dw", precision, WGT_BASE, ...):
        a LOAD or a prefetch over their words drops them."""
        return tuple(self._wcache)

    def drop_decoded_weights(self, keys) -> None:
        """Forget decoded weight matrices a caller keeps its own copy of (a compiled job's)."""
        for key in keys:
            self._wcache.pop(key, None)
            self._wrange.pop(key, None)

    @property
    def memory_epoch(self) -> int:
        """Bumped by every LOAD; see :meth:`memory_written_since`."""
        return self._wgen + self._pgen

    def memory_written_since(self, epoch: int, wgt: tuple[int, int], param: tuple[int, int]) -> bool:
        """True if a LOAD after `epoch` wrote weight words [wgt) or parameter entries [param), or
        if the log no longer reaches back that far (then assume it did)."""
        if epoch == self._wgen + self._pgen:
            return False
        log_ = self._mem_log
        if not log_ or log_[0][0] > epoch + 1:
            return True
        for when, kind, lo, hi in reversed(log_):
            if when <= epoch:
                break
            a, b = wgt if kind == "wgt" else param
            if lo < b and a < hi:
                return True
        return False


    # -- operands -----------------------------------------------------------------------------

    def post_params(self, base: int, n: int, prec: Precision, out_mode: int):
        """(bias, multiplier, shift, zero point) of n channels from PARAM_BASE, decoded once."""
        key = (base, n, prec, out_mode)
        hit = self._pcache.get(key)
        if hit is not None:
            return hit
        e = self.pmem[base:base + n]
        w0, w1 = e[:, 0], e[:, 1]
        if out_mode == self.cfg.OUT_MODE_FLOAT:
            bias = (w0 & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
            hit = (bias, None, None, None)
        else:
            bias = w0.view(np.int64)
            mult = (w1 & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32).astype(np.int64)
            shift = ((w1 >> np.uint64(32)) & np.uint64(0xFF)).astype(np.uint8).view(np.int8).astype(np.int64)
            zp = ((w1 >> np.uint64(48)) & np.uint64(0xFFFF)).astype(np.uint16).view(np.int16).astype(np.int64)
            hit = (bias, mult, shift, zp)
        self._pcache[key] = hit
        return hit

    @staticmethod
    def _lanes_of(words: np.ndarray, prec: Precision) -> np.ndarray:
        lanes = words.view(prec.lane_dtype)
        if prec is Precision.BF16:
            return from_bf16_bits(lanes)
        return lanes.view(prec.value_dtype)

    def operand_bound(self, prec: Precision, offset: int) -> int:
        if prec.is_float:
            return 0
        info = np.iinfo(prec.value_dtype)
        return max(abs(int(info.min) + offset), abs(int(info.max) + offset))

    def post(self, acc: np.ndarray, prec: Precision, out_mode: int, variant: int,
             params, raw_error_bits: int, act_min: int = 0, act_max: int = 0) -> tuple[np.ndarray, int]:
        """The post unit (:func:`dtpu.hw.units.post.post`) with this core's contract."""
        return post_unit.post(self.cfg, acc, prec, out_mode, variant, params, raw_error_bits, act_min, act_max)

    pack_lanes = staticmethod(pack_lanes)

    # -- GEMM ---------------------------------------------------------------------------------

    def _setup_gemm(self, prec: Precision, out_mode: int, variant: int, regs) -> "JobSetup":
        c = self.cfg
        m, kw, nt = (self._r("GEMM_M", regs=regs), self._r("GEMM_KW", regs=regs),
                     self._r("GEMM_NT", regs=regs))
        if 0 in (m, kw, nt):
            raise JobRefused(c.ERR_BAD_DIMS)
        if kw > c.ACT_WORDS:
            raise JobRefused(c.ERR_ACT_CAPACITY)
        wb = self._r("WGT_BASE", regs=regs)
        if wb % c.COLS or wb + nt * kw * c.COLS > c.WEIGHT_WORDS:
            raise JobRefused(c.ERR_WGT_RANGE)
        pf_addr, pf_count = self._setup_prefetch(regs, wb, wb + nt * kw * c.COLS)
        pb = self._r("PARAM_BASE", regs=regs)
        if out_mode != c.OUT_MODE_RAW and (pb % c.COLS or pb + nt * c.COLS > c.PARAM_ENTRIES):
            raise JobRefused(c.ERR_PARAM_RANGE)
        lanes_n, _ = out_lanes(c, prec, out_mode)
        wps = ceil_div(c.COLS, lanes_n)
        return JobSetup("GEMM", self._compute_needs(m * kw, pf_count), prec=prec,
                        out_mode=out_mode, variant=variant,
                        wb=wb, pb=pb, m=m, kw=kw, nt=nt, lanes_n=lanes_n, wpi=wps,
                        words_out=m * nt * wps,
                        cycles=prefetch_cycles(c, gemm_cycles(c, m, kw, nt, wps), pf_count),
                        pf_addr=pf_addr, pf_count=pf_count,
                        **self._compute_regs(prec, out_mode, regs))

    def gemm_words(self, s: "JobSetup", act: np.ndarray) -> tuple[np.ndarray, int]:
        c = self.cfg
        acc, err = self._gemm_acc(s.prec, act, s.m, s.kw, s.nt, s.wb, s.in_off, s.w_off)
        params = self.post_params(s.pb, s.nt * c.COLS, s.prec, s.out_mode) if s.out_mode != c.OUT_MODE_RAW else None
        y, err = self.post(acc, s.prec, s.out_mode, s.variant, params, err, s.act_min, s.act_max)
        if err & c.ERR_FATAL_MASK:
            return np.zeros(0, U64), err
        return self.pack_lanes(y.reshape(s.m * s.nt, c.COLS), s.lanes_n), err

    def gemm_weights(self, prec: Precision, wb: int, kw: int, nt: int, dtype, off: int):
        """Weight matrix (K, NT*COLS) with WGT_OFFSET applied, cached while memory is unchanged."""
        c = self.cfg
        key = ("gemm", prec, wb, kw, nt, off, np.dtype(dtype).str)
        hit = self._wcache.get(key)
        if hit is not None:
            return hit
        words = self.wmem[wb:wb + nt * kw * c.COLS].reshape(nt, kw, c.COLS)
        lanes = self._lanes_of(np.ascontiguousarray(words.transpose(0, 2, 1)).reshape(-1), prec)
        b = lanes.reshape(nt * c.COLS, kw * prec.lanes)
        if prec.is_float:
            b = b.astype(np.float32)
        else:
            b = b.astype(dtype) + off
        if not prec.is_float:
            b = np.ascontiguousarray(b.T)  # (K, C) for acc = a @ b
        self._wcache[key] = b
        self._wrange[key] = (wb, wb + nt * kw * c.COLS)
        return b

    def _gemm_acc(self, prec: Precision, act: np.ndarray, m: int, kw: int, nt: int, wb: int,
                  in_off: int, w_off: int):
        L = prec.lanes
        a_lanes = self._lanes_of(act, prec).reshape(m, kw * L)
        if prec.is_float:
            b = self.gemm_weights(prec, wb, kw, nt, np.float32, w_off)  # (C, K)
            return self._gemm_fp(a_lanes.astype(np.float32, copy=False), b, kw, L), 0
        bound = (kw * L * self.operand_bound(prec, in_off) * self.operand_bound(prec, w_off))
        dt = _exact_dtype(bound)
        b = self.gemm_weights(prec, wb, kw, nt, dt, w_off)
        a = a_lanes.astype(dt)
        if in_off:
            a += dt.type(in_off)
        if dt.kind == "f":
            acc = (a @ b).astype(np.int64)
            return acc, self._acc_range_error(prec, acc, bound)
        return self._exact_int_gemm(prec, a, b)

    def _acc_range_error(self, prec: Precision, acc: np.ndarray, bound: int) -> int:
        if prec.bits == 8 and bound >= 1 << 31 and acc.size:
            if acc.max() > INT32_MAX or acc.min() < INT32_MIN:
                return self.cfg.ERR_OVERFLOW
        return 0

    def _exact_int_gemm(self, prec: Precision, a: np.ndarray, b: np.ndarray):
        """Integer GEMM beyond float exactness: int64 when provably safe, else Python ints."""
        mag = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        if mag.size == 0 or mag.max() < 2.0 ** 62:
            acc = a.astype(np.int64) @ b.astype(np.int64)
            return acc, self._acc_range_error(prec, acc, int(mag.max()) if mag.size else 0)
        ao, bo = a.astype(object), b.astype(object)
        if prec is Precision.INT64:  # a product leaving int64 is an error even if the sum fits
            amax, bmax = np.abs(ao).max(axis=0), np.abs(bo).max(axis=1)
            if any(x * y > INT64_MAX for x, y in zip(amax, bmax)):
                return np.zeros((a.shape[0], b.shape[1]), np.int64), self.cfg.ERR_OVERFLOW
        acc = ao @ bo
        limit_lo, limit_hi = (INT32_MIN, INT32_MAX) if prec.bits == 8 else (INT64_MIN, INT64_MAX)
        if acc.size and (acc.max() > limit_hi or acc.min() < limit_lo):
            return np.zeros(acc.shape, np.int64), self.cfg.ERR_OVERFLOW
        return acc.astype(np.int64), 0

    def _gemm_fp(self, a: np.ndarray, b: np.ndarray, kw: int, L: int) -> np.ndarray:
        """fp32 in the hardware's order: per PE, word w into partial w mod FP_PARTIALS; the
        partials as a pairwise tree; then the column tree over the ROWS lanes."""
        c = self.cfg
        m, n = a.shape[0], b.shape[0]
        a3 = a.reshape(m, kw, L)
        b3 = b.reshape(n, kw, L)
        out = np.empty((m, n), np.float32)
        chunk = max(1, (1 << 22) // max(1, n * kw * L))
        parts_n = c.FP_PARTIALS
        for s in range(0, m, chunk):
            p = a3[s:s + chunk, None, :, :] * b3[None, :, :, :]  # (mc, n, kw, L) fp32 products
            parts = np.zeros(p.shape[:2] + (parts_n, L), np.float32)
            for w in range(kw):
                parts[:, :, w % parts_n, :] += p[:, :, w, :]
            pe = _tree(parts, axis=2)           # (mc, n, L)
            out[s:s + chunk] = _tree(pe, axis=2)  # column tree over lanes
        return out


    # -- DWCONV -------------------------------------------------------------------------------

    def _dw_geometry(self, regs=None) -> DwGeometry:
        def f(reg, name):
            return self._f(reg, name, regs)
        return DwGeometry(
            ih=f("DW_IN", "H"), iw=f("DW_IN", "W"), oh=f("DW_OUT", "H"), ow=f("DW_OUT", "W"),
            kh=f("DW_KERNEL", "KH"), kw=f("DW_KERNEL", "KW"), pt=f("DW_KERNEL", "PT"),
            pl=f("DW_KERNEL", "PL"), sy=f("DW_STRIDE", "SY"), sx=f("DW_STRIDE", "SX"),
            dy=f("DW_STRIDE", "DY"), dx=f("DW_STRIDE", "DX"), gc=f("DW_GROUPS", "GC"),
            nchunk=f("DW_GROUPS", "NCHUNK"), lb_rows=f("DW_RING", "LB_ROWS"),
            tap_cycles=f("DW_RING", "TAP_CYCLES"))

    def _setup_dw(self, prec: Precision, out_mode: int, variant: int, regs) -> "JobSetup":
        c = self.cfg
        g = self._dw_geometry(regs)
        if 0 in (g.ih, g.iw, g.oh, g.ow, g.kh, g.kw, g.sy, g.sx, g.dy, g.dx, g.gc, g.nchunk):
            raise JobRefused(c.ERR_BAD_DIMS)
        # every output window must start inside the padded plane and touch the image
        for o, i, p, s, k, d in ((g.oh, g.ih, g.pt, g.sy, g.kh, g.dy), (g.ow, g.iw, g.pl, g.sx, g.kw, g.dx)):
            if p > (k - 1) * d or (o - 1) * s - p > i - 1:
                raise JobRefused(c.ERR_BAD_DIMS)
        tc = g.tap_cycles
        if tc < 1 or tc > c.COLS or tc & (tc - 1):
            raise JobRefused(c.ERR_BAD_DIMS)
        if g.lb_rows < (g.kh - 1) * g.dy + 1 or g.lb_rows * dw_slot_words(c, g) > c.ACT_WORDS:
            raise JobRefused(c.ERR_ACT_CAPACITY)
        groups = g.gc * g.nchunk
        ww = dw_weight_words(c, g)
        wb = self._r("WGT_BASE", regs=regs)
        if wb % c.COLS or wb + ww > c.WEIGHT_WORDS:
            raise JobRefused(c.ERR_WGT_RANGE)
        pf_addr, pf_count = self._setup_prefetch(regs, wb, wb + ww)
        L = prec.lanes
        pb = self._r("PARAM_BASE", regs=regs)
        if out_mode != c.OUT_MODE_RAW and (pb % c.COLS or pb + groups * L > c.PARAM_ENTRIES):
            raise JobRefused(c.ERR_PARAM_RANGE)
        key = (g, c.COLS, dw_rotated(c))
        conflict = self._dwcache.get(("conflict", dw_pe_pairs(c)) + key)
        if conflict is None:  # banks (the banked layout) or a PE pair issuing together
            conflict = dw_conflict(c, g.ow, g.gc, g.sx, tc)
            self._dwcache[("conflict", dw_pe_pairs(c)) + key] = conflict
        if conflict:
            raise JobRefused(c.ERR_BANK_CONFLICT)
        lanes_n, _ = out_lanes(c, prec, out_mode)
        wpi = ceil_div(L, lanes_n)
        n_in = g.nchunk * g.ih * g.iw * g.gc
        tkey = ("timing", g, wpi) + key
        timing = self._dwcache.get(tkey)
        if timing is None:
            timing = dw_schedule(c, g, wpi)
            self._dwcache[tkey] = timing
        return JobSetup("DWCONV", self._compute_needs(n_in, pf_count), prec=prec,
                        out_mode=out_mode, variant=variant,
                        wb=wb, pb=pb, geom=g, ww=ww, lanes_n=lanes_n, wpi=wpi,
                        words_out=g.nchunk * g.oh * g.ow * g.gc * wpi,
                        cycles=prefetch_cycles(c, timing.cycles, pf_count),
                        pf_addr=pf_addr, pf_count=pf_count,
                        **self._compute_regs(prec, out_mode, regs))

    def dw_words(self, s: "JobSetup", act: np.ndarray) -> tuple[np.ndarray, int]:
        c = self.cfg
        g, L = s.geom, s.prec.lanes
        acc, err = self._dw_acc(s.prec, act, g, s.wb, s.in_off, s.w_off)
        params = (self.post_params(s.pb, g.gc * g.nchunk * L, s.prec, s.out_mode)
                  if s.out_mode != c.OUT_MODE_RAW else None)
        if params is not None:  # channels of (chunk, ., ., g, lane)
            params = tuple(None if p is None else p.reshape(g.nchunk, 1, 1, g.gc * L)
                           for p in params)
        y, err = self.post(acc.reshape(g.nchunk, g.oh, g.ow, g.gc * L), s.prec, s.out_mode,
                            s.variant, params, err, s.act_min, s.act_max)
        if err & c.ERR_FATAL_MASK:
            return np.zeros(0, U64), err
        return self.pack_lanes(y.reshape(-1, L), s.lanes_n), err

    def dw_weights(self, prec: Precision, g: DwGeometry, wb: int, dtype, off: int):
        """Tap weights (taps, groups*lanes) with WGT_OFFSET applied, in the build's layout
        (dtpu.hw.dw_format); raises DwWeightsPerColumn when the rotated layout's copies of a
        group differ (the datapath then reads them per item, :meth:`dw_item_weights`)."""
        c = self.cfg
        key = ("dw", prec, wb, g.kh, g.kw, g.gc, g.nchunk, dw_rotated(c), off, np.dtype(dtype).str)
        hit = self._wcache.get(key)
        if isinstance(hit, DwWeightsPerColumn):
            raise hit
        if hit is not None:
            return hit
        self._wrange[key] = (wb, wb + dw_weight_words(c, g))
        try:
            words = dw_group_words(c, g, self.wmem[wb:wb + dw_weight_words(c, g)])
        except DwWeightsPerColumn as err:
            self._wcache[key] = err
            raise
        lanes = self._lanes_of(np.ascontiguousarray(words).reshape(-1), prec)
        w = lanes.reshape(g.kh * g.kw, g.gc * g.nchunk * prec.lanes)
        w = w.astype(np.float32) if prec.is_float else w.astype(dtype) + off
        self._wcache[key] = w
        return w

    def dw_item_weights(self, prec: Precision, g: DwGeometry, wb: int, dtype, off: int):
        """Rotated layout: the weights each item reads, (taps, nchunk, 1, OW, GC*lanes)."""
        sel = dw_item_words(self.cfg, g, self.wmem[wb:wb + dw_weight_words(self.cfg, g)])
        lanes = self._lanes_of(np.ascontiguousarray(sel).reshape(-1), prec)
        w = lanes.reshape(g.kh * g.kw, g.nchunk, 1, g.ow, g.gc * prec.lanes)
        return w.astype(np.float32) if prec.is_float else w.astype(dtype) + off

    def _dw_acc(self, prec: Precision, act: np.ndarray, g: DwGeometry, wb: int,
                in_off: int, w_off: int):
        c = self.cfg
        L = prec.lanes
        x = self._lanes_of(act, prec).reshape(g.nchunk, g.ih, g.iw, g.gc * L)
        taps = g.kh * g.kw
        if prec.is_float:
            dt = np.dtype(np.float32)
            in_off = 0
        else:
            bound = taps * self.operand_bound(prec, in_off) * self.operand_bound(prec, w_off)
            dt = _exact_dtype(bound)
            if dt.kind == "i" and prec.bits > 16:
                dt = np.dtype(object)  # INT32/INT64: exact, overflow checked below
        wdt = np.float64 if dt == object else dt
        try:
            w = self.dw_weights(prec, g, wb, wdt, w_off)
            wc = w.reshape(taps, g.nchunk, 1, 1, g.gc * L)
        except DwWeightsPerColumn:
            wc = self.dw_item_weights(prec, g, wb, wdt, w_off)
        if dt == object:
            wc = wc.astype(np.int64).astype(object)
        # the padded plane of operands (x + IN_OFFSET); pad taps contribute exactly 0
        (ph, pw) = ((g.oh - 1) * g.sy + (g.kh - 1) * g.dy + 1, (g.ow - 1) * g.sx + (g.kw - 1) * g.dx + 1)
        xp = np.zeros((g.nchunk, max(ph, g.pt + g.ih), max(pw, g.pl + g.iw), g.gc * L), dt)
        inner = xp[:, g.pt:g.pt + g.ih, g.pl:g.pl + g.iw, :]
        inner[...] = x
        if in_off:
            inner += in_off
        if prec.is_float:
            parts = np.zeros((c.FP_PARTIALS, g.nchunk, g.oh, g.ow, g.gc * L), np.float32)
        else:
            acc = np.zeros((g.nchunk, g.oh, g.ow, g.gc * L), dt)
        for t in range(taps):
            ky, kx = divmod(t, g.kw)
            xs = xp[:, ky * g.dy:ky * g.dy + (g.oh - 1) * g.sy + 1:g.sy,
                    kx * g.dx:kx * g.dx + (g.ow - 1) * g.sx + 1:g.sx, :]
            if prec.is_float:
                parts[t % c.FP_PARTIALS] += xs * wc[t]
                continue
            if prec is Precision.INT64 and xs.size:
                # a product leaving int64 is an error even if the sum fits: the largest operand
                # of each (chunk, channel) at this tap against that channel's tap weight
                xmax = np.abs(xs).max(axis=(1, 2) if wc.shape[3] == 1 else 1, keepdims=True)
                if (xmax * np.abs(wc[t]) > INT64_MAX).any():
                    return np.zeros(acc.shape, np.int64), c.ERR_OVERFLOW
            acc += xs * wc[t]
        if prec.is_float:
            return _tree(parts, axis=0), 0
        if dt == object:
            lim = INT64_MAX
            if acc.size and (acc.max() > lim or acc.min() < -lim - 1):
                return np.zeros(acc.shape, np.int64), c.ERR_OVERFLOW
            return acc.astype(np.int64), 0
        acc = acc.astype(np.int64)
        return acc, self._acc_range_error(prec, acc, bound)
