"""The ISRO-ASIC instruction set: 512-bit instructions, their assembler and disassembler.

The report fixes what the chip computes (convolution, max pooling, dense, a per-channel DSP stage
``y = v2 + v1 * (x + v3)``, a compare-and-scale activation ``y = x < a1 ? a2 * x : x``, split
partial sums added by an addition instruction) but not how instructions are encoded. This module
is that missing definition; docs/isro_isa.md is its prose form and must change with it.

Why a fixed 512-bit word: a CISC instruction here carries a whole layer (four addresses, input and
output geometry, kernel, stride, dilation, the output's pre-applied padding and a split
sub-block). Packing that into 256 bits would need 12-bit dimensions and indirect descriptors; 64
bytes per layer is nothing next to the weights, and every field stays byte- or word-aligned, so
a hex dump of the program can be read by eye.

Every opcode uses a subset of one global field table. Unused fields must be zero: the decoder
rejects anything else, which is what makes ``encode(decode(b)) == b`` hold for every accepted
``b`` and lets the property tests check the round trip in both directions.
"""
from __future__ import annotations

import enum
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping

import numpy as np

# DTPU_ISRO_ENCODING points at another table (a chip team's encoding, or a test's permutation)
ENCODING_PATH = Path(os.environ.get("DTPU_ISRO_ENCODING") or Path(__file__).with_name("encoding.json"))
# Semantic names the machine model and compiler implement; the encoding file gives their codes.
REQUIRED_OPS = ("END", "CONV", "DWCONV", "DENSE", "MAXPOOL", "ADD", "NOP")


def _load_encoding(path: Path) -> dict:
    """The one encoding table (opcodes, enum codes, field positions, fields per opcode).

    Why a data file: the chip team's real encoding can replace ours by replacing this file; the
    assembler, decoder, listing and docs all follow it. Checked here so a bad table fails at import
    with the key that is wrong, not later with a garbled program.
    """
    enc = json.loads(path.read_text())
    missing = [k for k in ("name", "instruction_bytes", "opcodes", "enums", "fields", "uses") if k not in enc]
    if missing:
        raise ValueError(f"{path}: encoding table lacks {', '.join(missing)}")
    absent = [op for op in REQUIRED_OPS if op not in enc["opcodes"]]
    if absent:
        raise ValueError(f"{path}: opcodes {', '.join(absent)} missing; the machine implements "
                         f"{', '.join(REQUIRED_OPS)} (plus any extra opcodes the table defines)")
    return enc


ENCODING = _load_encoding(ENCODING_PATH)
ENCODING_SHA256 = hashlib.sha256(ENCODING_PATH.read_bytes()).hexdigest()
INSTRUCTION_BYTES = int(ENCODING["instruction_bytes"])
INSTRUCTION_BITS = INSTRUCTION_BYTES * 8

# Regions in both memories start on this boundary, so every 32-bit element is naturally aligned
# and a region's start can be read off a listing without arithmetic.
ALIGN = 16

# END must be 0 in any encoding we accept: zero-filled instruction memory then halts the chip.
Op = enum.IntEnum("Op", dict(sorted(ENCODING["opcodes"].items(), key=lambda kv: kv[1])))
Op.__doc__ = "Opcodes, as the encoding file numbers them (END must be 0: zeroed memory halts)."
if Op.END != 0:
    raise ValueError(f"{ENCODING_PATH}: END must be opcode 0 (zero-filled memory must halt)")
_E = ENCODING["enums"]


class Fmt(enum.IntEnum):
    """Number format of one instruction's operands (see docs/isro_isa.md, "Data representation")."""

    F32 = _E["fmt"]["F32"]   # float32 activations, weights, DSP parameters and accumulators
    I8 = _E["fmt"]["I8"]     # int8 activations and weights, int32 accumulators and DSP parameters


