"""The subset of Vivado's hardware handoff (.hwh) that PYNQ reads to build ``ip_dict``.

A .hwh is XML: ``MODULES/MODULE`` elements carry an ``INSTANCE`` name, a ``VLNV`` and
``PARAMETERS``; the processing system's ``MEMORYMAP/MEMRANGE`` elements give each slave's
address range. :func:`write_hwh` writes such a file for the emulated design (the same names and
addresses as hw/overlays builds); :func:`parse_hwh` reads that subset from any .hwh, so the
emulation also accepts the file Vivado writes for the real overlay.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from dtpu.board import design
from dtpu.hw.config import HwConfig, get_config


def _params(module: ET.Element, values: dict[str, Any]) -> None:
    params = ET.SubElement(module, "PARAMETERS")
    for name, value in values.items():
        ET.SubElement(params, "PARAMETER", NAME=name, VALUE=str(value))


def write_hwh(path: str | Path, cfg: HwConfig | None = None, note: str = "") -> Path:
    """Write the emulated design's .hwh for the DTPU build `cfg`."""
    cfg = cfg or get_config()
    root = ET.Element("EDKSYSTEM", EDWVERSION="1.2", VIVADOVERSION="emulated")
    if note:
        root.append(ET.Comment(f" {note} "))
    ET.SubElement(root, "SYSTEMINFO", ARCH="zynq", BOARD="tul.com.tw:pynq-z2:part0:1.0",
                  DEVICE="7z020", NAME=design.BITSTREAM_NAME, PACKAGE="clg400", SPEEDGRADE="-1")
    modules = ET.SubElement(root, "MODULES")
    ps7 = ET.SubElement(modules, "MODULE", FULLNAME=f"/{design.PS7}", INSTANCE=design.PS7,
                        MODTYPE="processing_system7", VLNV=design.VLNV["ps7"])
    _params(ps7, {"PCW_FPGA0_PERIPHERAL_FREQMHZ": design.FCLK_MHZ})
    memmap = ET.SubElement(ps7, "MEMORYMAP")
    for name, (base, size) in design.ADDRESS_MAP.items():
        ET.SubElement(memmap, "MEMRANGE", ADDRESSBLOCK="Reg", BASENAME="C_BASEADDR",
                      BASEVALUE=f"0x{base:08X}", HIGHNAME="C_HIGHADDR",
                      HIGHVALUE=f"0x{base + size - 1:08X}", INSTANCE=name, IS_DATA="TRUE",
                      MASTERBUSINTERFACE="M_AXI_GP0", MEMTYPE="REGISTER")
    dtpu = ET.SubElement(modules, "MODULE", FULLNAME=f"/{design.DTPU}", INSTANCE=design.DTPU,
                         MODTYPE=design.TOP, VLNV=design.DTPU_VLNV)
    _params(dtpu, {"ROWS": cfg.ROWS, "COLS": cfg.COLS, "LOG_WEIGHT_WORDS": cfg.LOG_WEIGHT_WORDS,
                   "LOG_PARAM_ENTRIES": cfg.LOG_PARAM_ENTRIES, "LOG_ACT_WORDS": cfg.LOG_ACT_WORDS,
                   "PREC_EN": f"0x{cfg.prec_enable_mask:04X}", "AXIL_ADDR_WIDTH": cfg.AXIL_ADDR_WIDTH})
    for name, mm2s, s2mm in ((design.DMA_WGT, 1, 0), (design.DMA_ACT, 1, 1)):
        dma = ET.SubElement(modules, "MODULE", FULLNAME=f"/{name}", INSTANCE=name, MODTYPE="axi_dma",
                            VLNV=design.VLNV["dma"])
        _params(dma, {"c_include_sg": 0, "c_include_mm2s": mm2s, "c_include_s2mm": s2mm,
                      "c_sg_length_width": design.DMA_LENGTH_WIDTH,
                      "c_m_axi_mm2s_data_width": design.DMA_DATA_WIDTH,
                      "c_m_axis_mm2s_tdata_width": design.DMA_DATA_WIDTH,
                      "c_m_axi_s2mm_data_width": design.DMA_DATA_WIDTH,
                      "c_s_axis_s2mm_tdata_width": design.DMA_DATA_WIDTH})
    xadc = ET.SubElement(modules, "MODULE", FULLNAME=f"/{design.XADC}", INSTANCE=design.XADC,
                         MODTYPE="xadc_wiz", VLNV=design.VLNV["xadc"])
    _params(xadc, {"INTERFACE_SELECTION": "Enable_AXI", "SEQUENCER_MODE": "Continuous"})
    path = Path(path)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


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


__all__ = ["parse_hwh", "write_hwh"]
