"""Board emulation for CI: the real ``pynq`` package over an emulated PYNQ-Z2 running the golden model.

:func:`install` makes the emulated board pynq's active device
(:class:`dtpu.board.emulate.device.EmulatedDevice`, a ``pynq.Device``), writes the emulated
overlay (a .bit in the bitstream file format whose configuration data is a placeholder, and the
.hwh of the hw/overlays design: contract 2.0's, the default build; :func:`write_design` also
writes contract 1.2's, ``contract=1``) and points ``$DTPU_BITSTREAM`` at it unless already set. From
then on the board code runs unchanged through pynq: ``pynq.Overlay`` parses the .hwh and binds
the drivers by VLNV, ``pynq.allocate`` hands out ``PynqBuffer`` objects in the emulated DDR,
``pynq.MMIO`` (and ``pynq.lib.dma.DMA`` in the 1.2 design) drive the emulated registers
(:mod:`dtpu.board.emulate.board`), and ``BOARD.trace`` records the register and DMA sequence
the real board would see. :mod:`dtpu.board.emulate.device` says which parts are the real
package and which stay hand-written (the device primitives the kernel and XRT provide on the
board).

What it does not emulate: timing (stalls, DMA bandwidth), interrupts in the 1.2 design (it has
none; the ``interrupts=True`` variant and the 2.0 design wire the DTPU's irq through an AXI INTC),
scatter-gather DMA, and the XADC's sensors (its codes are synthetic, and a warning says so).
``DTPU_PYNQ_EMULATE=1`` makes :func:`dtpu.board.import_pynq` call :func:`install`; pynq must
be installed (``pip install pynq "numpy<2"``, the ``board`` and ``dev`` extras).
"""
from __future__ import annotations

import logging
import os
import struct
import tempfile
from pathlib import Path

from dtpu.board import BITSTREAM_ENV
from dtpu.board.design import BITSTREAM_NAME, BOARD_BUILDS, DEFAULT_CONTRACT, board_build
from dtpu.board.emulate.board import BOARD, Access, Board
from dtpu.hw.config import HwConfig

log = logging.getLogger(__name__)

PLACEHOLDER = b"DTPU BOARD EMULATION: not a bitstream. The .hwh beside it describes the emulated design.\n"
PART = "7z020clg400"
_design_dir: list[Path] = []
_design_contract: list[int] = []      # the contract of the designs in _design_dir
_warned: list[bool] = []


def bit_file(data: bytes, design: str = BITSTREAM_NAME, part: str = PART) -> bytes:
    """`data` in Xilinx's .bit container (the header fields pynq's ``parse_bit_header`` reads:
    design, part, date, time, then the configuration data), padded to 32-bit words."""
    data = bytes(data) + b"\0" * (-len(data) % 4)

    def field(key: bytes, text: str) -> bytes:
        raw = text.encode("ascii") + b"\0"
        return key + struct.pack(">H", len(raw)) + raw

    return (struct.pack(">H", 9) + bytes.fromhex("0ff00ff00ff00ff000") + struct.pack(">H", 1)
            + field(b"a", f"{design};UserID=0XFFFFFFFF;Version=emulated")
            + field(b"b", part) + field(b"c", "2026/01/01") + field(b"d", "00:00:00")
            + b"e" + struct.pack(">I", len(data)) + data)


