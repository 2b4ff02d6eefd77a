"""Partial uplinks: new weights for an unchanged program, or a new input, without resending the rest.

A full bundle on board was signed on the ground (:mod:`dtpu.isro.signing`); a partial uplink
replaces one memory image of it and is trusted only through that signature chain:

    PARTIAL.json  format, kind (``weights`` or ``input``), the base it applies to (the SHA-256 of
                  the base's signed manifest SHA256SUMS and of its program.bin), the image's size
                  and digest, and for weights the host-side metadata that changes with them
                  (input/output quantization, per-layer scales, the source model)
    filter.bin    (weights) filter memory from address 0: the new weights and DSP parameters
    frame.bin     (input)   frame memory from address 0: the new pre-padded input
    SHA256SUMS    the manifest of the above; SIGNATURE, the Ed25519 signature over it

A weights partial exists only when the new model compiles to the very program the base runs
(byte for byte: same layers, shapes, addresses, zero points); anything else needs a full bundle.
Applying one (:func:`apply`) needs a public key: the base must verify with it, the partial must
verify with it, name the base's manifest digest and carry the base's program digest; any
mismatch is a :class:`PartialError` (exit status 2), and nothing runs.

Staged bundles (:mod:`dtpu.isro.staging`) keep weights and input together in external.bin, so
their partial uplinks are refused rather than replacing both at once.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from dtpu.isro.bundle import Bundle, BundleError, sha256
from dtpu.isro.signing import MANIFEST

log = logging.getLogger(__name__)

FORMAT = "dtpu-isro-partial/1"
META = "PARTIAL.json"
IMAGE = {"weights": "filter.bin", "input": "frame.bin"}
# host-side metadata that follows the weights (the program fixes everything else)
CARRIED = ("input", "output", "layers", "source", "heads", "tflite", "quantization")


class PartialError(BundleError):
    """A partial uplink that must not be applied: names the file and what does not match."""


def _base(base_dir: Path) -> Bundle:
    base = Bundle.load(base_dir)
    if base.meta.get("staged"):
        raise PartialError(f"{base_dir}: a staged bundle keeps weights and input together in external.bin; "
                           f"partial uplinks cover on-chip bundles (send a full bundle)")
    if not (base_dir / MANIFEST).is_file():
        raise PartialError(f"{base_dir}: no {MANIFEST}")
    return base


def _write(out: Path, kind: str, image: bytes, base_dir: Path, base: Bundle, extra: dict) -> Path:
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PartialError(f"{out}: exists and is not an empty directory; a partial uplink is written "
                           f"into a new one")
    out.mkdir(parents=True, exist_ok=True)
    name = IMAGE[kind]
    meta = {"format": FORMAT, "kind": kind,
            "base": {"manifest_sha256": sha256((base_dir / MANIFEST).read_bytes()),
                     "program_sha256": base.meta["images"]["program.bin"]["sha256"]},
            "image": {"name": name, "bytes": len(image), "sha256": sha256(image)}, **extra}
    files = {name: image, META: (json.dumps(meta, indent=1) + "\n").encode()}
    for n, data in files.items():
        (out / n).write_bytes(data)
    (out / MANIFEST).write_text("".join(f"{sha256(data)}  {n}\n" for n, data in files.items()))
    log.info("wrote %s partial uplink %s for %s", kind, out, base_dir)
    return out


def make_weights(base_dir: str | Path, model: str | Path, out: str | Path) -> Path:
    """Compile `model` as the base was compiled (profile, pe, reuse, output) and keep its filter
    image, provided the program is the base's byte for byte."""
    from dtpu.isro import isa
    from dtpu.isro.bundle import bundle_profile
    from dtpu.isro.compiler import compile_model
    base_dir = Path(base_dir)
    base = _base(base_dir)
    tfl = base.meta.get("tflite", {})
    output = tfl.get("output_name")
    if tfl.get("more_outputs"):
        output = [output] + list(tfl["more_outputs"])
    new = compile_model(model, chip=bundle_profile(base.meta), pe=base.meta["pe"], reuse=base.meta["reuse"],
                        output=output)
    if new.meta.get("staged"):
        raise PartialError(f"{model}: compiles to a staged bundle, the base {base_dir} is on-chip; send a full bundle")
    old_prog, new_prog = isa.encode_program(base.program), isa.encode_program(new.program)
    if new_prog != old_prog:
        n = isa.INSTRUCTION_BYTES
        diff = next((i for i in range(min(len(old_prog), len(new_prog)) // n)
                     if old_prog[i * n:(i + 1) * n] != new_prog[i * n:(i + 1) * n]), None)
        where = (f"{len(new_prog) // n} instructions against {len(old_prog) // n}" if diff is None
                 else f"instruction {diff} differs: {_fields(new.program[diff], base.program[diff])}")
        raise PartialError(f"{model}: compiles to a different program than {base_dir} ({where}); a weights-only "
                           f"uplink needs the same architecture, shapes and zero points: send a full bundle")
    for key in ("frame_bytes", "filter_bytes"):
        if new.meta[key] != base.meta[key]:
            raise PartialError(f"{model}: {key} {new.meta[key]:,} against the base's {base.meta[key]:,}; send a full bundle")
    extra = {"meta": {k: new.meta[k] for k in CARRIED if k in new.meta}}
    return _write(Path(out), "weights", new.filter, base_dir, base, json.loads(json.dumps(extra, default=_plain)))


def _fields(new, old) -> str:
    """Which fields of two instructions differ, as 'name new (base old)'."""
    if new.op is not old.op:
        return f"{new.op.name.lower()} (base {old.op.name.lower()})"
    a, b = new.fields, old.fields
    diff = [f"{k} {_v(a[k])} (base {_v(b[k])})" for k in a if a[k] != b[k]]
    return f"{new.op.name.lower()} " + ", ".join(diff[:4]) + (" ..." if len(diff) > 4 else "")


def _v(v) -> str:
    return v.name.lower() if hasattr(v, "name") else str(int(v))


def make_input(base_dir: str | Path, x: np.ndarray, out: str | Path, source: str = "") -> Path:
    """The base's frame image with input `x` written in (the base's placement and quantization)."""
    from dtpu.isro.bundle import input_metas, write_input
    base_dir = Path(base_dir)
    base = _base(base_dir)
    if len(input_metas(base.meta)) > 1:
        raise PartialError(f"{base_dir}: {len(input_metas(base.meta))} model inputs; an input partial uplink "
                           f"covers one-input bundles (send the inputs in a full bundle)")
    frame = np.zeros(len(base.frame), np.uint8)
    frame[:] = np.frombuffer(base.frame, np.uint8)
    write_input(base.meta["input"], frame, x, base.fmt)
    return _write(Path(out), "input", frame.tobytes(), base_dir, base, {"source": source})


def _plain(o):
    """numpy scalars and arrays in the carried metadata as JSON numbers and lists."""
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"{type(o).__name__} in the carried metadata is not JSON")


