"""The hardware handoff (.hwh) of the emulated design, in the shape Vivado writes it.

A .hwh is XML: ``MODULES/MODULE`` elements carry an ``INSTANCE`` name, a ``VLNV``,
``PARAMETERS``, ``PORTS`` (with their ``CONNECTIONS``) and ``BUSINTERFACES`` (logical to
physical ``PORTMAPS``); the processing system's ``MEMORYMAP/MEMRANGE`` elements give each
slave's address range behind ``M_AXI_GP0``, and a master's own ``MEMORYMAP`` the windows it
reaches (a DMA's or the 2.0 DTPU's DDR segment behind ``S_AXI_HP0``). :func:`write_hwh` writes
that for the emulated design (the names, addresses and parameters hw/overlays builds, from
:mod:`dtpu.board.design`), complete enough for the real ``pynq`` to parse it (``pynqmetadata``'s
HWH frontend, which needs every bus interface's physical ports and every connection's far end):
``pynq.Overlay`` builds its ``ip_dict``, ``clock_dict``, interrupt tables and driver bindings
from it exactly as from Vivado's file.

Two designs (``contract=``, :data:`dtpu.board.design.VARIANTS`):

* 1 (contract 1.2, ``make CONTRACT=1``; top ``dtpu_axi``): the DTPU's streams on two AXI DMAs. Left out, because nothing
  in pynq reads it for this design: the AXI interconnect and SmartConnect (pynq takes addresses
  from the PS's memory map), the DMAs' memory-side AXI masters, the DDR/FIXED_IO pins. The
  DTPU's ``irq`` and the DMAs' interrupt outputs are ports without connections, as in the block
  design (build.tcl: "the driver polls"). ``interrupts=True`` writes a variant the 1.2 TCL does
  not build: the DTPU's ``irq`` into the AXI interrupt controller (``design.INTC``) whose output
  drives the PS's ``IRQ_F2P``, so that pynq creates ``overlay.dtpu.irq`` as a ``pynq.Interrupt``.
* 2 (contract 2.0, the default, ``make -C hw/overlays``; top ``dtpu_cl_top``): no DMAs; the
  DTPU's AXI4 master ``m_axi`` (read and write channels) through the SmartConnect into
  ``S_AXI_HP0``, with its DDR window in the DTPU's memory map, and ``irq`` through the AXI INTC
  to ``IRQ_F2P`` (always: it is the 2.0 completion). The top's 1.2 streams are bus interfaces
  without connections (tied off, :data:`dtpu.board.design.TIED_OFF_2`), as Vivado lists an IP's
  unconnected interfaces. Here the SmartConnect
  is written, unlike in 1.2, because the route from the DTPU's master to HP0 is what the 2.0
  design adds and the tests follow it through the connections.

:func:`parse_hwh` reads the addressable subset (instance, VLNV, address, parameters) and
:func:`memory_windows` the masters' memory windows from any .hwh without pynq: the overlay tests
use them, and they apply unchanged to the first .hwh a real Vivado build writes.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from dtpu.board import design
from dtpu.hw.config import HwConfig

AXIMM = "xilinx.com:interface:aximm:1.0"
AXIS = "xilinx.com:interface:axis:1.0"

#: the AXI4-Lite slave interface of each addressable instance (hw/overlays/config.tcl ADDRESS_MAP*)
SLAVE_INTERFACE = design.SLAVE_INTERFACE

#: the interrupt controller of the ``interrupts=True`` variant and of the 2.0 design: instance,
#: VLNV, (base, range)
INTC = design.INTC
INTC_VLNV = design.VLNV["intc"]
INTC_ADDRESS = design.INTC_ADDRESS

#: Zynq-7000 PS clocks on the PYNQ-Z2: 50 MHz PS_CLK, IO PLL x20 = 1000 MHz, FCLK0 = IO PLL / 5 / 2
PS_CLK_MHZ = 50
IO_PLL_MULT = 20
FCLK0_DIVISORS = (5, 2)

# AXI4-Lite and AXI4-Stream signals: logical name -> (direction at the slave, width or None)
_AXIL_SLAVE = {
    "AWADDR": ("I", "addr"), "AWPROT": ("I", 3), "AWVALID": ("I", None), "AWREADY": ("O", None),
    "WDATA": ("I", 32), "WSTRB": ("I", 4), "WVALID": ("I", None), "WREADY": ("O", None),
    "BRESP": ("O", 2), "BVALID": ("O", None), "BREADY": ("I", None),
    "ARADDR": ("I", "addr"), "ARPROT": ("I", 3), "ARVALID": ("I", None), "ARREADY": ("O", None),
    "RDATA": ("O", 32), "RRESP": ("O", 2), "RVALID": ("O", None), "RREADY": ("I", None),
}
_AXIS_SLAVE = {"TDATA": ("I", "data"), "TVALID": ("I", None), "TREADY": ("O", None),
               "TLAST": ("I", None)}
# AXI4 (and AXI3 with "len" = 4 bits) signals of the 2.0 master, by design.BUS_SIGNALS' names
_AXI4_SIGNAL = {
    "awid": ("I", "id"), "awcache": ("I", 4), "awprot": ("I", 3), "bid": ("O", "id"),
    "arid": ("I", "id"), "arcache": ("I", 4), "arprot": ("I", 3), "rid": ("O", "id"),
    "awaddr": ("I", "addr"), "awlen": ("I", "len"), "awsize": ("I", 3), "awburst": ("I", 2),
    "awvalid": ("I", None), "awready": ("O", None), "wdata": ("I", "data"), "wstrb": ("I", "strb"),
    "wlast": ("I", None), "wvalid": ("I", None), "wready": ("O", None), "bresp": ("O", 2),
    "bvalid": ("O", None), "bready": ("I", None), "araddr": ("I", "addr"), "arlen": ("I", "len"),
    "arsize": ("I", 3), "arburst": ("I", 2), "arvalid": ("I", None), "arready": ("O", None),
    "rdata": ("O", "data"), "rresp": ("O", 2), "rlast": ("O", None), "rvalid": ("O", None),
    "rready": ("I", None),
}
_AXI4_SLAVE = {s.upper(): _AXI4_SIGNAL[s] for s in design.BUS_SIGNALS[design.M_AXI]}
_AXI4_WIDTHS = {"addr": design.M_AXI_ADDR_WIDTH, "data": design.M_AXI_DATA_WIDTH,
                "strb": design.M_AXI_DATA_WIDTH // 8, "len": 8, "id": design.M_AXI_ID_WIDTH}
# HP0 (AXI3): 4-bit AxLEN, 6-bit IDs
_AXI3_WIDTHS = dict(_AXI4_WIDTHS, len=4, data=design.HP_DATA_WIDTH, strb=design.HP_DATA_WIDTH // 8,
                    id=6)
_FLIP = {"I": "O", "O": "I"}


class _Module:
    """One MODULE element being built: ports by physical name, bus interfaces."""

    def __init__(self, parent: ET.Element, instance: str, vlnv: str, modtype: str,
                 params: dict[str, Any], **attrs: str) -> None:
        self.instance = instance
        self.el = ET.SubElement(parent, "MODULE", FULLNAME=f"/{instance}", INSTANCE=instance,
                                IPTYPE="PERIPHERAL", IS_ENABLE="1", MODTYPE=modtype, VLNV=vlnv,
                                **attrs)
        ps = ET.SubElement(self.el, "PARAMETERS")
        for name, value in params.items():
            ET.SubElement(ps, "PARAMETER", NAME=name, VALUE=str(value))
        self.ports_el = ET.SubElement(self.el, "PORTS")
        self.bus_el = ET.SubElement(self.el, "BUSINTERFACES")
        self.ports: dict[str, ET.Element] = {}

    def port(self, name: str, direction: str, width: int | None = None, sigis: str = "undef") -> str:
        attrs = {"DIR": direction, "NAME": name, "SIGIS": sigis}
        if width is not None and width > 1:
            attrs.update(LEFT=str(width - 1), RIGHT="0")
        self.ports[name] = ET.SubElement(self.ports_el, "PORT", **attrs)
        return name

    def bus(self, name: str, kind: str, mode: str, signals: dict[str, tuple[str, Any]],
            physical: str, widths: dict[str, int]) -> dict[str, str]:
        """A bus interface over new ports ``physical.format(logical)``; mode MASTER flips the
        slave-side directions. Returns logical -> physical port name."""
        b = ET.SubElement(self.bus_el, "BUSINTERFACE", BUSNAME=f"{self.instance}_{name}",
                          NAME=name, TYPE=mode, VLNV=kind)
        maps = ET.SubElement(b, "PORTMAPS")
        names = {}
        for logical, (direction, width) in signals.items():
            width = widths.get(width, width) if isinstance(width, str) else width
            d = direction if mode == "SLAVE" else _FLIP[direction]
            phys = self.port(physical.format(logical.lower()), d, width)
            attrs = {"LOGICAL": logical, "PHYSICAL": phys}
            if width is not None and width > 1:
                attrs.update(LEFT=str(width - 1), RIGHT="0")
            ET.SubElement(maps, "PORTMAP", **attrs)
            names[logical] = phys
        return names


def _connect(a: _Module, a_port: str, b: _Module, b_port: str) -> None:
    for src, sp, dst, dp in ((a, a_port, b, b_port), (b, b_port, a, a_port)):
        el = src.ports[sp]
        cons = el.find("CONNECTIONS")
        if cons is None:
            cons = ET.SubElement(el, "CONNECTIONS")
            el.set("SIGNAME", f"{a.instance}_{a_port}")
        ET.SubElement(cons, "CONNECTION", INSTANCE=dst.instance, PORT=dp)


def _ps7_params(interrupts: bool, contract: int) -> dict[str, Any]:
    p: dict[str, Any] = {"PCW_CRYSTAL_PERIPHERAL_FREQMHZ": PS_CLK_MHZ,
                         "PCW_IOPLL_CTRL_FBDIV": IO_PLL_MULT,
                         "PCW_USE_M_AXI_GP0": 1, "PCW_USE_S_AXI_HP0": 1,
                         "PCW_S_AXI_HP0_DATA_WIDTH": (design.HP_DATA_WIDTH if contract == 2
                                                      else design.DMA_DATA_WIDTH),
                         "PCW_USE_FABRIC_INTERRUPT": int(interrupts),
                         "PCW_IRQ_F2P_INTR": int(interrupts)}
    for i in range(4):
        on = i == 0
        p[f"PCW_FPGA_FCLK{i}_ENABLE"] = int(on)
        p[f"PCW_FCLK{i}_PERIPHERAL_CLKSRC"] = "IO PLL"
        p[f"PCW_FCLK{i}_PERIPHERAL_DIVISOR0"] = FCLK0_DIVISORS[0] if on else 1
        p[f"PCW_FCLK{i}_PERIPHERAL_DIVISOR1"] = FCLK0_DIVISORS[1] if on else 1
        p[f"PCW_FPGA{i}_PERIPHERAL_FREQMHZ"] = design.FCLK_MHZ if on else 50
        p[f"PCW_ACT_FPGA{i}_PERIPHERAL_FREQMHZ"] = f"{design.FCLK_MHZ if on else 10:.6f}"
    return p


def _stream(m: _Module, name: str, mode: str, prefix: str) -> dict[str, str]:
    return m.bus(name, AXIS, mode, _AXIS_SLAVE, prefix + "_{}", {"data": design.DMA_DATA_WIDTH})


def write_hwh(path: str | Path, cfg: HwConfig | None = None, note: str = "",
              interrupts: bool | None = None, contract: int = design.DEFAULT_CONTRACT,
              build: str | None = None) -> Path:
    """Write the emulated design's .hwh for the DTPU build `cfg` (default the board build
    `build`'s, design.board_config(build)): the ``contract`` 1 (1.2) or
    2 (2.0) block design of hw/overlays. ``build``: the board build (``make OVERLAY=``,
    :data:`dtpu.board.design.BOARD_BUILDS`; default the default one) whose VEC_EN the 2.0 top's
    parameters carry with `cfg`'s VEC_RQ_LANES (the 1.2 top has no vector unit and neither
    parameter); both tops carry `cfg`'s RQ_EN. ``interrupts``: whether the DTPU's ``irq`` reaches the
    PS through :data:`INTC` (default: as the design builds it, i.e. not for 1.2 and always for
    2.0; ``interrupts=True`` with contract 1 is the emulation-only 1.2 variant)."""
    if contract not in design.VARIANTS:
        raise ValueError(f"contract must be one of {sorted(design.VARIANTS)} (make CONTRACT=), "
                         f"not {contract!r}")
    variant = design.VARIANTS[contract]
    if interrupts is None:
        interrupts = variant.irq_to_ps
    elif not interrupts and variant.irq_to_ps:
        raise ValueError(f"the contract {variant.version} design always wires the DTPU's irq to the PS")
    board = design.board_build(build)
    cfg = cfg or design.board_config(board.name)
    root = ET.Element("EDKSYSTEM", EDWVERSION="1.2", VIVADOVERSION="emulated")
    if note:
        root.append(ET.Comment(f" {note} "))
    ET.SubElement(root, "SYSTEMINFO", ARCH="zynq", BOARD="tul.com.tw:pynq-z2:part0:1.0",
                  DEVICE="7z020", NAME=design.BITSTREAM_NAME, PACKAGE="clg400", SPEEDGRADE="-1")
    ET.SubElement(root, "EXTERNALPORTS")
    ET.SubElement(root, "EXTERNALINTERFACES")
    modules = ET.SubElement(root, "MODULES")

    ps7 = _Module(modules, design.PS7, design.VLNV["ps7"], "processing_system7",
                  _ps7_params(interrupts, contract), MODCLASS="PROCESSOR")
    fclk = ps7.port("FCLK_CLK0", "O", sigis="clk")
    ps7.port("FCLK_RESET0_N", "O", sigis="rst")
    ps7.port("M_AXI_GP0_ACLK", "I", sigis="clk")
    ps7.bus("M_AXI_GP0", AXIMM, "MASTER", _AXIL_SLAVE, "M_AXI_GP0_{}", {"addr": 32})
    memmap = ET.SubElement(ps7.el, "MEMORYMAP")
    slaves = {n: (a, SLAVE_INTERFACE[n]) for n, a in variant.address_map.items()}
    if interrupts:
        slaves[INTC] = (INTC_ADDRESS, SLAVE_INTERFACE[INTC])
    for name, ((base, size), busif) in slaves.items():
        ET.SubElement(memmap, "MEMRANGE", ADDRESSBLOCK="Reg", BASENAME="C_BASEADDR",
                      BASEVALUE=f"0x{base:08X}", HIGHNAME="C_HIGHADDR",
                      HIGHVALUE=f"0x{base + size - 1:08X}", INSTANCE=name, IS_DATA="TRUE",
                      IS_INSTRUCTION="TRUE", MASTERBUSINTERFACE="M_AXI_GP0", MEMTYPE="REGISTER",
                      SLAVEBUSINTERFACE=busif)

    dtpu = _Module(modules, design.DTPU, design.DTPU_VLNV, variant.top, {
        "ROWS": cfg.ROWS, "COLS": cfg.COLS, "LOG_WEIGHT_WORDS": cfg.LOG_WEIGHT_WORDS,
        "LOG_PARAM_ENTRIES": cfg.LOG_PARAM_ENTRIES, "LOG_ACT_WORDS": cfg.LOG_ACT_WORDS,
        "PREC_EN": f"0x{cfg.prec_enable_mask:04X}", "AXIL_ADDR_WIDTH": cfg.AXIL_ADDR_WIDTH,
        "RQ_EN": cfg.RQ_EN,
        **({"VEC_EN": board.vec_en, "VEC_RQ_LANES": cfg.VEC_RQ_LANES} if contract == 2 else {}),
        "Component_Name": f"{design.BITSTREAM_NAME}_{design.DTPU}_0"})
    dtpu.port(design.CLOCK_PORT, "I", sigis="clk")
    dtpu.port(design.RESET_PORT, "I", sigis="rst")
    dtpu.bus("s_axil", AXIMM, "SLAVE", _AXIL_SLAVE, "s_axil_{}", {"addr": cfg.AXIL_ADDR_WIDTH})
    dtpu_streams = {}
    for busif, (kind, mode) in {**variant.bus_interfaces, **variant.tied_off}.items():
        if kind == "axis":      # 2.0: the tied-off 1.2 streams, left without connections
            dtpu_streams[busif] = _stream(dtpu, busif, mode.upper(), busif)
    if contract == 2:
        dtpu_master = dtpu.bus(design.M_AXI, AXIMM, "MASTER", _AXI4_SLAVE, design.M_AXI + "_{}",
                               _AXI4_WIDTHS)
    dtpu.port(design.IRQ_PORT, "O", sigis="intr")
    _connect(ps7, fclk, dtpu, design.CLOCK_PORT)

    if contract == 1:
        _write_dmas(modules, ps7, fclk, dtpu, dtpu_streams)
    else:
        _write_hp0_route(modules, ps7, fclk, dtpu, dtpu_master)

    xadc = _Module(modules, design.XADC, design.VLNV["xadc"], "xadc_wiz",
                   {"INTERFACE_SELECTION": "Enable_AXI", "SEQUENCER_MODE": "Continuous"})
    xadc.port("s_axi_aclk", "I", sigis="clk")
    xadc.port("s_axi_aresetn", "I", sigis="rst")
    xadc.bus("s_axi_lite", AXIMM, "SLAVE", _AXIL_SLAVE, "s_axi_{}", {"addr": 11})
    xadc.port("ip2intc_irpt", "O", sigis="intr")
    _connect(ps7, fclk, xadc, "s_axi_aclk")

    if interrupts:
        f2p = ps7.port("IRQ_F2P", "I", sigis="intr")
        intc = _Module(modules, INTC, INTC_VLNV, "axi_intc",
                       {"C_NUM_INTR_INPUTS": 1, "C_KIND_OF_INTR": "0xFFFFFFFF",
                        "C_IRQ_IS_LEVEL": 1, "C_IRQ_CONNECTION": 1, "C_HAS_IPR": 1, "C_HAS_SIE": 1,
                        "C_HAS_CIE": 1})
        intc.port("s_axi_aclk", "I", sigis="clk")
        intc.port("s_axi_aresetn", "I", sigis="rst")
        intc.bus(SLAVE_INTERFACE[INTC], AXIMM, "SLAVE", _AXIL_SLAVE, "s_axi_{}", {"addr": 9})
        intc.port("intr", "I", sigis="intr")
        intc.port("irq", "O", sigis="intr")
        _connect(ps7, fclk, intc, "s_axi_aclk")
        _connect(dtpu, design.IRQ_PORT, intc, "intr")
        _connect(intc, "irq", ps7, f2p)

    path = Path(path)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


def _write_dmas(modules: ET.Element, ps7: _Module, fclk: str, dtpu: _Module,
                dtpu_streams: dict[str, dict[str, str]]) -> None:
    """The 1.2 design's two AXI DMAs, their streams wired to the DTPU's."""
    dmas = {}
    for name, mm2s, s2mm in ((design.DMA_WGT, 1, 0), (design.DMA_ACT, 1, 1)):
        params = {"c_include_sg": 0, "c_include_mm2s": mm2s, "c_include_s2mm": s2mm,
                  "c_sg_length_width": design.DMA_LENGTH_WIDTH, "c_micro_dma": 0,
                  "c_include_mm2s_dre": 0, "c_include_s2mm_dre": 0,
                  "c_m_axi_mm2s_data_width": design.DMA_DATA_WIDTH,
                  "c_m_axis_mm2s_tdata_width": design.DMA_DATA_WIDTH,
                  "c_m_axi_s2mm_data_width": design.DMA_DATA_WIDTH,
                  "c_s_axis_s2mm_tdata_width": design.DMA_DATA_WIDTH,
                  "c_mm2s_burst_size": 16, "c_s2mm_burst_size": 16}
        dma = _Module(modules, name, design.VLNV["dma"], "axi_dma", params)
        dma.port("s_axi_lite_aclk", "I", sigis="clk")
        dma.port("m_axi_mm2s_aclk", "I", sigis="clk")
        dma.port("axi_resetn", "I", sigis="rst")
        dma.bus("S_AXI_LITE", AXIMM, "SLAVE", _AXIL_SLAVE, "s_axi_lite_{}", {"addr": 10})
        streams = {"M_AXIS_MM2S": _stream(dma, "M_AXIS_MM2S", "MASTER", "m_axis_mm2s")}
        dma.port("mm2s_introut", "O", sigis="intr")
        if s2mm:
            dma.port("m_axi_s2mm_aclk", "I", sigis="clk")
            streams["S_AXIS_S2MM"] = _stream(dma, "S_AXIS_S2MM", "SLAVE", "s_axis_s2mm")
            dma.port("s2mm_introut", "O", sigis="intr")
        for clk in [p for p in dma.ports if p.endswith("aclk")]:
            _connect(ps7, fclk, dma, clk)
        dmas[name] = (dma, streams)
    for stream, (dma_name, attr) in design.STREAM_DMA.items():
        dtpu_if = {"wgt": "s_axis_wgt", "act": "s_axis_act", "res": "m_axis_res"}[stream]
        dma, streams = dmas[dma_name]
        dma_if = "M_AXIS_MM2S" if attr == "sendchannel" else "S_AXIS_S2MM"
        for logical, phys in streams[dma_if].items():
            _connect(dma, phys, dtpu, dtpu_streams[dtpu_if][logical])


def _write_hp0_route(modules: ET.Element, ps7: _Module, fclk: str, dtpu: _Module,
                     dtpu_master: dict[str, str]) -> None:
    """The 2.0 design's data path: DTPU ``m_axi`` (AXI4) -> SmartConnect -> the PS's
    ``S_AXI_HP0`` (AXI3, 64-bit), and the DTPU's memory window: all of DDR behind HP0."""
    ps7.port(f"{design.HP_PORT}_ACLK", "I", sigis="clk")
    hp = ps7.bus(design.HP_PORT, AXIMM, "SLAVE", _AXI4_SLAVE, design.HP_PORT + "_{}", _AXI3_WIDTHS)
    sc = _Module(modules, design.MEM_SC, design.VLNV["smartconnect"], "smartconnect",
                 {"NUM_SI": 1, "NUM_MI": 1})
    sc.port("aclk", "I", sigis="clk")
    sc.port("aresetn", "I", sigis="rst")
    s00 = sc.bus("S00_AXI", AXIMM, "SLAVE", _AXI4_SLAVE, "S00_AXI_{}", _AXI4_WIDTHS)
    m00 = sc.bus("M00_AXI", AXIMM, "MASTER", _AXI4_SLAVE, "M00_AXI_{}", _AXI3_WIDTHS)
    for logical in _AXI4_SLAVE:
        _connect(dtpu, dtpu_master[logical], sc, s00[logical])
        _connect(sc, m00[logical], ps7, hp[logical])
    _connect(ps7, fclk, sc, "aclk")
    base, size = design.DDR_WINDOW
    ET.SubElement(ET.SubElement(dtpu.el, "MEMORYMAP"), "MEMRANGE", ADDRESSBLOCK=design.HP_SEGMENT,
                  BASENAME="C_BASEADDR", BASEVALUE=f"0x{base:08X}", HIGHNAME="C_HIGHADDR",
                  HIGHVALUE=f"0x{base + size - 1:08X}", INSTANCE=design.PS7, IS_DATA="TRUE",
                  IS_INSTRUCTION="TRUE", MASTERBUSINTERFACE=design.M_AXI, MEMTYPE="MEMORY",
                  SLAVEBUSINTERFACE=design.HP_PORT)


