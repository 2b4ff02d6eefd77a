"""Chip profiles: one JSON (or TOML) file says what the compiler may assume about an ISRO-ASIC.

The report fixes what the chip computes but none of its sizes, so every size the toolchain uses
(processing elements, frame, filter and instruction memory, number formats, region alignment,
the instruction encoding) lives in a profile rather than in code. ``profiles/default.json`` ships
our assumptions, each with its source; ``--chip FILE`` selects another. A bundle records the
profile it was compiled for (name, content and SHA-256), and ``run``, ``check`` and ``compare``
hold the program to that profile's memories.
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dtpu.isro import isa

log = logging.getLogger(__name__)

DEFAULT_PATH = Path(__file__).with_name("profiles") / "default.json"
KEYS = ("name", "encoding", "pe", "frame_bytes", "filter_bytes", "program_bytes", "formats", "align")
OPTIONAL = ("about", "source")
FORMATS = tuple(f.name.lower() for f in isa.Fmt)


class ProfileError(ValueError):
    """A chip profile that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Profile:
    """A chip: sizes in bytes, ``pe`` None means as many processing elements as any block needs
    (the delegate backend's and some tests' idealized chip, never a flight profile)."""

    name: str
    pe: int | None
    frame_bytes: int
    filter_bytes: int
    program_bytes: int
    formats: tuple[str, ...] = FORMATS
    align: int = isa.ALIGN
    encoding: str = isa.ENCODING["name"]
    source: dict[str, str] = field(default_factory=dict, compare=False)
    path: str | None = field(default=None, compare=False)

    @property
    def max_instructions(self) -> int:
        return self.program_bytes // isa.INSTRUCTION_BYTES

    def to_dict(self) -> dict[str, Any]:
        """What a bundle records: every key the compiler used (not the prose)."""
        return {"name": self.name, "encoding": self.encoding, "pe": self.pe,
                "frame_bytes": self.frame_bytes, "filter_bytes": self.filter_bytes,
                "program_bytes": self.program_bytes, "formats": list(self.formats), "align": self.align}

    @property
    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def with_pe(self, pe: int | None) -> "Profile":
        return Profile(**{**self.__dict__, "pe": pe})

    def describe(self) -> str:
        pe = "unlimited" if self.pe is None else str(self.pe)
        return (f"{self.name}: pe {pe}, frame {self.frame_bytes:,} B, filter {self.filter_bytes:,} B, "
                f"program {self.program_bytes:,} B ({self.max_instructions} instructions), "
                f"formats {'/'.join(self.formats)}")


def unlimited(name: str = "unlimited") -> Profile:
    """No limits (4 GiB memories, the 32-bit address fields' reach; no splitting)."""
    return Profile(name, None, 1 << 32, 1 << 32, 1 << 32)


def from_dict(d: dict, where: str) -> Profile:
    """Validate every key (names the bad one and what is accepted) and build the profile."""
    if not isinstance(d, dict):
        raise ProfileError(f"{where}: a profile is a JSON object / TOML table, got {type(d).__name__}")
    unknown = sorted(set(d) - set(KEYS) - set(OPTIONAL))
    if unknown:
        raise ProfileError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(KEYS + OPTIONAL)}")
    missing = [k for k in KEYS if k not in d]
    if missing:
        raise ProfileError(f"{where}: missing key(s) {', '.join(missing)}; a profile needs {', '.join(KEYS)}")
    if not isinstance(d["name"], str) or not d["name"]:
        raise ProfileError(f"{where}: name {d['name']!r}; expected a non-empty string")
    for k, lo, hi in (("frame_bytes", 1, 1 << 32), ("filter_bytes", 1, 1 << 32), ("program_bytes",
                      isa.INSTRUCTION_BYTES, 1 << 32), ("align", 1, 4096)):
        v = d[k]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ProfileError(f"{where}: {k} = {v!r}; expected an integer in [{lo}, {hi}] "
                               f"(the address fields are 32 bits)")
    if d["align"] & (d["align"] - 1) or d["align"] < 4:
        raise ProfileError(f"{where}: align = {d['align']}; expected a power of two >= 4 (32-bit "
                           f"accumulators and parameters must be aligned)")
    pe = d["pe"]
    if pe is not None and (isinstance(pe, bool) or not isinstance(pe, int) or pe < 1):
        raise ProfileError(f"{where}: pe = {pe!r}; expected a positive integer")
    fmts = d["formats"]
    if (not isinstance(fmts, list) or not fmts or any(f not in FORMATS for f in fmts)):
        raise ProfileError(f"{where}: formats = {fmts!r}; expected a non-empty list of {', '.join(FORMATS)}")
    if d["encoding"] != isa.ENCODING["name"]:
        raise ProfileError(f"{where}: encoding {d['encoding']!r}, but this toolchain's encoding table "
                           f"({isa.ENCODING_PATH.name}) is {isa.ENCODING['name']!r}")
    src = d.get("source", {})
    return Profile(d["name"], pe, d["frame_bytes"], d["filter_bytes"], d["program_bytes"],
                   tuple(fmts), d["align"], d["encoding"], dict(src) if isinstance(src, dict) else {},
                   where)


def load(path: str | Path | None = None) -> Profile:
    """A profile file (.json or .toml); None: the default profile."""
    p = DEFAULT_PATH if path is None else Path(path)
    if not p.is_file():
        raise ProfileError(f"chip profile {p} does not exist; pass a .json or .toml profile "
                           f"(the default is {DEFAULT_PATH})")
    try:
        text = p.read_text()
        if p.suffix.lower() == ".toml":
            import tomllib
            d = tomllib.loads(text)
        else:
            d = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:     # JSONDecodeError, TOMLDecodeError
        kind = "TOML" if p.suffix.lower() == ".toml" else "JSON"
        raise ProfileError(f"chip profile {p}: not valid {kind} ({exc})") from None
    prof = from_dict(d, str(p))
    log.info("chip profile %s", prof.describe())
    return prof


def resolve(chip: "Profile | str | Path | None") -> Profile:
    if isinstance(chip, Profile):
        return chip
    return load(chip)