class Fill(enum.IntEnum):
    """What the pre-applied padding border of an output is filled with."""

    ZERO = _E["fill"]["ZERO"]       # the real value 0: 0.0 in F32, the output zero point in I8
    LOWEST = _E["fill"]["LOWEST"]   # -inf in F32, -128 in I8: neutral for a following max pooling


class Rounding(enum.IntEnum):
    """How the I8 DSP stage applies its fixed-point multiplier (the variants TFLite kernels use).

    The string forms match :class:`dtpu.reference.quantize.Variant` where both define one.
    """

    DOUBLE = _E["rnd"]["DOUBLE"]        # gemmlowp: high-mul half up, then a shift half away from 0
    SINGLE = _E["rnd"]["SINGLE"]        # one rounding of x*m / 2^(31-shift), half up
    DOUBLE_UP = _E["rnd"]["DOUBLE_UP"]  # high-mul, then shift, both rounded half up (ruy x86/NEON)

    @property
    def label(self) -> str:
        return self.name.lower()


class Mem(enum.IntEnum):
    """The memories an XFER copies between: the two on-chip ones and the external memory
    (DRAM behind the chip's memory controller) that holds what does not fit them."""

    FRAME = _E.get("mem", {}).get("FRAME", 0)
    FILTER = _E.get("mem", {}).get("FILTER", 1)
    EXTERNAL = _E.get("mem", {}).get("EXTERNAL", 2)


class Mode(enum.IntEnum):
    """How RESIZE picks its source pixels (TFLite's RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR)."""

    NEAREST = _E.get("mode", {}).get("NEAREST", 0)
    BILINEAR = _E.get("mode", {}).get("BILINEAR", 1)


class Func(enum.IntEnum):
    """What LUT computes per element: an I8 table of 256 outputs (exact for any function of one
    int8 value), or in F32 one of the functions the chip's float unit evaluates."""

    TABLE = _E.get("func", {}).get("TABLE", 0)
    SIGMOID = _E.get("func", {}).get("SIGMOID", 1)
    TANH = _E.get("func", {}).get("TANH", 2)
    HSWISH = _E.get("func", {}).get("HSWISH", 3)


# element dtypes per format: frame activations, filter weights, accumulators, DSP parameters
FRAME_DTYPE = {Fmt.F32: np.dtype("<f4"), Fmt.I8: np.dtype("i1")}
WEIGHT_DTYPE = {Fmt.F32: np.dtype("<f4"), Fmt.I8: np.dtype("i1")}
ACC_DTYPE = {Fmt.F32: np.dtype("<f4"), Fmt.I8: np.dtype("<i4")}
PARAM_DTYPE = {Fmt.F32: np.dtype("<f4"), Fmt.I8: np.dtype("<i4")}
PARAM_HEADER_WORDS = 4   # F32: a1, a2, lo, hi   I8: lo, hi, 0, 0
DSP_ARRAYS = 3           # F32: v1, v2, v3       I8: bias (v3), multiplier, shift (v1)


# I8 EADD parameters after the header: zp_a, zp_b, left_shift, m_a, s_a, m_b, s_b, m_out, s_out
# (TFLite's int8 ADD: both inputs rescaled to a common scale, summed, rescaled to the output)
EADD_WORDS = 9
# I8 EMUL parameter words after the header: zp_a, zp_b, m_out, s_out (TFLite's int8 MUL:
# MBQM((a - zp_a) * (b - zp_b), s_a s_b / s_out) + out_zp)
EMUL_WORDS = 4
# LUT's I8 table: one int8 output per stored input value, indexed by value + 128 (with perch:
# one table per channel, channel after channel)
LUT_ENTRIES = 256


def param_block_bytes(channels: int, dsp: bool, op: "Op | None" = None) -> int:
    """Size of a parameter block: the activation header, then the DSP arrays if the DSP is on
    (EADD: the nine I8 rescaling words instead of per-channel arrays)."""
    if op is not None and op.name == "EADD":
        return 4 * (PARAM_HEADER_WORDS + (EADD_WORDS if dsp else 0))
    if op is not None and op.name == "EMUL":
        return 4 * (PARAM_HEADER_WORDS + (EMUL_WORDS if dsp else 0))
    return 4 * (PARAM_HEADER_WORDS + (DSP_ARRAYS * channels if dsp else 0))


