"""The PYNQ-Z2 block design as the Python side knows it: names, addresses, stream wiring.

hw/overlays/*.tcl builds the design with these names and addresses, the board transport finds
its IPs by them, and the board emulation instantiates them; tests/test_overlay.py checks that
the TCL, this module and the RTL tops (hw/rtl/dtpu_cl_top.v, hw/rtl/dtpu_axi.v) agree. Nothing
here imports pynq.

Two designs share the names: contract 2.0's (the default, ``make -C hw/overlays``: the 2.0 top
``dtpu_cl_top`` masters DDR itself through ``S_AXI_HP0`` and interrupts the PS;
docs/contract2.md) and contract 1.2's (``make -C hw/overlays CONTRACT=1``: the 1.2 top
``dtpu_axi`` fed by two AXI DMAs; kept as a fallback bitstream and for backend=rtl path=jobs).
:data:`VARIANTS` describes each one by the same fields, so the TCL checks, the emulated .hwh and
the RTL port check iterate over one table instead of repeating names.
"""
from __future__ import annotations

from typing import NamedTuple

#: the DTPU IP as packaged by hw/overlays/package_ip.tcl; the DefaultIP driver binds to it
DTPU_VLNV = "dtpu.org:dtpu:dtpu_axi:1.0"
#: the RTL top module packaged as the IP of the 1.2 design (:data:`TOP_2`: the 2.0 design's)
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

#: the interrupt output of the top (1.2: CTRL.IRQ_EN with STATUS.DONE; 2.0: IRQ.PENDING), level high
IRQ_PORT = "irq"

#: contract 2.0's AXI4 master (docs/contract2.md: descriptors, loads, activations and results all
#: go through it), in hw/rtl/dtpu_cl_top.v's order: the read channels (dtpu_axi_rd), then the
#: write channels (dtpu_axi_wr). Xilinx-inferable names; ID (:data:`M_AXI_ID_WIDTH` bits, always
#: 0: one ID, responses in order), CACHE (0b0011, bufferable/modifiable) and PROT (0) are driven
#: as constants, LOCK, QOS, REGION and USER are absent (the SmartConnect ties them to their
#: defaults). HP ports are not coherent: the driver flushes and invalidates its buffers.
M_AXI = "m_axi"
_M_AXI = ("arid", "araddr", "arlen", "arsize", "arburst", "arcache", "arprot", "arvalid", "arready",
          "rid", "rdata", "rresp", "rlast", "rvalid", "rready",
          "awid", "awaddr", "awlen", "awsize", "awburst", "awcache", "awprot", "awvalid", "awready",
          "wdata", "wstrb", "wlast", "wvalid", "wready", "bid", "bresp", "bvalid", "bready")
M_AXI_ADDR_WIDTH = 32
M_AXI_DATA_WIDTH = 64
M_AXI_ID_WIDTH = 1          # dtpu_cl_top's ID_W default; HP0's 6-bit AXI3 IDs are the SmartConnect's
#: longest burst the master issues (dtpu_cl_top MAX_BURST): 16 beats, already legal on HP0's
#: AXI3, so the SmartConnect converts the protocol without splitting bursts
M_AXI_MAX_BURST = 16

#: bus interface of the top -> its signals (port = f"{busif}_{signal}"): the one list that the
#: RTL port check, the IP packager's expectations (config.tcl DTPU_BUSIF*) and the emulated .hwh
#: are written from
BUS_SIGNALS = {"s_axil": _AXIL, "s_axis_wgt": _AXIS, "s_axis_act": _AXIS, "m_axis_res": _AXIS,
               M_AXI: _M_AXI}


def top_ports(bus_interfaces, signals=None) -> tuple[str, ...]:
    """Every port of a top with these bus interfaces, in the RTL's order: clock, reset, the
    interfaces' signals (``signals``, default :data:`BUS_SIGNALS`), the interrupt."""
    signals = signals or BUS_SIGNALS
    return ((CLOCK_PORT, RESET_PORT) + tuple(f"{b}_{s}" for b in bus_interfaces for s in signals[b])
            + (IRQ_PORT,))


#: every port of the top, in the RTL's order
TOP_PORTS = top_ports(BUS_INTERFACES)