def _int(text: str) -> int:
    return int(text, 0)


def parse_hwh(path: str | Path) -> dict[str, dict[str, Any]]:
    """instance -> {type (VLNV), phys_addr, addr_range, parameters, fullpath} for the modules
    that the processing system can address (what PYNQ puts in ip_dict)."""
    root = ET.parse(path).getroot()
    ranges: dict[str, tuple[int, int]] = {}
    for rng in root.iter("MEMRANGE"):
        inst = rng.get("INSTANCE")
        if inst and rng.get("MEMTYPE", "REGISTER") == "REGISTER" and inst not in ranges:
            base, high = _int(rng.get("BASEVALUE")), _int(rng.get("HIGHVALUE"))
            ranges[inst] = (base, high - base + 1)
    ips = {}
    for module in root.iter("MODULE"):
        inst = module.get("INSTANCE")
        if inst not in ranges:
            continue
        params = {p.get("NAME"): p.get("VALUE") for p in module.iter("PARAMETER")}
        base, size = ranges[inst]
        ips[inst] = {"type": module.get("VLNV"), "phys_addr": base, "addr_range": size,
                     "fullpath": module.get("FULLNAME", f"/{inst}").lstrip("/"),
                     "parameters": params, "interrupts": {}, "gpio": {}, "state": None}
    return ips


def memory_windows(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """master instance -> the memory windows of its own MEMORYMAP (``MEMTYPE="MEMORY"``): master
    interface, target instance and slave interface, segment (ADDRESSBLOCK), base and range. In
    the 2.0 design the DTPU's ``m_axi`` has one: DDR behind ``S_AXI_HP0``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for module in ET.parse(path).getroot().iter("MODULE"):
        if module.get("MODCLASS") == "PROCESSOR":
            continue
        for rng in module.iter("MEMRANGE"):
            if rng.get("MEMTYPE") != "MEMORY":
                continue
            base, high = _int(rng.get("BASEVALUE")), _int(rng.get("HIGHVALUE"))
            out.setdefault(module.get("INSTANCE"), []).append({
                "master": rng.get("MASTERBUSINTERFACE"), "target": rng.get("INSTANCE"),
                "slave": rng.get("SLAVEBUSINTERFACE"), "segment": rng.get("ADDRESSBLOCK"),
                "base": base, "range": high - base + 1})
    return out


__all__ = ["INTC", "INTC_ADDRESS", "INTC_VLNV", "SLAVE_INTERFACE", "memory_windows", "parse_hwh",
           "write_hwh"]