def align(n: int, to: int = ALIGN) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    width: int
    signed: bool = False
    default: int = 0

    @property
    def lo(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1


# The one field table, from the encoding file.
FIELDS: dict[str, Field] = {f[0]: Field(f[0], int(f[1]), int(f[2]), bool(f[3]), int(f[4]))
                            for f in ENCODING["fields"]}

# Which fields each opcode reads; every other bit of its word must be zero.
USES: dict[Op, tuple[str, ...]] = {Op[name]: tuple(names) for name, names in ENCODING["uses"].items()}
_unknown = sorted({n for names in USES.values() for n in names} - set(FIELDS))
if _unknown or set(USES) != set(Op):
    raise ValueError(f"{ENCODING_PATH}: 'uses' names unknown fields {_unknown} or does not cover "
                     f"every opcode ({', '.join(o.name for o in Op)})")

#: field name -> the enum its values decode to (the other fields are integers)
ENUMS: dict[str, type[enum.IntEnum]] = {"fmt": Fmt, "fill": Fill, "rnd": Rounding, "xsrc": Mem, "xdst": Mem,
                                        "mode": Mode, "func": Func}
_FLAGS = ("dsp", "leaky", "clamp", "partial", "align", "half", "bcast", "perch", "hup")


def _check_layout() -> None:
    for op, names in USES.items():
        spans = sorted((FIELDS[n].offset, FIELDS[n].offset + FIELDS[n].width, n) for n in names + ("op",))
        for (a0, a1, an), (b0, _, bn) in zip(spans, spans[1:]):
            if b0 < a1:
                raise AssertionError(f"{op.name}: fields {an} and {bn} overlap")
    for f in FIELDS.values():
        if f.offset + f.width > INSTRUCTION_BITS:
            raise AssertionError(f"field {f.name} runs past the instruction word")


_check_layout()


class Instruction:
    """One decoded instruction: an opcode and a value for every field that opcode uses.

    Immutable and hashable so programs can be compared and deduplicated; fields read as
    attributes (``ins.cin``), enum fields as their enum (``ins.fmt is Fmt.I8``).
    """

    __slots__ = ("op", "_values")

    def __init__(self, op: Op | int | str, **values: int) -> None:
        op = _parse_op(op)
        used = USES[op]
        unknown = sorted(set(values) - set(used))
        if unknown:
            raise ValueError(f"{op.name} has no field(s) {', '.join(unknown)}; "
                             f"it uses: {', '.join(used) or 'none'}")
        vals: dict[str, int] = {}
        for name in used:
            f = FIELDS[name]
            v = values.get(name, f.default)
            if name in ENUMS:
                v = ENUMS[name](int(v))
            elif isinstance(v, (bool, np.bool_)):
                v = int(v)
            elif not isinstance(v, (int, np.integer)):
                raise ValueError(f"{op.name}.{name} must be an integer, got {v!r}")
            v_int = int(v)
            if not f.lo <= v_int <= f.hi:
                raise ValueError(f"{op.name}.{name}={v_int} does not fit its {f.width}-bit "
                                 f"{'signed ' if f.signed else ''}field [{f.lo}, {f.hi}]")
            vals[name] = v if name in ENUMS else v_int
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "_values", vals)

    def __getattr__(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"{self.op.name} has no field {name!r}") from None

    def __setattr__(self, name, value):
        raise AttributeError("instructions are immutable; use .replace()")

    @property
    def fields(self) -> Mapping[str, int]:
        return dict(self._values)

    def replace(self, **changes: int) -> "Instruction":
        return Instruction(self.op, **{**self._values, **changes})

    def __eq__(self, other) -> bool:
        return isinstance(other, Instruction) and self.op == other.op and self._values == other._values

    def __hash__(self) -> int:
        return hash((self.op, tuple(sorted(self._values.items()))))

    def __repr__(self) -> str:
        return f"Instruction({format_instruction(self)!r})"

    # -- binary -------------------------------------------------------------------------------

    def encode(self) -> bytes:
        word = int(self.op)
        for name, v in self._values.items():
            f = FIELDS[name]
            word |= (int(v) & ((1 << f.width) - 1)) << f.offset
        return word.to_bytes(INSTRUCTION_BYTES, "little")


