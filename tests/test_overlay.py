"""hw/overlays: the Vivado flow for the PYNQ-Z2, checked without Vivado.

Vivado is not installed here, so nothing is built (and no .bit/.hwh is shipped). Instead:
the names in hw/overlays/config.tcl equal those the Python side uses (dtpu.board.design) and the
ports of the RTL tops (hw/rtl/dtpu_cl_top.v for 2.0, hw/rtl/dtpu_axi.v for 1.2); and both TCL
scripts are *run* by tclsh against stub Vivado commands that record every call, so a wrong
variable, a typo in a name or a missing connection fails here rather than in a two-hour Vivado
run. Both designs are checked: contract 2.0's (the default: dtpu_cl_top, its master on HP0, irq
to the PS, its 1.2 streams tied off) and contract 1.2's (``CONTRACT=1``: dtpu_axi and two DMAs).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dtpu.board import design, xadc
from dtpu.board.emulate.hwh import memory_windows, parse_hwh, write_hwh

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
OVERLAYS = ROOT / "hw" / "overlays"
RTL = ROOT / "hw" / "rtl"
RTL_TOP = RTL / f"{design.TOP}.v"           # the 1.2 design's top
RTL_TOP_2 = RTL / f"{design.TOP_2}.v"       # the 2.0 design's top (issue 15)
TCLSH = shutil.which("tclsh")


def _tcl_vars() -> dict[str, str]:
    """`set NAME value` (a word, or a {braced} block with nesting) from config.tcl."""
    text = (OVERLAYS / "config.tcl").read_text()
    out = {}
    for m in re.finditer(r"^set\s+(\w+)\s+", text, re.M):
        i = m.end()
        if text[i] == "{":
            depth, j = 0, i
            while True:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            out[m.group(1)] = text[i + 1:j]
        else:
            out[m.group(1)] = text[i:].split()[0]
    return out


def _rtl_ports_and_params(text: str, top: str = design.TOP) -> tuple[list[str], list[str]]:
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    start = text.index(f"module {top}")
    header = text[start:text.index(");", start)]
    params = re.findall(r"\bparameter\s+(?:\[[^\]]*\]\s*)?(\w+)", header)
    ports = re.findall(r"\b(?:input|output|inout)\s+(?:wire|reg)?\s*(?:signed\s*)?(?:\[[^\]]*\])?\s*(\w+)",
                       header)
    return ports, params


# -------------------------------------------------------------------------- names agree


def test_config_tcl_matches_the_python_design():
    v = _tcl_vars()
    assert v["DTPU_VLNV"] == design.DTPU_VLNV and v["DTPU_TOP"] == design.TOP
    assert v["DTPU_TOP_2"] == design.TOP_2 == design.VARIANTS[2].top
    assert (v["DTPU_CLOCK"], v["DTPU_RESET"]) == (design.CLOCK_PORT, design.RESET_PORT)
    assert v["DTPU_BUSIF"].split() == list(design.BUS_INTERFACES)
    assert v["DTPU_PARAMS"].split() == list(design.TOP_PARAMS)
    assert v["BD_NAME"] == design.BITSTREAM_NAME and int(v["FCLK_MHZ"]) == design.FCLK_MHZ
    assert int(v["DMA_LENGTH_WIDTH"]) == design.DMA_LENGTH_WIDTH
    assert int(v["DMA_DATA_WIDTH"]) == design.DMA_DATA_WIDTH
    assert (v["INST_PS7"], v["INST_DTPU"], v["INST_DMA_WGT"], v["INST_DMA_ACT"], v["INST_XADC"]) == \
        (design.PS7, design.DTPU, design.DMA_WGT, design.DMA_ACT, design.XADC)
    words = v["ADDRESS_MAP"].split()
    amap = {words[i]: (int(words[i + 2], 16), int(words[i + 3], 16)) for i in range(0, len(words), 4)}
    assert amap == design.ADDRESS_MAP
    streams = re.findall(r"(\w+)\s+\{(\w+)\s+(\w+)\s+(\w+)\}", v["STREAMS"])
    channel = {"M_AXIS_MM2S": "sendchannel", "S_AXIS_S2MM": "recvchannel"}
    assert {s: (dma, channel[dif]) for s, dma, dif, _ in streams} == design.STREAM_DMA
    assert {s: tif for s, _, _, tif in streams} == {"wgt": "s_axis_wgt", "act": "s_axis_act",
                                                   "res": "m_axis_res"}
    assert v["PART"] == "xc7z020clg400-1" and v["VIVADO_TESTED"] == "2022.1"


def _address_map(text: str) -> dict[str, tuple[str, int, int]]:
    words = text.split()
    return {words[i]: (words[i + 1], int(words[i + 2], 16), int(words[i + 3], 16))
            for i in range(0, len(words), 4)}


def test_config_tcl_matches_the_python_design_of_contract_2():
    """The 2.0 design's names (make CONTRACT=2) equal dtpu.board.design's, and what the issue
    asks of it holds there: one 64-bit HP port covering the PYNQ-Z2's DDR, no DMA, the DTPU and
    the XADC where 1.2 has them."""
    v = _tcl_vars()
    assert v["DTPU_BUSIF_2"].split() == list(design.BUS_INTERFACES_2)
    assert v["DTPU_PARAMS_2"].split() == list(design.TOP_PARAMS_2)
    assert (v["DTPU_MASTER"], v["DTPU_IRQ"]) == (design.M_AXI, design.IRQ_PORT)
    assert (v["INST_INTC"], v["INST_MEM_SC"]) == (design.INTC, design.MEM_SC)
    assert int(v["DEFAULT_CONTRACT"]) == design.DEFAULT_CONTRACT == 2
    assert int(v["M_AXI_ID_WIDTH"]) == design.M_AXI_ID_WIDTH
    assert int(v["M_AXI_MAX_BURST"]) == design.M_AXI_MAX_BURST == 16   # AXI3's longest burst
    words = v["DTPU_TIED_OFF_2"].split()
    tied = {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}
    assert tied == design.TIE_OFF_VALUES
    # every input of the tied-off streams, and nothing else, has a value
    inputs = {f"{b}_{sig}" for b, (_, mode) in design.TIED_OFF_2.items()
              for sig in design.BUS_SIGNALS[b] if (sig == "tready") == (mode == "master")}
    assert set(tied) == inputs
    assert (v["HP_PORT"], v["HP_SEGMENT"]) == (design.HP_PORT, design.HP_SEGMENT)
    assert int(v["HP_DATA_WIDTH"]) == int(v["M_AXI_DATA_WIDTH"]) == design.HP_DATA_WIDTH \
        == design.M_AXI_DATA_WIDTH == 64
    assert tuple(int(w, 16) for w in v["DDR_WINDOW"].split()) == design.DDR_WINDOW == (0, 512 << 20)
    amap = _address_map(v["ADDRESS_MAP_2"])
    assert {n: (b, r) for n, (_, b, r) in amap.items()} == design.ADDRESS_MAP_2
    assert {n: intf for n, (intf, _, _) in amap.items()} == \
        {n: design.SLAVE_INTERFACE[n] for n in design.ADDRESS_MAP_2}
    assert design.ADDRESS_MAP_2[design.DTPU] == design.ADDRESS_MAP[design.DTPU]
    assert design.ADDRESS_MAP_2[design.XADC] == design.ADDRESS_MAP[design.XADC]
    assert not {design.DMA_WGT, design.DMA_ACT} & (set(amap) | set(design.INSTANCES_2))
    assert set(design.INSTANCES_2) == set(design.ADDRESS_MAP_2)
    # and the 1.2 map names the same AXI4-Lite interfaces as the Python side
    assert {n: intf for n, (intf, _, _) in _address_map(v["ADDRESS_MAP"]).items()} == \
        {n: design.SLAVE_INTERFACE[n] for n in design.ADDRESS_MAP}


def test_top_ports_are_written_from_one_list_per_design():
    """Each design's expected RTL ports are generated from its bus interfaces and
    design.BUS_SIGNALS (what package_ip.tcl's DTPU_BUSIF* and the emulated .hwh use too), so
    the IP packager's expectations, the RTL check and the .hwh cannot disagree on a name."""
    assert design.VARIANTS[1].top_ports == design.TOP_PORTS
    assert design.VARIANTS[2].top_ports == design.TOP_PORTS_2
    assert (design.VARIANTS[1].top, design.VARIANTS[2].top) == (design.TOP, design.TOP_2)
    for variant in design.VARIANTS.values():
        interfaces = [b for b in variant.signals if b in variant.bus_interfaces or b in variant.tied_off]
        assert variant.top_ports == design.top_ports(interfaces, variant.signals)
        assert design.variant_of_ports(variant.top_ports) is variant
        assert len(set(variant.top_ports)) == len(variant.top_ports)
        assert not set(variant.bus_interfaces) & set(variant.tied_off)
        for busif in [*variant.bus_interfaces, *variant.tied_off]:
            assert [p for p in variant.top_ports if p.startswith(busif + "_")] == \
                [f"{busif}_{s}" for s in variant.signals[busif]]
            assert sorted(variant.signals[busif]) == sorted(design.BUS_SIGNALS[busif])
    # 2.0: one AXI4 master with burst length, last, IDs and the 64-bit data path, read and write
    m = design.BUS_SIGNALS[design.M_AXI]
    assert {"awlen", "arlen", "wlast", "rlast", "wstrb", "bresp", "rresp", "arid", "rid", "awid",
            "bid"} <= set(m)
    assert design.BUS_INTERFACES_2[design.M_AXI] == ("aximm", "master")
    # its only streams are the tied-off 1.2 ones, which the design does not connect
    assert {p for p in design.TOP_PORTS_2 if "axis" in p} == \
        {f"{b}_{s}" for b in design.TIED_OFF_2 for s in design.BUS_SIGNALS[b]}
    assert set(design.TIED_OFF_2) == set(design.BUS_INTERFACES) - {"s_axil"}
    assert design.VARIANTS[1].tied_off == {}
    mixed = design.TOP_PORTS_2 + ("s_axis_wgt_tdata",)
    with pytest.raises(ValueError, match="match no overlay design"):
        design.variant_of_ports(mixed)
    with pytest.raises(ValueError, match="order differs"):
        design.variant_of_ports(design.TOP_PORTS_2[::-1])


def _defaults() -> tuple[int, int, int]:
    """The default contract as the Makefile, config.tcl and design.py say it."""
    make_default = re.search(r"^CONTRACT \?= (\d+)$", (OVERLAYS / "Makefile").read_text(), re.M)
    assert make_default, "no CONTRACT ?= default in hw/overlays/Makefile"
    return int(make_default.group(1)), int(_tcl_vars()["DEFAULT_CONTRACT"]), design.DEFAULT_CONTRACT


def _default_contract_problem(defaults: tuple[int, int, int], rtl_dir: Path = RTL) -> str | None:
    """Why `defaults` (Makefile, config.tcl, design.py) are not the newest design whose top
    hw/rtl implements (each top recognised by its ports, not its file name); None if they are."""
    implemented = {c: _rtl_contract(rtl_dir / f"{v.top}.v", v.top) for c, v in design.VARIANTS.items()
                   if (rtl_dir / f"{v.top}.v").exists()}
    for c, got in implemented.items():
        if got != c:
            return f"{design.VARIANTS[c].top}.v implements contract {design.VARIANTS[got].version}"
    if not implemented:
        return "no top of any design in hw/rtl"
    newest = max(implemented)
    if defaults != (newest, newest, newest):
        return (f"hw/rtl has the contract {design.VARIANTS[newest].version} top "
                f"{design.VARIANTS[newest].top}.v; the defaults (Makefile, config.tcl, design.py) "
                f"say {defaults}")
    return None


def test_the_default_contract_is_the_one_the_rtl_implements(tmp_path):
    """`make -C hw/overlays` without CONTRACT builds the newest design whose top is in hw/rtl:
    2.0 since issue 15's dtpu_cl_top.v landed (its ports are exactly the 2.0 design's, tied-off
    1.2 streams included), so DEFAULT_CONTRACT (config.tcl, design.py) and the Makefile's
    CONTRACT default say 2. The check is the one that failed while they said 1; it still fails
    for the old defaults, and for a 2.0 top whose ports drift from the 2.0 design."""
    assert RTL_TOP_2.exists() and _rtl_contract(RTL_TOP_2, design.TOP_2) == 2
    assert _default_contract_problem(_defaults()) is None
    assert _defaults() == (2, 2, 2)
    # the previous defaults are refused now, for the reason the test gave while it waited
    assert "the defaults (Makefile, config.tcl, design.py) say (1, 1, 1)" in \
        _default_contract_problem((1, 1, 1))
    # without the 2.0 top (the RTL before issue 15) the 1.2 defaults were the right ones
    (tmp_path / f"{design.TOP}.v").write_text(RTL_TOP.read_text())
    assert _default_contract_problem((1, 1, 1), tmp_path) is None
    assert "say (2, 2, 2)" in _default_contract_problem((2, 2, 2), tmp_path)
    # a 2.0 top with a port more (or less) is no design's top: that fails, never skips
    text = RTL_TOP_2.read_text().replace("    output wire                        irq\n",
                                         "    output wire                        irq,\n"
                                         "    output wire                        irq2\n", 1)
    assert text != RTL_TOP_2.read_text()
    (tmp_path / f"{design.TOP_2}.v").write_text(text)
    with pytest.raises(ValueError, match=r"match no overlay design .*extra \['irq2'\]"):
        _default_contract_problem((2, 2, 2), tmp_path)


def test_xadc_channels_cover_the_sensors_the_sampler_reads():
    channels = set(_tcl_vars()["XADC_CHANNELS"].split())
    need = {"TEMPERATURE"} | {{"vccint": "VCCINT", "vccaux": "VCCAUX", "vccbram": "VBRAM",
                               "vccpint": "VCCPINT", "vccpaux": "VCCPAUX",
                               "vccoddr": "VCCDDRO"}[n] for n in xadc.SUPPLIES}
    assert channels == need


def _rtl_contract(path: Path = RTL_TOP, top: str = design.TOP) -> int:
    """The design (make CONTRACT=) whose top the RTL module `top` in `path` implements, by its
    ports. A top matching neither design fails (variant_of_ports names the differences):
    nothing is skipped."""
    ports, _ = _rtl_ports_and_params(path.read_text(), top)
    variant = design.variant_of_ports(ports)
    log.info("%s implements the contract %s top (CONTRACT=%d)", path.name, variant.version,
             variant.contract)
    return variant.contract


def _param_default(text: str, name: str) -> int:
    m = re.search(rf"\bparameter\s+(?:\[[^\]]*\]\s*)?{name}\s*=\s*(\d+)", text)
    assert m, name
    return int(m.group(1))


@pytest.mark.parametrize("contract", sorted(design.VARIANTS))
def test_rtl_top_has_the_ports_the_ip_packager_needs(contract):
    """Each design's RTL top (2.0: dtpu_cl_top.v, 1.2: dtpu_axi.v, both in hw/rtl) has exactly
    that design's ports (in order) and the parameters the IP exposes; the 2.0 top's master has
    the widths, ID width and burst length the block design is built for."""
    variant = design.VARIANTS[contract]
    path = RTL / f"{variant.top}.v"
    ports, params = _rtl_ports_and_params(path.read_text(), variant.top)
    assert design.variant_of_ports(ports) is variant
    assert ports == list(variant.top_ports), set(ports) ^ set(variant.top_ports)
    assert set(design.TOP_PARAMS) <= set(params)
    if contract == 2:
        assert set(design.TOP_PARAMS_2) <= set(params)
        text = re.sub(r"//[^\n]*|/\*.*?\*/", "", path.read_text(), flags=re.S)
        assert _param_default(text, "ID_W") == design.M_AXI_ID_WIDTH
        assert _param_default(text, "ADDR_W") == design.M_AXI_ADDR_WIDTH
        assert _param_default(text, "MAX_BURST") == design.M_AXI_MAX_BURST
        for sig, width in (("awaddr", "ADDR_W"), ("araddr", "ADDR_W"),
                           ("wdata", design.M_AXI_DATA_WIDTH), ("rdata", design.M_AXI_DATA_WIDTH),
                           ("awlen", 8), ("arlen", 8), ("arid", "ID_W"), ("awid", "ID_W"),
                           ("rid", "ID_W"), ("bid", "ID_W")):
            m = re.search(rf"\[\s*([^\]:]+?)\s*:\s*0\s*\]\s*{design.M_AXI}_{sig}\b", text)
            want = (f"{width}-1",) if isinstance(width, str) else (str(width - 1), f"{width}-1")
            assert m and m.group(1).replace(" ", "") in want, sig
    for busif, (kind, _) in design.BUS_INTERFACES.items():
        need = ("tdata", "tvalid", "tready", "tlast") if kind == "axis" else ("awaddr", "rdata")
        assert all(f"{busif}_{s}" in design.TOP_PORTS for s in need)
    for busif in design.BUS_INTERFACES_2:
        assert all(f"{busif}_{s}" in design.TOP_PORTS_2 for s in ("awaddr", "rdata", "rvalid"))


def test_the_emulated_hwh_is_the_overlay_design(tmp_path):
    """The 1.2 design (CONTRACT=1) in the emulation; the default .hwh is the 2.0 design's."""
    default = parse_hwh(write_hwh(tmp_path / "default.hwh"))
    assert {n: d["type"] for n, d in default.items()} == design.INSTANCES_2
    ips = parse_hwh(write_hwh(tmp_path / "d.hwh", contract=1))
    assert {n: (d["phys_addr"], d["addr_range"]) for n, d in ips.items()} == design.ADDRESS_MAP
    assert {n: d["type"] for n, d in ips.items()} == design.INSTANCES
    assert ips[design.DMA_WGT]["parameters"]["c_include_s2mm"] == "0"
    assert ips[design.DMA_ACT]["parameters"]["c_sg_length_width"] == str(design.DMA_LENGTH_WIDTH)


def _modules(path: Path) -> dict[str, ET.Element]:
    return {m.get("INSTANCE"): m for m in ET.parse(path).getroot().iter("MODULE")}


def _peers(module: ET.Element, port: str) -> list[tuple[str, str]]:
    """(instance, port) at the far ends of `port`'s connections in a .hwh MODULE."""
    el = [p for p in module.iter("PORT") if p.get("NAME") == port]
    assert el, f"no port {port} on {module.get('INSTANCE')}"
    return [(c.get("INSTANCE"), c.get("PORT")) for c in el[0].iter("CONNECTION")]


@pytest.mark.parametrize("build", sorted(design.BOARD_BUILDS))
def test_the_emulated_hwh_carries_the_board_builds_parameters(tmp_path, build):
    """Each board build (make OVERLAY=) is what the emulated .hwh declares: its PREC_EN and
    RQ_EN and, on the 2.0 top, its VEC_EN and VEC_RQ_LANES (the IP parameters the board
    transport reads to declare the vector unit and its lanes); the 1.2 top has neither vector
    parameter. The emulated core built from that .hwh is the build's HwConfig (the golden
    model's cycles = that RTL's), and so is what the driver lowers for. The default build is
    int8/uint8 with the unit (whole models in one kick; it fits the xc7z020 since fit8c)."""
    from dtpu.board.emulate.board import config_from_params

    b = design.BOARD_BUILDS[build]
    built = design.build_params(build=build)
    params = parse_hwh(write_hwh(tmp_path / "d.hwh", build=build))[design.DTPU]["parameters"]
    for key in ("PREC_EN", "VEC_EN", "VEC_RQ_LANES", "RQ_EN"):
        assert params[key] == built[key], key
    assert (built["VEC_EN"], built["VEC_RQ_LANES"], built["RQ_EN"]) == \
        (str(b.vec_en), str(b.vec_rq_lanes), str(b.rq_en))
    assert design.vector_unit_of(params) == bool(b.vec_en)
    assert design.vec_rq_lanes_of(params) == b.vec_rq_lanes
    cfg, want = config_from_params(params), design.board_config(build)
    assert (cfg.ENABLED, cfg.VEC_RQ_LANES, cfg.RQ_EN) == (want.ENABLED, b.vec_rq_lanes, b.rq_en)
    p1 = parse_hwh(write_hwh(tmp_path / "d1.hwh", contract=1, build=build))[design.DTPU]["parameters"]
    assert "VEC_EN" not in p1 and "VEC_RQ_LANES" not in p1 and p1["RQ_EN"] == built["RQ_EN"]
    default = design.BOARD_BUILDS[design.DEFAULT_BOARD_BUILD]
    assert (default.precisions, default.vec_en) == (("int8", "uint8"), 1)
    assert design.board_build() is default and design.board_config().ENABLED == \
        design.board_config("int8").ENABLED
    assert default.bitstream == design.BITSTREAM_NAME      # the default build is dtpu_pynqz2.bit
    with pytest.raises(ValueError, match=r"board build 'fp32' unknown; accepted: int8 \(int8/uint8 "
                                         r"lanes and the vector unit \(the default.*int16 \(int8/uint8/int16 "
                                         r"lanes, no vector unit"):
        design.board_build("fp32")
    with pytest.raises(ValueError, match=r"VEC_EN='yes'; accepted: 0 or 1"):
        design.vector_unit_of({"VEC_EN": "yes"})
    assert not design.vector_unit_of({})     # a .hwh from before VEC_EN: no unit
    with pytest.raises(ValueError, match=r"VEC_RQ_LANES='3'; accepted: 8, 4, 2 or 1"):
        design.vec_rq_lanes_of({"VEC_RQ_LANES": "3"})
    assert design.vec_rq_lanes_of({}) == 8   # a .hwh from before VEC_RQ_LANES: the top's default


def test_the_int8_board_build_is_the_lean_one():
    """The int8 board build (make OVERLAY=int8, bitstream=int8) passes the knobs that shrink it
    toward the xc7z020 (docs/architecture.md, "Area budget of the board builds"): one
    requantizing lane in the vector unit and only the requantization variants the int8 board's
    two runtimes use (RQ_EN 25); its golden model is that build."""
    params = design.build_params(build="int8")
    assert (params["PREC_EN"], params["VEC_EN"], params["VEC_RQ_LANES"], params["RQ_EN"]) == \
        ("0x0003", "1", "1", "25")
    cfg = design.board_config("int8")
    assert (cfg.VEC_RQ_LANES, cfg.RQ_EN) == (1, 25)
    assert design.build_params(cfg) == design.build_params(build="int8")   # cfg and the default build's VEC_EN
    assert design.build_params(design.board_config("int16"), build="int16") == \
        design.build_params(build="int16")
    assert design.build_params(build="int16") == design.build_params(build="int8") | {
        "PREC_EN": "0x0007", "VEC_EN": "0", "VEC_RQ_LANES": "8", "RQ_EN": "31"}


def test_the_emulated_hwh_of_contract_2_is_the_2_0_design(tmp_path):
    """write_hwh(contract=2) describes what build.tcl CONTRACT=2 builds: DTPU, XADC and the AXI
    INTC on GP0 (no DMA), the DTPU's m_axi through the SmartConnect into S_AXI_HP0 with all of
    DDR as its window, its irq through the INTC to IRQ_F2P, and the DTPU's ports those of
    design.TOP_PORTS_2."""
    path = write_hwh(tmp_path / "d2.hwh", contract=2)
    ips = parse_hwh(path)
    assert {n: (d["phys_addr"], d["addr_range"]) for n, d in ips.items()} == design.ADDRESS_MAP_2
    assert {n: d["type"] for n, d in ips.items()} == design.INSTANCES_2
    assert memory_windows(path) == {design.DTPU: [{
        "master": design.M_AXI, "target": design.PS7, "slave": design.HP_PORT,
        "segment": design.HP_SEGMENT, "base": design.DDR_WINDOW[0], "range": design.DDR_WINDOW[1]}]}
    mods = _modules(path)
    assert not [m for m in mods.values() if m.get("VLNV") == design.VLNV["dma"]]
    ps_params = {p.get("NAME"): p.get("VALUE") for p in mods[design.PS7].iter("PARAMETER")}
    assert (ps_params["PCW_USE_S_AXI_HP0"], ps_params["PCW_S_AXI_HP0_DATA_WIDTH"]) == \
        ("1", str(design.HP_DATA_WIDTH))
    assert (ps_params["PCW_USE_FABRIC_INTERRUPT"], ps_params["PCW_IRQ_F2P_INTR"]) == ("1", "1")
    dtpu = mods[design.DTPU]
    assert dtpu.get("MODTYPE") == design.TOP_2
    assert {p.get("NAME") for p in dtpu.iter("PORT")} == set(design.TOP_PORTS_2)
    # the tied-off 1.2 streams: on the IP, connected to nothing
    for busif in design.TIED_OFF_2:
        for sig in design.BUS_SIGNALS[busif]:
            assert _peers(dtpu, f"{busif}_{sig}") == []
    assert mods[design.MEM_SC].get("VLNV") == design.VLNV["smartconnect"]
    for sig in design.BUS_SIGNALS[design.M_AXI]:
        assert _peers(dtpu, f"{design.M_AXI}_{sig}") == [(design.MEM_SC, f"S00_AXI_{sig}")]
        assert _peers(mods[design.MEM_SC], f"M00_AXI_{sig}") == [(design.PS7, f"{design.HP_PORT}_{sig}")]
    widths = {p.get("NAME"): int(p.get("LEFT", 0)) + 1 for p in dtpu.iter("PORT")}
    assert widths["m_axi_wdata"] == widths["m_axi_rdata"] == design.M_AXI_DATA_WIDTH
    assert widths["m_axi_awaddr"] == widths["m_axi_araddr"] == design.M_AXI_ADDR_WIDTH
    assert _peers(dtpu, design.IRQ_PORT) == [(design.INTC, "intr")]
    assert _peers(mods[design.INTC], "irq") == [(design.PS7, "IRQ_F2P")]
    # the 1.2 design has none of it (and its DTPU ports are the 1.2 list)
    path1 = write_hwh(tmp_path / "d1.hwh", contract=1)
    mods1 = _modules(path1)
    assert mods1[design.DTPU].get("MODTYPE") == design.TOP
    assert memory_windows(path1) == {} and design.INTC not in mods1 and design.MEM_SC not in mods1
    assert {p.get("NAME") for p in mods1[design.DTPU].iter("PORT")} == set(design.TOP_PORTS)
    assert _peers(mods1[design.DTPU], design.IRQ_PORT) == []
    with pytest.raises(ValueError, match="always wires"):
        write_hwh(tmp_path / "x.hwh", contract=2, interrupts=False)
    with pytest.raises(ValueError, match="CONTRACT"):
        write_hwh(tmp_path / "x.hwh", contract=3)


def test_pynq_parses_the_contract_2_design_and_binds_the_dtpu_with_its_interrupt(tmp_path):
    """The real pynq 4.0 on the emulated board: the 2.0 .hwh gives overlay.dtpu (the DTPU
    driver, by VLNV) whose irq is a pynq.Interrupt behind the AXI INTC on IRQ_F2P[0], the XADC,
    and no DMA."""
    pytest.importorskip("pynq", reason="the board emulation runs the pynq package (pip install pynq)")
    import pynq

    from dtpu.board import emulate, ip, load_overlay

    saved = os.environ.get("DTPU_BITSTREAM")
    emulate.install(tmp_path / "default")
    try:
        overlay = load_overlay(emulate.write_design(tmp_path / "c2", contract=2))
        dtpu_ip, xadc_ip = ip.drivers()
        pl = {n for n, d in overlay.ip_dict.items() if not d["type"].startswith(design.VLNV["ps7"])}
        assert pl == set(design.ADDRESS_MAP_2)
        assert {n: overlay.ip_dict[n]["phys_addr"] for n in pl} == \
            {n: b for n, (b, _) in design.ADDRESS_MAP_2.items()}
        assert isinstance(overlay.dtpu, dtpu_ip) and isinstance(overlay.xadc, xadc_ip)
        assert isinstance(overlay.dtpu.irq, pynq.Interrupt)
        assert overlay.ip_dict[design.DTPU]["interrupts"][design.IRQ_PORT] == {
            "controller": design.INTC, "index": design.IRQ_F2P_INDEX,
            "fullpath": f"{design.DTPU}/{design.IRQ_PORT}"}
        assert overlay.interrupt_controllers == {
            design.INTC: {"parent": "", "index": 0, "raw_irq": design.IRQ_F2P_GIC_ID}}
        assert not [d for d in overlay.ip_dict.values() if d["type"] == design.VLNV["dma"]]
        assert not hasattr(overlay, design.DMA_WGT) and not hasattr(overlay, design.DMA_ACT)
    finally:
        emulate.uninstall()
        if saved is None:
            os.environ.pop("DTPU_BITSTREAM", None)
        else:
            os.environ["DTPU_BITSTREAM"] = saved


def test_nothing_built_is_shipped():
    tracked = subprocess.run(["git", "ls-files", "hw/overlays"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert not [f for f in tracked if f.endswith((".bit", ".hwh", ".xpr", ".dcp"))]
    assert not [p for p in OVERLAYS.glob("*") if p.suffix in (".bit", ".hwh")]


def test_make_without_vivado_says_what_is_missing():
    env = dict(os.environ, PATH="/usr/bin:/bin")
    proc = subprocess.run(["make", "-C", str(OVERLAYS), "VIVADO=vivado-not-installed"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "'vivado-not-installed' is not on PATH" in proc.stderr and "2022.1" in proc.stderr
    assert not (OVERLAYS / "build").exists()
    proc = subprocess.run(["make", "-C", str(OVERLAYS), "CONTRACT=2", "VIVADO=vivado-not-installed"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "'vivado-not-installed' is not on PATH" in proc.stderr
    assert not (OVERLAYS / "build").exists()
    proc = subprocess.run(["make", "-C", str(OVERLAYS), "CONTRACT=3", "VIVADO=vivado-not-installed"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "CONTRACT must be 2 (contract 2.0, the default) or 1" in proc.stderr
    assert not (OVERLAYS / "build").exists()
    proc = subprocess.run(["make", "-C", str(OVERLAYS), "OVERLAY=fp32", "VIVADO=vivado-not-installed"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "OVERLAY must be int8 (int8/uint8 and the vector unit, the " \
        "default) or int16 (int8/uint8/int16, no vector unit), not 'fp32'" in proc.stderr
    assert not (OVERLAYS / "build").exists()


def test_make_passes_the_contract_to_both_scripts():
    """`make CONTRACT=1` hands 1 to package_ip.tcl and build.tcl and builds into
    build/contract1 (a 1.2 build is not taken for a 2.0 one); the default is 2, into build/.
    The default OVERLAY, int8, builds the int8 board build (PREC_EN 0x0003, VEC_EN 1,
    VEC_RQ_LANES 1, RQ_EN 25) into build/; `make OVERLAY=int16` the int16 one (PREC_EN 0x0007,
    no vector unit, all five requantization variants) into build/int16; CONTRACT=1 has VEC_EN 0."""
    for args, contract, build, prec_vec in (
            ([], "2", "build", "0x0003 1 1 25"), (["CONTRACT=2"], "2", "build", "0x0003 1 1 25"),
            (["CONTRACT=1"], "1", "build/contract1", "0x0003 0 1 25"),
            (["OVERLAY=int8"], "2", "build", "0x0003 1 1 25"),
            (["OVERLAY=int16"], "2", "build/int16", "0x0007 0 8 31")):
        proc = subprocess.run(["make", "-n", "-C", str(OVERLAYS), "VIVADO=true",
                               f"PYTHON={sys.executable}", *args],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert re.search(rf"package_ip\.tcl -tclargs \S+/hw/rtl \S+/hw/overlays/{build}/ip {contract}$", out, re.M), out
        assert re.search(rf"build\.tcl -tclargs \S+/hw/overlays/{build}/ip \S+/hw/overlays/{build} 4 "
                         rf"(\S+ ){{5}}{prec_vec} {contract}$", out, re.M), out
    # install: each build under its own name on the board (the delegate's bitstream=int16)
    for overlay, build in (("int8", "build"), ("int16", "build/int16")):
        proc = subprocess.run(["make", "-n", "-C", str(OVERLAYS), "VIVADO=true", "install", "BOARD=x@y",
                               f"PYTHON={sys.executable}", f"OVERLAY={overlay}"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        name = design.BOARD_BUILDS[overlay].bitstream
        for ext in ("bit", "hwh"):
            assert re.search(rf"^scp \S+/hw/overlays/{build}/{design.BITSTREAM_NAME}\.{ext} "
                             rf"x@y:{design.BOARD_OVERLAY_DIR}/{name}\.{ext}$", proc.stdout, re.M), proc.stdout


# ------------------------------------------------------------ the scripts, run against stubs

_STUBS = r"""
set ::calls {}
proc log {args} { lappend ::calls $args }
proc unknown {args} { log {*}$args; return "" }
proc version {args} { return $::stub_version }
proc get_board_parts {args} { return $::stub_board_parts }
proc create_bd_cell {args} { log create_bd_cell {*}$args; return [lindex $args end] }
proc get_bd_intf_pins {args} { return [lindex $args end] }
proc get_bd_pins {args} {
    if {[lindex $args 0] eq "-of_objects"} { return "pins_of([lindex $args 1]|[lindex $args 3])" }
    return [lindex $args end]
}
proc get_bd_cells {args} { return [lindex $args end] }
proc get_bd_addr_spaces {args} { return "space([lindex $args end])" }
proc get_bd_addr_segs {args} { return "segs_of([lindex $args end])" }
proc get_files {args} { return [lindex $args end] }
proc make_wrapper {args} { return wrapper.v }
proc get_runs {args} { return [lindex $args end] }
proc get_property {name obj} {
    switch $name {
        PROGRESS { return 100% } DIRECTORY { return /runs/$obj } INTERFACE_MODE { return $::stub_mode }
        default { return "" }
    }
}
namespace eval ipx {}
proc ipx::current_core {} { return core }
proc ipx::get_bus_interfaces {name args} {
    if {$name in $::stub_missing} { return "" }
    return $name
}
proc ipx::get_bus_parameters {name args} { return $name }
proc ipx::get_user_parameters {name args} { return $name }
proc ipx::get_ports {name args} {
    if {$name in $::stub_missing} { return "" }
    return port_$name
}
proc ipx::get_address_spaces {args} { return "" }
proc ipx::add_address_space {name args} { log ipx::add_address_space $name {*}$args; return space_$name }
proc ipx::add_bus_parameter {name args} { log ipx::add_bus_parameter $name {*}$args; return $name }
rename file _file
proc file {cmd args} {
    if {$cmd in {copy delete mkdir}} { log file $cmd {*}$args; return }
    return [_file $cmd {*}$args]
}
"""


def _run_tcl(script: str, args: list[str], version="2022.1", board_parts=None, missing=(),
             mode="master"):
    board_parts = board_parts if board_parts is not None else _tcl_vars()["BOARD_PART"]
    prelude = _STUBS + (f"set ::stub_version {version}\nset ::stub_mode {mode}\n"
                        f"set ::stub_board_parts {{{board_parts}}}\nset ::stub_missing {{{' '.join(missing)}}}\n"
                        f"set argv {{{' '.join(args)}}}\nset argc {len(args)}\n")
    runner = prelude + (f"if {{[catch {{source {OVERLAYS / script}}} err]}} {{ puts \"ERROR: $err\" }}\n"
                        "foreach c $::calls { puts \"CALL [list {*}$c]\" }\n")
    proc = subprocess.run([TCLSH], input=runner, capture_output=True, text=True, timeout=60)
    calls = []
    for line in proc.stdout.splitlines():
        if line.startswith("CALL "):
            calls.append(line[5:])
    errors = [line[7:] for line in proc.stdout.splitlines() if line.startswith("ERROR: ")]
    return calls, errors, proc.stdout + proc.stderr


needs_tclsh = pytest.mark.skipif(TCLSH is None, reason="tclsh not installed")
#: the default int8 board build's arguments (the one with the vector unit, VEC_EN=1: the
#: script's wider case; the int16 build passes VEC_EN=0)
BUILD_ARGS = ["/ip", "/out", "4", *design.build_params(build="int8").values()]
assert design.build_params()["VEC_EN"] == "1"
#: the 1.2 design's: the default build's with VEC_EN=0, as the Makefile passes them for
#: CONTRACT=1 (the 1.2 top has no vector unit)
BUILD_ARGS_1 = ["/ip", "/out", "4", *(design.build_params() | {"VEC_EN": "0"}).values()]


def _dtpu_config(params: dict[str, str]) -> str:
    """The first set_property -dict of the DTPU cell: every parameter but VEC_EN and
    VEC_RQ_LANES, which only the 2.0 design sets (its own set_property)."""
    return (r"set_property -dict \{" + " ".join(f"CONFIG.{k} {v}" for k, v in params.items()
                                                if k not in ("VEC_EN", "VEC_RQ_LANES"))
            + r"\} dtpu")


@needs_tclsh
def test_build_tcl_connects_the_design_the_driver_expects():
    """build.tcl CONTRACT=1: the 1.2 design (dtpu_axi's streams on two AXI DMAs)."""
    calls, errors, out = _run_tcl("build.tcl", BUILD_ARGS_1 + ["1"])
    assert not errors and "building the contract 1.2 design" in out, out
    text = "\n".join(calls)
    # the DTPU with the contract's parameters, and its three streams on the right DMAs
    assert f"create_bd_cell -type ip -vlnv {design.DTPU_VLNV} {design.DTPU}" in text
    params = design.build_params()
    assert re.search(_dtpu_config(params), text), text
    assert "VEC_EN" not in text and "VEC_RQ_LANES" not in text
    for stream, (dma, attr) in design.STREAM_DMA.items():
        dma_if = "M_AXIS_MM2S" if attr == "sendchannel" else "S_AXIS_S2MM"
        dtpu_if = f"m_axis_{stream}" if stream == "res" else f"s_axis_{stream}"
        assert f"connect_bd_intf_net {dma}/{dma_if} {design.DTPU}/{dtpu_if}" in text
    # control path: one interconnect master per AXI4-Lite slave, at the fixed addresses
    assert "set_property CONFIG.NUM_MI 4 ctrl_ic" in text
    for inst, (base, size) in design.ADDRESS_MAP.items():
        assert re.search(rf"connect_bd_intf_net ctrl_ic/M0\d_AXI {inst}/\w+", text)
        assert re.search(rf"assign_bd_address -offset 0x{base:08X} -range 0x{size:X} "
                         rf"-target_address_space space\({design.PS7}/Data\) segs_of\({inst}/\w+\)",
                         text, re.I), inst
    # data path: all three DMA masters into HP0
    for master in ("dma_wgt/M_AXI_MM2S", "dma_act/M_AXI_MM2S", "dma_act/M_AXI_S2MM"):
        assert re.search(rf"connect_bd_intf_net {master} mem_sc/S0\d_AXI", text)
    assert f"connect_bd_intf_net mem_sc/M00_AXI {design.PS7}/S_AXI_HP0" in text
    # DMAs in simple mode with the long length register; the weight DMA without S2MM
    dma_cfg = [c for c in calls if c.startswith("set_property -dict") and c.endswith(("dma_wgt", "dma_act"))]
    assert len(dma_cfg) == 2 and all(f"CONFIG.c_sg_length_width {design.DMA_LENGTH_WIDTH}" in c
                                     and "CONFIG.c_include_sg 0" in c for c in dma_cfg)
    assert "CONFIG.c_include_s2mm 0" in dma_cfg[0] and "CONFIG.c_include_s2mm 1" in dma_cfg[1]
    # XADC on AXI4-Lite with the PS supplies enabled
    assert re.search(r"CONFIG.INTERFACE_SELECTION Enable_AXI .*CONFIG.CHANNEL_ENABLE_VCCDDRO true\} xadc",
                     text)
    # clocks and resets of every PL cell, and the two outputs under the names PYNQ looks for
    assert re.search(r"connect_bd_net .*FCLK_CLK0 .*pins_of\(dtpu dma_wgt dma_act xadc ctrl_ic mem_sc\|"
                     r"TYPE == clk && DIR == I\)", text)
    assert f"file copy -force /runs/impl_1/{design.BITSTREAM_NAME}_wrapper.bit /out/{design.BITSTREAM_NAME}.bit" in text
    assert f"file copy -force {design.BITSTREAM_NAME}.hwh /out/{design.BITSTREAM_NAME}.hwh" in text
    assert "report_power" in text


@needs_tclsh
def test_build_tcl_refuses_without_board_files_and_warns_on_other_versions():
    _, errors, _ = _run_tcl("build.tcl", BUILD_ARGS, board_parts="")
    assert errors and "board part tul.com.tw:pynq-z2:part0:1.0 is not installed" in errors[0]
    calls, errors, out = _run_tcl("build.tcl", BUILD_ARGS, version="2023.2")
    assert not errors and "WARNING: written for Vivado 2022.1, running 2023.2" in out
    _, errors, _ = _run_tcl("build.tcl", ["/ip"])
    assert errors and errors[0].startswith("usage:")
    # the vector unit's lanes and the variant mask: a bad value named, before any design is made
    lanes, rq = BUILD_ARGS.index("1", 10), len(BUILD_ARGS) - 1
    assert (lanes, BUILD_ARGS[rq]) == (rq - 1, "25")
    for at, bad, msg in ((lanes, "3", "VEC_RQ_LANES must be 8, 4, 2 or 1"), (rq, "0", "RQ_EN must be"),
                         (rq, "32", "RQ_EN must be")):
        args = list(BUILD_ARGS)
        args[at] = bad
        calls, errors, _ = _run_tcl("build.tcl", args)
        assert errors and msg in errors[0] and f"not '{bad}'" in errors[0], errors
        assert not any(c.startswith("create_bd_design") for c in calls)


@needs_tclsh
@pytest.mark.parametrize("contract", sorted(design.VARIANTS))
def test_package_ip_tcl_packages_the_rtl_top(tmp_path, contract):
    """package_ip.tcl on hw/rtl for each design: its top (2.0: dtpu_cl_top, 1.2: dtpu_axi) under
    the one VLNV; without an argument the default design, 2.0."""
    rtl = RTL
    variant = design.VARIANTS[contract]
    busifs = list(variant.bus_interfaces)
    calls, errors, out = _run_tcl("package_ip.tcl", [str(rtl), "/ip", str(contract)])
    assert not errors, out
    if contract == design.DEFAULT_CONTRACT:
        assert calls == _run_tcl("package_ip.tcl", [str(rtl), "/ip"])[0]
    text = "\n".join(calls)
    vendor, library, name, version = design.DTPU_VLNV.split(":")
    assert f"ipx::package_project -root_dir /ip -vendor {vendor} -library {library}" in text
    assert f"set_property name {name} core" in text and f"set_property version {version} core" in text
    assert f"set_property top {variant.top} {{}}" in text, text
    assert f"({variant.top})" in text
    for busif in design.BUS_INTERFACES:
        if contract == 1:
            assert f"ipx::associate_bus_interfaces -busif {busif} -clock {design.CLOCK_PORT} core" in text
    assert re.findall(r"ipx::associate_bus_interfaces -busif (\w+) -clock", text) == busifs
    assert "set_property value ACTIVE_LOW POLARITY" in text
    assert "ipx::save_core core" in text
    # an IP whose interfaces were not inferred is not saved
    for missing in (["s_axis_act"] if contract == 1 else []) + [busifs[-1]]:
        calls, errors, _ = _run_tcl("package_ip.tcl", [str(rtl), "/ip", str(contract)], missing=[missing])
        assert errors and f"did not infer bus interface {missing}" in errors[0]
        assert not any(c.startswith("ipx::save_core") for c in calls)
    _, errors, _ = _run_tcl("package_ip.tcl", [str(tmp_path / "empty"), "/ip", str(contract)])
    assert errors and f"no {variant.top}.v" in errors[0]
    # a tree with only the 1.2 top cannot be packaged as the 2.0 design (and vice versa)
    (tmp_path / f"{design.VARIANTS[3 - contract].top}.v").write_text("module x; endmodule\n")
    _, errors, _ = _run_tcl("package_ip.tcl", [str(tmp_path), "/ip", str(contract)])
    assert errors and f"no {variant.top}.v" in errors[0]


@needs_tclsh
def test_build_tcl_contract_2_puts_the_dtpu_master_on_hp0_and_its_irq_on_the_ps():
    """build.tcl CONTRACT=2: HP0 enabled at 64 bits, the DTPU's m_axi -> SmartConnect -> HP0,
    irq -> AXI INTC -> IRQ_F2P with the PS's fabric interrupts on, no DMA cell, the GP0 map of
    design.ADDRESS_MAP_2 and the DTPU's DDR window over all 512 MiB."""
    calls, errors, out = _run_tcl("build.tcl", BUILD_ARGS + ["2"])
    assert not errors, out
    text = "\n".join(calls)
    assert "building the contract 2.0 design" in out
    # cells: the DTPU with the contract's parameters, the INTC, no DMA
    assert f"create_bd_cell -type ip -vlnv {design.DTPU_VLNV} {design.DTPU}" in text
    params = design.build_params(build="int8")
    assert re.search(_dtpu_config(params), text), text
    # the int8 board build's vector unit (OVERLAY=int8) with its one requantizing lane
    assert params["VEC_EN"] == "1" and params["PREC_EN"] == "0x0003" and params["RQ_EN"] == "25"
    assert re.search(r"^set_property -dict \{CONFIG.VEC_EN 1 CONFIG.VEC_RQ_LANES 1\} dtpu$", text,
                     re.M), text
    assert not [c for c in calls if "axi_dma" in c or design.DMA_WGT in c or design.DMA_ACT in c]
    assert f"create_bd_cell -type ip -vlnv {design.VLNV['intc']} {design.INTC}" in text
    assert re.search(rf"set_property -dict \{{CONFIG.C_IRQ_CONNECTION 1 CONFIG.C_IRQ_IS_LEVEL 1\}} "
                     rf"{design.INTC}$", text, re.M)
    # the PS: GP0, HP0 at 64 bits, fabric interrupts on IRQ_F2P
    ps_cfg = [c for c in calls if c.startswith("set_property -dict") and c.endswith(design.PS7)]
    assert len(ps_cfg) == 1
    for key, value in (("PCW_USE_M_AXI_GP0", 1), ("PCW_USE_S_AXI_HP0", 1),
                       ("PCW_S_AXI_HP0_DATA_WIDTH", design.HP_DATA_WIDTH),
                       ("PCW_USE_FABRIC_INTERRUPT", 1), ("PCW_IRQ_F2P_INTR", 1),
                       ("PCW_FPGA0_PERIPHERAL_FREQMHZ", design.FCLK_MHZ)):
        assert f"CONFIG.{key} {value}" in ps_cfg[0], key
    # data path: the DTPU's master alone into HP0 through the SmartConnect
    assert f"create_bd_cell -type ip -vlnv {design.VLNV['smartconnect']} {design.MEM_SC}" in text
    assert f"set_property -dict {{CONFIG.NUM_SI 1 CONFIG.NUM_MI 1}} {design.MEM_SC}" in text
    assert f"connect_bd_intf_net {design.DTPU}/{design.M_AXI} {design.MEM_SC}/S00_AXI" in text
    assert f"connect_bd_intf_net {design.MEM_SC}/M00_AXI {design.PS7}/{design.HP_PORT}" in text
    assert len([c for c in calls if c.startswith("connect_bd_intf_net") and design.HP_PORT in c]) == 1
    assert not re.search(r"axis", text)
    # completion: irq -> INTC -> IRQ_F2P
    assert f"connect_bd_net {design.DTPU}/{design.IRQ_PORT} {design.INTC}/intr" in text
    assert f"connect_bd_net {design.INTC}/irq {design.PS7}/IRQ_F2P" in text
    # control path and addresses
    assert f"set_property CONFIG.NUM_MI {len(design.ADDRESS_MAP_2)} ctrl_ic" in text
    for inst, (base, size) in design.ADDRESS_MAP_2.items():
        intf = design.SLAVE_INTERFACE[inst]
        assert re.search(rf"connect_bd_intf_net ctrl_ic/M0\d_AXI {inst}/{intf}$", text, re.M), inst
        assert re.search(rf"assign_bd_address -offset 0x{base:08X} -range 0x{size:X} "
                         rf"-target_address_space space\({design.PS7}/Data\) segs_of\({inst}/{intf}\)",
                         text, re.I), inst
    base, size = design.DDR_WINDOW
    hp = [c for c in calls if c.startswith("assign_bd_address") and design.HP_SEGMENT in c]
    assert len(hp) == 1
    m = re.fullmatch(r"assign_bd_address -offset (\S+) -range (\S+) -target_address_space "
                     rf"space\({design.DTPU}/{design.M_AXI}\) "
                     rf"segs_of\({design.PS7}/{design.HP_PORT}/{design.HP_SEGMENT}\)", hp[0])
    assert m and (int(m.group(1), 16), int(m.group(2), 16)) == (base, size) == (0, 512 << 20), hp
    # one clock and one reset for every PL cell, HP0's clock included
    cells = f"{design.DTPU} {design.XADC} {design.INTC} ctrl_ic {design.MEM_SC}"
    assert re.search(rf"connect_bd_net .*FCLK_CLK0 .*{design.HP_PORT}_ACLK .*pins_of\({cells}\|"
                     r"TYPE == clk && DIR == I\)", text)
    assert re.search(rf"connect_bd_net rst_fclk0/peripheral_aresetn \{{?pins_of\({cells}\|"
                     r"TYPE == rst && DIR == I\)", text)
    # outputs under the same names as 1.2 (the driver tells the two apart by VERSION)
    assert f"file copy -force /runs/impl_1/{design.BITSTREAM_NAME}_wrapper.bit /out/{design.BITSTREAM_NAME}.bit" in text
    assert f"file copy -force {design.BITSTREAM_NAME}.hwh /out/{design.BITSTREAM_NAME}.hwh" in text


@needs_tclsh
def test_build_tcl_default_is_the_2_0_design_and_refuses_other_contracts():
    calls, errors, out = _run_tcl("build.tcl", BUILD_ARGS)
    assert not errors and "building the contract 2.0 design" in out
    calls2, errors, _ = _run_tcl("build.tcl", BUILD_ARGS + ["2"])
    assert not errors and calls2 == calls
    # the 1.2 design stays buildable (CONTRACT=1) and has none of 2.0's interrupt path
    calls1, errors, out = _run_tcl("build.tcl", BUILD_ARGS_1 + ["1"])
    assert not errors and "building the contract 1.2 design" in out
    text = "\n".join(calls1)
    assert "IRQ_F2P" not in text and design.INTC not in text and "PCW_USE_FABRIC_INTERRUPT" not in text
    _, errors, _ = _run_tcl("build.tcl", BUILD_ARGS + ["3"])
    assert errors and "CONTRACT must be 1 (contract 1.2) or 2 (contract 2.0), not '3'" in errors[0]
    # the 1.2 top has no vector unit: VEC_EN=1 there is refused, not silently dropped
    _, errors, _ = _run_tcl("build.tcl", BUILD_ARGS + ["1"])
    assert errors and "VEC_EN=1 with CONTRACT=1: the 1.2 top dtpu_axi has no vector unit" in errors[0]
    # the parameter lists of earlier builds are refused, not built with a shifted meaning:
    # without VEC_EN, VEC_RQ_LANES and RQ_EN (before the vector unit), and without the last two
    for old in (BUILD_ARGS[:-3], BUILD_ARGS[:-2]):
        for tail in ([], ["2"]):
            _, errors, _ = _run_tcl("build.tcl", old + tail)
            assert errors and errors[0].startswith("usage:"), (old + tail, errors)


@needs_tclsh
def test_package_ip_tcl_contract_2_packages_the_master_and_the_interrupt(tmp_path):
    """package_ip.tcl CONTRACT=2 requires exactly DTPU_BUSIF_2 (s_axil, m_axi), gives the master
    an address space, makes irq a level-high interrupt, and saves nothing when m_axi is missing
    or was inferred as a slave. It runs on whichever RTL is there (the stubs do not read it)."""
    rtl = RTL
    calls, errors, out = _run_tcl("package_ip.tcl", [str(rtl), "/ip", "2"])
    assert not errors, out
    text = "\n".join(calls)
    # the tied-off 1.2 streams: each input gets its constant, before the IP is saved
    for port, value in design.TIE_OFF_VALUES.items():
        assert f"set_property driver_value {value} port_{port}" in text, port
    assert text.index("driver_value") < text.index("ipx::save_core")
    associated = re.findall(rf"ipx::associate_bus_interfaces -busif (\w+) -clock {design.CLOCK_PORT} core",
                            text)
    assert associated == list(design.BUS_INTERFACES_2)
    assert f"ipx::add_address_space {design.M_AXI} core" in text
    assert f"set_property range 4G space_{design.M_AXI}" in text
    assert f"set_property width {design.M_AXI_DATA_WIDTH} space_{design.M_AXI}" in text
    assert f"set_property master_address_space_ref {design.M_AXI} {design.M_AXI}" in text
    assert f"set_property value LEVEL_HIGH SENSITIVITY" in text
    assert "set_property value ACTIVE_LOW POLARITY" in text and "ipx::save_core core" in text
    for missing, mode, message in ((design.M_AXI, "master", f"did not infer bus interface {design.M_AXI}"),
                                   (None, "slave", f"{design.M_AXI} of {design.TOP_2} was not inferred as a master"),
                                   (design.IRQ_PORT, "master", f"no interrupt interface on port {design.IRQ_PORT}"),
                                   ("m_axis_res_tready", "master", f"no port m_axis_res_tready on {design.TOP_2}")):
        calls, errors, _ = _run_tcl("package_ip.tcl", [str(rtl), "/ip", "2"],
                                    missing=[missing] if missing else [], mode=mode)
        assert errors and message in errors[0], (missing, mode, errors)
        assert not any(c.startswith("ipx::save_core") for c in calls)
    # the 1.2 packaging is unchanged by all this: its four interfaces, no master, no interrupt
    calls, errors, _ = _run_tcl("package_ip.tcl", [str(rtl), "/ip", "1"])
    text = "\n".join(calls)
    assert not errors and re.findall(r"ipx::associate_bus_interfaces -busif (\w+) -clock", text) == \
        list(design.BUS_INTERFACES)
    assert "add_address_space" not in text and "SENSITIVITY" not in text and "driver_value" not in text
    assert f"set_property top {design.TOP} {{}}" in text
    _, errors, _ = _run_tcl("package_ip.tcl", [str(rtl), "/ip", "3"])
    assert errors and "CONTRACT must be 1" in errors[0]
