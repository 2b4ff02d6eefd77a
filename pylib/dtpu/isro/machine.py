"""A functional model of the ISRO-ASIC: executes an instruction stream on its two memories.

It plays the role of the report's "Python model that mimics the ASIC's behaviour": every
instruction is executed with whole-tensor numpy operations (no loop over pixels), every
non-partial instruction's output can be captured as it is written (so per-layer dumps survive a
program that reuses frame memory), and the counters say what the hardware would have spent:
instructions, MACs, cycles at one block per cycle (a convolution's `lanes` blocks side by side), and
bytes moved in each memory.

Arithmetic is the ISA's definition, not a copy of any framework's: F32 accumulates in float32,
I8 accumulates exactly and wraps to the 32-bit accumulator, and the I8 DSP stage applies its
fixed-point multiplier with the rounding the instruction names (:func:`requantize`).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from dtpu.isro.isa import (ACC_DTYPE, FRAME_DTYPE, INSTRUCTION_BYTES, LUT_ENTRIES, PARAM_DTYPE,
                           PARAM_HEADER_WORDS, WEIGHT_DTYPE, Fill, Fmt, Func, Instruction, Mem, Mode, Op, Rounding,
                           block_size, output_steps, param_block_bytes, pe_used, times_lanes as _times_lanes)
from dtpu.isro import resample
from dtpu.isro.operands import avgpool_taps, operand_faults

log = logging.getLogger(__name__)

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


# geometry fields that must be at least 1 wherever an opcode uses them
DIMENSIONS = ("cin", "hin", "win", "cout", "hout", "wout")


class MachineError(RuntimeError):
    """An instruction the chip would fault on (bad address, geometry, or a block too large).

    ``index`` is the faulting instruction (the program's length when it ran off its end).
    """

    index: int | None = None


@dataclass
class Counters:
    """What one program run cost. Bytes are counted once per operand an instruction touches."""

    instructions: int = 0
    by_op: dict[str, int] = field(default_factory=dict)
    macs: int = 0
    adds: int = 0
    compares: int = 0
    cycles: int = 0
    frame_read: int = 0
    frame_write: int = 0
    filter_read: int = 0
    filter_write: int = 0
    external_read: int = 0
    external_write: int = 0
    transfer_cycles: int = 0      # of `cycles`: spent in XFER (external memory latency + bytes)

    def add(self, other: "Counters") -> None:
        for k, v in asdict(other).items():
            if k == "by_op":
                for op, n in v.items():
                    self.by_op[op] = self.by_op.get(op, 0) + n
            else:
                setattr(self, k, getattr(self, k) + v)

    def to_dict(self) -> dict:
        return asdict(self)


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """The 32-bit accumulator: two's-complement wrap of exact int64 sums."""
    x = np.asarray(x, dtype=np.int64)
    return ((x - INT32_MIN) & 0xFFFFFFFF) + INT32_MIN


def requantize(x, mult, shift, rounding: Rounding) -> np.ndarray:
    """x * mult * 2^(shift - 31), rounded as `rounding` says, on int32 values held in int64.

    ``mult`` is a Q0.31 multiplier, ``shift`` a power-of-two exponent (positive: left shift),
    exactly TFLite's QuantizeMultiplier encoding; the three roundings are the ones TFLite's
    kernels differ by (docs/isro_isa.md, "I8 DSP stage"). Every product is |x*m| < 2^62.
    """
    x = np.asarray(x, dtype=np.int64)
    m = np.asarray(mult, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    if np.any((s < -31) | (s > 30)):
        raise MachineError(f"I8 DSP shift {int(s.min())}..{int(s.max())} outside [-31, 30]")
    rounding = Rounding(rounding)
    if rounding is Rounding.SINGLE:
        total = 31 - s
        return wrap_int32((x * m + (np.int64(1) << (total - 1))) >> total)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    xs = wrap_int32(x << left)
    ab = xs * m
    overflow = (xs == INT32_MIN) & (m == INT32_MIN)
    if rounding is Rounding.DOUBLE:
        t = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
        high = np.sign(t) * (np.abs(t) >> 31)          # C division: truncate towards zero
        high = np.where(overflow, INT32_MAX, high)
        mask = (np.int64(1) << right) - 1
        rem = high & mask
        threshold = (mask >> 1) + (high < 0)
        return (high >> right) + (rem > threshold)
    high = (ab + (1 << 30)) >> 31                     # DOUBLE_UP: floor(x*m/2^31 + 1/2)
    high = np.where(overflow, INT32_MAX, high)
    half = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0)
    return (high + half) >> right


def div_round_away(x: np.ndarray, n: int) -> np.ndarray:
    """C's (x + n/2) / n for x > 0, (x - n/2) / n otherwise (truncating): TFLite's int8 average."""
    x = np.asarray(x, dtype=np.int64)
    return np.sign(x) * ((np.abs(x) + n // 2) // n)


def _f32_function(func: Func, x: np.ndarray) -> np.ndarray:
    """LUT in F32: the chip's float unit (float32 throughout)."""
    x = x.astype(np.float32)
    one = np.float32(1.0)
    if func is Func.SIGMOID:
        return (one / (one + np.exp(-x))).astype(np.float32)
    if func is Func.TANH:
        return np.tanh(x).astype(np.float32)
    return (x * np.clip(x + np.float32(3.0), 0, 6).astype(np.float32) / np.float32(6.0)).astype(np.float32)


@dataclass(frozen=True)
class Link:
    """The external memory's cost as the chip profile states it: an XFER of n bytes takes
    `latency_cycles` + ceil(n / `bytes_per_cycle`) cycles (transfers do not overlap compute)."""

    bytes_per_cycle: float = 8.0
    latency_cycles: int = 0

    def cycles(self, nbytes: int) -> int:
        return int(self.latency_cycles) + int(np.ceil(nbytes / self.bytes_per_cycle))


class Machine:
    """The chip: `pe` processing elements (None: as many as any instruction needs); `link` the
    external memory's transfer cost (XFER)."""

    def __init__(self, pe: int | None = None, link: Link | None = None) -> None:
        if pe is not None and (not isinstance(pe, (int, np.integer)) or pe < 1):
            raise ValueError(f"pe must be a positive integer or None, got {pe!r}")
        self.pe = None if pe is None else int(pe)
        self.link = link or Link()

    # -- memory ---------------------------------------------------------------------------------

    @staticmethod
    def _region(mem: np.ndarray, name: str, addr: int, dtype: np.dtype, count: int, where: str) -> np.ndarray:
        nbytes = int(count) * dtype.itemsize
        if addr % dtype.itemsize:
            raise MachineError(f"{where}: {name} address {addr:#x} is not {dtype.itemsize}-byte aligned")
        if addr + nbytes > mem.size:
            raise MachineError(f"{where}: {name} region [{addr:#x}, {addr + nbytes:#x}) runs past "
                               f"the end of {name} memory ({mem.size:#x} bytes)")
        return mem[addr:addr + nbytes].view(dtype)

    # -- execution ------------------------------------------------------------------------------

    def execute(self, program: Sequence[Instruction], frame: np.ndarray, filt: np.ndarray, *,
                on_output: Callable[[int, Instruction, np.ndarray], None] | None = None,
                trace: list | None = None, external: np.ndarray | None = None) -> Counters:
        """Run `program` until END, updating the uint8 memories `frame` and `filt` (and
        `external`, when the program moves data there with XFER) in place.

        `on_output(index, instruction, tensor)` sees every value an instruction writes to frame
        memory, as (C, H, W) without its padding border; `trace` (a list) receives one Counters
        per instruction.
        """
        ext = np.zeros(0, np.uint8) if external is None else external
        for mem, name in ((frame, "frame"), (filt, "filter"), (ext, "external")):
            if not (isinstance(mem, np.ndarray) and mem.dtype == np.uint8 and mem.ndim == 1):
                raise TypeError(f"{name} memory must be a 1-D uint8 numpy array")
        mems = {Mem.FRAME: frame, Mem.FILTER: filt, Mem.EXTERNAL: ext}
        total = Counters()
        for index, ins in enumerate(program):
            if ins.op is Op.END:
                total.instructions += 1
                total.by_op["end"] = total.by_op.get("end", 0) + 1
                if trace is not None:
                    trace.append(Counters(instructions=1, by_op={"end": 1}))
                return total
            c = Counters(instructions=1, by_op={ins.op.name.lower(): 1})
            if ins.op.name == "XFER":
                try:
                    self._xfer(index, ins, mems, c)
                except MachineError as exc:
                    exc.index = index
                    raise
            elif ins.op is not Op.NOP:
                try:
                    self._check(index, ins)
                    # F32 inf/NaN are values the chip computes with, not host errors
                    with np.errstate(all="ignore"):
                        out = self._run(index, ins, frame, filt, c)
                except MachineError as exc:
                    exc.index = index
                    raise
                if out is not None and on_output is not None:
                    on_output(index, ins, out)
            total.add(c)
            if trace is not None:
                trace.append(c)
        exc = MachineError(f"program ran off its end after {len(program)} instructions without END")
        exc.index = len(program)
        raise exc

    def _xfer(self, index: int, ins: Instruction, mems: dict, c: Counters) -> None:
        """`count` chunks of `len` bytes, chunk k from src + k*sstride to dst + k*dstride."""
        where = f"instruction {index} (xfer)"
        names = {Mem.FRAME: "frame", Mem.FILTER: "filter", Mem.EXTERNAL: "external"}
        if ins.len < 1 or ins.count < 1:
            raise MachineError(f"{where}: len={ins.len} count={ins.count}; a transfer moves at least one byte")
        if ins.xsrc == ins.xdst:
            raise MachineError(f"{where}: source and destination are both {names[ins.xsrc]} memory")
        src, dst = mems[ins.xsrc], mems[ins.xdst]
        for mem, base, stride, name in ((src, ins.src, ins.sstride, names[ins.xsrc]),
                                        (dst, ins.dst, ins.dstride, names[ins.xdst])):
            end = base + (ins.count - 1) * stride + ins.len
            if end > mem.size:
                raise MachineError(f"{where}: {name} region up to {end:#x} runs past the end of {name} "
                                   f"memory ({mem.size:#x} bytes)")
            if ins.count > 1 and stride < ins.len:
                raise MachineError(f"{where}: {name} stride {stride} is shorter than a chunk ({ins.len} B)")
        n, k = ins.len, ins.count
        view = np.lib.stride_tricks.as_strided
        a = view(src[ins.src:], shape=(k, n), strides=(ins.sstride or n, 1))
        b = view(dst[ins.dst:], shape=(k, n), strides=(ins.dstride or n, 1))
        b[...] = a
        moved = n * k
        for m, attr in ((ins.xsrc, "read"), (ins.xdst, "write")):
            key = f"{names[m]}_{attr}"
            setattr(c, key, getattr(c, key) + moved)
        if Mem.EXTERNAL in (ins.xsrc, ins.xdst):
            cost = self.link.cycles(moved)
        else:
            cost = int(np.ceil(moved / self.link.bytes_per_cycle))
        c.cycles += cost
        c.transfer_cycles += cost

    def _check(self, index: int, ins: Instruction) -> None:
        where = f"instruction {index} ({ins.op.name.lower()})"
        if self.pe is not None:
            block, used = block_size(ins), pe_used(ins)
            if used > self.pe:
                raise MachineError(f"{where}: a block of {block} inputs{_times_lanes(ins)} needs {used} "
                                   f"processing elements, the machine has {self.pe}; compile with pe <= {self.pe}")
        f = ins.fields
        if ins.fmt is Fmt.F32 and (ins.out_zp or f.get("in_zp") or f.get("rnd") or f.get("w_zp")):
            raise MachineError(f"{where}: zero points and rounding are I8-only fields (f32 needs 0)")
        for problem in operand_faults(ins):
            raise MachineError(f"{where}: {problem}")
        if ins.fmt is Fmt.I8 and f.get("leaky") and not f.get("dsp"):
            raise MachineError(f"{where}: the I8 leaky stage is a second DSP multiplier (for negative "
                               f"values); it needs dsp=1")
        if getattr(ins, "partial", 0) and (ins.dsp or ins.leaky or ins.clamp or ins.pt or ins.pb
                                           or ins.pl or ins.pr):
            raise MachineError(f"{where}: a partial result is raw accumulators; DSP, activation and "
                               f"padding belong to the ADD that combines the partials")
        if ins.op is Op.MAXPOOL and ins.dsp:
            raise MachineError(f"{where}: max pooling has no DSP stage")
        if ins.op.name in ("EADD", "EMUL") and ins.dsp != (ins.fmt is Fmt.I8):
            raise MachineError(f"{where}: {ins.op.name} rescales its operands with the DSP stage in I8 "
                               f"(dsp=1) and combines them as they are in F32 (dsp=0)")
        if ins.op is Op.AVGPOOL and ins.in_zp and not ins.dsp:
            raise MachineError(f"{where}: AVGPOOL without the DSP stage averages stored values; in_zp must be 0")
        empty = [n for n in DIMENSIONS if f.get(n, 1) == 0]
        if empty:
            raise MachineError(f"{where}: {', '.join(empty)} = 0; tensors have at least one element "
                               f"along every axis")

    def _run(self, index, ins, frame, filt, c: Counters):
        where = f"instruction {index} ({ins.op.name.lower()})"
        fmt = ins.fmt
        fdt, wdt, adt = FRAME_DTYPE[fmt], WEIGHT_DTYPE[fmt], ACC_DTYPE[fmt]
        if ins.op is Op.ADD:
            count = ins.cout * ins.hout * ins.wout
            if ins.npart < 1:
                raise MachineError(f"{where}: npart must be at least 1")
            parts = self._region(filt, "filter", ins.src, adt, count * ins.npart, where)
            parts = parts.reshape(ins.npart, ins.cout, ins.hout, ins.wout)
            if fmt is Fmt.I8:
                acc = wrap_int32(parts.astype(np.int64).sum(axis=0))
            else:
                acc = parts[0].copy()
                for p in parts[1:]:         # in partial order: the order the adder sees them
                    acc += p
            c.adds += (ins.npart - 1) * count
            c.cycles += count
            c.filter_read += parts.nbytes
            return self._post(ins, acc, frame, filt, c, where)

        name = ins.op.name
        if name in ("EADD", "EMUL"):
            ops = []
            bcast = name == "EMUL" and ins.bcast
            for k, (src, (t, b, l, r)) in enumerate(((ins.src, (ins.at, ins.ab, ins.al, ins.ar)),
                                                     (ins.src2, (ins.bt, ins.bb, ins.bl, ins.br)))):
                h, w = (1, 1) if (k and bcast) else (ins.hout, ins.wout)
                ph, pw = h + t + b, w + l + r
                v = self._region(frame, "frame", src, fdt, ins.cout * ph * pw, where)
                ops.append(v.reshape(ins.cout, ph, pw)[:, t:t + h, l:l + w])
                c.frame_read += v.nbytes
            n = ins.cout * ins.hout * ins.wout
            if name == "EADD":
                c.adds += n
            else:
                c.macs += n
            c.cycles += n
            return self._post(ins, tuple(ops), frame, filt, c, where)

        if name == "CAT":
            t, b, l, r = ins.at, ins.ab, ins.al, ins.ar
            ph, pw = ins.hout + t + b, ins.wout + l + r
            v = self._region(frame, "frame", ins.src, fdt, ins.cin * ph * pw, where)
            c.frame_read += v.nbytes
            c.cycles += ins.cin * ins.hout * ins.wout
            y = v.reshape(ins.cin, ph, pw)[:, t:t + ins.hout, l:l + ins.wout]
            return self._post(ins, y.astype(np.int64) if fmt is Fmt.I8 else y.astype(np.float32),
                              frame, filt, c, where)

        cin, hin, win = ins.cin, ins.hin, ins.win
        x = self._region(frame, "frame", ins.src, fdt, cin * hin * win, where).reshape(cin, hin, win)

        if ins.op is Op.AVGPOOL:
            self._check_out(ins, hin, win, ins.kh, ins.kw, ins.sh, ins.sw, 1, 1, where)

            def windows(a):
                return sliding_window_view(a, (ins.kh, ins.kw), axis=(-2, -1))[..., ::ins.sh, ::ins.sw, :, :][
                    ..., :ins.hout, :ins.wout, :, :]
            # the border at..ar (SAME padding) is left out of both the sums and the tap counts
            inside, taps = avgpool_taps(ins)
            if np.any(taps == 0):
                raise MachineError(f"{where}: a window lies wholly in the border left out of the average")
            v = windows(x)
            mask = windows(inside)[None]
            if fmt is Fmt.I8:
                acc = (v.astype(np.int64) * mask).sum(axis=(3, 4)) - (ins.in_zp * taps if ins.dsp else 0)
            else:
                acc = np.where(mask.astype(bool), v, np.float32(0)).sum(axis=(3, 4), dtype=np.float32)
            c.adds += cin * ins.hout * ins.wout * (ins.kh * ins.kw - 1)
            c.cycles += cin * ins.hout * ins.wout
            c.frame_read += x.nbytes
            # I8 with the DSP stage: 1/count is part of the multiplier (TFLite's MEAN); without
            # it the stored values are averaged as they are (TFLite's AVERAGE_POOL_2D)
            count = None if (fmt is Fmt.I8 and ins.dsp) else taps
            return self._post(ins, acc, frame, filt, c, where, count=count)

        if name == "RESIZE":
            self._region(frame, "frame", ins.dst, fdt, cin * (ins.hout + ins.pt + ins.pb) * (ins.wout + ins.pl + ins.pr),
                         where)                  # the output must fit before it is computed
            y = resample.resize(x, ins.hout, ins.wout, ins.mode is Mode.BILINEAR, bool(ins.align),
                                bool(ins.half), fmt is Fmt.I8, rows=(ins.fho, ins.fhi, ins.yo, ins.yi))
            c.cycles += cin * ins.hout * ins.wout
            c.frame_read += x.nbytes
            if ins.mode is Mode.BILINEAR:
                c.macs += 4 * cin * ins.hout * ins.wout
            return self._post(ins, y.astype(np.int64) if fmt is Fmt.I8 else y, frame, filt, c, where)

        if name == "LUT":
            if fmt is Fmt.I8:
                tables = cin if ins.perch else 1
                table = self._region(filt, "filter", ins.wgt, wdt, tables * LUT_ENTRIES, where)
                chan = np.arange(cin)[:, None, None] if ins.perch else 0
                y = table.reshape(tables, LUT_ENTRIES)[chan, x.astype(np.int64) + 128].astype(np.int64)
                c.filter_read += x.size
            else:
                y = _f32_function(ins.func, x)
            c.cycles += x.size
            c.frame_read += x.nbytes
            return self._post(ins, y, frame, filt, c, where)

        if name == "TCONV":
            # a transposed convolution is a convolution over the input spread out by uh x uw, with
            # the zero (in I8 the input zero point) between pixels and in the inner border q*;
            # its geometry and output region are checked before the spread-out input is built
            self._check_out(ins, (hin - 1) * ins.uh + 1 + ins.qt + ins.qb, (win - 1) * ins.uw + 1 + ins.ql + ins.qr,
                            ins.kh, ins.kw, ins.sh, ins.sw, ins.dh, ins.dw, where)
            if ins.partial:
                self._region(filt, "filter", ins.dst, adt, ins.cout * ins.hout * ins.wout, where)
            else:
                self._region(frame, "frame", ins.dst, fdt, ins.cout * (ins.hout + ins.pt + ins.pb)
                             * (ins.wout + ins.pl + ins.pr), where)
            fill = np.array(ins.in_zp if fmt is Fmt.I8 else 0).astype(fdt)
            x = resample.upsample_zeros(x, ins.uh, ins.uw, (ins.qt, ins.qb, ins.ql, ins.qr), fill)
            cin, hin, win = x.shape

        if ins.op is Op.MAXPOOL:
            self._check_out(ins, hin, win, ins.kh, ins.kw, ins.sh, ins.sw, 1, 1, where)
            v = sliding_window_view(x, (ins.kh, ins.kw), axis=(1, 2))[:, ::ins.sh, ::ins.sw]
            y = v[:, :ins.hout, :ins.wout].max(axis=(3, 4))
            c.compares += cin * ins.hout * ins.wout * (ins.kh * ins.kw - 1)
            c.cycles += cin * ins.hout * ins.wout
            c.frame_read += x.nbytes
            acc = y.astype(np.int64) if fmt is Fmt.I8 else y.astype(np.float32)
            return self._post(ins, acc, frame, filt, c, where)

        zp = ins.in_zp
        if ins.op is Op.DENSE:
            n = cin * hin * win
            if ins.nn < 1 or ins.n0 + ins.nn > n:
                raise MachineError(f"{where}: elems {ins.n0}+{ins.nn} outside the input's {n} elements")
            w = self._region(filt, "filter", ins.wgt, wdt, ins.cout * n, where).reshape(ins.cout, n)
            w = w[:, ins.n0:ins.n0 + ins.nn]
            xs = x.reshape(n)[ins.n0:ins.n0 + ins.nn]
            if fmt is Fmt.I8:
                acc = ((w.astype(np.float64) - ins.w_zp) @ (xs.astype(np.float64) - zp)).astype(np.int64)
            else:
                acc = w @ xs
            acc = acc.reshape(ins.cout, 1, 1)
            c.macs += ins.cout * ins.nn
            c.cycles += ins.cout
            c.frame_read += xs.nbytes
            c.filter_read += w.size * wdt.itemsize
        else:
            kh, kw, sh, sw, dh, dw = ins.kh, ins.kw, ins.sh, ins.sw, ins.dh, ins.dw
            self._check_out(ins, hin, win, kh, kw, sh, sw, dh, dw, where)
            hout, wout, cout = ins.hout, ins.wout, ins.cout
            r0, rn, s0, sn = ins.r0, ins.rn, ins.s0, ins.sn
            if rn < 1 or sn < 1 or r0 + rn > kh or s0 + sn > kw:
                raise MachineError(f"{where}: rows {r0}+{rn} / cols {s0}+{sn} outside the {kh}x{kw} kernel")
            if ins.op is Op.CONV or name == "TCONV":
                c0, cn = ins.c0, ins.cn
                if cn < 1 or c0 + cn > cin:
                    raise MachineError(f"{where}: channels {c0}+{cn} outside the input's {cin}")
                w = self._region(filt, "filter", ins.wgt, wdt, cout * cin * kh * kw, where)
                w = w.reshape(cout, cin, kh, kw)[:, c0:c0 + cn, r0:r0 + rn, s0:s0 + sn]
                xs = x[c0:c0 + cn]
                v = sliding_window_view(xs, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(1, 2))
                v = v[:, ::sh, ::sw][:, :hout, :wout, r0 * dh:(r0 + rn - 1) * dh + 1:dh,
                                     s0 * dw:(s0 + sn - 1) * dw + 1:dw]
                cols = v.transpose(1, 2, 0, 3, 4).reshape(hout * wout, cn * rn * sn)
                wm = w.reshape(cout, cn * rn * sn)
                if fmt is Fmt.I8:
                    # exact: |terms| <= 255*128 and any realistic K keeps sums below 2^53
                    acc = ((wm.astype(np.float64) - ins.w_zp) @ (cols.astype(np.float64) - zp).T).astype(np.int64)
                else:
                    acc = wm @ cols.T
                acc = acc.reshape(cout, hout, wout)
                c.macs += cout * hout * wout * cn * rn * sn
                c.frame_read += xs.nbytes if name != "TCONV" else ins.cin * ins.hin * ins.win * fdt.itemsize
                c.filter_read += w.size * wdt.itemsize
            else:  # DWCONV
                mult = ins.mult
                if cout != cin * mult:
                    raise MachineError(f"{where}: dwconv output channels {cout} != input channels "
                                       f"{cin} x depth multiplier {mult}")
                w = self._region(filt, "filter", ins.wgt, wdt, cout * kh * kw, where).reshape(cout, kh, kw)
                xr = np.repeat(x, mult, axis=0) if mult > 1 else x
                work = np.float64 if fmt is Fmt.I8 else np.float32
                xr = xr.astype(work) - zp if fmt is Fmt.I8 else xr
                acc = np.zeros((cout, hout, wout), dtype=work)
                for i in range(r0, r0 + rn):
                    for j in range(s0, s0 + sn):
                        tap = xr[:, i * dh:i * dh + (hout - 1) * sh + 1:sh, j * dw:j * dw + (wout - 1) * sw + 1:sw]
                        wij = w[:, i, j].astype(work) - (ins.w_zp if fmt is Fmt.I8 else 0)
                        acc += tap * wij[:, None, None]
                if fmt is Fmt.I8:
                    acc = acc.astype(np.int64)
                c.macs += cout * hout * wout * rn * sn
                c.frame_read += x.nbytes
                c.filter_read += cout * rn * sn * wdt.itemsize
            c.cycles += output_steps(ins)          # DWCONV has no lanes: one channel per cycle

        if fmt is Fmt.I8:
            acc = wrap_int32(acc)
        if ins.partial:
            dst = self._region(filt, "filter", ins.dst, adt, acc.size, where)
            dst[:] = acc.reshape(-1).astype(adt)
            c.filter_write += dst.nbytes
            return None
        return self._post(ins, acc, frame, filt, c, where)

    @staticmethod
    def _check_out(ins, hin, win, kh, kw, sh, sw, dh, dw, where) -> None:
        eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
        if min(kh, kw, sh, sw, dh, dw) < 1:
            raise MachineError(f"{where}: kernel, stride and dilation must be >= 1")
        if eh > hin or ew > win:
            raise MachineError(f"{where}: a {eh}x{ew} window does not fit the {hin}x{win} input")
        hout, wout = (hin - eh) // sh + 1, (win - ew) // sw + 1
        if (ins.hout, ins.wout) != (hout, wout):
            raise MachineError(f"{where}: out={ins.hout}x{ins.wout} but a {kh}x{kw} window "
                               f"(stride {sh}x{sw}, dilation {dh}x{dw}) over {hin}x{win} gives {hout}x{wout}")

    def _post(self, ins, acc, frame, filt, c: Counters, where: str, count=None) -> np.ndarray:
        """DSP, activation, clamp, then the store with the pre-applied padding border.

        `acc` is (C, H, W), or for EADD/EMUL the pair of operands; `count` is AVGPOOL's tap count
        per output position (None: no division). CAT stores into channels `coff..` of its output
        and returns the whole output (what the tensor holds once this part is written).
        """
        fmt, f, name = ins.fmt, ins.fields, ins.op.name
        dsp, leaky, clamp = f.get("dsp", 0), f.get("leaky", 0), f.get("clamp", 0)
        pair = name in ("EADD", "EMUL")
        chans = ins.cout if pair else acc.shape[0]
        if dsp or leaky or clamp:
            pdt = PARAM_DTYPE[fmt]
            nbytes = param_block_bytes(chans, bool(dsp), ins.op)
            prm = self._region(filt, "filter", ins.prm, pdt, nbytes // 4, where)
            c.filter_read += nbytes
            head = prm[:PARAM_HEADER_WORDS]
            arrays = None if pair else prm[PARAM_HEADER_WORDS:].reshape(-1, chans)
        if name == "EADD":
            a, b = acc
            if fmt is Fmt.F32:
                acc = a.astype(np.float32) + b.astype(np.float32)
            else:
                zpa, zpb, ls, ma, sa, mb, sb, mo, so = (int(v) for v in prm[PARAM_HEADER_WORDS:])
                if not 0 <= ls <= 30:
                    raise MachineError(f"{where}: EADD left shift {ls} outside [0, 30]")
                xa = requantize(wrap_int32((a.astype(np.int64) - zpa) << ls), ma, sa, ins.rnd)
                xb = requantize(wrap_int32((b.astype(np.int64) - zpb) << ls), mb, sb, ins.rnd)
                acc = requantize(wrap_int32(xa + xb), mo, so, ins.rnd) + ins.out_zp
        elif name == "EMUL":
            a, b = acc
            if fmt is Fmt.F32:
                acc = a.astype(np.float32) * b.astype(np.float32)
            else:
                zpa, zpb, mo, so = (int(v) for v in prm[PARAM_HEADER_WORDS:])
                prod = (a.astype(np.int64) - zpa) * (b.astype(np.int64) - zpb)
                acc = requantize(wrap_int32(prod), mo, so, ins.rnd) + ins.out_zp
        if fmt is Fmt.F32:
            y = acc.astype(np.float32)
            if count is not None:
                y = (y / np.asarray(count, np.float32)).astype(np.float32)
            if dsp and arrays is not None:
                v1, v2, v3 = (a[:, None, None] for a in arrays)
                y = v2 + v1 * (y + v3)
            if leaky:
                a1, a2 = head[0], head[1]
                y = np.where(y < a1, a2 * y, y)
            if clamp:
                y = np.clip(y, head[2], head[3])
            y = y.astype(np.float32)
            fill = np.float32(0.0) if ins.fill is Fill.ZERO else np.float32(-np.inf)
        else:
            y = np.asarray(acc, dtype=np.int64)
            if dsp and arrays is not None:
                bias, mult, shift = (a.astype(np.int64)[:, None, None] for a in arrays)
                z = wrap_int32(y + bias)
                if leaky:           # negative values take the header's (multiplier, shift): LEAKY_RELU
                    neg = z < 0
                    mult, shift = np.where(neg, int(head[2]), mult), np.where(neg, int(head[3]), shift)
                y = requantize(z, mult, shift, ins.rnd) + ins.out_zp
            elif count is not None and f.get("hup"):      # TFLite's uint8 average: (sum + n/2) / n
                y = (y + np.asarray(count) // 2) // np.asarray(count)
            elif count is not None:
                y = div_round_away(y, count)
            if clamp:
                y = np.clip(y, int(head[0]), int(head[1]))
            y = np.clip(y, -128, 127).astype(np.int8)   # the store saturates to the element type
            fill = np.int8(np.clip(ins.out_zp, -128, 127)) if ins.fill is Fill.ZERO else np.int8(-128)
        h, w = y.shape[1:]
        ph, pw = h + ins.pt + ins.pb, w + ins.pl + ins.pr
        total, c0 = (ins.cout, ins.coff) if name == "CAT" else (chans, 0)
        dst = self._region(frame, "frame", ins.dst, FRAME_DTYPE[fmt], total * ph * pw, where)
        dst = dst.reshape(total, ph, pw)
        part = dst[c0:c0 + chans]
        if ins.pt or ins.pb or ins.pl or ins.pr:
            part[...] = fill
        part[:, ins.pt:ins.pt + h, ins.pl:ins.pl + w] = y
        c.frame_write += part.nbytes
        if name == "CAT":
            return dst[:, ins.pt:ins.pt + h, ins.pl:ins.pl + w].copy()
        return y


@dataclass
class Result:
    """One bundle run: the output in framework layout (after any host heads), every layer's
    output, and the costs; ``chip_output`` is what the chip itself produced."""

    output: np.ndarray
    layers: dict[str, np.ndarray]          # layer name -> (C, H, W) as the chip wrote it
    counters: Counters
    trace: list[Counters]
    frame: np.ndarray
    filter: np.ndarray
    chip_output: np.ndarray | None = None
    external: np.ndarray | None = None
    schedule: "Schedule | None" = None     # when each instruction ran, transfers beside compute
    more_outputs: dict[str, np.ndarray] | None = None   # the model's other outputs, by name


def run(bundle, x: np.ndarray | None = None, *, pe: int | None = None) -> Result:
    """Load `bundle`'s images (and input `x`, if given) into fresh memories and execute it.

    `pe` defaults to the processing elements the bundle was compiled for.
    """
    from dtpu.isro.bundle import read_tensor, to_framework
    link = None
    ext_prof = bundle.meta.get("profile", {}).get("external")
    if ext_prof:
        link = Link(float(ext_prof["bytes_per_cycle"]), int(ext_prof["latency_cycles"]))
    machine = Machine(bundle.meta.get("pe") if pe is None else pe, link)
    frame, filt = bundle.memories(x)
    external = bundle.external_memory(x)
    ends = {layer["instructions"][1]: layer["name"] for layer in bundle.layers if layer["kind"] != "input"}
    dumps: dict[str, np.ndarray] = {}

    def capture(index, ins, y):
        if index in ends:
            dumps[ends[index]] = y.copy()

    trace: list[Counters] = []
    counters = machine.execute(bundle.program, frame, filt, on_output=capture, trace=trace, external=external)
    for layer in bundle.layers:        # staged layers: the whole tensor is in external memory
        if layer["output"].get("memory") == "external":
            dumps[layer["name"]] = read_tensor(external, layer["output"], bundle.fmt)
    out_meta = bundle.meta["output"]
    y = read_tensor(bundle.memory(out_meta.get("memory", "frame"), frame, external), out_meta, bundle.fmt)
    offset = out_meta.get("offset", 0)
    heads = bundle.meta.get("heads") or []
    if heads:
        # a uint8 model's head runs on the stored (128 lower) values with its zero points stored
        # the same way: TFLite's uint8 kernels are its int8 ones shifted by 128 (dtpu.isro.heads)
        from dtpu.isro import heads as host_heads
        chip = to_framework(y, out_meta["flat"])
        out = host_heads.apply(heads, chip)
        if offset:
            out, chip = ((v.astype(np.int16) + offset).astype(np.uint8) for v in (out, chip))
    else:
        out = chip = to_framework(y, out_meta["flat"], offset)
    more = {o["name"]: to_framework(read_tensor(frame, o, bundle.fmt), o["flat"], o.get("offset", 0))
            for o in bundle.meta.get("outputs", [])[1:]}
    from dtpu.isro.timing import schedule
    streamed = bundle.meta.get("program") or {}
    buffer = fetch = None
    if streamed.get("memory") == "external":    # the sequencer streams the rest through its buffer
        buffer = int(streamed["buffer_instructions"])
        fetch = link.cycles(INSTRUCTION_BYTES) - link.latency_cycles      # a burst: the prefetch hides latency
        counters.external_read += max(0, len(bundle.program) - buffer) * INSTRUCTION_BYTES
    sched = schedule(bundle.program, [t.cycles for t in trace], frame_bytes=frame.size, filter_bytes=filt.size,
                     external_bytes=external.size, pe=machine.pe, buffer=buffer, fetch_cycles=fetch or 0)
    return Result(out, dumps, counters, trace, frame, filt, chip, external, sched, more_outputs=more or None)