def sign(d: str | Path, key_path: str | Path) -> Path:
    """Sign a partial uplink's manifest (checked first, as :func:`dtpu.isro.signing.sign` does)."""
    from dtpu.isro import signing
    return signing.sign(d, key_path, load=load)


def load(d: str | Path) -> dict:
    """PARTIAL.json of a partial uplink directory whose files match its manifest and metadata."""
    d = Path(d)
    if not d.is_dir() or not (d / META).is_file():
        raise PartialError(f"{d}: not a partial uplink (no {META}; written by `dtpu isro partial`)")
    if not (d / MANIFEST).is_file():
        raise PartialError(f"{d}: no {MANIFEST}")
    sums = {}
    for line in (d / MANIFEST).read_text(errors="replace").splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    raw = (d / META).read_bytes()
    if sums.get(META) != sha256(raw):
        raise PartialError(f"{d / META}: does not match {MANIFEST}; the file was modified")
    try:
        meta = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise PartialError(f"{d / META}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("kind") not in IMAGE:
        raise PartialError(f"{d / META}: format {meta.get('format') if isinstance(meta, dict) else None!r} "
                           f"kind {meta.get('kind') if isinstance(meta, dict) else None!r}; expected {FORMAT!r}, "
                           f"kind weights or input")
    img = meta.get("image") or {}
    name = IMAGE[meta["kind"]]
    if img.get("name") != name or not (d / name).is_file():
        raise PartialError(f"{d}: a {meta['kind']} partial uplink carries {name}; it is missing")
    blob = (d / name).read_bytes()
    if len(blob) != img.get("bytes") or sha256(blob) != img.get("sha256") or sums.get(name) != sha256(blob):
        raise PartialError(f"{d / name}: {len(blob):,} bytes, SHA-256 {sha256(blob)[:16]}... does not match "
                           f"{META} / {MANIFEST}; the image was modified or truncated")
    meta["_image"] = blob
    return meta


def apply(base_dir: str | Path, partials: list[str | Path], public_key: str | Path | None) -> tuple[Bundle, list[str]]:
    """The base bundle with each partial's image in place, after checking every signature and
    that each partial names this base. Returns (bundle, one line per partial applied)."""
    from dtpu.isro import signing
    base_dir = Path(base_dir)
    key = signing.configured_key(public_key)
    if key is None:
        raise PartialError(f"a partial uplink is applied only to a signed base with a key to check both: "
                           f"pass --public-key FILE (or set ${signing.ENV_PUBLIC_KEY})")
    signing.verify(base_dir, key)
    bundle = _base(base_dir)
    manifest = sha256((base_dir / MANIFEST).read_bytes())
    program = sha256(Path(base_dir / "program.bin").read_bytes())
    lines = []
    seen = set()
    for p in partials:
        p = Path(p)
        if not p.is_dir():
            raise PartialError(f"{p}: not a partial uplink directory (written by `dtpu isro partial`)")
        who = signing.verify(p, key)
        meta = load(p)
        kind = meta["kind"]
        if kind in seen:
            raise PartialError(f"{p}: a second {kind} partial uplink; apply one of each")
        seen.add(kind)
        base = meta.get("base") or {}
        if base.get("manifest_sha256") != manifest:
            raise PartialError(f"{p}: made for the bundle with manifest {str(base.get('manifest_sha256'))[:16]}..., "
                               f"not {base_dir} ({manifest[:16]}...); refused")
        if base.get("program_sha256") != program or program != bundle.meta["images"]["program.bin"]["sha256"]:
            raise PartialError(f"{p}: program digest {str(base.get('program_sha256'))[:16]}... does not match "
                               f"{base_dir}/program.bin ({program[:16]}...); refused")
        blob = meta["_image"]
        if kind == "weights":
            if len(blob) != len(bundle.filter):
                raise PartialError(f"{p}: filter.bin {len(blob):,} bytes, the base's {len(bundle.filter):,}; refused")
            bundle.filter = blob
            bundle.meta.update(meta.get("meta", {}))
        else:
            if len(blob) != len(bundle.frame):
                raise PartialError(f"{p}: frame.bin {len(blob):,} bytes, the base's {len(bundle.frame):,}; refused")
            bundle.frame = blob
        bundle.meta["images"][IMAGE[kind]] = {"bytes": len(blob), "sha256": sha256(blob)}
        bundle.meta.setdefault("partials", []).append({"kind": kind, "path": str(p), "key": who})
        lines.append(f"partial uplink {p} ({kind}): key {who} ok, base manifest and program digest match")
    return bundle, lines
