# Build the DTPU overlay for the PYNQ-Z2: block design, bitstream, hardware handoff.
#
#   vivado -mode batch -source build.tcl -tclargs <ip_dir> <out_dir> <jobs> \
#       <ROWS> <COLS> <LOG_WEIGHT_WORDS> <LOG_PARAM_ENTRIES> <LOG_ACT_WORDS> <PREC_EN> <VEC_EN> \
#       <VEC_RQ_LANES> <RQ_EN> [<CONTRACT>]
#
# (the Makefile passes the contract's values and the board build's PREC_EN, VEC_EN,
# VEC_RQ_LANES and RQ_EN, OVERLAY=). VEC_EN=1 builds dtpu_cl_top's vector unit (contract 2.1's
# VEC descriptors) with VEC_RQ_LANES requantizing lanes; the 1.2 top has none, so CONTRACT=1
# takes VEC_EN=0 only (and sets no VEC_RQ_LANES). RQ_EN (both tops): the requantization
# variants the post lanes build. Writes <out_dir>/$BD_NAME.bit and .hwh (copy both
# to the board) and <out_dir>/reports/. Both designs: the Zynq PS with the PYNQ-Z2 board preset
# and FCLK_CLK0 for the fabric; M_AXI_GP0 -> AXI interconnect -> the AXI4-Lite slaves; the XADC
# Wizard; the DTPU IP packaged from hw/rtl for the same contract.
#
# CONTRACT=2 (default, contract 2.0, docs/contract2.md): the IP's top is dtpu_cl_top; no DMAs.
# The DTPU's own AXI4 master m_axi (read and write channels) goes through a SmartConnect into
# S_AXI_HP0 (64-bit; the SmartConnect turns AXI4 into the port's AXI3), mapped onto all of DDR;
# its irq goes through an AXI INTC to the PS's IRQ_F2P[0], which is how pynq finds it
# (overlay.dtpu.irq) and the line PYNQ's image services. dtpu_cl_top's 1.2 streams stay
# unconnected: package_ip.tcl tied their inputs off (config.tcl DTPU_TIED_OFF_2).
#
# CONTRACT=1 (contract 1.2, the fallback bitstream): the IP's top is dtpu_axi; two simple-mode
# AXI DMAs in front of its streams (weights on dma_wgt, activations and results on dma_act)
# master DDR through S_AXI_HP0. The DTPU's irq and the DMAs' interrupts stay unconnected: the
# driver polls.

set here [file dirname [file normalize [info script]]]
source [file join $here config.tcl]

if {[llength $argv] ni {12 13}} {
    error "usage: vivado -mode batch -source build.tcl -tclargs <ip_dir> <out_dir> <jobs>\
           <ROWS> <COLS> <LOG_WEIGHT_WORDS> <LOG_PARAM_ENTRIES> <LOG_ACT_WORDS> <PREC_EN> <VEC_EN>\
           <VEC_RQ_LANES> <RQ_EN> \[<CONTRACT>\]"
}
lassign $argv ip_dir out_dir jobs ROWS COLS LOG_WEIGHT_WORDS LOG_PARAM_ENTRIES LOG_ACT_WORDS PREC_EN VEC_EN \
    VEC_RQ_LANES RQ_EN CONTRACT
if {$CONTRACT eq ""} {
    set CONTRACT $DEFAULT_CONTRACT
}
if {$CONTRACT ni {1 2}} {
    error "CONTRACT must be 1 (contract 1.2) or 2 (contract 2.0), not '$CONTRACT'"
}
if {$VEC_EN ni {0 1}} {
    error "VEC_EN must be 0 or 1 (dtpu_cl_top's vector unit), not '$VEC_EN'"
}
if {$VEC_RQ_LANES ni {8 4 2 1}} {
    error "VEC_RQ_LANES must be 8, 4, 2 or 1 (the vector unit's requantizing lanes), not '$VEC_RQ_LANES'"
}
if {![string is integer -strict $RQ_EN] || $RQ_EN < 1 || $RQ_EN > 31} {
    error "RQ_EN must be a mask of requantization variants, 1..31, not '$RQ_EN'"
}
if {$CONTRACT == 1 && $VEC_EN != 0} {
    error "VEC_EN=$VEC_EN with CONTRACT=1: the 1.2 top $DTPU_TOP has no vector unit; accepted there: VEC_EN=0"
}
set address_map [expr {$CONTRACT == 2 ? $ADDRESS_MAP_2 : $ADDRESS_MAP}]
set ip_dir [file normalize $ip_dir]
set out_dir [file normalize $out_dir]
puts "building the contract [expr {$CONTRACT == 2 ? {2.0} : {1.2}}] design"

