"""Chip profiles: one JSON (or TOML) file says what the compiler may assume about an ISRO-ASIC.

The report fixes what the chip computes but none of its sizes, so every size the toolchain uses
(processing elements, frame, filter and instruction memory, number formats, region alignment,
the instruction encoding) lives in a profile rather than in code. ``profiles/default.json`` ships
our assumptions, each with its source; ``--chip FILE`` selects another. A bundle records the
profile it was compiled for (name, content and SHA-256), and ``run``, ``check`` and ``compare``
hold the program to that profile's memories.

Two optional keys turn cycles into time and energy (``dtpu.isro.performance``): ``clock_mhz``
and ``power`` (static watts, picojoules per MAC in each format, per byte of on-chip memory
traffic). A profile without them still compiles and runs; ``run`` then reports cycles only.
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
OPTIONAL = ("about", "source", "clock_mhz", "power", "external")
EXTERNAL_KEYS = ("bytes", "bytes_per_cycle", "latency_cycles")
POWER_KEYS = ("static_w", "mac_pj", "sram_pj_per_byte")
POWER_OPTIONAL = ("dram_pj_per_byte",)      # external memory traffic (profiles with `external`)
FORMATS = tuple(f.name.lower() for f in isa.Fmt)


class ProfileError(ValueError):
    """A chip profile that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class External:
    """Memory outside the chip (DRAM behind its memory controller): what the compiler stages
    tensors and weights through when they do not fit frame or filter memory. A transfer of n
    bytes costs `latency_cycles` + n / `bytes_per_cycle` cycles."""

    bytes: int
    bytes_per_cycle: float
    latency_cycles: int

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "bytes_per_cycle": self.bytes_per_cycle, "latency_cycles": self.latency_cycles}


@dataclass(frozen=True)
class Power:
    """An energy model simple enough to state as assumptions: a constant static power plus a
    cost per MAC (by number format) and per byte moved in frame or filter memory."""

    static_w: float
    mac_pj: tuple[tuple[str, float], ...]        # (format, pJ per MAC), hashable
    sram_pj_per_byte: float
    dram_pj_per_byte: float | None = None

    def mac(self, fmt: str) -> float:
        return dict(self.mac_pj)[fmt]

    def to_dict(self) -> dict[str, Any]:
        d = {"static_w": self.static_w, "mac_pj": dict(self.mac_pj), "sram_pj_per_byte": self.sram_pj_per_byte}
        if self.dram_pj_per_byte is not None:
            d["dram_pj_per_byte"] = self.dram_pj_per_byte
        return d


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
    clock_mhz: float | None = None
    power: Power | None = None
    external: External | None = None
    path: str | None = field(default=None, compare=False)

    @property
    def max_instructions(self) -> int:
        return self.program_bytes // isa.INSTRUCTION_BYTES

    def to_dict(self) -> dict[str, Any]:
        """What a bundle records: every key the compiler used (not the prose)."""
        d = {"name": self.name, "encoding": self.encoding, "pe": self.pe,
             "frame_bytes": self.frame_bytes, "filter_bytes": self.filter_bytes,
             "program_bytes": self.program_bytes, "formats": list(self.formats), "align": self.align}
        if self.clock_mhz is not None:
            d["clock_mhz"] = self.clock_mhz
        if self.power is not None:
            d["power"] = self.power.to_dict()
        if self.external is not None:
            d["external"] = self.external.to_dict()
        return d

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
    clock = d.get("clock_mhz")
    if clock is not None and not _positive_number(clock):
        raise ProfileError(f"{where}: clock_mhz = {clock!r}; expected a number > 0 (MHz)")
    power = _power(d["power"], fmts, where) if d.get("power") is not None else None
    external = _external(d["external"], where) if d.get("external") is not None else None
    return Profile(d["name"], pe, d["frame_bytes"], d["filter_bytes"], d["program_bytes"],
                   tuple(fmts), d["align"], d["encoding"], dict(src) if isinstance(src, dict) else {},
                   clock_mhz=None if clock is None else float(clock), power=power, external=external,
                   path=where)


def _external(e, where: str) -> External:
    if not isinstance(e, dict) or sorted(e) != sorted(EXTERNAL_KEYS):
        got = sorted(e) if isinstance(e, dict) else type(e).__name__
        raise ProfileError(f"{where}: external = {got}; expected a table of exactly {', '.join(EXTERNAL_KEYS)}")
    b, bw, lat = e["bytes"], e["bytes_per_cycle"], e["latency_cycles"]
    if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 1 << 32:
        raise ProfileError(f"{where}: external.bytes = {b!r}; expected an integer in [1, {1 << 32}] "
                           f"(the address fields are 32 bits)")
    if not _positive_number(bw):
        raise ProfileError(f"{where}: external.bytes_per_cycle = {bw!r}; expected a number > 0")
    if isinstance(lat, bool) or not isinstance(lat, int) or lat < 0:
        raise ProfileError(f"{where}: external.latency_cycles = {lat!r}; expected an integer >= 0")
    return External(b, float(bw), lat)


def _positive_number(v, zero_ok: bool = False) -> bool:
    return (not isinstance(v, bool) and isinstance(v, (int, float)) and v == v and v != float("inf")
            and (v >= 0 if zero_ok else v > 0))


def _power(p, fmts, where: str) -> Power:
    if (not isinstance(p, dict) or not set(POWER_KEYS) <= set(p)
            or not set(p) <= set(POWER_KEYS + POWER_OPTIONAL)):
        got = sorted(p) if isinstance(p, dict) else type(p).__name__
        raise ProfileError(f"{where}: power = {got}; expected a table of {', '.join(POWER_KEYS)} "
                           f"(and optionally {', '.join(POWER_OPTIONAL)})")
    for k in ("static_w", "sram_pj_per_byte") + tuple(k for k in POWER_OPTIONAL if k in p):
        if not _positive_number(p[k], zero_ok=True):
            raise ProfileError(f"{where}: power.{k} = {p[k]!r}; expected a number >= 0")
    mac = p["mac_pj"]
    if (not isinstance(mac, dict) or not set(fmts) <= set(mac) or not set(mac) <= set(FORMATS)
            or not all(_positive_number(v, zero_ok=True) for v in mac.values())):
        raise ProfileError(f"{where}: power.mac_pj = {mac!r}; expected a number >= 0 (pJ per MAC) for "
                           f"each of the profile's formats {', '.join(fmts)} (of {', '.join(FORMATS)})")
    dram = p.get("dram_pj_per_byte")
    return Power(float(p["static_w"]), tuple((f, float(v)) for f, v in mac.items()), float(p["sram_pj_per_byte"]),
                 None if dram is None else float(dram))


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
