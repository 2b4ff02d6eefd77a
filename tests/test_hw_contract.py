"""The contract JSON is the one truth: the committed RTL header and register table must match it,
and the register map must be well formed (what the RTL engineer builds from)."""
from __future__ import annotations

import re

import pytest

from dtpu.hw import gen_header
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.core import Core
from dtpu.driver import ModelTransport, check_identity


@pytest.mark.parametrize("path", [gen_header.HEADER_PATH, gen_header.DOC_PATH,
                                  gen_header.CONTRACT2_HEADER_PATH], ids=lambda p: p.name)
def test_generated_files_match_contract(path):
    expected = gen_header.outputs()[path]
    assert path.exists(), f"{path} missing: run `python -m dtpu.hw.gen_header`"
    assert path.read_text() == expected, f"{path} drifted from contract.json: run `python -m dtpu.hw.gen_header`"


def _header_params(path=gen_header.HEADER_PATH) -> dict[str, int]:
    """Parse the committed header independently of the generator."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"localparam (?:\[\d+:0\] |integer )(\w+) = (?:(\d+)'([hd]))?([0-9A-Fa-f]+);", line)
        if m:
            out[m.group(1)] = int(m.group(4), 16 if m.group(3) == "h" else 10)
    return out


def test_header_constants_equal_python_constants():
    cfg = get_config()
    p = _header_params()
    assert p["DTPU_ID"] == cfg.ID == 0x44545055
    assert p["DTPU_VERSION"] == cfg.VERSION
    for r in cfg.registers:
        assert p[f"DTPU_REG_{r.name}"] == r.offset == getattr(cfg, f"REG_{r.name}")
        for f in r.fields:
            assert p[f"DTPU_{r.name}_{f.name}_LSB"] == f.lsb
            assert p[f"DTPU_{r.name}_{f.name}_WIDTH"] == f.width
    for enum, members in cfg.enums.items():
        for name, code in members.items():
            assert p[f"DTPU_{enum}_{name}"] == code == getattr(cfg, f"{enum}_{name}")
    for name, bit in cfg.errors.items():
        assert p[f"DTPU_ERR_{name}"] == bit
        assert getattr(cfg, f"ERR_{name}") == 1 << bit
    for key in ("CFG_CYCLES", "LOAD_LATENCY", "LAT_MXU", "LAT_REDUCE", "LAT_POST", "FP_PARTIALS", "DW_SETUP"):
        assert p[f"DTPU_{key}"] == getattr(cfg, key)
    assert p["DTPU_DEFAULT_ROWS"] == cfg.ROWS and p["DTPU_DEFAULT_COLS"] == cfg.COLS
    assert p["DTPU_DEFAULT_PREC_EN"] == cfg.prec_enable_mask


def test_contract2_header_constants_equal_the_golden_models():
    """hw/rtl/dtpu_cl_regs.vh, parsed as text, against dtpu.hw.listformat.Format (what the golden
    model and the compiler use); and its length check against Format.length."""
    from dtpu.hw.listformat import Format
    f = Format()
    p = _header_params(gen_header.CONTRACT2_HEADER_PATH)
    assert (p["DTPU_CL_VERSION_MAJOR"], p["DTPU_CL_VERSION_MINOR"]) == f.version
    for key, value in f.mem.items():
        assert p[f"DTPU_CL_{key}"] == value
    for op, code in f.opcodes.items():
        assert p[f"DTPU_CL_OP_{op}"] == code
        var = f.layout[op][-1].endswith("*")
        assert p[f"DTPU_CL_LEN_VAR_{op}"] == int(var)
        assert p[f"DTPU_CL_LEN_{op}"] == (f.length(op, 1) if var else f.length(op))
    for kind, fields in f.fields.items():
        for name, (lsb, width) in fields.items():
            assert (p[f"DTPU_CL_{kind}_{name}_LSB"], p[f"DTPU_CL_{kind}_{name}_WIDTH"]) == (lsb, width)
    for name, mask in f.errors.items():
        assert 1 << p[f"DTPU_CL_ERR_{name}"] == mask
    for name, r in f.regs.items():
        assert p[f"DTPU_REG_{name}"] == r["offset"]
    text = gen_header.CONTRACT2_HEADER_PATH.read_text()
    for op in f.opcodes:
        cmp = ">=" if f.layout[op][-1].endswith("*") else "=="
        assert f"DTPU_CL_OP_{op}: dtpu_cl_len_ok = (len {cmp} DTPU_CL_LEN_{op});" in text


def test_register_map_is_well_formed():
    cfg = get_config()
    offsets = [r.offset for r in cfg.registers]
    assert len(set(offsets)) == len(offsets)
    assert all(o % 4 == 0 and o < (1 << cfg.AXIL_ADDR_WIDTH) for o in offsets)
    for r in cfg.registers:
        assert r.access in ("ro", "rw", "w1c")
        used = 0
        for f in r.fields:
            assert 0 <= f.lsb and f.lsb + f.width <= 32, (r.name, f.name)
            assert not used & f.mask, f"{r.name}.{f.name} overlaps another field"
            used |= f.mask
            if f.enum:
                assert max(cfg.enums[f.enum].values()) < 1 << f.width
    for enum, members in cfg.enums.items():
        assert len(set(members.values())) == len(members), enum
    bits = list(cfg.errors.values())
    assert len(set(bits)) == len(bits) and max(bits) < 32


def test_core_reports_its_build():
    t = ModelTransport(Core(get_config()))
    check_identity(t)
    with HwConfig(COLS=4, LOG_WEIGHT_WORDS=10) as small:
        t2 = ModelTransport(Core(small))
        assert small.decode("HWCFG0", t2.read_reg(small.REG_HWCFG0))["COLS"] == 4
        assert small.decode("HWCFG1", t2.read_reg(small.REG_HWCFG1))["LOG_WEIGHT_WORDS"] == 10
        with pytest.raises(RuntimeError, match="does not match contract"):
            t2.cfg = get_config().__class__()  # host lowering for the default build
            check_identity(t2)


def test_overrides_are_validated():
    with pytest.raises(ValueError, match="unknown hardware knob 'BOGUS'"):
        HwConfig(BOGUS=1)
    with pytest.raises(ValueError, match="COLS a power of two"):
        HwConfig(COLS=6)
    cfg = get_config()
    with pytest.raises(ValueError, match="does not fit 4 bits"):
        cfg.encode("JOB", OPCODE=16)


@pytest.mark.parametrize("top,knob", [(t, k) for t in ("dtpu_cl_top", "dtpu_axi")
                                       for k in ("DW_ROTATE", "PE_PAIR", "RQ_EN")]
                         + [("dtpu_cl_top", "VEC_RQ_LANES")])
def test_tops_default_to_the_contracts_build_knobs(top, knob):
    """The Vivado overlay passes the contract's geometry and precisions and the board build's
    RQ_EN and VEC_RQ_LANES (config.tcl DTPU_PARAMS, dtpu.board.design.build_params), so the
    board build's depthwise layout and PE pairs are the top's defaults, and every knob's default
    is what a build that does not pass it gets (timing.py, pe_area.py, the 1.2 overlay): they
    must be the contract's, which the golden model, the lowering and the board driver assume."""
    text = (gen_header.REPO / "hw" / "rtl" / f"{top}.v").read_text()
    m = re.search(rf"parameter {knob} = (\d+)", text)
    assert m, f"{top}.v declares no {knob} parameter"
    assert int(m.group(1)) == getattr(HwConfig(), knob)


def test_vec_rq_lanes_is_validated():
    assert HwConfig(VEC_RQ_LANES=2).VEC_RQ_LANES == 2
    with pytest.raises(ValueError, match=r"VEC_RQ_LANES=3: .*accepted: 8, 4, 2 or 1"):
        HwConfig(VEC_RQ_LANES=3)