if {[version -short] ne $VIVADO_TESTED} {
    puts "WARNING: written for Vivado $VIVADO_TESTED, running [version -short]: IP versions may differ"
}
if {[lsearch -exact [get_board_parts -quiet] $BOARD_PART] < 0} {
    error "board part $BOARD_PART is not installed: get the PYNQ-Z2 board files (TUL) into\
           <Vivado>/data/boards/board_files or the Xilinx board store (see hw/overlays/README.md)"
}

# -- project ---------------------------------------------------------------------------------------
create_project $BD_NAME [file join $out_dir vivado] -part $PART -force
set_property board_part $BOARD_PART [current_project]
set_property ip_repo_paths [list $ip_dir] [current_project]
update_ip_catalog
create_bd_design $BD_NAME

# -- cells -----------------------------------------------------------------------------------------
set ps7 [create_bd_cell -type ip -vlnv xilinx.com:ip:processing_system7:5.5 $INST_PS7]
apply_bd_automation -rule xilinx.com:bd_rule:processing_system7 \
    -config {make_external "FIXED_IO, DDR" apply_board_preset "1" Master "Disable" Slave "Disable"} $ps7
if {$CONTRACT == 2} {
    # HP0 for the DTPU's master; the fabric interrupt input IRQ_F2P for the AXI INTC's output
    set_property -dict [list \
        CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ $FCLK_MHZ \
        CONFIG.PCW_USE_M_AXI_GP0 {1} \
        CONFIG.PCW_USE_S_AXI_HP0 {1} \
        CONFIG.PCW_S_AXI_HP0_DATA_WIDTH $HP_DATA_WIDTH \
        CONFIG.PCW_USE_FABRIC_INTERRUPT {1} \
        CONFIG.PCW_IRQ_F2P_INTR {1} \
    ] $ps7
} else {
    set_property -dict [list \
        CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ $FCLK_MHZ \
        CONFIG.PCW_USE_M_AXI_GP0 {1} \
        CONFIG.PCW_USE_S_AXI_HP0 {1} \
        CONFIG.PCW_S_AXI_HP0_DATA_WIDTH $DMA_DATA_WIDTH \
    ] $ps7
}

set rst [create_bd_cell -type ip -vlnv xilinx.com:ip:proc_sys_reset:5.0 rst_fclk0]

set dtpu [create_bd_cell -type ip -vlnv $DTPU_VLNV $INST_DTPU]
set_property -dict [list \
    CONFIG.ROWS $ROWS \
    CONFIG.COLS $COLS \
    CONFIG.LOG_WEIGHT_WORDS $LOG_WEIGHT_WORDS \
    CONFIG.LOG_PARAM_ENTRIES $LOG_PARAM_ENTRIES \
    CONFIG.LOG_ACT_WORDS $LOG_ACT_WORDS \
    CONFIG.PREC_EN $PREC_EN \
    CONFIG.RQ_EN $RQ_EN \
] $dtpu
if {$CONTRACT == 2} {
    # contract 2.1's vector unit and its requantizing lanes (the 1.2 top has neither parameter)
    set_property -dict [list CONFIG.VEC_EN $VEC_EN CONFIG.VEC_RQ_LANES $VEC_RQ_LANES] $dtpu
}

