"""Backend registry: a name in the delegate's `backend` option maps to a class here.

Backends import lazily so that choosing `model` never imports cocotb or pynq.
"""
from __future__ import annotations

import importlib

from dtpu.backends.base import Backend, HwCounters, PowerReading, Probes

_REGISTRY = {
    "reference": "dtpu.backends.reference:ReferenceBackend",
    "isro": "dtpu.backends.isro:IsroBackend",
    "model": "dtpu.backends.model:ModelBackend",
    "pynq": "dtpu.backends.pynq:PynqBackend",
    "rtl": "dtpu.backends.rtl:RtlBackend",
}


def names() -> list[str]:
    return sorted(_REGISTRY)


def register(name: str, target: str) -> None:
    """Register `module:Class` under `name` (later issues add model, rtl, pynq, isro)."""
    _REGISTRY[name] = target


def get(name: str) -> type[Backend]:
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; accepted: {', '.join(names())}") from None
    module, _, cls = target.partition(":")
    found = getattr(importlib.import_module(module), cls)
    if not (isinstance(found, type) and issubclass(found, Backend)):
        # the delegate reads a backend's capabilities (lists, placement_error, job_streams...)
        # as declared attributes of Backend, not by probing: a class outside it would miss them
        raise ValueError(f"backend {name!r}: {target} is not a subclass of "
                         f"dtpu.backends.Backend; accepted: a Backend subclass")
    return found


__all__ = ["Backend", "HwCounters", "PowerReading", "Probes", "get", "names", "register"]
