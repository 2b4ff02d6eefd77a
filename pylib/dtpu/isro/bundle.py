"""What the compiler hands the master processor: two memory images, a program, and metadata.

A bundle on disk is a directory::

    frame.bin     frame memory from address 0: the (pre-padded) input tensor
    filter.bin    filter memory from address 0: all weights, then all parameter blocks
    program.bin   the instruction stream, 64 bytes per instruction
    program.lst   the same stream disassembled, one line per instruction, layer names as comments
    meta.json     memory sizes, input/output placement and quantization, and per layer the
                  addresses of its input, output, weights, DSP parameters and split partials;
                  the chip profile it was compiled for; size and SHA-256 of each image
    SHA256SUMS    `sha256sum -c` manifest of all of the above (meta.json included)
    external.bin  only in a staged bundle (meta.json ``staged``, :mod:`dtpu.isro.staging`): external
                  memory from address 0: the padded input, room for every tensor, then each
                  layer's weights and parameter blocks chunk by chunk (frame.bin and filter.bin
                  are then empty: the program stages everything itself)

Images are what gets uplinked, so :meth:`Bundle.load` refuses a bundle whose images or
meta.json do not match their recorded sizes and digests (a truncated or flipped file is named,
never run). The digests guard against corruption in storage and transfer; anyone able to rewrite
the files can rewrite the digests too, which an Ed25519 signature over SHA256SUMS (``SIGNATURE``,
:mod:`dtpu.isro.signing`) stops.

The images hold only what the master processor must write; the rest of each memory (layer
outputs, split scratch) is produced by the program, so the metadata records the full sizes the
memories must have (`frame_bytes`, `filter_bytes`).
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dtpu.isro import isa
from dtpu.isro.isa import FRAME_DTYPE, Fill, Fmt, Instruction

log = logging.getLogger(__name__)

FORMAT = "dtpu-isro-bundle/2"
IMAGES = ("frame.bin", "filter.bin", "program.bin")
FILES = IMAGES + ("program.lst", "meta.json", "SHA256SUMS")
EXTERNAL_IMAGE = "external.bin"


def image_names(meta: dict) -> tuple[str, ...]:
    """The images a bundle has: a staged one adds external memory's."""
    return IMAGES + ((EXTERNAL_IMAGE,) if meta.get("staged") else ())