if {$CONTRACT == 1} {
    set dma_common [list \
        CONFIG.c_include_sg {0} \
        CONFIG.c_sg_length_width $DMA_LENGTH_WIDTH \
        CONFIG.c_m_axi_mm2s_data_width $DMA_DATA_WIDTH \
        CONFIG.c_m_axis_mm2s_tdata_width $DMA_DATA_WIDTH \
        CONFIG.c_mm2s_burst_size {16} \
    ]
    set dma_wgt [create_bd_cell -type ip -vlnv xilinx.com:ip:axi_dma:7.1 $INST_DMA_WGT]
    set_property -dict [concat $dma_common [list CONFIG.c_include_s2mm {0}]] $dma_wgt
    set dma_act [create_bd_cell -type ip -vlnv xilinx.com:ip:axi_dma:7.1 $INST_DMA_ACT]
    set_property -dict [concat $dma_common [list \
        CONFIG.c_include_s2mm {1} \
        CONFIG.c_m_axi_s2mm_data_width $DMA_DATA_WIDTH \
        CONFIG.c_s_axis_s2mm_tdata_width $DMA_DATA_WIDTH \
        CONFIG.c_s2mm_burst_size {16} \
    ]] $dma_act
} else {
    # one interrupt input (the DTPU's irq, level high); its output is one wire (not the
    # interrupt interface a MicroBlaze takes) into IRQ_F2P
    set intc [create_bd_cell -type ip -vlnv xilinx.com:ip:axi_intc:4.1 $INST_INTC]
    set_property -dict [list CONFIG.C_IRQ_CONNECTION {1} CONFIG.C_IRQ_IS_LEVEL {1}] $intc
}

set xadc [create_bd_cell -type ip -vlnv xilinx.com:ip:xadc_wiz:3.3 $INST_XADC]
set xadc_config [list \
    CONFIG.INTERFACE_SELECTION {Enable_AXI} \
    CONFIG.ENABLE_RESET {false} \
    CONFIG.XADC_STARUP_SELECTION {channel_sequencer} \
    CONFIG.SEQUENCER_MODE {Continuous} \
    CONFIG.CHANNEL_ENABLE_VP_VN {false} \
    CONFIG.OT_ALARM {false} \
    CONFIG.USER_TEMP_ALARM {false} \
    CONFIG.VCCINT_ALARM {false} \
    CONFIG.VCCAUX_ALARM {false} \
    CONFIG.ENABLE_VCCPINT_ALARM {false} \
    CONFIG.ENABLE_VCCPAUX_ALARM {false} \
    CONFIG.ENABLE_VCCDDRO_ALARM {false} \
]
foreach channel $XADC_CHANNELS {
    lappend xadc_config CONFIG.CHANNEL_ENABLE_$channel {true}
}
set_property -dict $xadc_config $xadc

# control path: GP0 -> interconnect -> AXI4-Lite slaves
set ctrl [create_bd_cell -type ip -vlnv xilinx.com:ip:axi_interconnect:2.1 ctrl_ic]
set_property CONFIG.NUM_MI [expr {[llength $address_map] / 4}] $ctrl
connect_bd_intf_net [get_bd_intf_pins $INST_PS7/M_AXI_GP0] [get_bd_intf_pins ctrl_ic/S00_AXI]
set mi 0
foreach {inst intf base range} $address_map {
    connect_bd_intf_net [get_bd_intf_pins [format "ctrl_ic/M%02d_AXI" $mi]] \
        [get_bd_intf_pins $inst/$intf]
    incr mi
}

if {$CONTRACT == 1} {
    # data path: DMA masters -> SmartConnect -> HP0
    set mem [create_bd_cell -type ip -vlnv xilinx.com:ip:smartconnect:1.0 mem_sc]
    set masters [list $INST_DMA_WGT/M_AXI_MM2S $INST_DMA_ACT/M_AXI_MM2S $INST_DMA_ACT/M_AXI_S2MM]
    set_property -dict [list CONFIG.NUM_SI [llength $masters] CONFIG.NUM_MI {1}] $mem
    set si 0
    foreach master $masters {
        connect_bd_intf_net [get_bd_intf_pins $master] [get_bd_intf_pins [format "mem_sc/S%02d_AXI" $si]]
        incr si
    }
    connect_bd_intf_net [get_bd_intf_pins mem_sc/M00_AXI] [get_bd_intf_pins $INST_PS7/S_AXI_HP0]

    # the DTPU's streams
    foreach {stream spec} $STREAMS {
        lassign $spec dma dma_if dtpu_if
        connect_bd_intf_net [get_bd_intf_pins $dma/$dma_if] [get_bd_intf_pins $INST_DTPU/$dtpu_if]
    }
} else {
    # data path: the DTPU's AXI4 master -> SmartConnect (AXI4 to AXI3, bursts split to 16 beats)
    # -> HP0. A direct connection would put an AXI4 master (8-bit AxLEN) on an AXI3 slave.
    set mem [create_bd_cell -type ip -vlnv xilinx.com:ip:smartconnect:1.0 $INST_MEM_SC]
    set_property -dict [list CONFIG.NUM_SI {1} CONFIG.NUM_MI {1}] $mem
    connect_bd_intf_net [get_bd_intf_pins $INST_DTPU/$DTPU_MASTER] [get_bd_intf_pins $INST_MEM_SC/S00_AXI]
    connect_bd_intf_net [get_bd_intf_pins $INST_MEM_SC/M00_AXI] [get_bd_intf_pins $INST_PS7/$HP_PORT]

    # completion: DTPU irq -> AXI INTC -> IRQ_F2P[0]
    connect_bd_net [get_bd_pins $INST_DTPU/$DTPU_IRQ] [get_bd_pins $INST_INTC/intr]
    connect_bd_net [get_bd_pins $INST_INTC/irq] [get_bd_pins $INST_PS7/IRQ_F2P]
}

