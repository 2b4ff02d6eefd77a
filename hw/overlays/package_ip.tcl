# Package hw/rtl as the DTPU IP (VLNV and interface names from config.tcl).
#
#   vivado -mode batch -source package_ip.tcl -tclargs <rtl_dir> <ip_dir> [<CONTRACT>]
#
# Every hw/rtl/*.v goes in, with dtpu_regs.vh and dtpu_cl_regs.vh as includes; the top is the
# contract's (DTPU_TOP_2 = dtpu_cl_top for 2.0, DTPU_TOP = dtpu_axi for 1.2). The IP packager
# infers the bus interfaces from the port names; this script then ties them to the clock, marks
# aresetn active low and refuses to save an IP that lacks an interface the block design of that
# contract connects:
#   CONTRACT=2 (default, 2.0): the AXI4-Lite slave s_axil_* and the AXI4 master m_axi_* (read
#              and write channels; DTPU_BUSIF_2), the master with an address space for the block
#              design to map DDR into, and irq as a level-high interrupt (what the AXI INTC in
#              front of IRQ_F2P expects). dtpu_cl_top's 1.2 streams, which the 2.0 design leaves
#              unconnected, get the constant driver values of DTPU_TIED_OFF_2 on their inputs;
#   CONTRACT=1 (1.2): s_axil_* and the AXI4-Streams s_axis_wgt_*, s_axis_act_*, m_axis_res_*
#              (DTPU_BUSIF).
# The parameters the block design sets must be user parameters of the IP: DTPU_PARAMS, and for
# 2.0 DTPU_PARAMS_2 (the same, VEC_EN and VEC_RQ_LANES: dtpu_cl_top's vector unit).
# The VLNV stays the same for both: the PYNQ driver binds to it and tells 1.2 from 2.0 by the
# core's VERSION register.

set here [file dirname [file normalize [info script]]]
source [file join $here config.tcl]

if {[llength $argv] ni {2 3}} {
    error "usage: vivado -mode batch -source package_ip.tcl -tclargs <rtl_dir> <ip_dir> \[<CONTRACT>\]"
}
lassign $argv rtl_dir ip_dir CONTRACT
if {$CONTRACT eq ""} {
    set CONTRACT $DEFAULT_CONTRACT
}
if {$CONTRACT ni {1 2}} {
    error "CONTRACT must be 1 (contract 1.2) or 2 (contract 2.0), not '$CONTRACT'"
}
set busifs [expr {$CONTRACT == 2 ? $DTPU_BUSIF_2 : $DTPU_BUSIF}]
set top [expr {$CONTRACT == 2 ? $DTPU_TOP_2 : $DTPU_TOP}]
set rtl_dir [file normalize $rtl_dir]
set ip_dir [file normalize $ip_dir]
lassign [split $DTPU_VLNV :] ip_vendor ip_library ip_name ip_version

set sources [lsort [glob -nocomplain -directory $rtl_dir *.v]]
set headers [lsort [glob -nocomplain -directory $rtl_dir *.vh]]
if {[lsearch -exact [lmap f $sources {file rootname [file tail $f]}] $top] < 0} {
    error "no $top.v in $rtl_dir (found: [lmap f $sources {file tail $f}])"
}

file delete -force $ip_dir ${ip_dir}_project
create_project ${ip_name}_ip ${ip_dir}_project -part $PART -force
add_files -norecurse $sources
if {[llength $headers]} {
    add_files -norecurse $headers
    set_property file_type {Verilog Header} [get_files $headers]
}
set_property include_dirs [list $rtl_dir] [current_fileset]
set_property top $top [current_fileset]
update_compile_order -fileset sources_1

ipx::package_project -root_dir $ip_dir -vendor $ip_vendor -library $ip_library \
    -taxonomy /UserIP -import_files -set_current true
set core [ipx::current_core]
set_property name $ip_name $core
set_property version $ip_version $core
set_property display_name "DTPU tensor accelerator ($top)" $core
if {$CONTRACT == 2} {
    set_property description "DTPU (contract 2.0): AXI4-Lite registers, 64-bit AXI4 master, level interrupt" $core
} else {
    set_property description "DTPU: AXI4-Lite registers, 64-bit weight/activation/result AXI4-Streams" $core
}
set_property supported_families {zynq Production} $core

# A bus interface parameter set to a value, added first when inference did not create it.
proc set_bus_parameter {iface name value} {
    set param [ipx::get_bus_parameters $name -of_objects $iface]
    if {[llength $param] == 0} {
        set param [ipx::add_bus_parameter $name $iface]
    }
    set_property value $value $param
}

# Interfaces: exactly those the block design connects, all on the one clock.
foreach busif $busifs {
    if {[llength [ipx::get_bus_interfaces $busif -of_objects $core]] == 0} {
        error "the IP packager did not infer bus interface $busif from the ports of $top"
    }
    ipx::associate_bus_interfaces -busif $busif -clock $DTPU_CLOCK $core
}
if {$CONTRACT == 2} {
    # the master: inferred from m_axi_* as AXI4 (AxLEN is 8 bits); it needs an address space,
    # 32-bit addresses (4 GiB), for the block design to assign HP0's DDR segment into
    set m_if [ipx::get_bus_interfaces $DTPU_MASTER -of_objects $core]
    if {[get_property INTERFACE_MODE $m_if] ne "master"} {
        error "bus interface $DTPU_MASTER of $top was not inferred as a master"
    }
    set space [ipx::get_address_spaces $DTPU_MASTER -of_objects $core]
    if {[llength $space] == 0} {
        set space [ipx::add_address_space $DTPU_MASTER $core]
    }
    set_property range 4G $space
    set_property width $M_AXI_DATA_WIDTH $space
    set_property master_address_space_ref $DTPU_MASTER $m_if
    # the interrupt: IRQ.PENDING, a level held until the driver acknowledges it
    set irq_if [ipx::get_bus_interfaces $DTPU_IRQ -of_objects $core]
    if {[llength $irq_if] == 0} {
        set irq_if [ipx::infer_bus_interface $DTPU_IRQ xilinx.com:signal:interrupt_rtl:1.0 $core]
    }
    if {[llength $irq_if] == 0} {
        error "no interrupt interface on port $DTPU_IRQ of $top"
    }
    set_bus_parameter $irq_if SENSITIVITY LEVEL_HIGH
    # the 1.2 streams the 2.0 design leaves unconnected: defined constants on their inputs
    foreach {port value} $DTPU_TIED_OFF_2 {
        set p [ipx::get_ports $port -of_objects $core]
        if {[llength $p] == 0} {
            error "no port $port on $top to tie off"
        }
        set_property driver_value $value $p
    }
}

set reset_if [ipx::get_bus_interfaces $DTPU_RESET -of_objects $core]
if {[llength $reset_if] == 0} {
    error "no reset interface $DTPU_RESET inferred"
}
set_bus_parameter $reset_if POLARITY ACTIVE_LOW
ipx::associate_bus_interfaces -clock $DTPU_CLOCK -reset $DTPU_RESET $core

foreach param [expr {$CONTRACT == 2 ? $DTPU_PARAMS_2 : $DTPU_PARAMS}] {
    if {[llength [ipx::get_user_parameters $param -of_objects $core]] == 0} {
        error "parameter $param of $top is not a user parameter of the IP"
    }
}

ipx::create_xgui_files $core
ipx::update_checksums $core
ipx::check_integrity $core
ipx::save_core $core
close_project
puts "packaged $DTPU_VLNV in $ip_dir"
