"""Board emulation for CI: a fake ``pynq`` over an emulated PYNQ-Z2 running the golden model.

``install()`` puts modules named ``pynq``, ``pynq.lib`` and ``pynq.lib.dma`` on ``sys.modules``
(:mod:`dtpu.board.emulate.fakepynq`), writes the emulated overlay (a placeholder .bit and the
.hwh of the hw/overlays design) and points ``$DTPU_BITSTREAM`` at it unless already set. From
then on the board code runs unchanged: ``pynq.Overlay``, ``allocate``, MMIO and the AXI DMA
channels are emulated at their register level (:mod:`dtpu.board.emulate.board`), and
``BOARD.trace`` records the register and DMA sequence the real board would see.

What it does not emulate: timing (stalls, DMA bandwidth), caches, interrupts, scatter-gather
DMA, and the XADC's sensors (its codes are synthetic, and a warning says so).
``DTPU_PYNQ_EMULATE=1`` makes :func:`dtpu.board.import_pynq` call :func:`install`.
"""
from __future__ import annotations

import logging
import os
import sys
import tempfile
import types
from pathlib import Path

from dtpu.board import BITSTREAM_ENV
from dtpu.board.design import BITSTREAM_NAME
from dtpu.board.emulate.board import BOARD, Access, Board
from dtpu.hw.config import HwConfig, get_config

log = logging.getLogger(__name__)

PLACEHOLDER = b"DTPU BOARD EMULATION: not a bitstream. The .hwh beside it describes the emulated design.\n"
_MODULES = ("pynq", "pynq.lib", "pynq.lib.dma")
_installed: dict[str, types.ModuleType] = {}
_design_dir: list[Path] = []


def write_design(directory: str | os.PathLike, cfg: HwConfig | None = None) -> Path:
    """Write <directory>/dtpu_pynqz2.bit (a placeholder) and .hwh; return the .bit path."""
    from dtpu.board.emulate.hwh import write_hwh

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    bit = d / f"{BITSTREAM_NAME}.bit"
    bit.write_bytes(PLACEHOLDER)
    write_hwh(bit.with_suffix(".hwh"), cfg or get_config(),
              note="written by dtpu.board.emulate for the board emulation, not by Vivado")
    return bit


def _modules() -> dict[str, types.ModuleType]:
    from dtpu.board.emulate import fakepynq

    pynq = types.ModuleType("pynq", fakepynq.__doc__)
    lib = types.ModuleType("pynq.lib")
    dma = types.ModuleType("pynq.lib.dma")
    for name in ("Overlay", "allocate", "MMIO", "DefaultIP", "PynqBuffer", "__version__", "EMULATED"):
        setattr(pynq, name, getattr(fakepynq, name))
    dma.DMA = fakepynq.DMA
    lib.DMA = fakepynq.DMA
    lib.dma = dma
    pynq.lib = lib
    pynq.__path__ = []
    lib.__path__ = []
    return {"pynq": pynq, "pynq.lib": lib, "pynq.lib.dma": dma}


def install(directory: str | os.PathLike | None = None) -> Path:
    """Make ``import pynq`` the emulation (idempotent); return the emulated overlay's .bit."""
    if not _installed:
        present = [m for m in _MODULES if m in sys.modules]
        if present:
            raise RuntimeError(f"cannot emulate pynq: {', '.join(present)} already imported "
                               f"(a real pynq, or another fake)")
        _installed.update(_modules())
        log.warning("pynq emulation installed: the DTPU board is the golden model, the XADC "
                    "readings are synthetic")
    for name, module in _installed.items():
        sys.modules[name] = module
    if directory is not None or not _design_dir:
        d = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="dtpu-emu-"))
        _design_dir[:] = [d]
        bit = write_design(d)
    else:
        bit = _design_dir[0] / f"{BITSTREAM_NAME}.bit"
    os.environ.setdefault(BITSTREAM_ENV, str(bit))
    return bit


def uninstall() -> None:
    """Remove the fake modules from sys.modules (the emulated board keeps its state)."""
    for name, module in _installed.items():
        if sys.modules.get(name) is module:
            del sys.modules[name]


def installed() -> bool:
    return bool(_installed) and sys.modules.get("pynq") is _installed["pynq"]


def current_board() -> Board:
    """The emulated board (what the last Overlay download programmed)."""
    return BOARD


__all__ = ["Access", "BOARD", "Board", "PLACEHOLDER", "current_board", "install", "installed",
           "uninstall", "write_design"]