#: Verilog parameters of the top that the IP exposes (values come from contract.json)
TOP_PARAMS = ("ROWS", "COLS", "LOG_WEIGHT_WORDS", "LOG_PARAM_ENTRIES", "LOG_ACT_WORDS", "PREC_EN",
              "AXIL_ADDR_WIDTH", "RQ_EN")
#: those of the 2.0 top (dtpu_cl_top): the same, VEC_EN (its vector unit) and VEC_RQ_LANES (the
#: unit's requantizing lanes); the 1.2 top has neither
TOP_PARAMS_2 = TOP_PARAMS + ("VEC_EN", "VEC_RQ_LANES")

VLNV = {
    "ps7": "xilinx.com:ip:processing_system7:5.5",
    "dma": "xilinx.com:ip:axi_dma:7.1",
    "xadc": "xilinx.com:ip:xadc_wiz:3.3",
    "intc": "xilinx.com:ip:axi_intc:4.1",
    "smartconnect": "xilinx.com:ip:smartconnect:1.0",
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

#: the AXI4-Lite slave interface of each instance on M_AXI_GP0 (config.tcl's address maps)
SLAVE_INTERFACE = {DMA_WGT: "S_AXI_LITE", DMA_ACT: "S_AXI_LITE", DTPU: "s_axil", XADC: "s_axi_lite"}

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


# ------------------------------------------------------------ contract 2.0 (make CONTRACT=2)

#: the RTL top module of the 2.0 design (hw/rtl/dtpu_cl_top.v), packaged under the same VLNV:
#: the driver binds by VLNV and tells 1.2 from 2.0 by the core's VERSION register
TOP_2 = "dtpu_cl_top"

#: bus interfaces of the 2.0 top that the block design connects: the registers and the AXI4
#: master (what package_ip.tcl CONTRACT=2 requires, config.tcl DTPU_BUSIF_2)
BUS_INTERFACES_2 = {"s_axil": ("aximm", "slave"), M_AXI: ("aximm", "master")}

#: the 1.2 streams dtpu_cl_top still has (the 1.2 protocol runs on them while no list runs)
#: that the 2.0 design leaves unconnected: there are no DMAs to feed them (a list moves all its
#: data through m_axi), and the driver of a 2.0 bitstream never starts a 1.2 job. package_ip.tcl
#: gives their inputs constant driver values, so an unconnected input is a defined tie-off:
#: ``port -> value`` (TVALID and TLAST low, TREADY high: a stray 1.2 job never sees an input
#: word, and a result could never back up into the core)
TIED_OFF_2 = {"s_axis_wgt": ("axis", "slave"), "s_axis_act": ("axis", "slave"),
              "m_axis_res": ("axis", "master")}
TIE_OFF_VALUES = {"s_axis_wgt_tdata": 0, "s_axis_wgt_tvalid": 0, "s_axis_wgt_tlast": 0,
                  "s_axis_act_tdata": 0, "s_axis_act_tvalid": 0, "s_axis_act_tlast": 0,
                  "m_axis_res_tready": 1}

#: every bus interface of the 2.0 top, in the RTL's port order
TOP_INTERFACES_2 = {"s_axil": BUS_INTERFACES_2["s_axil"], **TIED_OFF_2, M_AXI: BUS_INTERFACES_2[M_AXI]}
#: the 2.0 top's signals: :data:`BUS_SIGNALS`, except that dtpu_cl_top declares the AXI4-Lite
#: inputs it does not use (AWPROT, WSTRB, ARPROT) first, inside one lint waiver
BUS_SIGNALS_2 = {**BUS_SIGNALS,
                 "s_axil": ("awaddr", "awprot", "wstrb", "arprot")
                 + tuple(s for s in _AXIL if s not in ("awaddr", "awprot", "wstrb", "arprot"))}
TOP_PORTS_2 = top_ports(TOP_INTERFACES_2, BUS_SIGNALS_2)

#: the AXI interrupt controller between the DTPU's irq and the PS's IRQ_F2P[0]. pynq 4.0
#: (pynqmetadata 0.2) finds interrupt pins only behind an ``axi_intc`` wired to the PS: with
#: ``irq`` straight on IRQ_F2P it would parse no interrupt and ``overlay.dtpu.irq`` would not
#: exist. And PYNQ's stock image services IRQ_F2P[0] only (one UIO device, GIC ID 61).
INTC = "axi_intc_0"
INTC_ADDRESS = (0x4180_0000, 0x1_0000)      # where PYNQ's own overlays put their first AXI INTC
IRQ_F2P_INDEX = 0
IRQ_F2P_GIC_ID = 61                         # IRQ_F2P[0] (UG585, "Interrupts": PL to PS, 61..68)
SLAVE_INTERFACE[INTC] = "s_axi"

#: the SmartConnect between the DTPU's AXI4 master and HP0 (in 1.2: between the DMAs and HP0).
#: HP0 is an AXI3 slave (4-bit AxLEN, 16-beat bursts, WID): an AXI4 master cannot be wired to it
#: directly, the SmartConnect converts the protocol and splits longer bursts.
MEM_SC = "mem_sc"

#: the PS's high-performance port the DTPU masters DDR through, its width and its DDR window:
#: all of the PYNQ-Z2's 512 MiB, so any ``pynq.allocate`` buffer (CMA) is reachable
HP_PORT = "S_AXI_HP0"
HP_DATA_WIDTH = 64
HP_SEGMENT = "HP0_DDR_LOWOCM"               # Vivado's name of the DDR segment behind HP0
DDR_WINDOW = (0x0000_0000, 0x2000_0000)

INSTANCES_2 = {DTPU: DTPU_VLNV, XADC: VLNV["xadc"], INTC: VLNV["intc"]}

#: M_AXI_GP0 address map of the 2.0 design: the DMAs are gone, DTPU and XADC stay where they were
ADDRESS_MAP_2 = {
    DTPU: ADDRESS_MAP[DTPU],
    XADC: ADDRESS_MAP[XADC],
    INTC: INTC_ADDRESS,
}


class Variant(NamedTuple):
    """One block design: what make's ``CONTRACT=`` selects (hw/overlays) and what
    :func:`dtpu.board.emulate.hwh.write_hwh` writes for the emulation."""

    contract: int                           #: make CONTRACT= (major contract version)
    version: str                            #: the contract it implements
    top: str                                #: the RTL top module (hw/rtl/<top>.v) packaged as the IP
    bus_interfaces: dict[str, tuple[str, str]]   #: those the block design connects
    tied_off: dict[str, tuple[str, str]]    #: those of the top it leaves unconnected (tied off)
    signals: dict[str, tuple[str, ...]]     #: bus interface -> its signals, in the top's order
    top_ports: tuple[str, ...]
    instances: dict[str, str]               #: addressable instance -> VLNV (ip_dict)
    address_map: dict[str, tuple[int, int]]
    irq_to_ps: bool                         #: the DTPU's irq reaches IRQ_F2P (through INTC)


VARIANTS = {
    1: Variant(1, "1.2", TOP, BUS_INTERFACES, {}, BUS_SIGNALS, TOP_PORTS, INSTANCES, ADDRESS_MAP,
               False),
    2: Variant(2, "2.0", TOP_2, BUS_INTERFACES_2, TIED_OFF_2, BUS_SIGNALS_2, TOP_PORTS_2, INSTANCES_2,
               ADDRESS_MAP_2, True),
}
#: what ``make -C hw/overlays`` builds and the emulated board is by default: the 2.0 design, since
#: issue 15's 2.0 top (hw/rtl/dtpu_cl_top.v) exists. ``make CONTRACT=1`` still builds the 1.2 one.
DEFAULT_CONTRACT = 2


def variant_of_ports(ports) -> Variant:
    """The design whose top has exactly these ports (in this order); ValueError naming the
    differences with each design otherwise. The port checks of hw/rtl/dtpu_axi.v and
    hw/rtl/dtpu_cl_top.v use it to tell which contract each top implements."""
    ports = tuple(ports)
    for v in VARIANTS.values():
        if ports == v.top_ports:
            return v
    diffs = "; ".join(f"contract {v.version}: missing {sorted(set(v.top_ports) - set(ports))}, "
                      f"extra {sorted(set(ports) - set(v.top_ports))}"
                      + (", order differs" if set(ports) == set(v.top_ports) else "")
                      for v in VARIANTS.values())
    raise ValueError(f"the ports match no overlay design ({diffs})")


class BoardBuild(NamedTuple):
    """One build of the DTPU for the board: what ``make -C hw/overlays OVERLAY=<name>`` passes
    to Vivado beside the contract's geometry and memories, and what the emulated board's .hwh
    declares. The xc7z020 does not hold every unit at once (docs/architecture.md, "Area
    budget"): int16 lanes and the vector unit are traded against each other."""

    name: str                               #: make OVERLAY=, the delegate's ``bitstream=<name>``
    precisions: tuple[str, ...]             #: the lanes built (PREC_EN)
    vec_en: int                             #: dtpu_cl_top's VEC_EN: contract 2.1's vector unit
    bitstream: str                          #: its .bit / .hwh file name on the board
    summary: str
    #: dtpu_cl_top's VEC_RQ_LANES: the vector unit's requantizing lanes (ADD/SUB/MUL, MEAN);
    #: fewer lanes, less area, 8 / lanes cycles a requantized word (the golden model's knob)
    vec_rq_lanes: int = 8
    #: RQ_EN of both tops: the requantization variants the post lanes build (a bit per
    #: RQ_VARIANT code; the driver reads the complement back from HWCFG1.RQ_OFF)
    rq_en: int = 31


#: The board builds. ``int8`` (the default): int8/uint8 lanes with the vector unit, so the
#: canonical int8/uint8 models run as one command list (ADD, pools, MEAN, tables inside the
#: partition: one inference, one kick), built lean: one requantizing lane in the vector unit
#: (VEC_RQ_LANES 1) and the requantization variants of the int8 board's two runtimes (RQ_EN 25:
#: DOUBLE, DOUBLE_UP, FP32). Yosys measures it at 46.8 k LUT, 198 DSP48E1, 116.5 BRAM36: inside
#: the 10 % LUT margin (47.9 k) by 1 044 LUT (docs/architecture.md, "Area budget of the board
#: builds"). ``int16``: int8/uint8/int16 lanes without the vector unit (47.7 k LUT, 197
#: DSP48E1): int16x8 convolutions on the DTPU, the vector operators on the CPU; the default
#: until the int8 build fitted, kept for int16x8 models.
BOARD_BUILDS = {
    "int8": BoardBuild("int8", ("int8", "uint8"), 1, "dtpu_pynqz2",
                       "int8/uint8 lanes and the vector unit (the default: whole models in "
                       "one kick; fits the xc7z020)", vec_rq_lanes=1, rq_en=25),
    "int16": BoardBuild("int16", ("int8", "uint8", "int16"), 0, "dtpu_pynqz2_int16",
                        "int8/uint8/int16 lanes, no vector unit (int16x8 convolutions; "
                        "fits the xc7z020)"),
}
DEFAULT_BOARD_BUILD = "int8"

#: Lane precisions of the default board build (backend=pynq lowers for whatever the loaded
#: bitstream reports, so the other builds work too)
BOARD_PRECISIONS = BOARD_BUILDS[DEFAULT_BOARD_BUILD].precisions


def board_build(name: str | None = None) -> BoardBuild:
    """The board build `name` (default :data:`DEFAULT_BOARD_BUILD`); ValueError naming the
    accepted ones otherwise."""
    key = DEFAULT_BOARD_BUILD if name in (None, "", "default") else str(name).strip().lower()
    if key not in BOARD_BUILDS:
        raise ValueError(f"board build {name!r} unknown; accepted: "
                         + ", ".join(f"{b.name} ({b.summary})" for b in BOARD_BUILDS.values()))
    return BOARD_BUILDS[key]


def board_config(build: str | None = None):
    """The contract's defaults with the knobs of board build `build` (default: the default
    build's): its precisions, the vector unit's requantizing lanes and the requantization
    variants built, so the golden model of that build runs the RTL's cycles."""
    from dtpu.hw.config import HwConfig

    b = board_build(build)
    return HwConfig(ENABLED=list(b.precisions), VEC_RQ_LANES=b.vec_rq_lanes, RQ_EN=b.rq_en)


def build_params(cfg=None, build: str | None = None) -> dict[str, str]:
    """The DTPU IP's parameters for a build (default: :func:`board_config` of board build
    `build`), as the overlay build passes them to Vivado (hw/overlays/Makefile, in this order):
    the geometry, memories, PREC_EN, VEC_RQ_LANES and RQ_EN of `cfg`, VEC_EN of the board
    build."""
    b = board_build(build)
    c = cfg or board_config(b.name)
    return {"ROWS": str(c.ROWS), "COLS": str(c.COLS), "LOG_WEIGHT_WORDS": str(c.LOG_WEIGHT_WORDS),
            "LOG_PARAM_ENTRIES": str(c.LOG_PARAM_ENTRIES), "LOG_ACT_WORDS": str(c.LOG_ACT_WORDS),
            "PREC_EN": f"0x{c.prec_enable_mask:04X}", "VEC_EN": str(b.vec_en),
            "VEC_RQ_LANES": str(c.VEC_RQ_LANES), "RQ_EN": str(c.RQ_EN)}


def vector_unit_of(params: dict) -> bool:
    """Whether the DTPU IP with these parameters (the .hwh's, as pynq's ``ip_dict`` gives them)
    has the vector unit: VEC_EN set and not 0. A .hwh of a build before VEC_EN (no such
    parameter) has none. The bitstream says it, not a register: VERSION 2.1 names the list
    format, not the units built (:attr:`dtpu.driver.Transport.vector_unit`)."""
    value = str(params.get("VEC_EN", "0")).strip() or "0"
    try:
        return int(value, 0) != 0
    except ValueError:
        raise ValueError(f"DTPU IP parameter VEC_EN={value!r}; accepted: 0 or 1") from None


def vec_rq_lanes_of(params: dict) -> int:
    """The vector unit's requantizing lanes of the DTPU IP with these parameters (the .hwh's
    VEC_RQ_LANES): the golden model's knob of the same name, which sets the cycles of a
    requantized element-wise word and of MEAN. No register holds it (the list format does not
    change with it), so the bitstream's .hwh says it, as for VEC_EN; a .hwh without it is a
    build with dtpu_cl_top's default, 8."""
    value = str(params.get("VEC_RQ_LANES", "8")).strip() or "8"
    try:
        lanes = int(value, 0)
    except ValueError:
        lanes = None
    if lanes not in (8, 4, 2, 1):
        raise ValueError(f"DTPU IP parameter VEC_RQ_LANES={value!r}; accepted: 8, 4, 2 or 1")
    return lanes


__all__ = ["ADDRESS_MAP", "ADDRESS_MAP_2", "BITSTREAM_NAME", "BOARD_BUILDS", "BOARD_OVERLAY_DIR",
           "BOARD_PRECISIONS", "BoardBuild", "DEFAULT_BOARD_BUILD", "board_build",
           "BUS_INTERFACES", "BUS_INTERFACES_2", "BUS_SIGNALS", "BUS_SIGNALS_2", "CLOCK_PORT", "DDR_WINDOW",
           "DEFAULT_CONTRACT", "DMA_ACT", "DMA_DATA_WIDTH", "DMA_LENGTH_WIDTH", "DMA_WGT", "DTPU",
           "DTPU_VLNV", "FCLK_MHZ", "HP_DATA_WIDTH", "HP_PORT", "HP_SEGMENT", "INSTANCES",
           "INSTANCES_2", "INTC", "INTC_ADDRESS", "IRQ_F2P_GIC_ID", "IRQ_F2P_INDEX", "IRQ_PORT",
           "MEM_SC", "M_AXI", "M_AXI_ADDR_WIDTH", "M_AXI_DATA_WIDTH", "M_AXI_ID_WIDTH", "M_AXI_MAX_BURST", "PS7", "RESET_PORT",
           "SLAVE_INTERFACE", "STREAM_DMA", "TIED_OFF_2", "TIE_OFF_VALUES", "TOP", "TOP_2",
           "TOP_INTERFACES_2", "TOP_PARAMS", "TOP_PORTS", "TOP_PORTS_2", "VARIANTS",
           "TOP_PARAMS_2", "VLNV", "Variant", "XADC", "board_config", "build_params", "top_ports",
           "variant_of_ports", "vec_rq_lanes_of", "vector_unit_of"]
