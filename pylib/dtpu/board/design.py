"""The PYNQ-Z2 block design as the Python side knows it: names, addresses, stream wiring.

hw/overlays/*.tcl builds the design with these names and addresses, the board transport finds
its IPs by them, and the board emulation instantiates them; tests/test_overlay.py checks that
the TCL, this module and the RTL top (hw/rtl/dtpu_axi.v) agree. Nothing here imports pynq.
"""
from __future__ import annotations

#: the DTPU IP as packaged by hw/overlays/package_ip.tcl; the DefaultIP driver binds to it
DTPU_VLNV = "dtpu.org:dtpu:dtpu_axi:1.0"
#: the RTL top module packaged as the IP
TOP = "dtpu_axi"
CLOCK_PORT = "clk"
RESET_PORT = "aresetn"      # synchronous, active low (AXI convention)

_AXIL = ("awaddr", "awprot", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp",
         "bvalid", "bready", "araddr", "arprot", "arvalid", "arready", "rdata", "rresp", "rvalid",
         "rready")
_AXIS = ("tdata", "tvalid", "tready", "tlast")

#: bus interfaces of the top: name -> (kind, mode)
BUS_INTERFACES = {
    "s_axil": ("aximm", "slave"),
    "s_axis_wgt": ("axis", "slave"),
    "s_axis_act": ("axis", "slave"),
    "m_axis_res": ("axis", "master"),
}

#: every port of the top, in the RTL's order
TOP_PORTS = ((CLOCK_PORT, RESET_PORT) + tuple(f"s_axil_{s}" for s in _AXIL)
             + tuple(f"s_axis_wgt_{s}" for s in _AXIS) + tuple(f"s_axis_act_{s}" for s in _AXIS)
             + tuple(f"m_axis_res_{s}" for s in _AXIS) + ("irq",))

#: Verilog parameters of the top that the IP exposes (values come from contract.json)
TOP_PARAMS = ("ROWS", "COLS", "LOG_WEIGHT_WORDS", "LOG_PARAM_ENTRIES", "LOG_ACT_WORDS", "PREC_EN",
              "AXIL_ADDR_WIDTH")

VLNV = {
    "ps7": "xilinx.com:ip:processing_system7:5.5",
    "dma": "xilinx.com:ip:axi_dma:7.1",
    "xadc": "xilinx.com:ip:xadc_wiz:3.3",
}

#: block design instance names (what `overlay.<name>` is on the board)
PS7 = "processing_system7_0"
DTPU = "dtpu"
DMA_WGT = "dma_wgt"         # MM2S only: weights and parameters
DMA_ACT = "dma_act"         # MM2S activations, S2MM results
XADC = "xadc"

INSTANCES = {DTPU: DTPU_VLNV, DMA_WGT: VLNV["dma"], DMA_ACT: VLNV["dma"], XADC: VLNV["xadc"]}

#: M_AXI_GP0 address map: instance -> (base, range)
ADDRESS_MAP = {
    DMA_WGT: (0x4040_0000, 0x1_0000),
    DMA_ACT: (0x4041_0000, 0x1_0000),
    DTPU: (0x43C0_0000, 0x1_0000),
    XADC: (0x43C1_0000, 0x1_0000),
}

#: DTPU stream -> (DMA instance, pynq channel attribute)
STREAM_DMA = {
    "wgt": (DMA_WGT, "sendchannel"),
    "act": (DMA_ACT, "sendchannel"),
    "res": (DMA_ACT, "recvchannel"),
}

#: AXI DMA "Width of Buffer Length Register": 2^26-1 bytes per transfer. A job's stream goes in
#: one transfer (tlast ends the transfer), so the default 14 bits (16 KiB) would be too small.
DMA_LENGTH_WIDTH = 26
DMA_DATA_WIDTH = 64

#: FCLK_CLK0, the fabric clock of the DTPU and the DMAs (contract CLOCK_MHZ)
FCLK_MHZ = 100

#: file names written by `make -C hw/overlays` (build/<name>.bit and .hwh)
BITSTREAM_NAME = "dtpu_pynqz2"

#: where the overlay is looked for on the board when no `bitstream` option is given
BOARD_OVERLAY_DIR = "/home/xilinx/pynq/overlays/dtpu"



#: Lane precisions of the default board build: the configuration that fits the xc7z020
#: (docs/synthesis.md: 8x8 with all seven precisions needs ~5x its LUTs). backend=pynq lowers
#: for whatever the loaded bitstream reports, so other builds work too.
BOARD_PRECISIONS = ("int8", "uint8", "int16")


def board_config():
    """The contract's defaults with the board build's precisions."""
    from dtpu.hw.config import HwConfig

    return HwConfig(ENABLED=list(BOARD_PRECISIONS))


def build_params(cfg=None) -> dict[str, str]:
    """The DTPU IP's parameters for a build (default: :func:`board_config`), as the overlay build
    passes them to Vivado (hw/overlays/Makefile)."""
    c = cfg or board_config()
    return {"ROWS": str(c.ROWS), "COLS": str(c.COLS), "LOG_WEIGHT_WORDS": str(c.LOG_WEIGHT_WORDS),
            "LOG_PARAM_ENTRIES": str(c.LOG_PARAM_ENTRIES), "LOG_ACT_WORDS": str(c.LOG_ACT_WORDS),
            "PREC_EN": f"0x{c.prec_enable_mask:04X}"}


__all__ = ["ADDRESS_MAP", "BITSTREAM_NAME", "BOARD_OVERLAY_DIR", "BOARD_PRECISIONS", "BUS_INTERFACES", "CLOCK_PORT",
           "DMA_ACT", "DMA_DATA_WIDTH", "DMA_LENGTH_WIDTH", "DMA_WGT", "DTPU", "DTPU_VLNV",
           "FCLK_MHZ", "INSTANCES", "PS7", "RESET_PORT", "STREAM_DMA", "TOP", "TOP_PARAMS",
           "TOP_PORTS", "VLNV", "XADC", "board_config", "build_params"]
