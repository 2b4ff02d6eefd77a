"""hw/overlays: the Vivado flow for the PYNQ-Z2, checked without Vivado.

Vivado is not installed here, so nothing is built (and no .bit/.hwh is shipped). Instead:
the names in hw/overlays/config.tcl equal those the Python side uses (dtpu.board.design) and the
ports of the RTL top (hw/rtl/dtpu_axi.v); and both TCL scripts are *run* by tclsh against stub
Vivado commands that record every call, so a wrong variable, a typo in a name or a missing
connection fails here rather than in a two-hour Vivado run.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dtpu.board import design, xadc
from dtpu.board.emulate.hwh import parse_hwh, write_hwh

ROOT = Path(__file__).resolve().parents[1]
OVERLAYS = ROOT / "hw" / "overlays"
RTL_TOP = ROOT / "hw" / "rtl" / "dtpu_axi.v"
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


def _rtl_ports_and_params(text: str) -> tuple[list[str], list[str]]:
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    start = text.index(f"module {design.TOP}")
    header = text[start:text.index(");", start)]
    params = re.findall(r"\bparameter\s+(?:\[[^\]]*\]\s*)?(\w+)", header)
    ports = re.findall(r"\b(?:input|output|inout)\s+(?:wire|reg)?\s*(?:signed\s*)?(?:\[[^\]]*\])?\s*(\w+)",
                       header)
    return ports, params


# -------------------------------------------------------------------------- names agree


def test_config_tcl_matches_the_python_design():
    v = _tcl_vars()
    assert v["DTPU_VLNV"] == design.DTPU_VLNV and v["DTPU_TOP"] == design.TOP
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


def test_xadc_channels_cover_the_sensors_the_sampler_reads():
    channels = set(_tcl_vars()["XADC_CHANNELS"].split())
    need = {"TEMPERATURE"} | {{"vccint": "VCCINT", "vccaux": "VCCAUX", "vccbram": "VBRAM",
                               "vccpint": "VCCPINT", "vccpaux": "VCCPAUX",
                               "vccoddr": "VCCDDRO"}[n] for n in xadc.SUPPLIES}
    assert channels == need


def test_rtl_top_has_the_ports_the_ip_packager_needs():
    if RTL_TOP.exists():
        ports, params = _rtl_ports_and_params(RTL_TOP.read_text())
        assert ports == list(design.TOP_PORTS), set(ports) ^ set(design.TOP_PORTS)
        assert set(design.TOP_PARAMS) <= set(params)
    else:  # before the RTL lands: the names the contract documents
        doc = (ROOT / "docs" / "architecture.md").read_text()
        for busif in design.BUS_INTERFACES:
            assert busif in doc
    for busif, (kind, _) in design.BUS_INTERFACES.items():
        need = ("tdata", "tvalid", "tready", "tlast") if kind == "axis" else ("awaddr", "rdata")
        assert all(f"{busif}_{s}" in design.TOP_PORTS for s in need)


def test_the_emulated_hwh_is_the_overlay_design(tmp_path):
    ips = parse_hwh(write_hwh(tmp_path / "d.hwh"))
    assert {n: (d["phys_addr"], d["addr_range"]) for n, d in ips.items()} == design.ADDRESS_MAP
    assert {n: d["type"] for n, d in ips.items()} == design.INSTANCES
    assert ips[design.DMA_WGT]["parameters"]["c_include_s2mm"] == "0"
    assert ips[design.DMA_ACT]["parameters"]["c_sg_length_width"] == str(design.DMA_LENGTH_WIDTH)


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
    switch $name { PROGRESS { return 100% } DIRECTORY { return /runs/$obj } default { return "" } }
}
namespace eval ipx {}
proc ipx::current_core {} { return core }
proc ipx::get_bus_interfaces {name args} {
    if {$name in $::stub_missing} { return "" }
    return $name
}
proc ipx::get_bus_parameters {args} { return POLARITY }
proc ipx::get_user_parameters {name args} { return $name }
rename file _file
proc file {cmd args} {
    if {$cmd in {copy delete mkdir}} { log file $cmd {*}$args; return }
    return [_file $cmd {*}$args]
}
"""


def _run_tcl(script: str, args: list[str], version="2022.1", board_parts=None, missing=()):
    board_parts = board_parts if board_parts is not None else _tcl_vars()["BOARD_PART"]
    prelude = _STUBS + (f"set ::stub_version {version}\n"
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
BUILD_ARGS = ["/ip", "/out", "4", *design.build_params().values()]


@needs_tclsh
def test_build_tcl_connects_the_design_the_driver_expects():
    calls, errors, out = _run_tcl("build.tcl", BUILD_ARGS)
    assert not errors, out
    text = "\n".join(calls)
    # the DTPU with the contract's parameters, and its three streams on the right DMAs
    assert f"create_bd_cell -type ip -vlnv {design.DTPU_VLNV} {design.DTPU}" in text
    params = design.build_params()
    assert re.search(r"set_property -dict \{" + " ".join(f"CONFIG.{k} {v}" for k, v in params.items())
                     + r"\} dtpu", text), text
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


@needs_tclsh
def test_package_ip_tcl_packages_the_rtl_top(tmp_path):
    rtl = ROOT / "hw" / "rtl"
    if not RTL_TOP.exists():
        rtl = tmp_path
        (rtl / "dtpu_axi.v").write_text("module dtpu_axi; endmodule\n")
    calls, errors, out = _run_tcl("package_ip.tcl", [str(rtl), "/ip"])
    assert not errors, out
    text = "\n".join(calls)
    vendor, library, name, version = design.DTPU_VLNV.split(":")
    assert f"ipx::package_project -root_dir /ip -vendor {vendor} -library {library}" in text
    assert f"set_property name {name} core" in text and f"set_property version {version} core" in text
    assert f"set_property top {design.TOP}" in text
    for busif in design.BUS_INTERFACES:
        assert f"ipx::associate_bus_interfaces -busif {busif} -clock {design.CLOCK_PORT} core" in text
    assert "set_property value ACTIVE_LOW POLARITY" in text
    assert "ipx::save_core core" in text
    # an IP whose interfaces were not inferred is not saved
    calls, errors, _ = _run_tcl("package_ip.tcl", [str(rtl), "/ip"], missing=["s_axis_act"])
    assert errors and "did not infer bus interface s_axis_act" in errors[0]
    assert not any(c.startswith("ipx::save_core") for c in calls)
    _, errors, _ = _run_tcl("package_ip.tcl", [str(tmp_path / "empty"), "/ip"])
    assert errors and "no dtpu_axi.v" in errors[0]