def write_design(directory: str | os.PathLike, cfg: HwConfig | None = None,
                 interrupts: bool | None = None, contract: int = DEFAULT_CONTRACT,
                 build: str | None = None) -> Path:
    """Write <directory>/dtpu_pynqz2.bit (placeholder configuration data) and .hwh (named as
    the board build is installed: dtpu_pynqz2_int16.bit for ``build="int16"``); return the
    .bit path. ``cfg``: the DTPU build the .hwh describes; default the board build
    (:func:`dtpu.board.design.board_config`: its precisions, memories and geometry, what
    hw/overlays builds), so that the emulated board claims what the real one would. ``build``:
    which board build (``make -C hw/overlays OVERLAY=``: "int8", the default, with the
    vector unit; "int16" without it; :data:`dtpu.board.design.BOARD_BUILDS`). ``contract``: which hw/overlays design (2: the 2.0 design, the default:
    dtpu_cl_top, its master on HP0 and its irq to the PS; 1: the 1.2 design, dtpu_axi fed by two
    AXI DMAs). ``interrupts=True`` with contract 1: the
    1.2 variant with the DTPU's irq wired to the PS through an AXI interrupt controller
    (:func:`dtpu.board.emulate.hwh.write_hwh`)."""
    from dtpu.board.emulate.hwh import write_hwh

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    bit = d / f"{board_build(build).bitstream}.bit"     # the name it is installed under
    bit.write_bytes(bit_file(PLACEHOLDER))
    write_hwh(bit.with_suffix(".hwh"), cfg,
              note="written by dtpu.board.emulate for the board emulation, not by Vivado",
              interrupts=interrupts, contract=contract, build=build)
    return bit


def install(directory: str | os.PathLike | None = None, contract: int = DEFAULT_CONTRACT,
            build: str | None = None) -> Path:
    """Make the emulated PYNQ-Z2 pynq's active device (idempotent); return the emulated
    overlay's .bit (the hw/overlays design of `contract`: 2, the default, or 1; of board build
    `build`: the default, int8 with the vector unit, or int16 without it), with the other board builds'
    overlays beside it, as ``make install`` puts them on the board (the ``bitstream`` option's
    names find them there). RuntimeError if pynq cannot be imported."""
    try:
        import pynq  # noqa: F401
    except ImportError as exc:
        raise RuntimeError(f"the board emulation runs the pynq package, which is not importable "
                           f"here ({exc}); install it with pip install pynq \"numpy<2\" (the "
                           f"dtpu[board] extra)") from exc
    from dtpu.board.emulate import device

    device.activate()
    if not _warned:
        _warned.append(True)
        log.warning("pynq emulation: the active pynq device is an emulated PYNQ-Z2; its DTPU is "
                    "the golden model, its XADC readings are synthetic")
    # the designs written last are reused only for the same contract: a 1.2 design left by an
    # earlier install(contract=1) is not the default 2.0 overlay (its partitions differ)
    if directory is not None or not _design_dir or _design_contract != [contract]:
        d = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="dtpu-emu-"))
        _design_dir[:] = [d]
        _design_contract[:] = [contract]
        bit = write_design(d, contract=contract, build=build)
        for other in BOARD_BUILDS:      # the other overlays beside it: bitstream=<name>
            if other != board_build(build).name:
                write_design(d, contract=contract, build=other)
    else:
        bit = _design_dir[0] / f"{board_build(build).bitstream}.bit"
    os.environ.setdefault(BITSTREAM_ENV, str(bit))
    return bit


def uninstall() -> None:
    """Stop using the emulated board as pynq's active device (the board keeps its state)."""
    if installed():
        from dtpu.board.emulate import device

        device.deactivate()


def installed() -> bool:
    """Whether pynq's active device is the emulated board."""
    import sys

    if "dtpu.board.emulate.device" not in sys.modules:
        return False
    return sys.modules["dtpu.board.emulate.device"].active()


def design_dir() -> Path:
    """The directory the emulated overlay was written to by :func:`install` (this process's
    emulated board: its lock file defaults to here, :mod:`dtpu.board.owner`)."""
    if not _design_dir:
        raise RuntimeError("the board emulation is not installed: no emulated design directory "
                           "(dtpu.board.emulate.install() first)")
    return _design_dir[0]


def current_board() -> Board:
    """The emulated board (what the last Overlay download programmed)."""
    return BOARD


__all__ = ["Access", "BOARD", "Board", "PART", "PLACEHOLDER", "bit_file", "current_board",
           "design_dir", "install", "installed", "uninstall", "write_design"]
