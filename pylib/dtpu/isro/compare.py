"""Hardware-in-the-loop verification: compare memory read back from a chip (or an RTL simulation)
with the machine model, layer by layer, as the report's section 5.4 did.

Dump format (a directory, ``DUMPS``), all files raw bytes, little-endian elements exactly as the
chip stores them (channel-major ``C x H x W`` of the tensor *with* its padding border; int8 or
float32 per the bundle's ``fmt``):

- ``layer_NNN.bin``: the output region of layer ``NNN`` (its index in meta.json ``layers``, three
  digits), ``layers[NNN].output.addr`` for ``bytes`` bytes, read after the layer's last
  instruction (``instructions[1]``) and before the next one. A chip that can stop after an
  instruction (single-step, breakpoint, or an RTL testbench) produces these.
- ``frame.bin``: optionally, all of frame memory from address 0 after END. Layers without their
  own file are compared from it when nothing later in the program overwrote their region (no
  frame reuse, or a region that stayed live to the end).

The expected values come from running the bundle on the machine model with the same input (the
compiled input, or ``--input``). For each layer the report gives the first differing element
(channel, row, column of the unpadded tensor, or "border"), the count of differing elements, and
the maximum, mean and RMS absolute error; layers without a dump are listed as not compared.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dtpu.isro.isa import FRAME_DTYPE

log = logging.getLogger(__name__)


class DumpError(ValueError):
    """A dump file that cannot be compared: names the file and the size it must have."""


@dataclass
class LayerDiff:
    index: int
    name: str
    source: str                 # the dump file used, or "" when not compared
    elements: int = 0
    differ: int = 0
    border_differ: int = 0
    first: tuple | None = None  # (c, h, w, got, expected) of the first differing interior element
    max_abs: float = 0.0
    mean_abs: float = 0.0
    rms: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.source) and self.differ == 0 and self.border_differ == 0

    def __str__(self) -> str:
        if not self.source:
            return f"{self.index:3d} {self.name:<28} not compared (no dump covers it)"
        if self.ok:
            return f"{self.index:3d} {self.name:<28} match ({self.elements:,} elements, {self.source})"
        first = ""
        if self.first:
            c, h, w, got, exp = self.first
            first = f"first at c={c} h={h} w={w}: got {got}, expected {exp}; "
        return (f"{self.index:3d} {self.name:<28} DIFFER {self.differ:,}/{self.elements:,} elements"
                f"{f' + {self.border_differ:,} border' if self.border_differ else ''}; {first}"
                f"max|err| {self.max_abs:.4g}, mean {self.mean_abs:.4g}, rms {self.rms:.4g} ({self.source})")


def _region_bytes(out: dict, itemsize: int) -> int:
    c, h, w = out["shape"]
    t, b, l, r = out["pad"]
    return c * (h + t + b) * (w + l + r) * itemsize


def _overwritten_later(bundle, k: int) -> bool:
    """Does any later layer's output region overlap layer k's (so frame.bin no longer holds it)?"""
    layers = bundle.meta["layers"]
    isz = FRAME_DTYPE[bundle.fmt].itemsize
    a0 = layers[k]["output"]["addr"]
    a1 = a0 + _region_bytes(layers[k]["output"], isz)
    for later in layers[k + 1:]:
        b0 = later["output"]["addr"]
        if b0 < a1 and a0 < b0 + _region_bytes(later["output"], isz):
            return True
    return False


def on_chip_only(bundle, what: str) -> None:
    """Dumps describe frame memory; a staged bundle's tensors live in external memory."""
    if bundle.meta.get("staged"):
        raise ValueError(f"{what}: this bundle is staged through external memory (its layers' outputs "
                         f"live there, not in frame memory); memory dumps cover on-chip bundles only")


def expected_regions(bundle, x=None) -> list[np.ndarray]:
    """Each layer's output region (padded, as stored) right after its last instruction."""
    on_chip_only(bundle, "memory dumps")
    from dtpu.isro.machine import Machine
    layers = bundle.meta["layers"]
    ends = {m["instructions"][1]: k for k, m in enumerate(layers) if m["kind"] != "input"}
    isz = FRAME_DTYPE[bundle.fmt].itemsize
    frame, filt = bundle.memories(x)
    regions: list[np.ndarray | None] = [None] * len(layers)
    for k, m in enumerate(layers):         # a further model input: as the host wrote it
        if m["kind"] == "input":
            out = m["output"]
            regions[k] = frame[out["addr"]:out["addr"] + _region_bytes(out, isz)].copy()

    def capture(index, ins, y):
        k = ends.get(index)
        if k is not None:
            out = bundle.meta["layers"][k]["output"]
            regions[k] = frame[out["addr"]:out["addr"] + _region_bytes(out, isz)].copy()

    Machine(bundle.meta.get("pe")).execute(bundle.program, frame, filt, on_output=capture)
    return regions


