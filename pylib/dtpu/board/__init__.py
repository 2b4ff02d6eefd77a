"""The DTPU on the PYNQ-Z2: the pynq transport, the PYNQ drivers, XADC power monitoring.

``pynq`` is never required to import this package: it is imported by :func:`import_pynq` when a
board is actually used (``backend=pynq``). On a machine without a board, ``DTPU_PYNQ_EMULATE=1``
makes :func:`import_pynq` install :mod:`dtpu.board.emulate`, a stand-in for the part of the pynq
API the transport uses, backed by the golden model; the transport itself cannot tell.

Typical use on the board (Jupyter)::

    from dtpu.board import load_overlay
    overlay = load_overlay("/home/xilinx/pynq/overlays/dtpu/dtpu_pynqz2.bit")
    overlay.dtpu.status          # {'BUSY': 0, 'DONE': 0, 'ERROR': 0, 'STATE': 0}
    overlay.xadc.temperature     # degrees C
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from dtpu.board.design import BITSTREAM_NAME, BOARD_OVERLAY_DIR, DTPU_VLNV

log = logging.getLogger(__name__)

EMULATE_ENV = "DTPU_PYNQ_EMULATE"
BITSTREAM_ENV = "DTPU_BITSTREAM"


def emulation_requested() -> bool:
    return os.environ.get(EMULATE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def import_pynq():
    """The pynq module: the real one on the board, the emulation when DTPU_PYNQ_EMULATE is set
    (and no pynq was imported before), else a RuntimeError saying how to get either."""
    if "pynq" not in sys.modules and emulation_requested():
        from dtpu.board import emulate

        emulate.install()
    try:
        import pynq
    except ImportError as exc:
        raise RuntimeError(
            f"backend=pynq needs the pynq package, which the PYNQ-Z2 image provides ({exc}); "
            f"to run the board emulation on another machine set {EMULATE_ENV}=1") from exc
    return pynq


def default_bitstream() -> Path:
    """$DTPU_BITSTREAM, else the overlay's install location on the board."""
    env = os.environ.get(BITSTREAM_ENV, "").strip()
    return Path(env) if env else Path(BOARD_OVERLAY_DIR) / f"{BITSTREAM_NAME}.bit"


def check_bitstream(path: str | os.PathLike) -> Path:
    """A .bit file that exists and has its .hwh beside it (PYNQ reads the design from the .hwh)."""
    p = Path(path)
    if p.suffix != ".bit":
        raise ValueError(f"bitstream {str(p)!r} is not a .bit file; expected the path of the "
                         f"overlay's .bit with its .hwh beside it")
    if not p.is_file():
        raise ValueError(f"bitstream {str(p)!r} does not exist; build it with `make -C hw/overlays` "
                         f"and copy build/{BITSTREAM_NAME}.bit and .hwh to the board")
    if not p.with_suffix(".hwh").is_file():
        raise ValueError(f"bitstream {str(p)!r} has no {p.with_suffix('.hwh').name} beside it; "
                         f"PYNQ needs the .hwh to find the IPs")
    return p


def load_overlay(bitstream: str | os.PathLike | None = None, download: bool = True):
    """``pynq.Overlay`` with the DTPU and XADC drivers registered, so ``overlay.dtpu`` is a
    :class:`dtpu.board.ip.DtpuIP` and ``overlay.xadc`` a :class:`dtpu.board.ip.XadcIP`."""
    pynq = import_pynq()
    from dtpu.board import ip

    ip.drivers(pynq)
    path = check_bitstream(bitstream if bitstream is not None else default_bitstream())
    log.info("loading overlay %s", path)
    return pynq.Overlay(str(path), download=download)


__all__ = ["BITSTREAM_ENV", "DTPU_VLNV", "EMULATE_ENV", "check_bitstream", "default_bitstream",
           "emulation_requested", "import_pynq", "load_overlay"]
