"""Where things live: the one allocator of on-chip and DDR space, the scratch regions both
execution paths keep free of resident nodes, the host's record of what the on-chip memories
hold, and the claim check that a node can be placed at all.

The job-by-job path (:class:`dtpu.backends.model.DeviceBackend`), the command-list compiler
(:func:`dtpu.hw.listcompiler.compile_program`), the model's DDR (:class:`dtpu.hw.ddr.DdrPool`)
and the delegate's claim (``placement_error``) used to carry an allocator or a capacity rule of
their own each; they now ask this module, so a change of placement policy is made once. The two
paths still differ where the hardware use differs: the job path pages a node that does not fit
through the whole scratch region (:func:`job_scratch`), a command list streams it through one of
two alternating halves of it (:func:`list_scratch`, :func:`list_halves`) so the load unit fills
one while the core reads the other.
"""
from __future__ import annotations

import numpy as np

from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.lower import Job, placement_error

#: share of each on-chip memory kept free of resident nodes: the region that nodes which do
#: not fit are paged or streamed through
SCRATCH_FRACTION = 8

_U64 = np.dtype("<u8")


class Region:
    """First-fit allocation of [0, `size`) in units aligned to `align`: the lowest gap that
    holds a request (never fragmenting more than first fit does). With no frees in between,
    allocations are consecutive from 0 (what a bump allocator gives), so one class serves
    resident on-chip nodes, a compiled program's resident nodes and DDR buffers."""

    def __init__(self, size: int, align: int) -> None:
        self.size, self.align = size, align
        #: start -> aligned length of every allocation
        self.used: dict[int, int] = {}

    def alloc(self, n: int, limit: int | None = None) -> int | None:
        """The offset of `n` units (rounded up to `align`), None when no gap holds them below
        `limit` (default: `size`; a larger one lets an allocation reach past the region)."""
        n = -(-n // self.align) * self.align
        base = 0
        for start, length in sorted(self.used.items()):
            if start - base >= n:
                break
            base = max(base, start + length)
        if base + n > (self.size if limit is None else limit):
            return None
        self.used[base] = n
        return base

    def free(self, base: int | None) -> None:
        if base is not None:
            self.used.pop(base, None)

    @property
    def top(self) -> int:
        """The end of the highest allocation (0: none)."""
        return max((s + n for s, n in self.used.items()), default=0)

    def largest_gap(self, end: int) -> tuple[int, int]:
        """(start, end) of the largest stretch of [0, `end`) no allocation holds."""
        free, pos = [], 0
        for start, length in sorted(self.used.items()):
            if start > pos:
                free.append((pos, start))
            pos = max(pos, start + length)
        free.append((pos, end))
        return max(free, key=lambda r: r[1] - r[0])


def job_scratch(cfg: HwConfig, fraction: int = SCRATCH_FRACTION) -> tuple[int, int]:
    """(weight words, parameter entries) of the job path's scratch region, at the top of each
    memory: a node that is not resident pages through it (or streams its pages through the
    ring of which it is the least part)."""
    return max(cfg.COLS, cfg.WEIGHT_WORDS // fraction), max(cfg.COLS, cfg.PARAM_ENTRIES // fraction)


def list_scratch(cfg: HwConfig, fraction: int = SCRATCH_FRACTION) -> tuple[int, int]:
    """(weight words, parameter entries) a compiled program keeps as scratch: at least two
    COLS-aligned halves."""
    return (max(cfg.COLS * 2, cfg.WEIGHT_WORDS // fraction),
            max(cfg.COLS * 2, cfg.PARAM_ENTRIES // fraction))


def list_halves(cfg: HwConfig, fraction: int = SCRATCH_FRACTION) -> tuple[int, int, list]:
    """(weight words, parameter entries, [(weight base, parameter base)] x 2) of the two
    alternating halves a compiled program streams non-resident nodes through."""
    weight_scratch, param_scratch = list_scratch(cfg, fraction)
    whalf = (weight_scratch // 2) // cfg.COLS * cfg.COLS
    phalf = (param_scratch // 2) // cfg.COLS * cfg.COLS
    halves = [(cfg.WEIGHT_WORDS - weight_scratch, cfg.PARAM_ENTRIES - param_scratch),
              (cfg.WEIGHT_WORDS - weight_scratch + whalf, cfg.PARAM_ENTRIES - param_scratch + phalf)]
    return whalf, phalf, halves


def claim_error(spec, cfg: HwConfig | None = None, precision=None, *, lists: bool = False) -> str | None:
    """Why `spec` cannot be placed (None: it can), for the smallest region a node that does
    not fit gets: the job path's scratch region, or (`lists`) a compiled program's scratch
    half. What the delegate checks before it claims a node, so prepare never fails for lack of
    on-chip memory."""
    cfg = cfg or get_config()
    if lists:
        words, entries, _ = list_halves(cfg)
    else:
        words, entries = job_scratch(cfg)
    return placement_error(spec, cfg, precision, wgt_capacity=words, param_capacity=entries)


class OnChipShadow:
    """What the weight and parameter memories hold, as far as the host wrote them (the
    target's memories cannot be read back cheaply): checked before a streamed page or paged
    parameters are used, forgotten when something else (a failed job, a command list) wrote
    the memories."""

    def __init__(self, cfg: HwConfig) -> None:
        self.cfg = cfg
        self.wgt = np.zeros(cfg.WEIGHT_WORDS, _U64)
        self.wgt_known = np.zeros(cfg.WEIGHT_WORDS, bool)
        self.param = np.zeros((cfg.PARAM_ENTRIES, 2), _U64)
        self.param_known = np.zeros(cfg.PARAM_ENTRIES, bool)

    def remember(self, addr: int, words: np.ndarray) -> None:
        """Weight words written from `addr`."""
        self.wgt[addr:addr + words.size] = words
        self.wgt_known[addr:addr + words.size] = True

    def remember_load(self, job: Job) -> None:
        """What a LOAD_WGT or LOAD_PARAM job writes (other jobs write neither memory)."""
        r = dict(job.regs)
        op = self.cfg.decode("JOB", r["JOB"])["OPCODE"]
        if op == self.cfg.OPCODE_LOAD_WGT:
            self.remember(r["LOAD_ADDR"], job.send["wgt"])
        elif op == self.cfg.OPCODE_LOAD_PARAM:
            a, e = r["LOAD_ADDR"], job.send["wgt"].reshape(-1, 2)
            self.param[a:a + len(e)] = e
            self.param_known[a:a + len(e)] = True

    def words_there(self, addr: int, words: np.ndarray) -> bool:
        n = words.size
        return bool(self.wgt_known[addr:addr + n].all()
                    and self.wgt[addr:addr + n].tobytes() == words.tobytes())

    def entries_there(self, a: int, e: np.ndarray) -> bool:
        return bool(self.param_known[a:a + len(e)].all()
                    and self.param[a:a + len(e)].tobytes() == e.tobytes())

    def forget(self) -> None:
        """Whatever the memories hold is checked again before use."""
        self.wgt_known[:] = False
        self.param_known[:] = False


__all__ = ["SCRATCH_FRACTION", "OnChipShadow", "Region", "claim_error", "job_scratch", "list_halves",
           "list_scratch"]