def write_dumps(bundle, directory: str | Path, x=None, *, frame: bool = True) -> Path:
    """What a chip would produce: layer_NNN.bin per layer (and frame.bin after END)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for k, region in enumerate(expected_regions(bundle, x)):
        (d / f"layer_{k:03d}.bin").write_bytes(region.tobytes())
    if frame:
        from dtpu.isro.machine import run
        (d / "frame.bin").write_bytes(run(bundle, x).frame.tobytes())
    return d


def compare(bundle, dumps: str | Path, x=None) -> list[LayerDiff]:
    on_chip_only(bundle, "compare")
    """Per-layer differences between `dumps` (the format above) and the machine model."""
    d = Path(dumps)
    if not d.is_dir():
        raise DumpError(f"{d}: not a dump directory (expected layer_NNN.bin files and/or frame.bin)")
    dt = FRAME_DTYPE[bundle.fmt]
    expected = expected_regions(bundle, x)
    frame = None
    if (d / "frame.bin").is_file():
        frame = np.frombuffer((d / "frame.bin").read_bytes(), np.uint8)
        if frame.size < bundle.meta["frame_bytes"]:
            raise DumpError(f"{d / 'frame.bin'}: {frame.size:,} bytes; a frame memory dump holds at least "
                            f"the bundle's {bundle.meta['frame_bytes']:,} bytes from address 0")
    known = {f"layer_{k:03d}.bin" for k in range(len(expected))}
    stray = sorted(p.name for p in d.glob("layer_*.bin") if p.name not in known)
    if stray:
        raise DumpError(f"{d}: {', '.join(stray)} name no layer; the bundle has layers 000.."
                        f"{len(expected) - 1:03d}")
    diffs = []
    for k, (layer, want) in enumerate(zip(bundle.meta["layers"], expected)):
        out = layer["output"]
        path = d / f"layer_{k:03d}.bin"
        if path.is_file():
            got = np.frombuffer(path.read_bytes(), np.uint8)
            source = path.name
            if got.size != want.size:
                raise DumpError(f"{path}: {got.size:,} bytes, layer {layer['name']}'s region is "
                                f"{want.size:,} bytes ({'x'.join(map(str, out['shape']))} with border "
                                f"{out['pad']}, {dt.name})")
        elif frame is not None and not _overwritten_later(bundle, k):
            got = frame[out["addr"]:out["addr"] + want.size]
            source = "frame.bin"
        else:
            diffs.append(LayerDiff(k, layer["name"], ""))
            continue
        diff = _diff(k, layer, got, want, dt)
        diff.source = source
        diffs.append(diff)
    return diffs


def _diff(k: int, layer: dict, got_b: np.ndarray, want_b: np.ndarray, dt: np.dtype) -> LayerDiff:
    c, h, w = layer["output"]["shape"]
    t, b, l, r = layer["output"]["pad"]
    shape = (c, h + t + b, w + l + r)
    got = got_b.view(dt).reshape(shape)
    want = want_b.view(dt).reshape(shape)
    interior = (slice(None), slice(t, t + h), slice(l, l + w))
    gi, wi = got[interior].astype(np.float64), want[interior].astype(np.float64)
    same = (gi == wi) | (np.isnan(gi) & np.isnan(wi))
    border = np.ones(shape, bool)
    border[interior] = False
    raw_same = got_b.reshape(-1, dt.itemsize) == want_b.reshape(-1, dt.itemsize)
    border_differ = int((~raw_same.all(axis=1).reshape(shape) & border).sum())
    diff = LayerDiff(k, layer["name"], "", elements=int(gi.size), differ=int((~same).sum()),
                     border_differ=border_differ)
    if diff.differ:
        idx = tuple(int(v) for v in np.argwhere(~same)[0])
        diff.first = (*idx, got[interior][idx].item(), want[interior][idx].item())
        err = np.abs(gi - wi)[~same]
        err = np.where(np.isfinite(err), err, np.inf)
        diff.max_abs, diff.mean_abs = float(err.max()), float(err.mean())
        diff.rms = float(np.sqrt(np.mean(np.square(err))))
    return diff
