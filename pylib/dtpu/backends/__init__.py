"""Backend registry: a name in the delegate's `backend` option maps to a class here.

Backends import lazily so that choosing `model` never imports cocotb or pynq.
"""
from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator

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


@contextlib.contextmanager
def registered(name: str, target: str) -> Iterator[None]:
    """`module:Class` registered under `name` for the `with` block only, whatever the block
    raises: the name's former target (or its absence) comes back after it. For tests and tools
    that plug in a backend (a spy, a failing one) without leaving it in the process's registry."""
    missing = object()
    before = _REGISTRY.get(name, missing)
    register(name, target)
    try:
        yield
    finally:
        if before is missing:
            _REGISTRY.pop(name, None)
        else:
            _REGISTRY[name] = before


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


__all__ = ["Backend", "HwCounters", "PowerReading", "Probes", "get", "names", "register", "registered"]
