"""The DTPU's hardware constants, derived from the one JSON contract (VTA's Environment pattern).

``contract.json`` beside this file is the hardware truth: the RTL header ``hw/rtl/dtpu_regs.vh``
is generated from it (:mod:`dtpu.hw.gen_header`), and the golden model, the lowering and the
drivers read it through :class:`HwConfig`. Tests swap in other array or memory sizes with
``with HwConfig(ROWS=4, LOG_WEIGHT_WORDS=8):`` and :func:`get_config` returns the active one.
"""
from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dtpu.precision import Precision

CONTRACT_PATH = Path(__file__).with_name("contract.json")

#: Contract precision code name -> the package-wide Precision (the names differ only in case).
PREC_OF_CODE_NAME = {
    "INT8": Precision.INT8, "UINT8": Precision.UINT8, "INT16": Precision.INT16,
    "INT32": Precision.INT32, "INT64": Precision.INT64, "FP32": Precision.FP32, "BF16": Precision.BF16,
}


def load_contract(path: Path | str = CONTRACT_PATH) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise RuntimeError(f"DTPU contract not found at {path}")
    with path.open() as fh:
        return json.load(fh)


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    enum: str | None = None
    doc: str = ""

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: str
    reset: int | None
    doc: str
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name!r}; fields: "
                       f"{', '.join(f.name for f in self.fields) or '(none)'}")


_local = threading.local()


