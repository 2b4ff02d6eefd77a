"""What the compiler hands the master processor: two memory images, a program, and metadata.

A bundle on disk is a directory::

    frame.bin     frame memory from address 0: the (pre-padded) input tensor
    filter.bin    filter memory from address 0: all weights, then all parameter blocks
    program.bin   the instruction stream, 64 bytes per instruction
    program.lst   the same stream disassembled, one line per instruction, layer names as comments
    meta.json     memory sizes, input/output placement and quantization, and per layer the
                  addresses of its input, output, weights, DSP parameters and split partials

The images hold only what the master processor must write; the rest of each memory (layer
outputs, split scratch) is produced by the program, so the metadata records the full sizes the
memories must have (`frame_bytes`, `filter_bytes`).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dtpu.isro import isa
from dtpu.isro.isa import FRAME_DTYPE, Fill, Fmt, Instruction

log = logging.getLogger(__name__)

FORMAT = "dtpu-isro-bundle/1"
FILES = ("frame.bin", "filter.bin", "program.bin", "program.lst", "meta.json")


@dataclass
class Bundle:
    program: list[Instruction]
    frame: bytes
    filter: bytes
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def fmt(self) -> Fmt:
        return Fmt[self.meta["fmt"].upper()]

    @property
    def layers(self) -> list[dict]:
        return self.meta["layers"]

    def listing(self) -> str:
        comments = {}
        for layer in self.layers:
            first, last = layer["instructions"]
            for i in range(first, last + 1):
                comments[i] = layer["name"] + (f" (part {i - first + 1}/{last - first})"
                                               if last > first and i < last else "")
        return isa.disassemble(self.program, comments)

    # -- disk -----------------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / "frame.bin").write_bytes(self.frame)
        (d / "filter.bin").write_bytes(self.filter)
        (d / "program.bin").write_bytes(isa.encode_program(self.program))
        (d / "program.lst").write_text(self.listing())
        (d / "meta.json").write_text(json.dumps(self.meta, indent=1, default=_json_default) + "\n")
        log.info("wrote bundle %s (%d instructions)", d, len(self.program))
        return d

    @classmethod
    def load(cls, directory: str | Path) -> "Bundle":
        d = Path(directory)
        missing = [f for f in ("frame.bin", "filter.bin", "program.bin", "meta.json") if not (d / f).exists()]
        if missing:
            raise FileNotFoundError(f"{d} is not an ISRO bundle: missing {', '.join(missing)}")
        meta = json.loads((d / "meta.json").read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"{d / 'meta.json'}: format {meta.get('format')!r}, expected {FORMAT!r}")
        return cls(isa.decode_program((d / "program.bin").read_bytes()),
                   (d / "frame.bin").read_bytes(), (d / "filter.bin").read_bytes(), meta)

    # -- memories -------------------------------------------------------------------------------

    def memories(self, x: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Fresh (frame, filter) memories as the master processor leaves them before START.

        Bytes the images do not cover are 0xFF (a float32 NaN, an int8 -1), so a program that
        reads memory it never wrote shows it in the result instead of reading plausible zeros.
        """
        frame = np.full(self.meta["frame_bytes"], 0xFF, dtype=np.uint8)
        filt = np.full(self.meta["filter_bytes"], 0xFF, dtype=np.uint8)
        frame[:len(self.frame)] = np.frombuffer(self.frame, dtype=np.uint8)
        filt[:len(self.filter)] = np.frombuffer(self.filter, dtype=np.uint8)
        if x is not None:
            write_input(self.meta["input"], frame, x, self.fmt)
        return frame, filt


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


# -- host side of the input and output tensors ------------------------------------------------

def round_half_away(x: np.ndarray) -> np.ndarray:
    """std::round: ties away from zero (TFLite's QUANTIZE), exact for every float."""
    x = np.asarray(x)
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def quantize(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """TFLite's float->int8 QUANTIZE: round(x / scale) (float32 division, ties away) + zp."""
    q = round_half_away(np.asarray(x, dtype=np.float32) / np.float32(scale)) + zero_point
    return np.clip(q, -128, 127).astype(np.int8)


def to_chw(x: np.ndarray, shape_chw: tuple[int, int, int], what: str = "input") -> np.ndarray:
    """NHWC (N=1), HWC, or a flat vector -> (C, H, W), checking the element count and shape."""
    c, h, w = shape_chw
    x = np.asarray(x)
    if x.ndim == 4:
        if x.shape[0] != 1:
            raise ValueError(f"{what}: a bundle runs one image; got batch {x.shape[0]} in shape {x.shape}")
        x = x[0]
    if x.ndim == 3:
        if x.shape != (h, w, c):
            raise ValueError(f"{what}: shape {x.shape} (HWC) does not match the model's {(h, w, c)}")
        return np.ascontiguousarray(x.transpose(2, 0, 1))
    if x.ndim == 2 and x.shape[0] == 1:
        x = x[0]
    if x.ndim == 1 and h == w == 1 and x.size == c:
        return x.reshape(c, 1, 1)
    raise ValueError(f"{what}: shape {x.shape} does not match the model's (H, W, C) = {(h, w, c)}")


def write_input(meta_in: dict, frame: np.ndarray, x: np.ndarray, fmt: Fmt) -> None:
    """Place `x` (framework layout) into frame memory, padded as the first layer needs."""
    chw = to_chw(x, tuple(meta_in["shape"]))
    if fmt is Fmt.I8:
        if chw.dtype.kind == "f":
            chw = quantize(chw, meta_in["scale"], meta_in["zero_point"])
        elif chw.dtype != np.int8:
            if chw.min(initial=0) < -128 or chw.max(initial=0) > 127:
                raise ValueError(f"input values {chw.min()}..{chw.max()} do not fit int8")
            chw = chw.astype(np.int8)
    else:
        chw = chw.astype(np.float32)
    padded = pad_chw(chw, meta_in["pad"], Fill[meta_in["fill"].upper()], meta_in.get("zero_point", 0), fmt)
    dt = FRAME_DTYPE[fmt]
    start = meta_in["addr"]
    frame[start:start + padded.size * dt.itemsize] = padded.reshape(-1).view(np.uint8)


def pad_chw(chw: np.ndarray, pad, fill: Fill, zero_point: int, fmt: Fmt) -> np.ndarray:
    t, b, l, r = pad
    if fmt is Fmt.F32:
        value = 0.0 if fill is Fill.ZERO else -np.inf
    else:
        value = zero_point if fill is Fill.ZERO else -128
    return np.pad(chw, ((0, 0), (t, b), (l, r)), constant_values=value).astype(FRAME_DTYPE[fmt])


def read_tensor(frame: np.ndarray, meta_t: dict, fmt: Fmt) -> np.ndarray:
    """A tensor's (C, H, W) interior out of frame memory (its padding border stripped)."""
    c, h, w = meta_t["shape"]
    t, b, l, r = meta_t["pad"]
    dt = FRAME_DTYPE[fmt]
    n = c * (h + t + b) * (w + l + r)
    a = frame[meta_t["addr"]:meta_t["addr"] + n * dt.itemsize].view(dt).reshape(c, h + t + b, w + l + r)
    return a[:, t:t + h, l:l + w].copy()


def to_framework(chw: np.ndarray, flat: bool) -> np.ndarray:
    """(C, H, W) -> the framework's (1, H, W, C), or (1, C) for dense outputs."""
    if flat:
        return chw.reshape(1, -1)
    return chw.transpose(1, 2, 0)[None]