def _parse_op(op) -> Op:
    if isinstance(op, Op):
        return op
    if isinstance(op, str):
        try:
            return Op[op.upper()]
        except KeyError:
            raise ValueError(f"unknown opcode {op!r}; accepted: "
                             f"{', '.join(o.name.lower() for o in Op)}") from None
    try:
        return Op(int(op))
    except ValueError:
        raise ValueError(f"unknown opcode {op!r}; accepted: "
                         f"{', '.join(f'{o.value} ({o.name})' for o in Op)}") from None


def decode(data: bytes, *, address: int | None = None) -> Instruction:
    """One 64-byte word back into an :class:`Instruction`; reserved bits must be zero."""
    where = f" at byte {address:#x}" if address is not None else ""
    if len(data) != INSTRUCTION_BYTES:
        raise ValueError(f"an instruction is {INSTRUCTION_BYTES} bytes, got {len(data)}{where}")
    word = int.from_bytes(data, "little")
    op = _parse_op(word & 0xFF)
    covered = 0xFF
    values = {}
    for name in USES[op]:
        f = FIELDS[name]
        mask = (1 << f.width) - 1
        raw = (word >> f.offset) & mask
        covered |= mask << f.offset
        if f.signed and raw >> (f.width - 1):
            raw -= 1 << f.width
        if name in ENUMS:
            try:
                ENUMS[name](raw)
            except ValueError:
                raise ValueError(f"{op.name}{where}: {name}={raw} is not one of "
                                 f"{', '.join(f'{e.value} ({e.name})' for e in ENUMS[name])}") from None
        values[name] = raw
    stray = word & ~covered
    if stray:
        raise ValueError(f"{op.name}{where}: reserved bits set (mask {stray:#x}); "
                         f"{op.name} uses only: {', '.join(USES[op]) or 'the opcode'}")
    return Instruction(op, **values)


def encode_program(program: Iterable[Instruction]) -> bytes:
    return b"".join(i.encode() for i in program)


def decode_program(data: bytes) -> list[Instruction]:
    if len(data) % INSTRUCTION_BYTES:
        raise ValueError(f"program length {len(data)} is not a multiple of {INSTRUCTION_BYTES} bytes")
    return [decode(data[i:i + INSTRUCTION_BYTES], address=i) for i in range(0, len(data), INSTRUCTION_BYTES)]


# -- text form ----------------------------------------------------------------------------------
#
# mnemonic[.fmt] then key=value groups. A group prints the fields of it the opcode uses, joined
# by its separator; addresses are hexadecimal, everything else decimal (hex accepted on input).

@dataclass(frozen=True)
class _Group:
    key: str
    fields: tuple[str, ...]
    sep: str = ""
    hex: bool = False