class BundleError(ValueError):
    """A bundle directory that must not be used: names the file and what is wrong with it."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Bundle:
    program: list[Instruction]
    frame: bytes
    filter: bytes
    meta: dict[str, Any] = field(default_factory=dict)
    external: bytes = b""

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

    def images(self) -> dict[str, bytes]:
        images = {"frame.bin": self.frame, "filter.bin": self.filter,
                  "program.bin": isa.encode_program(self.program)}
        if self.meta.get("staged"):
            images[EXTERNAL_IMAGE] = self.external
        return images

    def save(self, directory: str | Path) -> Path:
        """Write the bundle; meta.json gets each image's size and SHA-256, SHA256SUMS all files."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        images = self.images()
        self.meta["images"] = {name: {"bytes": len(data), "sha256": sha256(data)} for name, data in images.items()}
        files = dict(images)
        files["program.lst"] = self.listing().encode()
        files["meta.json"] = (json.dumps(self.meta, indent=1, default=_json_default) + "\n").encode()
        for name, data in files.items():
            (d / name).write_bytes(data)
        (d / "SHA256SUMS").write_text("".join(f"{sha256(data)}  {name}\n" for name, data in files.items()))
        log.info("wrote bundle %s (%d instructions)", d, len(self.program))
        return d

    @classmethod
    def load(cls, directory: str | Path) -> "Bundle":
        """Read and verify a bundle: every file present, digests and sizes as recorded."""
        d = Path(directory)
        if not d.is_dir():
            raise BundleError(f"{d}: not a bundle directory (expected one written by `dtpu isro compile -o`)")
        missing = [f for f in FILES if not (d / f).is_file()]
        if missing:
            raise BundleError(f"{d} is not an ISRO bundle: missing {', '.join(missing)} (a bundle has "
                              f"{', '.join(FILES)})")
        sums = {}
        for n, line in enumerate((d / "SHA256SUMS").read_text(errors="replace").splitlines(), 1):
            digest, _, name = line.partition("  ")
            if len(digest) != 64 or not name:
                raise BundleError(f"{d / 'SHA256SUMS'} line {n}: expected '<sha256>  <file>', got {line[:80]!r}")
            sums[name] = digest
        raw_meta = (d / "meta.json").read_bytes()
        if sums.get("meta.json") != sha256(raw_meta):
            raise BundleError(f"{d / 'meta.json'}: SHA-256 {sha256(raw_meta)[:16]}... does not match "
                              f"SHA256SUMS ({str(sums.get('meta.json'))[:16]}...); the file was modified "
                              f"or truncated")
        try:
            meta = json.loads(raw_meta)
        except (UnicodeDecodeError, ValueError) as exc:
            raise BundleError(f"{d / 'meta.json'}: not valid JSON ({exc})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise BundleError(f"{d / 'meta.json'}: format {got!r}, expected {FORMAT!r} (recompile the "
                              f"model with this toolchain)")
        recorded = meta.get("images")
        names = image_names(meta)
        if not isinstance(recorded, dict) or set(recorded) != set(names):
            raise BundleError(f"{d / 'meta.json'}: no image digests for {', '.join(names)}")
        data = {}
        for name in names:
            if not (d / name).is_file():
                raise BundleError(f"{d} is not a complete ISRO bundle: missing {name} (a staged bundle "
                                  f"has {', '.join(names)})")
            blob = (d / name).read_bytes()
            want = recorded[name]
            if len(blob) != want.get("bytes"):
                how = "truncated" if len(blob) < want.get("bytes", 0) else "longer than compiled"
                raise BundleError(f"{d / name}: {len(blob):,} bytes, meta.json records {want.get('bytes'):,} "
                                  f"({how}); restore or recompile the bundle")
            if sha256(blob) != want.get("sha256") or sums.get(name) != want.get("sha256"):
                raise BundleError(f"{d / name}: SHA-256 {sha256(blob)[:16]}... differs from the "
                                  f"{str(want.get('sha256'))[:16]}... recorded in meta.json; the image "
                                  f"was modified, do not uplink it")
            data[name] = blob
        _check_profile(meta, d / "meta.json")
        _check_schema(meta, d / "meta.json")
        try:
            program = isa.decode_program(data["program.bin"])
        except ValueError as exc:
            raise BundleError(f"{d / 'program.bin'}: {exc}") from None
        for name, key in (("frame.bin", "frame_bytes"), ("filter.bin", "filter_bytes")):
            if len(data[name]) > meta.get(key, -1):
                raise BundleError(f"{d / name}: {len(data[name]):,} bytes, larger than the memory "
                                  f"meta.json declares ({key} = {meta.get(key)})")
        if meta.get("staged") and len(data[EXTERNAL_IMAGE]) > meta.get("external_bytes", -1):
            raise BundleError(f"{d / EXTERNAL_IMAGE}: {len(data[EXTERNAL_IMAGE]):,} bytes, larger than the "
                              f"external memory meta.json declares (external_bytes = {meta.get('external_bytes')})")
        return cls(program, data["frame.bin"], data["filter.bin"], meta, data.get(EXTERNAL_IMAGE, b""))

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
            for m_in, xi in _per_input(self.meta, x):
                if m_in.get("memory", "frame") == "frame":
                    write_input(m_in, frame, xi, self.fmt)
        return frame, filt

    def external_memory(self, x: np.ndarray | None = None) -> np.ndarray:
        """Fresh external memory (empty for a bundle that is not staged), with input `x` when
        the input lives there; 0xFF where the image does not reach, as for the others."""
        ext = np.full(self.meta.get("external_bytes", 0), 0xFF, dtype=np.uint8)
        ext[:len(self.external)] = np.frombuffer(self.external, dtype=np.uint8)
        if x is not None:
            for m_in, xi in _per_input(self.meta, x):
                if m_in.get("memory", "frame") == "external":
                    write_input(m_in, ext, xi, self.fmt)
        return ext

    def memory(self, name: str, frame: np.ndarray, external: np.ndarray) -> np.ndarray:
        """Frame or external memory, as a tensor's meta (``memory``) names it."""
        return external if name == "external" else frame


def input_metas(meta: dict) -> list[dict]:
    """Every model input's placement and quantization, in the model's order."""
    return meta.get("inputs") or [meta["input"]]


def _per_input(meta: dict, x) -> list[tuple[dict, np.ndarray]]:
    """(input meta, array) pairs; a model with several inputs takes a list of as many arrays."""
    metas = input_metas(meta)
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if len(xs) != len(metas):
        raise ValueError(f"input: the bundle has {len(metas)} inputs ({', '.join(m['name'] for m in metas)}); "
                         f"got {len(xs)} arrays")
    return list(zip(metas, xs))


def _check_profile(meta: dict, where: Path) -> None:
    """The recorded profile must be a valid one, its digest its content's."""
    from dtpu.isro import profile
    rec = meta.get("profile")
    if not isinstance(rec, dict):
        raise BundleError(f"{where}: no chip profile recorded; recompile the model with this toolchain")
    body = {k: v for k, v in rec.items() if k != "sha256"}
    try:
        prof = profile.from_dict(body, f"{where} (profile)")
    except profile.ProfileError as exc:
        raise BundleError(str(exc)) from None
    if prof.sha256 != rec.get("sha256"):
        raise BundleError(f"{where}: the recorded profile {prof.name!r} does not match its SHA-256; "
                          f"meta.json was edited")


def _ints(v, n: int | None = None) -> bool:
    return (isinstance(v, list) and (n is None or len(v) == n)
            and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in v))


