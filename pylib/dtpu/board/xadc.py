"""The Zynq-7000 XADC as the AXI XADC Wizard (PG091) exposes it, and its transfer functions.

Status registers hold 16-bit words whose 12 most significant bits are the ADC code (UG480,
"ADC Transfer Functions"):

* temperature: T = code * 503.975 / 4096 - 273.15 (degrees C)
* supply sensors (VCCINT, VCCAUX, VCCBRAM and, on Zynq, VCCPINT, VCCPAUX, VCCO_DDR):
  V = code / 4096 * 3.0 (volts; the supply sensors' full scale is 3 V)

The thesis' sampler scaled the supply codes by 1.8 V instead of 3 V, and turned the droop of
each supply below its nominal value into a current through an assumed capacitor ESR. Neither is
a measurement of power; here the XADC gives temperature and voltages only (docs/power.md).
Nothing in this module imports pynq: a reader is any ``read(offset) -> int``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

# AXI XADC Wizard register map (byte offsets from the IP's base address)
SRR = 0x00          # software reset: write 0x0000000A
SR = 0x04           # status
AOSR = 0x08         # alarm output status
CONVSTR = 0x0C
SYSMONRR = 0x10     # XADC hard macro reset
TEMPERATURE = 0x200
VCCINT = 0x204
VCCAUX = 0x208
VPVN = 0x20C
VREFP = 0x210
VREFN = 0x214
VCCBRAM = 0x218
VCCPINT = 0x234     # Zynq-7000 only: PS supplies
VCCPAUX = 0x238
VCCO_DDR = 0x23C
MAX_TEMPERATURE = 0x280
MIN_TEMPERATURE = 0x290
FLAGS = 0x2FC
CONFIG0 = 0x300
CONFIG1 = 0x304
CONFIG2 = 0x308

SRR_RESET = 0x0000000A

#: supply sensor name -> (register, nominal volts on the PYNQ-Z2)
SUPPLIES = {
    "vccint": (VCCINT, 1.0),
    "vccaux": (VCCAUX, 1.8),
    "vccbram": (VCCBRAM, 1.0),
    "vccpint": (VCCPINT, 1.0),
    "vccpaux": (VCCPAUX, 1.8),
    "vccoddr": (VCCO_DDR, 1.5),
}


def code(register_value: int) -> int:
    """The 12-bit ADC code of a status register (MSB-justified in bits 15:4)."""
    return (int(register_value) >> 4) & 0xFFF


def temperature_c(register_value: int) -> float:
    return code(register_value) * 503.975 / 4096.0 - 273.15


def supply_v(register_value: int) -> float:
    return code(register_value) / 4096.0 * 3.0


def register_for_temperature(celsius: float) -> int:
    """Inverse of :func:`temperature_c` (for emulation and tests)."""
    c = round((celsius + 273.15) * 4096.0 / 503.975)
    return max(0, min(0xFFF, c)) << 4


def register_for_supply(volts: float) -> int:
    c = round(volts * 4096.0 / 3.0)
    return max(0, min(0xFFF, c)) << 4


@dataclass(frozen=True)
class Sample:
    """One reading of all sensors; `power_w` is an external meter's reading, if any."""

    t: float
    temperature_c: float | None
    voltages_v: dict[str, float]
    power_w: float | None = None


def read_sensors(read: Callable[[int], int]) -> tuple[float, dict[str, float]]:
    """Temperature and the six supplies through `read(offset)`: seven register reads."""
    return (temperature_c(read(TEMPERATURE)),
            {name: supply_v(read(reg)) for name, (reg, _) in SUPPLIES.items()})


__all__ = ["SUPPLIES", "Sample", "code", "read_sensors", "register_for_supply",
           "register_for_temperature", "supply_v", "temperature_c"]