_GROUPS = (
    _Group("flags", _FLAGS, "|"),
    _Group("fill", ("fill",)), _Group("rnd", ("rnd",)), _Group("mode", ("mode",)), _Group("func", ("func",)),
    _Group("zp", ("in_zp", "out_zp"), ","), _Group("wzp", ("w_zp",)),
    _Group("src", ("src",), hex=True), _Group("src2", ("src2",), hex=True), _Group("dst", ("dst",), hex=True),
    _Group("wgt", ("wgt",), hex=True), _Group("prm", ("prm",), hex=True),
    _Group("in", ("cin", "hin", "win"), "x"),
    _Group("out", ("cout", "hout", "wout"), "x"),
    _Group("k", ("kh", "kw"), "x"), _Group("s", ("sh", "sw"), "x"), _Group("d", ("dh", "dw"), "x"),
    _Group("mult", ("mult",)), _Group("up", ("uh", "uw"), "x"), _Group("inner", ("qt", "qb", "ql", "qr"), ","),
    _Group("coff", ("coff",)), _Group("band", ("fho", "fhi", "yo", "yi"), ","),
    _Group("pad", ("pt", "pb", "pl", "pr"), ","),
    _Group("apad", ("at", "ab", "al", "ar"), ","), _Group("bpad", ("bt", "bb", "bl", "br"), ","),
    _Group("ch", ("c0", "cn"), "+"), _Group("rows", ("r0", "rn"), "+"),
    _Group("cols", ("s0", "sn"), "+"), _Group("elems", ("n0", "nn"), "+"),
    _Group("npart", ("npart",)), _Group("lanes", ("lanes",)),
    _Group("mem", ("xsrc", "xdst"), ">"), _Group("len", ("len",)), _Group("count", ("count",)),
    _Group("stride", ("sstride", "dstride"), ","),
)
_GROUP_BY_KEY = {g.key: g for g in _GROUPS}


def format_instruction(ins: Instruction) -> str:
    used = set(USES[ins.op])
    head = ins.op.name.lower()
    if "fmt" in used:
        head += "." + ins.fmt.name.lower()
    parts = [head]
    for g in _GROUPS:
        names = [n for n in g.fields if n in used]
        if not names:
            continue
        if g.key == "flags":
            on = [n for n in names if getattr(ins, n)]
            parts.append("flags=" + ("|".join(on) if on else "-"))
            continue
        if g.key in ("zp", "rnd") and "fmt" in used and ins.fmt is Fmt.F32 and not any(int(getattr(ins, n)) for n in names):
            continue                              # I8-only fields, zero in F32: omitted
        if g.key == "wzp" and not ins.w_zp:
            continue                              # symmetric weights (every int8 model): omitted
        if g.key == "lanes" and ins.lanes == 1:
            continue                              # one output channel per cycle: omitted
        if g.key == "band" and not any(int(getattr(ins, n)) for n in names):
            continue                              # a whole resize: omitted
        texts = []
        for n in names:
            v = getattr(ins, n)
            if n in ENUMS:
                texts.append(v.name.lower())
            elif g.hex:
                texts.append(f"{int(v):#x}")
            else:
                texts.append(str(int(v)))
        parts.append(f"{g.key}={g.sep.join(texts)}")
    return " ".join(parts)


_INT = re.compile(r"[+-]?(0x[0-9a-fA-F]+|\d+)$")


def _parse_int(text: str, what: str) -> int:
    if not _INT.match(text):
        raise ValueError(f"{what}: {text!r} is not an integer (decimal or 0x-hex)")
    return int(text, 0)