# one clock (FCLK_CLK0) and one reset for everything in the PL
set fclk [get_bd_pins $INST_PS7/FCLK_CLK0]
if {$CONTRACT == 2} {
    set cells [list $INST_DTPU $INST_XADC $INST_INTC ctrl_ic $INST_MEM_SC]
} else {
    set cells [list $INST_DTPU $INST_DMA_WGT $INST_DMA_ACT $INST_XADC ctrl_ic mem_sc]
}
connect_bd_net $fclk [get_bd_pins $INST_PS7/M_AXI_GP0_ACLK] [get_bd_pins $INST_PS7/S_AXI_HP0_ACLK] \
    [get_bd_pins rst_fclk0/slowest_sync_clk] \
    [get_bd_pins -of_objects [get_bd_cells $cells] -filter {TYPE == clk && DIR == I}]
connect_bd_net [get_bd_pins $INST_PS7/FCLK_RESET0_N] [get_bd_pins rst_fclk0/ext_reset_in]
connect_bd_net [get_bd_pins rst_fclk0/peripheral_aresetn] \
    [get_bd_pins -of_objects [get_bd_cells $cells] -filter {TYPE == rst && DIR == I}]

# addresses: the fixed map for the slaves; DDR for the masters (1.2: the DMAs, by
# assign_bd_address's defaults; 2.0: the DTPU, explicitly all of DDR so that any buffer the
# driver allocates is inside the window)
foreach {inst intf base range} $address_map {
    assign_bd_address -offset $base -range $range \
        -target_address_space [get_bd_addr_spaces $INST_PS7/Data] \
        [get_bd_addr_segs -of_objects [get_bd_intf_pins $inst/$intf]]
}
if {$CONTRACT == 2} {
    lassign $DDR_WINDOW ddr_base ddr_range
    assign_bd_address -offset $ddr_base -range $ddr_range \
        -target_address_space [get_bd_addr_spaces $INST_DTPU/$DTPU_MASTER] \
        [get_bd_addr_segs $INST_PS7/$HP_PORT/$HP_SEGMENT]
}
assign_bd_address

validate_bd_design
save_bd_design

# -- synthesis, implementation, outputs ------------------------------------------------------------
set bd_file [get_files $BD_NAME.bd]
generate_target all $bd_file
set wrapper [make_wrapper -files $bd_file -top]
add_files -norecurse $wrapper
set_property top ${BD_NAME}_wrapper [current_fileset]
add_files -fileset constrs_1 -norecurse [file join $here pynq_z2.xdc]
update_compile_order -fileset sources_1

launch_runs impl_1 -to_step write_bitstream -jobs $jobs
wait_on_run impl_1
if {[get_property PROGRESS [get_runs impl_1]] ne "100%"} {
    error "implementation failed: [get_property STATUS [get_runs impl_1]] (see [file join $out_dir vivado])"
}

file mkdir [file join $out_dir reports]
open_run impl_1
report_utilization -file [file join $out_dir reports utilization.txt]
report_timing_summary -file [file join $out_dir reports timing.txt]
report_power -file [file join $out_dir reports power.txt]

set bit [file join [get_property DIRECTORY [get_runs impl_1]] ${BD_NAME}_wrapper.bit]
set hwh [lindex [get_files -all -of_objects $bd_file $BD_NAME.hwh] 0]
file copy -force $bit [file join $out_dir $BD_NAME.bit]
file copy -force $hwh [file join $out_dir $BD_NAME.hwh]
puts "wrote [file join $out_dir $BD_NAME.bit] and [file join $out_dir $BD_NAME.hwh]"