class HwConfig:
    """One build of the DTPU: the contract's knobs plus everything derived from them.

    Keyword overrides replace knobs of ``params`` or ``timing`` (e.g. a 4x4 array with a tiny
    weight memory to exercise paging in tests); the register map and enums are never overridden,
    because they are the interface the RTL implements.
    """

    def __init__(self, contract: dict[str, Any] | None = None, **overrides: Any) -> None:
        c = copy.deepcopy(contract if contract is not None else _default_contract())
        for key, value in overrides.items():
            if key in c["params"]:
                c["params"][key] = value
            elif key in c["timing"]:
                c["timing"][key] = value
            else:
                accepted = ", ".join(sorted([*c["params"], *c["timing"]]))
                raise ValueError(f"unknown hardware knob {key!r}; accepted: {accepted}")
        self.contract = c
        p, t = c["params"], c["timing"]
        for key, value in {**p, **t}.items():
            setattr(self, key, value)
        self.ENABLED = tuple(Precision.parse(v) for v in p["ENABLED"])
        self.WEIGHT_WORDS = 1 << p["LOG_WEIGHT_WORDS"]
        self.PARAM_ENTRIES = 1 << p["LOG_PARAM_ENTRIES"]
        self.ACT_WORDS = 1 << p["LOG_ACT_WORDS"]
        self.WORD_BYTES = p["DATA_WIDTH"] // 8
        self.PEAK_MACS_PER_CYCLE = p["ROWS"] * p["COLS"]
        self.ID = c["id"]
        self.VERSION = (c["version"]["major"] << 16) | c["version"]["minor"]
        # a contract-2.0 core (command lists, docs/contract2.md) keeps the 1.2 protocol: the
        # driver accepts either VERSION and picks its path from it
        v2 = c.get("contract2", {}).get("version")
        self.VERSION2 = (v2["major"] << 16) | v2["minor"] if v2 else None
        self.enums = {k: dict(v) for k, v in c["enums"].items()}
        for enum_name, members in self.enums.items():
            for member, code in members.items():
                setattr(self, f"{enum_name}_{member}", code)
        self.errors = {k: v["bit"] for k, v in c["errors"].items()}
        for name, bit in self.errors.items():
            setattr(self, f"ERR_{name}", 1 << bit)
        self.ERR_FATAL_MASK = sum(1 << b for b in self.errors.values() if b < 16)
        self.registers = tuple(
            Register(r["name"], r["offset"], r["access"], r.get("reset"), r.get("doc", ""),
                     tuple(Field(f["name"], f["lsb"], f["width"], f.get("enum"), f.get("doc", ""))
                           for f in r.get("fields", [])))
            for r in c["registers"])
        self._by_name = {r.name: r for r in self.registers}
        self._by_offset = {r.offset: r for r in self.registers}
        for r in self.registers:
            setattr(self, f"REG_{r.name}", r.offset)
        self._check()

    # -- the register map -------------------------------------------------------------------

    def reg(self, name: str) -> Register:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown register {name!r}; registers: {', '.join(self._by_name)}") from None

    def reg_at(self, offset: int) -> Register:
        try:
            return self._by_offset[offset]
        except KeyError:
            raise KeyError(f"no register at offset {offset:#x}") from None

    def encode(self, reg: str, **fields: int) -> int:
        """Compose a register value from field values, refusing values that do not fit."""
        r = self.reg(reg)
        value = 0
        for name, v in fields.items():
            f = r.field(name)
            v = int(v)
            if not 0 <= v < (1 << f.width):
                raise ValueError(f"{reg}.{name}={v} does not fit {f.width} bits (0..{(1 << f.width) - 1})")
            value |= v << f.lsb
        return value

    def decode(self, reg: str, value: int) -> dict[str, int]:
        return {f.name: (int(value) >> f.lsb) & ((1 << f.width) - 1) for f in self.reg(reg).fields}

    # -- precisions -------------------------------------------------------------------------

    def prec_code(self, prec: Precision | str) -> int:
        prec = Precision.parse(prec)
        for name, p in PREC_OF_CODE_NAME.items():
            if p is prec:
                return self.enums["PREC"][name]
        accepted = ", ".join(p.value for p in PREC_OF_CODE_NAME.values())
        raise ValueError(f"precision {prec.value} has no DTPU code; accepted: {accepted}")

    def prec_of_code(self, code: int) -> Precision | None:
        for name, c in self.enums["PREC"].items():
            if c == code:
                return PREC_OF_CODE_NAME[name]
        return None

    @property
    def prec_enable_mask(self) -> int:
        return sum(1 << self.prec_code(p) for p in self.ENABLED)

    def rq_built(self, variant: int | str) -> bool:
        """True if this build's post lanes have requantization variant `variant` (its JOB.RQ_VARIANT
        code or name): RQ_EN's bit for it. A job naming a variant not built is refused in CONFIG
        (ERR.BAD_MODE), a POST descriptor with BAD_FIELD, as the RTL's dtpu_control and dtpu_cl_post do."""
        code = self.enums["RQ_VARIANT"].get(variant) if isinstance(variant, str) else variant
        return code is not None and code in self.enums["RQ_VARIANT"].values() and bool(self.RQ_EN >> code & 1)

    @property
    def rq_variants(self) -> tuple[str, ...]:
        """The names of the requantization variants built (RQ_EN), in code order."""
        return tuple(n for n, v in sorted(self.enums["RQ_VARIANT"].items(), key=lambda kv: kv[1])
                     if self.RQ_EN >> v & 1)

    @property
    def hwcfg0(self) -> int:
        return self.encode("HWCFG0", ROWS=self.ROWS, COLS=self.COLS, PREC_EN=self.prec_enable_mask)

    @property
    def hwcfg1(self) -> int:
        return self.encode("HWCFG1", LOG_WEIGHT_WORDS=self.LOG_WEIGHT_WORDS,
                           LOG_PARAM_ENTRIES=self.LOG_PARAM_ENTRIES, LOG_ACT_WORDS=self.LOG_ACT_WORDS,
                           RQ_OFF=self.rq_all & ~self.RQ_EN)

    @property
    def rq_all(self) -> int:
        """RQ_EN with every variant built (the contract's default)."""
        return sum(1 << v for v in self.enums["RQ_VARIANT"].values())

    @property
    def model_name(self) -> str:
        """Names one build exactly (like VTA's TARGET_bitstream); the board driver compares it."""
        return (f"dtpu_{self.ROWS}x{self.COLS}_w{self.LOG_WEIGHT_WORDS}_p{self.LOG_PARAM_ENTRIES}"
                f"_a{self.LOG_ACT_WORDS}_v{self.VERSION >> 16}.{self.VERSION & 0xFFFF}")

    def _check(self) -> None:
        if self.DATA_WIDTH != 64:
            raise ValueError(f"DATA_WIDTH={self.DATA_WIDTH}: the stream formats are defined for 64 only")
        if self.ROWS != 8 or self.COLS < 2 or self.COLS & (self.COLS - 1):
            raise ValueError(f"ROWS={self.ROWS}, COLS={self.COLS}: ROWS must be 8 (the int8 lanes "
                             f"of a 64-bit word) and COLS a power of two >= 2")
        if self.WEIGHT_WORDS % self.COLS or self.ACT_WORDS % self.COLS or self.PARAM_ENTRIES % self.COLS:
            raise ValueError("memory sizes must be multiples of COLS (one bank per column)")
        if self.VEC_RQ_LANES not in (8, 4, 2, 1):
            raise ValueError(f"VEC_RQ_LANES={self.VEC_RQ_LANES}: the vector unit's requantizing "
                             f"lanes; accepted: 8, 4, 2 or 1")
        all_rq = sum(1 << v for v in self.enums["RQ_VARIANT"].values())
        if not isinstance(self.RQ_EN, int) or not 0 < self.RQ_EN <= all_rq or self.RQ_EN & ~all_rq:
            raise ValueError(f"RQ_EN={self.RQ_EN!r}: a bit mask of RQ_VARIANT codes "
                             f"({', '.join(f'{n}={v}' for n, v in self.enums['RQ_VARIANT'].items())}) "
                             f"with at least one bit set, at most {all_rq}")
        if self.FP_PARTIALS < 1 or self.FP_PARTIALS & (self.FP_PARTIALS - 1):
            raise ValueError(f"FP_PARTIALS={self.FP_PARTIALS} must be a power of two")

    # -- the active configuration -----------------------------------------------------------

    def __enter__(self) -> "HwConfig":
        stack = _stack()
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack().pop()

    def __repr__(self) -> str:
        return f"HwConfig({self.model_name}, {self.CLOCK_MHZ} MHz)"