def parse_instruction(line: str) -> Instruction:
    """The inverse of :func:`format_instruction`; missing groups take their field defaults."""
    tokens = line.split()
    if not tokens:
        raise ValueError("empty instruction")
    head, _, fmt_text = tokens[0].partition(".")
    op = _parse_op(head)
    used = set(USES[op])
    values: dict[str, int] = {}
    if fmt_text:
        if "fmt" not in used:
            raise ValueError(f"{op.name.lower()} takes no format suffix, got .{fmt_text}")
        try:
            values["fmt"] = Fmt[fmt_text.upper()]
        except KeyError:
            raise ValueError(f"unknown format .{fmt_text}; accepted: "
                             f"{', '.join('.' + f.name.lower() for f in Fmt)}") from None
    for tok in tokens[1:]:
        key, eq, text = tok.partition("=")
        if not eq:
            raise ValueError(f"{op.name.lower()}: expected key=value, got {tok!r}")
        g = _GROUP_BY_KEY.get(key)
        names = [n for n in g.fields if n in used] if g else []
        if not names:
            keys = [g.key for g in _GROUPS if any(n in used for n in g.fields)]
            raise ValueError(f"{op.name.lower()} has no operand {key!r}; accepted: {', '.join(keys) or 'none'}")
        if key == "flags":
            on = [] if text == "-" else text.split("|")
            bad = [f for f in on if f not in names]
            if bad:
                raise ValueError(f"{op.name.lower()}: unknown flag(s) {', '.join(bad)}; accepted: {', '.join(names)}")
            for n in names:
                values[n] = int(n in on)
            continue
        pieces = text.split(g.sep) if g.sep else [text]
        if len(pieces) != len(names):
            example = g.sep.join("1" for _ in names)
            raise ValueError(f"{op.name.lower()}: {key} needs {len(names)} value(s) "
                             f"({', '.join(names)}) written like {example}, got {text!r}")
        for n, piece in zip(names, pieces):
            if n in ENUMS:
                try:
                    values[n] = ENUMS[n][piece.upper()]
                except KeyError:
                    raise ValueError(f"{op.name.lower()}: {n}={piece!r}; accepted: "
                                     f"{', '.join(e.name.lower() for e in ENUMS[n])}") from None
            else:
                values[n] = _parse_int(piece, f"{op.name.lower()} {key}")
    return Instruction(op, **values)


def assemble(text: str) -> list[Instruction]:
    """Parse an assembly listing: one instruction a line; ';' starts a comment.

    A listing may carry a leading address (``0040:``) per line, as :func:`disassemble` writes;
    it is checked against the instruction's position so an edited listing cannot silently shift.
    """
    program = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(";", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"([0-9a-fA-F]+):\s*(.*)$", line)
        if m:
            addr = int(m.group(1), 16)
            if addr != len(program) * INSTRUCTION_BYTES:
                raise ValueError(f"line {lineno}: address {addr:#x} but the instruction lands at "
                                 f"{len(program) * INSTRUCTION_BYTES:#x}")
            line = m.group(2)
        try:
            program.append(parse_instruction(line))
        except ValueError as exc:
            raise ValueError(f"line {lineno}: {exc}") from None
    return program


def disassemble(program: bytes | Iterable[Instruction], comments: Mapping[int, str] | None = None) -> str:
    """Listing text: ``address: instruction`` a line, with optional ``; comment`` per index."""
    if isinstance(program, (bytes, bytearray, memoryview)):
        program = decode_program(bytes(program))
    lines = []
    for i, ins in enumerate(program):
        line = f"{i * INSTRUCTION_BYTES:04x}: {format_instruction(ins)}"
        if comments and i in comments:
            line += f"  ; {comments[i]}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def iter_fields(op: Op) -> Iterator[Field]:
    for name in USES[op]:
        yield FIELDS[name]


def block_size(ins: Instruction) -> int:
    """Inputs one output value needs in one cycle: what must fit the processing elements."""
    if ins.op is Op.CONV:
        return ins.cn * ins.rn * ins.sn
    if ins.op is Op.DWCONV:
        return ins.rn * ins.sn
    if ins.op is Op.DENSE:
        return ins.nn
    if ins.op.name == "TCONV":
        return ins.cn * ins.rn * ins.sn
    return 0


def lanes(ins: Instruction) -> int:
    """Output channels the MAC array computes per cycle (CONV, TCONV: ``lanes``; else one)."""
    return int(ins.fields.get("lanes", 1))


def pe_used(ins: Instruction) -> int:
    """Processing elements an instruction occupies: its block once per lane."""
    return block_size(ins) * max(1, lanes(ins))


def times_lanes(ins: Instruction) -> str:
    """" x N lanes" for an error message when the block runs several lanes, else nothing."""
    return f" x {lanes(ins)} lanes" if lanes(ins) != 1 else ""


def output_steps(ins: Instruction) -> int:
    """Cycles of a convolution's MAC array: one per output position and group of `lanes` channels."""
    return -(-ins.cout // max(1, lanes(ins))) * ins.hout * ins.wout
