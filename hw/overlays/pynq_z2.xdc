# Constraints of the DTPU overlay on the PYNQ-Z2 (xc7z020clg400-1).
#
# The design uses no PL pins: DDR and FIXED_IO belong to the PS and are constrained by the
# processing_system7 IP; the only clock, FCLK_CLK0, is created by the PS7 IP at
# PCW_FPGA0_PERIPHERAL_FREQMHZ (100 MHz). The XADC uses its dedicated analog inputs only
# (on-chip sensors), which need no constraints. What remains is the bitstream itself.

set_property BITSTREAM.GENERAL.COMPRESS TRUE [current_design]
