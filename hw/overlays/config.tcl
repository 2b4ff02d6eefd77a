# Names, addresses and build settings of the DTPU overlay for the PYNQ-Z2.
#
# The Python side relies on the same values (pylib/dtpu/board/design.py: the board transport finds
# its IPs by these names, the board emulation builds this design); tests/test_overlay.py keeps the
# two equal and checks the port names against hw/rtl/dtpu_cl_top.v and hw/rtl/dtpu_axi.v. Change
# both together.
#
# Two designs: contract 2.0 (CONTRACT=2, the default: the 2.0 top dtpu_cl_top masters DDR through
# S_AXI_HP0 and interrupts the PS; the names for it are the *_2 and HP_/INTC ones at the end) and
# contract 1.2 (CONTRACT=1: the 1.2 top dtpu_axi, AXI DMAs feed its streams; the fallback
# bitstream, and the core backend=rtl path=jobs simulates).

# The DTPU IP (hw/rtl packaged by package_ip.tcl); the PYNQ driver binds to this VLNV, the same
# for both designs (it tells them apart by the core's VERSION register). DTPU_TOP is the 1.2
# design's top module, DTPU_TOP_2 the 2.0 design's.
set DTPU_VLNV        dtpu.org:dtpu:dtpu_axi:1.0
set DTPU_TOP         dtpu_axi
set DTPU_TOP_2       dtpu_cl_top
set DTPU_CLOCK       clk
set DTPU_RESET       aresetn
set DTPU_BUSIF       {s_axil s_axis_wgt s_axis_act m_axis_res}
set DTPU_BUSIF_2     {s_axil m_axi}
set DTPU_MASTER      m_axi
set DTPU_IRQ         irq
set DTPU_PARAMS      {ROWS COLS LOG_WEIGHT_WORDS LOG_PARAM_ENTRIES LOG_ACT_WORDS PREC_EN AXIL_ADDR_WIDTH RQ_EN}
# the 2.0 top's: the same, VEC_EN and VEC_RQ_LANES (contract 2.1's vector unit and its
# requantizing lanes, dtpu_cl_top only)
set DTPU_PARAMS_2    {ROWS COLS LOG_WEIGHT_WORDS LOG_PARAM_ENTRIES LOG_ACT_WORDS PREC_EN AXIL_ADDR_WIDTH RQ_EN VEC_EN VEC_RQ_LANES}

# Device and tool.
set PART             xc7z020clg400-1
set BOARD_PART       tul.com.tw:pynq-z2:part0:1.0
set VIVADO_TESTED    2022.1

# Block design: its name is also the name of the .bit and .hwh.
set BD_NAME          dtpu_pynqz2
set FCLK_MHZ         100
set INST_PS7         processing_system7_0
set INST_DTPU        dtpu
set INST_DMA_WGT     dma_wgt
set INST_DMA_ACT     dma_act
set INST_XADC        xadc
set INST_INTC        axi_intc_0
set INST_MEM_SC      mem_sc
set DEFAULT_CONTRACT 2

# AXI DMA: simple mode, 64-bit, and a 26-bit length register (a job's stream is one transfer,
# up to 64 MiB; the default 14 bits would stop at 16 KiB).
set DMA_LENGTH_WIDTH 26
set DMA_DATA_WIDTH   64

# M_AXI_GP0 address map: instance, AXI4-Lite slave interface, base, range.
set ADDRESS_MAP {
    dma_wgt S_AXI_LITE 0x40400000 0x10000
    dma_act S_AXI_LITE 0x40410000 0x10000
    dtpu    s_axil     0x43C00000 0x10000
    xadc    s_axi_lite 0x43C10000 0x10000
}

# DTPU stream: DMA instance, DMA stream interface, DTPU stream interface.
set STREAMS {
    wgt {dma_wgt M_AXIS_MM2S s_axis_wgt}
    act {dma_act M_AXIS_MM2S s_axis_act}
    res {dma_act S_AXIS_S2MM m_axis_res}
}

# XADC channels sampled by the sequencer (dtpu.board.xadc reads their status registers).
set XADC_CHANNELS    {TEMPERATURE VCCINT VCCAUX VBRAM VCCPINT VCCPAUX VCCDDRO}

# -- contract 2.0 (CONTRACT=2) ---------------------------------------------------------------------
# The DTPU's AXI4 master (m_axi, 64-bit data, 32-bit addresses) reaches DDR through a SmartConnect
# (AXI4 -> the HP port's AXI3) and S_AXI_HP0; HP_SEGMENT is Vivado's DDR segment behind HP0 and
# DDR_WINDOW (base, range) all of the PYNQ-Z2's 512 MiB. The DTPU's irq goes through the AXI INTC
# to IRQ_F2P[0], the one fabric interrupt line PYNQ services (and the way pynq finds it).
set HP_PORT          S_AXI_HP0
set HP_DATA_WIDTH    64
set HP_SEGMENT       HP0_DDR_LOWOCM
set DDR_WINDOW       {0x00000000 0x20000000}
set M_AXI_DATA_WIDTH 64
# dtpu_cl_top's master: one ID bit (always 0), bursts of at most 16 beats (already AXI3-legal:
# the SmartConnect converts the protocol, it does not split)
set M_AXI_ID_WIDTH   1
set M_AXI_MAX_BURST  16

# dtpu_cl_top keeps the 1.2 streams (the 1.2 protocol runs on them while no list runs); the 2.0
# design has no DMA to feed them and leaves them unconnected. package_ip.tcl gives their inputs
# these driver values, Vivado's tie-off for an unconnected input: no word ever arrives on
# s_axis_wgt/s_axis_act, and m_axis_res can never back up into the core. Port, value.
set DTPU_TIED_OFF_2 {
    s_axis_wgt_tdata  0
    s_axis_wgt_tvalid 0
    s_axis_wgt_tlast  0
    s_axis_act_tdata  0
    s_axis_act_tvalid 0
    s_axis_act_tlast  0
    m_axis_res_tready 1
}

# M_AXI_GP0 address map of the 2.0 design: no DMAs; DTPU and XADC where they are in 1.2.
set ADDRESS_MAP_2 {
    dtpu       s_axil     0x43C00000 0x10000
    xadc       s_axi_lite 0x43C10000 0x10000
    axi_intc_0 s_axi      0x41800000 0x10000
}