def _check_schema(meta: dict, where: Path) -> None:
    """The keys and types the toolchain reads, so an edited meta.json is refused here, by name,
    instead of failing later inside the machine or the checker."""
    def need(cond: bool, what: str) -> None:
        if not cond:
            raise BundleError(f"{where}: {what}; this meta.json was not written by `dtpu isro compile`")

    def tensor(t, label: str, fills=True) -> None:
        need(isinstance(t, dict), f"{label} is not an object")
        need(isinstance(t.get("addr"), int) and t["addr"] >= 0, f"{label}.addr is not a non-negative integer")
        need(_ints(t.get("shape"), 3) and min(t["shape"]) > 0, f"{label}.shape is not 3 positive integers")
        need(_ints(t.get("pad"), 4), f"{label}.pad is not 4 non-negative integers")
        if fills:
            need(t.get("fill") in ("zero", "lowest"), f"{label}.fill is not 'zero' or 'lowest'")

    need(meta.get("fmt") in ("f32", "i8"), f"fmt {meta.get('fmt')!r} is not 'f32' or 'i8'")
    pe = meta.get("pe")
    need(pe is None or (isinstance(pe, int) and pe > 0), f"pe {pe!r} is not a positive integer or null")
    for key in ("frame_bytes", "filter_bytes"):
        need(isinstance(meta.get(key), int) and meta[key] > 0, f"{key} is not a positive integer")
    tensor(meta.get("input"), "input")
    need(isinstance(meta["input"].get("zero_point", 0), int), "input.zero_point is not an integer")
    tensor(meta.get("output"), "output", fills=False)
    need(isinstance(meta["output"].get("flat"), bool), "output.flat is not true/false")
    layers = meta.get("layers")
    need(isinstance(layers, list) and layers, "layers is not a non-empty list")
    for k, layer in enumerate(layers):
        label = f"layers[{k}]"
        need(isinstance(layer, dict) and isinstance(layer.get("name"), str), f"{label}.name is not a string")
        ins = layer.get("instructions")
        need(_ints(ins, 2) or (layer.get("kind") == "input" and isinstance(ins, list) and len(ins) == 2
                               and _ints(ins[:1]) and ins[1] == ins[0] - 1),
             f"{label}.instructions is not [first, last] (or [next, next - 1] for a further model input)")
        need(_ints(layer.get("inputs")) and all(t <= k for t in layer["inputs"]),
             f"{label}.inputs is not a list of earlier tensors")
        tensor(layer.get("output"), f"{label}.output")
        need(isinstance(layer["output"].get("flat"), bool), f"{label}.output.flat is not true/false")
    heads = meta.get("heads", [])
    need(isinstance(heads, list) and all(isinstance(h, dict) and h.get("kind") in ("softmax", "sigmoid")
                                         for h in heads), "heads is not a list of softmax/sigmoid heads")


def bundle_profile(meta: dict):
    """The :class:`~dtpu.isro.profile.Profile` a bundle was compiled for."""
    from dtpu.isro import profile
    return profile.from_dict({k: v for k, v in meta["profile"].items() if k != "sha256"}, "bundle profile")


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
    """NHWC (N=1), HWC, a sequence (L, C) or a flat vector -> (C, H, W), checking the element
    count and shape."""
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
    if x.ndim == 2 and h == 1 and x.shape == (w, c) and w > 1:
        return np.ascontiguousarray(x.T[:, None, :])       # a sequence (L, C): stored C x 1 x L
    if x.ndim == 2 and x.shape[0] == 1:
        x = x[0]
    if x.ndim == 1 and h == w == 1 and x.size == c:
        return x.reshape(c, 1, 1)
    raise ValueError(f"{what}: shape {x.shape} does not match the model's (H, W, C) = {(h, w, c)}")


def write_input(meta_in: dict, frame: np.ndarray, x: np.ndarray, fmt: Fmt) -> None:
    """Place `x` (framework layout) into frame memory, padded as the first layer needs."""
    chw = to_chw(x, tuple(meta_in["shape"]))
    offset = meta_in.get("offset", 0)           # a uint8 model: stored 128 lower
    if offset and chw.dtype == np.uint8:
        chw = (chw.astype(np.int16) - offset).astype(np.int8)
    if fmt is Fmt.I8:
        if chw.dtype.kind == "f":
            chw = quantize(chw, meta_in["scale"], meta_in["zero_point"])
        elif chw.dtype != np.int8:
            if chw.min(initial=0) < -128 or chw.max(initial=0) > 127:
                raise ValueError(f"input: integer values {chw.min()}..{chw.max()} do not fit int8; pass "
                                 f"int8 (already quantized) or float (real values, quantized by the host)")
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


def to_framework(chw: np.ndarray, flat: bool, offset: int = 0) -> np.ndarray:
    """(C, H, W) -> the framework's (1, H, W, C), or (1, C) for dense outputs; a uint8 model's
    values (stored `offset` lower) back as uint8."""
    if offset:
        chw = (chw.astype(np.int16) + offset).astype(np.uint8)
    if flat:
        return chw.reshape(1, -1)
    return chw.transpose(1, 2, 0)[None]
