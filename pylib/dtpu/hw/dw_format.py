"""How a DWCONV job's words sit in the core's memories: the ring slot of an input row and the
weight words, in the build's depthwise layout (``DW_ROTATE``: docs/architecture.md, "Depthwise
crossbars linear in COLS"). The golden model, the lowering and the list compiler read them
here, so that the three agree with the RTL by construction. `g` is a :class:`DwGeometry`
(dtpu.hw.core), read by attribute only.
"""
from __future__ import annotations

import math

import numpy as np

from dtpu.hw.config import HwConfig, ceil_div
from dtpu.hw.contract_schedules import dw_bank_conflict, dw_pair_conflict


def dw_rotated(cfg: HwConfig) -> bool:
    """The build's depthwise layout is the rotated one (``DW_ROTATE``, docs/architecture.md
    "Depthwise crossbars linear in COLS"): phase-major activation slots read as one rotation of
    the banks, per-column weight words in step phases. Old contracts without the knob: 0."""
    return bool(getattr(cfg, "DW_ROTATE", 0))


def dw_pe_pairs(cfg: HwConfig) -> bool:
    """The build's 8-bit MXU rows are PE pairs (``PE_PAIR``, docs/architecture.md "A denser
    array"): columns j and j + COLS/2 must not issue together in DWCONV. Old contracts: 0."""
    return bool(getattr(cfg, "PE_PAIR", 0))


def dw_conflict(cfg: HwConfig, ow: int, gc: int, sx: int, tap_cycles: int) -> bool:
    """The build refuses this depthwise row shape in CONFIG with ERR.BANK_CONFLICT: two columns
    of one cycle on one activation bank (the banked layout only) or, with PE pairs, the two
    columns of a pair in one cycle. The golden model refuses by it and the lowering picks the
    smallest TAP_CYCLES it accepts, so that the two agree by construction."""
    if not dw_rotated(cfg) and dw_bank_conflict(cfg.COLS, ow, gc, sx, tap_cycles):
        return True
    return dw_pe_pairs(cfg) and dw_pair_conflict(cfg.COLS, ow, gc, tap_cycles)


def dw_slot_words(cfg: HwConfig, g) -> int:
    """Words one ring slot occupies, whole bank rows so that every slot starts in bank 0. The
    rotated layout keeps SX phases of ceil(IW/SX) pixels (the last ones short of IW mod SX) in
    a slot of (IW + SX - 1)*GC words, SX*ceil(IW/SX)*GC or up to (SX - 1)*GC more: a size
    without a quotient, so that the RTL's CONFIG0 capacity check needs no divider."""
    cols = cfg.COLS
    if dw_rotated(cfg):
        return ceil_div((g.iw + g.sx - 1) * g.gc, cols) * cols
    return ceil_div(g.iw * g.gc, cols) * cols


def dw_weight_phases(cols: int, gc: int) -> int:
    """Steps after which the rotated layout's columns see the same groups again: column j of
    step s holds group (s*COLS + j) mod GC, period GC / gcd(GC, COLS), the odd part of GC for
    the power-of-two COLS."""
    return gc // math.gcd(gc, cols)


def dw_weight_words(cfg: HwConfig, g) -> int:
    """Weight words a DWCONV job reads from WGT_BASE: KH*KW*GP (groups rounded up to COLS),
    or KH*KW*NCHUNK*P*COLS in the rotated layout (a word per column and step phase)."""
    cols, taps = cfg.COLS, g.kh * g.kw
    if dw_rotated(cfg):
        return taps * g.nchunk * dw_weight_phases(cols, g.gc) * cols
    return taps * ceil_div(g.gc * g.nchunk, cols) * cols


def dw_weight_layout(cfg: HwConfig, g) -> np.ndarray:
    """The group each weight word of a DWCONV job holds, per tap (taps, words per tap); -1 for
    padding. Tap-major both ways: (groups rounded up to COLS) today, (chunk, step phase h,
    column j) -> group c*GC + (h*COLS + j) mod GC in the rotated layout."""
    cols, taps = cfg.COLS, g.kh * g.kw
    groups = g.gc * g.nchunk
    if dw_rotated(cfg):
        p = dw_weight_phases(cols, g.gc)
        pos = np.arange(p * cols)
        per = (np.arange(g.nchunk)[:, None] * g.gc + (pos % g.gc)[None, :]).reshape(-1)
    else:
        gp = ceil_div(groups, cols) * cols
        per = np.where(np.arange(gp) < groups, np.arange(gp), -1)
    return np.broadcast_to(per, (taps, per.size))


class DwWeightsPerColumn(ValueError):
    """Rotated depthwise weights whose column copies of one group differ: the job is still
    exact (each item reads its column's copy), only no per-group weight matrix describes it."""


def dw_group_words(cfg: HwConfig, g, words: np.ndarray) -> np.ndarray:
    """The weight word of each (tap, group), (taps, groups), from the job's words (from
    WGT_BASE on, :func:`dw_weight_words` of them); raises :class:`DwWeightsPerColumn` when the
    rotated layout's copies of a group differ."""
    taps, groups = g.kh * g.kw, g.gc * g.nchunk
    if not dw_rotated(cfg):
        return words.reshape(taps, -1)[:, :groups]
    per = words.reshape(taps, g.nchunk, -1)
    first = per[:, :, :g.gc]      # group c*GC + j at (chunk c, phase 0, column j) for j < GC
    if not (per.reshape(taps, g.nchunk, -1, g.gc) == first[:, :, None, :]).all():
        raise DwWeightsPerColumn("rotated depthwise weights: a group's column copies differ")
    return first.reshape(taps, groups)


def dw_item_words(cfg: HwConfig, g, words: np.ndarray) -> np.ndarray:
    """Rotated layout: the weight word each item reads, (taps, nchunk, OW, GC): item q = ox*GC + g
    of step s = q // COLS, in column q mod COLS, reads phase s mod P, i.e. word q mod (P*COLS) of
    its chunk's tap row."""
    p = dw_weight_phases(cfg.COLS, g.gc)
    w = words.reshape(g.kh * g.kw, g.nchunk, p * cfg.COLS)
    q = (np.arange(g.ow)[:, None] * g.gc + np.arange(g.gc)[None, :]) % (p * cfg.COLS)
    return w[:, :, q]
