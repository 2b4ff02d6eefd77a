"""Small cocotb helpers the unit benches share: the 10 ns clock and driving several inputs at
once (a unit's idle / reset state in one call, e.g. ``drive(dut, rst_n=0, start=0)``)."""
from __future__ import annotations

import cocotb
from cocotb.clock import Clock


def start_clock(dut, period_ns: int = 10, name: str = "clk"):
    """Start the clock on ``dut.<name>`` (a period of `period_ns`)."""
    return cocotb.start_soon(Clock(getattr(dut, name), period_ns, unit="ns").start())


def drive(dut, **values) -> None:
    """Set each input ``dut.<name>`` to its value (in the order given)."""
    for name, value in values.items():
        getattr(dut, name).value = value
