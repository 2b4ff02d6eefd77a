"""Register values read by name: ``status.done``, not ``status & 0b10``.

A register's bit fields come from contract.json (or, for a vendor IP such as the AXI DMA, from
its data sheet); :func:`register_type` turns them into an ``int`` subclass with one read-only
property per field, so a value read once can be asked for its fields (a one-bit field as a bool,
a wider one as an int) and still compares, formats and masks as the plain integer it is.
"""
from __future__ import annotations

import functools
from typing import Iterable


def _field(lsb: int, width: int):
    mask = (1 << width) - 1
    if width == 1:
        return property(lambda self: bool(self >> lsb & 1))
    return property(lambda self: self >> lsb & mask)


@functools.lru_cache(maxsize=64)
def _register_type(name: str, fields: tuple[tuple[str, int, int], ...]) -> type:
    members = {f.lower(): _field(lsb, width) for f, lsb, width in fields}
    members["__slots__"] = ()
    members["__doc__"] = f"{name} as read: " + ", ".join(
        f"{f.lower()} (bit{'s' if w > 1 else ''} {lsb}{f'..{lsb + w - 1}' if w > 1 else ''})"
        for f, lsb, w in fields)
    members["__repr__"] = lambda self: f"{name}({int(self):#x})"
    return type(name, (int,), members)


def register_type(name: str, fields: Iterable[dict]) -> type:
    """An ``int`` subclass named `name` with a property per field (``{"name", "lsb", "width"}``
    dicts as contract.json lists them; the property is the field's name in lower case)."""
    return _register_type(name, tuple((f["name"], int(f["lsb"]), int(f.get("width", 1)))
                                      for f in fields))


#: an AXI DMA channel's status register (Xilinx PG021, DMASR), as PYNQ's dma.py reads it
Dmasr = register_type("DMASR", [
    {"name": "HALTED", "lsb": 0}, {"name": "IDLE", "lsb": 1},
    {"name": "DMA_INT_ERR", "lsb": 4}, {"name": "DMA_SLV_ERR", "lsb": 5},
    {"name": "DMA_DEC_ERR", "lsb": 6}, {"name": "IOC_IRQ", "lsb": 12},
    {"name": "ERR_IRQ", "lsb": 14}])


__all__ = ["Dmasr", "register_type"]