_DEFAULT: dict[str, Any] | None = None


def _default_contract() -> dict[str, Any]:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_contract()
    return _DEFAULT


def _stack() -> list[HwConfig]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


_DEFAULT_CONFIG: HwConfig | None = None


def get_config() -> HwConfig:
    """The innermost ``with HwConfig(...)`` block's config, else the contract's defaults."""
    global _DEFAULT_CONFIG
    stack = _stack()
    if stack:
        return stack[-1]
    if _DEFAULT_CONFIG is None:
        _DEFAULT_CONFIG = HwConfig()
    return _DEFAULT_CONFIG


def lanes(prec: Precision) -> int:
    return Precision.parse(prec).lanes


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def out_lanes(cfg: HwConfig, prec: Precision, out_mode: int) -> tuple[int, np.dtype]:
    """(lanes per result word, lane dtype) of a job's results: the contract's result formats,
    which the lowering, the list compiler and the post unit all read."""
    if out_mode == cfg.OUT_MODE_REQUANT:
        return prec.lanes, prec.value_dtype
    if out_mode == cfg.OUT_MODE_FLOAT:
        return 2, np.dtype("<f4")
    if prec.bits == 8:
        return 2, np.dtype("<i4")  # RAW, 32-bit accumulators
    return 1, np.dtype("<i8")


#: the largest ROWS or COLS an ``mxu`` option may name (backends narrow it further)
MXU_MAX = 64


def parse_mxu(value: str) -> tuple[int, int]:
    """``"ROWSxCOLS"`` as (rows, cols): the one reading of an array geometry, shared by the
    delegate option ``mxu`` and the RTL builds (which sit below the delegate)."""
    import re

    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", value)
    if match:
        rows, cols = int(match.group(1)), int(match.group(2))
        if 1 <= rows <= MXU_MAX and 1 <= cols <= MXU_MAX:
            return rows, cols
    raise ValueError(f"dtpu: option 'mxu'={value!r} is invalid; expected ROWSxCOLS with ROWS, COLS "
                     f"in 1..{MXU_MAX}")


__all__ = ["CONTRACT_PATH", "Field", "HwConfig", "MXU_MAX", "Register", "ceil_div", "get_config",
           "load_contract", "out_lanes", "parse_mxu"]
