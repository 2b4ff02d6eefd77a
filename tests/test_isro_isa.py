"""The ISRO instruction encoding: binary and text round trips, and strict rejection of bad words."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtpu.isro import isa
from dtpu.isro.isa import ENUMS, FIELDS, INSTRUCTION_BYTES, USES, Fmt, Instruction, Op



@st.composite
def instructions(draw, ops=tuple(Op)):
    op = draw(st.sampled_from(ops))
    values = {}
    for name in USES[op]:
        f = FIELDS[name]
        if name in ENUMS:
            values[name] = draw(st.sampled_from(list(ENUMS[name])))
        else:
            values[name] = draw(st.integers(f.lo, f.hi))
    return Instruction(op, **values)


@given(st.lists(instructions(), max_size=12))
@settings(max_examples=300, deadline=None)
def test_binary_and_text_round_trip(program):
    blob = isa.encode_program(program)
    assert len(blob) == INSTRUCTION_BYTES * len(program)
    assert isa.decode_program(blob) == program
    listing = isa.disassemble(blob)
    assert isa.assemble(listing) == program
    assert isa.encode_program(isa.assemble(listing)) == blob


@given(instructions())
@settings(max_examples=200, deadline=None)
def test_format_parse_is_canonical(ins):
    text = isa.format_instruction(ins)
    assert isa.parse_instruction(text) == ins
    assert isa.format_instruction(isa.parse_instruction(text)) == text


@given(instructions(), st.integers(0, isa.INSTRUCTION_BITS - 1))
@settings(max_examples=300, deadline=None)
def test_decoder_rejects_any_reserved_bit(ins, bit):
    word = int.from_bytes(ins.encode(), "little")
    used = 0xFF
    for name in USES[ins.op]:
        f = FIELDS[name]
        used |= ((1 << f.width) - 1) << f.offset
    if used >> bit & 1:
        return
    bad = (word | 1 << bit).to_bytes(INSTRUCTION_BYTES, "little")
    with pytest.raises(ValueError, match="reserved bits set"):
        isa.decode(bad)


def test_layout_matches_the_documented_words():
    # docs/isro_isa.md lists these offsets; the listing examples in the doc rely on them
    assert (FIELDS["src"].offset, FIELDS["dst"].offset, FIELDS["wgt"].offset, FIELDS["prm"].offset) == (64, 96, 128, 160)
    ins = Instruction(Op.CONV, fmt=Fmt.I8, dsp=1, src=0x10, cin=3, hin=5, win=5, cout=2, kh=3, kw=3,
                      hout=3, wout=3, cn=3, rn=3, sn=3, in_zp=-1)
    b = ins.encode()
    assert b[0] == Op.CONV and b[1] & 0x3 == Fmt.I8 and b[1] >> 2 & 1 == 1
    assert int.from_bytes(b[4:6], "little", signed=True) == -1
    assert int.from_bytes(b[8:12], "little") == 0x10
    assert isa.decode(bytes(INSTRUCTION_BYTES)).op is Op.END      # a zeroed word halts


@pytest.mark.parametrize("kwargs, message", [
    (dict(cin=1 << 16), r"CONV\.cin=65536 does not fit its 16-bit field \[0, 65535\]"),
    (dict(in_zp=-40000), r"in_zp=-40000 does not fit its 16-bit signed field \[-32768, 32767\]"),
    (dict(npart=2), r"CONV has no field\(s\) npart; it uses: fmt"),
    (dict(kh=2.5), r"CONV\.kh must be an integer, got 2\.5"),
])
def test_bad_fields_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Instruction(Op.CONV, **kwargs)


@pytest.mark.parametrize("text, message", [
    ("frob.f32", "unknown opcode 'frob'; accepted: end, conv"),
    ("conv.f16", r"unknown format \.f16; accepted: \.f32, \.i8"),
    ("conv.f32 k=3", r"k needs 2 value\(s\) \(kh, kw\) written like 1x1, got '3'"),
    ("maxpool.f32 wgt=0x10", "maxpool has no operand 'wgt'; accepted: flags, fill, rnd, zp, src, dst, prm"),
    ("conv.f32 flags=dsp|fast", r"unknown flag\(s\) fast; accepted: dsp, leaky, clamp, partial"),
    ("conv.i8 rnd=nearest", "rnd='nearest'; accepted: double, single, double_up"),
    ("end.f32", r"end takes no format suffix"),
    ("conv.f32 src=ten", r"'ten' is not an integer"),
])
def test_assembler_errors_name_the_operand_and_the_choices(text, message):
    with pytest.raises(ValueError, match=message):
        isa.parse_instruction(text)


def test_assembler_checks_listing_addresses_and_reports_lines():
    good = "0000: nop\n0040: end\n"
    assert [i.op for i in isa.assemble(good)] == [Op.NOP, Op.END]
    with pytest.raises(ValueError, match=r"line 2: address 0x80 but the instruction lands at 0x40"):
        isa.assemble("0000: nop\n0080: end\n")
    with pytest.raises(ValueError, match="line 3: unknown opcode 'bogus'"):
        isa.assemble("nop ; comment\n\nbogus\n")


def test_decoder_rejects_bad_opcode_enum_and_length():
    with pytest.raises(ValueError, match="unknown opcode 99"):
        isa.decode(bytes([99]) + bytes(63))
    word = Instruction(Op.CONV, fmt=Fmt.F32).encode()
    bad = bytearray(word)
    bad[2] |= 0x3                                       # rnd = 3: not a rounding
    with pytest.raises(ValueError, match=r"rnd=3 is not one of 0 \(DOUBLE\), 1 \(SINGLE\), 2 \(DOUBLE_UP\)"):
        isa.decode(bytes(bad))
    with pytest.raises(ValueError, match="not a multiple of 64 bytes"):
        isa.decode_program(b"\0" * 65)


def test_instructions_are_immutable_values():
    a = Instruction(Op.ADD, fmt=Fmt.I8, npart=3, cout=2)
    assert a == Instruction("add", fmt=1, npart=3, cout=2) and hash(a) == hash(a.replace())
    assert a.replace(npart=4).npart == 4 and a.npart == 3
    with pytest.raises(AttributeError):
        a.npart = 5
    with pytest.raises(AttributeError, match="ADD has no field 'kh'"):
        a.kh  # noqa: B018


def test_block_size_is_what_must_fit_the_processing_elements():
    conv = Instruction(Op.CONV, cn=4, rn=3, sn=2)
    assert isa.block_size(conv) == 24
    assert isa.block_size(Instruction(Op.DWCONV, rn=5, sn=5)) == 25
    assert isa.block_size(Instruction(Op.DENSE, nn=100)) == 100
    assert isa.block_size(Instruction(Op.ADD, npart=9)) == 0
    assert isa.param_block_bytes(8, True) == 4 * (4 + 24) and isa.align(17) == 32
    assert np.dtype(isa.ACC_DTYPE[Fmt.I8]).itemsize == 4


def test_the_document_lists_the_encoding():
    """docs/isro_isa.md section 3 is encoding.json in prose: every opcode with its code, and every
    field by name, so a change to the file that the document does not follow fails here."""
    import re
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[1] / "docs" / "isro_isa.md").read_text()
    section = doc[doc.index("## 3. Instruction word"):doc.index("## 4. Semantics")]
    rows = {name: int(code) for name, code in re.findall(r"^\| `([A-Z]+)` \| (\d+) \|", section, re.M)}
    assert rows == dict(isa.ENCODING["opcodes"])
    named = {w for group in re.findall(r"`([^`]+)`", section) for w in re.split(r"[\s,.]+", group)}
    assert sorted(set(FIELDS) - named) == []
    semantics = doc[doc.index("## 4. Semantics"):doc.index("## 5. Padding")]
    assert all(f"**{op}**" in semantics or f"**{op}'s" in semantics
               for op in isa.ENCODING["opcodes"] if op not in ("END", "NOP", "CONV", "DWCONV", "DENSE"))
