# Names, addresses and build settings of the DTPU overlay for the PYNQ-Z2.
#
# The Python side relies on the same values (pylib/dtpu/board/design.py: the board transport finds
# its IPs by these names, the board emulation builds this design); tests/test_overlay.py keeps the
# two equal and checks the port names against hw/rtl/dtpu_axi.v. Change both together.

# The DTPU IP (hw/rtl packaged by package_ip.tcl); the PYNQ driver binds to this VLNV.
set DTPU_VLNV        dtpu.org:dtpu:dtpu_axi:1.0
set DTPU_TOP         dtpu_axi
set DTPU_CLOCK       clk
set DTPU_RESET       aresetn
set DTPU_BUSIF       {s_axil s_axis_wgt s_axis_act m_axis_res}
set DTPU_PARAMS      {ROWS COLS LOG_WEIGHT_WORDS LOG_PARAM_ENTRIES LOG_ACT_WORDS PREC_EN AXIL_ADDR_WIDTH}

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
