"""Radiation, measured: single and double bit flips in the images, run on the machine model.

Each trial copies the bundle's images, flips bits in one region, runs the program and sorts the
outcome against the unflipped run:

- ``masked``: the output (after any host head) is bit-identical;
- ``silent``: the machine ran to END but the output differs (silent data corruption);
- ``stopped``: the machine faulted, the decoder rejected a program word, or the EDAC memory
  reported an uncorrectable word (the master processor can retry or reload).

Regions: ``program`` (program.bin), ``filter`` (weights and parameter blocks, filter.bin) and
``frame`` (the input image in frame memory), flipped as the images sit in memory before START;
and ``activations``: any byte of frame memory, flipped between two instructions chosen
uniformly while the program runs (a tensor being produced or consumed, or a dead one). A trial
flips one bit, or with ``double`` two bits chosen uniformly in the region, or with ``adjacent``
two neighbouring bits of one word (a multi-bit upset, what SECDED cannot correct).

With ``secded``, each 64-bit memory word carries 8 check bits of an extended Hamming (72, 64)
code, as an EDAC memory does; flips land uniformly in the 72-bit codewords (check bits
included), the word is decoded on read: one flipped bit in a word is corrected, two are detected
(the machine stops). The code is implemented, not assumed: flips are applied to real codewords.

Trials draw from ``numpy.random.default_rng(seed)``, so a seeded run is reproducible.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from dtpu.isro import isa
from dtpu.isro.machine import Machine, MachineError

log = logging.getLogger(__name__)

REGIONS = ("program", "filter", "frame", "activations")
OUTCOMES = ("masked", "silent", "stopped")


# -- SECDED (72, 64): extended Hamming ---------------------------------------------------------------

_DATA_POS = [p for p in range(1, 72) if p & (p - 1)]          # 64 positions that are not powers of 2
assert len(_DATA_POS) == 64


def secded_encode(word: int) -> int:
    """64-bit word -> 72-bit codeword: bit p (1..71) Hamming positions, bit 0 overall parity."""
    code = 0
    for i, p in enumerate(_DATA_POS):
        if word >> i & 1:
            code |= 1 << p
    syn = 0
    for p in _DATA_POS:
        if code >> p & 1:
            syn ^= p
    for k in range(7):
        if syn >> k & 1:
            code |= 1 << (1 << k)
    if bin(code).count("1") & 1:
        code |= 1
    return code


def secded_decode(code: int) -> tuple[int, str]:
    """(word, 'ok' | 'corrected' | 'detected') for a 72-bit codeword."""
    syn = 0
    for p in range(1, 72):
        if code >> p & 1:
            syn ^= p
    odd = bin(code).count("1") & 1
    status = "ok"
    if odd:                                     # one flip: at `syn`, or the parity bit itself
        code ^= 1 << syn if syn else 1
        status = "corrected"
    elif syn:
        return 0, "detected"
    word = 0
    for i, p in enumerate(_DATA_POS):
        if code >> p & 1:
            word |= 1 << i
    return word, status


# -- trials ---------------------------------------------------------------------------------------

@dataclass
class Table:
    trials: int
    double: bool
    secded: bool
    seed: int | None
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    region_bytes: dict[str, int] = field(default_factory=dict)
    adjacent: bool = False

    def fraction(self, region: str, outcome: str) -> float:
        n = sum(self.counts[region].values())
        return self.counts[region][outcome] / n if n else 0.0

    def __str__(self) -> str:
        kind = "adjacent double" if self.adjacent else ("double" if self.double else "single")
        head = (f"{kind}-bit flips, {self.trials} trials per region, "
                f"SECDED {'on' if self.secded else 'off'}, seed {self.seed}")
        lines = [head, f"{'region':<11} {'bytes':>9} " + " ".join(f"{o:>9}" for o in OUTCOMES)]
        for region, c in self.counts.items():
            lines.append(f"{region:<11} {self.region_bytes[region]:>9,} "
                         + " ".join(f"{100 * self.fraction(region, o):>8.1f}%" for o in OUTCOMES))
        return "\n".join(lines)


def _images(bundle, x) -> dict[str, tuple[bytearray, int, int]]:
    """region -> (bytes, first, end) of the part of that memory image flips may land in."""
    frame, _ = bundle.memories(x)
    inp = bundle.meta["input"]
    c, h, w = inp["shape"]
    t, b, l, r = inp["pad"]
    n = c * (h + t + b) * (w + l + r) * isa.FRAME_DTYPE[bundle.fmt].itemsize
    return {"program": (bytearray(isa.encode_program(bundle.program)), 0, len(bundle.program) * 64),
            "filter": (bytearray(bundle.filter), 0, len(bundle.filter)),
            "frame": (bytearray(frame[:inp["addr"] + n].tobytes()), inp["addr"], inp["addr"] + n)}


def _flip(data: bytearray, lo: int, hi: int, nbits: int, rng, secded: bool, adjacent: bool = False) -> str:
    """Flip bits in data[lo:hi]; returns 'ok' or, with SECDED, the worst word status."""
    if not secded:
        if adjacent:                                  # two neighbouring bits of one 64-bit word
            bit = int(rng.integers((hi - lo) * 8))
            bits = [bit, bit + 1] if bit % 64 != 63 else [bit - 1, bit]
            bits = [b for b in bits if b < (hi - lo) * 8]
        else:
            bits = rng.choice((hi - lo) * 8, size=nbits, replace=False)
        for bit in bits:
            data[lo + bit // 8] ^= 1 << (bit % 8)
        return "ok"
    words0, words1 = lo // 8, -(-hi // 8)
    if adjacent:
        w, p = int(rng.integers(words1 - words0)), int(rng.integers(71))
        picks = [w * 72 + p, w * 72 + p + 1]
    else:
        picks = rng.choice((words1 - words0) * 72, size=nbits, replace=False)
    by_word: dict[int, list[int]] = {}
    for p in picks:
        by_word.setdefault(words0 + int(p) // 72, []).append(int(p) % 72)
    worst = "ok"
    for wi, bits in by_word.items():
        raw = bytes(data[wi * 8:wi * 8 + 8]).ljust(8, b"\0")
        code = secded_encode(int.from_bytes(raw, "little"))
        for bpos in bits:
            code ^= 1 << bpos
        word, status = secded_decode(code)
        if status == "detected":
            return "detected"
        end = min(wi * 8 + 8, len(data))
        data[wi * 8:end] = word.to_bytes(8, "little")[:end - wi * 8]
        if status == "corrected":
            worst = "corrected"
    return worst


def _run(bundle, images: dict[str, bytearray], pe, heads, upset=None) -> np.ndarray:
    """Run the images; `upset(frame)` (if given) flips frame memory between two instructions."""
    from dtpu.isro.bundle import read_tensor, to_framework
    program = isa.decode_program(bytes(images["program"]))
    frame = np.full(bundle.meta["frame_bytes"], 0xFF, np.uint8)
    filt = np.full(bundle.meta["filter_bytes"], 0xFF, np.uint8)
    fr = np.frombuffer(bytes(images["frame"]), np.uint8)
    frame[:fr.size] = fr
    fi = np.frombuffer(bytes(images["filter"]), np.uint8)
    filt[:fi.size] = fi
    if upset is None:
        Machine(pe).execute(program, frame, filt)
    else:
        at, flip = upset
        # a straight-line program: run up to the boundary, upset the memory, run the rest
        Machine(pe).execute(program[:at] + [isa.Instruction(isa.Op.END)], frame, filt)
        if flip(frame) == "detected":
            raise MachineError("EDAC: uncorrectable frame memory word")
        Machine(pe).execute(program[at:], frame, filt)
    out = to_framework(read_tensor(frame, bundle.meta["output"], bundle.fmt), bundle.meta["output"]["flat"])
    if heads:
        from dtpu.isro import heads as host_heads
        out = host_heads.apply(heads, out)
    return out


def inject(bundle, trials: int, *, seed: int | None = 0, double: bool = False, secded: bool = False,
           adjacent: bool = False, regions=REGIONS, x=None) -> Table:
    """The outcome table of `trials` flips per region (see the module docstring)."""
    if bundle.meta.get("staged"):
        raise ValueError("inject: this bundle is staged through external memory; the upset campaign "
                         "covers on-chip bundles (program, filter and frame images) only")
    if trials < 1:
        raise ValueError(f"trials = {trials}; expected a positive number")
    bad = [r for r in regions if r not in REGIONS]
    if bad:
        raise ValueError(f"region(s) {', '.join(bad)}; accepted: {', '.join(REGIONS)}")
    rng = np.random.default_rng(seed)
    base = _images(bundle, x)
    pe = bundle.meta.get("pe")
    heads = bundle.meta.get("heads") or []
    golden = _run(bundle, {k: v[0] for k, v in base.items()}, pe, heads)
    table = Table(trials, double or adjacent, secded, seed, adjacent=adjacent)
    nbits = 2 if double or adjacent else 1
    n_run = len(bundle.program) - 1                   # instructions before END
    for region in regions:
        if region == "activations":
            lo, hi = 0, bundle.meta["frame_bytes"]
        else:
            data0, lo, hi = base[region]
        table.region_bytes[region] = hi - lo
        counts = dict.fromkeys(OUTCOMES, 0)
        for _ in range(trials):
            images = {k: bytearray(v[0]) for k, v in base.items()}
            upset = None
            if region == "activations":
                at = int(rng.integers(1, max(n_run, 2)))

                def flip(frame, lo=lo, hi=hi):
                    buf = bytearray(frame.tobytes())
                    status = _flip(buf, lo, hi, nbits, rng, secded, adjacent)
                    frame[:] = np.frombuffer(bytes(buf), np.uint8)
                    return status
                upset = (at, flip)
            else:
                status = _flip(images[region], lo, hi, nbits, rng, secded, adjacent)
                if status == "detected":
                    counts["stopped"] += 1
                    continue
            try:
                with np.errstate(all="ignore"):
                    out = _run(bundle, images, pe, heads, upset)
            except (MachineError, ValueError):      # ValueError: the decoder rejects a word
                counts["stopped"] += 1
                continue
            same = out.shape == golden.shape and np.array_equal(out.view(np.uint8), golden.view(np.uint8))
            counts["masked" if same else "silent"] += 1
        table.counts[region] = counts
        log.info("%s: %s", region, counts)
    return table
