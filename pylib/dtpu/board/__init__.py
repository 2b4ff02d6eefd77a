"""The DTPU on the PYNQ-Z2: the pynq transport, the PYNQ drivers, XADC power monitoring.

``pynq`` is never required to import this package: it is imported by :func:`import_pynq` when a
board is actually used (``backend=pynq``). On a machine without a board, ``DTPU_PYNQ_EMULATE=1``
makes :func:`import_pynq` activate :mod:`dtpu.board.emulate`: an emulated PYNQ-Z2 (the golden
model and an emulated XADC) as the active device of the real pynq package, which then runs its
own Overlay, MMIO, allocate and interrupt code; the transport itself cannot tell. It loads the
default design, contract 2.0's (no DMAs: the emulated DTPU runs command lists from the buffers
pynq allocates); ``DTPU_PYNQ_EMULATE=1.2`` loads the contract-1.2 design (``make CONTRACT=1``:
AXI DMAs feed the DTPU's streams, the delegate runs job by job).

Typical use on the board (Jupyter)::

    from dtpu.board import load_overlay
    overlay = load_overlay("/home/xilinx/pynq/overlays/dtpu/dtpu_pynqz2.bit")
    overlay.dtpu.status          # {'BUSY': 0, 'DONE': 0, 'ERROR': 0, 'STATE': 0}
    overlay.xadc.temperature     # degrees C
"""
from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from dtpu.board.design import BITSTREAM_NAME, BOARD_OVERLAY_DIR, DTPU_VLNV

log = logging.getLogger(__name__)

EMULATE_ENV = "DTPU_PYNQ_EMULATE"
BITSTREAM_ENV = "DTPU_BITSTREAM"


def emulation_requested() -> bool:
    return os.environ.get(EMULATE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def emulated_contract() -> int:
    """Which hw/overlays design the emulation loads (make CONTRACT=): DTPU_PYNQ_EMULATE=1.2 the
    contract-1.2 one (AXI DMAs, job by job), any other true value (1, 2) the default design,
    contract 2.0's (command lists over HP0, no DMAs)."""
    from dtpu.board.design import DEFAULT_CONTRACT

    return 1 if os.environ.get(EMULATE_ENV, "").strip() == "1.2" else DEFAULT_CONTRACT


def import_pynq():
    """The pynq module with a device to drive: on the board its own (the Zynq's FPGA manager);
    with DTPU_PYNQ_EMULATE set, the emulated PYNQ-Z2 made pynq's active device
    (:mod:`dtpu.board.emulate`); else a RuntimeError saying how to get either."""
    try:
        import pynq
    except ImportError as exc:
        if emulation_requested():
            raise RuntimeError(f"{EMULATE_ENV}=1 runs the board emulation through the pynq package, "
                               f"which is not importable here ({exc}); install it with pip install "
                               f"pynq \"numpy<2\" (the dtpu[board] extra)") from exc
        raise RuntimeError(
            f"backend=pynq needs the pynq package, which the PYNQ-Z2 image provides ({exc}); "
            f"to run the board emulation on another machine set {EMULATE_ENV}=1 (with pynq "
            f"installed: pip install pynq)") from exc
    from dtpu.board import emulate

    if emulation_requested() and not emulate.installed():
        emulate.install(contract=emulated_contract())
    if not emulate.installed():
        with warnings.catch_warnings():  # pynq's "No devices found, is the XRT environment sourced?"
            warnings.simplefilter("ignore")
            devices = list(pynq.Device.devices)
        if not devices:
            raise RuntimeError(
                f"backend=pynq needs the pynq package on a PYNQ board: pynq {pynq.__version__} is "
                f"installed here but found no device (no Zynq FPGA manager: not a PYNQ board); "
                f"to run the board emulation set {EMULATE_ENV}=1")
    return pynq


def default_bitstream() -> Path:
    """$DTPU_BITSTREAM, else the overlay's install location on the board."""
    env = os.environ.get(BITSTREAM_ENV, "").strip()
    return Path(env) if env else Path(BOARD_OVERLAY_DIR) / f"{BITSTREAM_NAME}.bit"


def overlay_name(value: str | os.PathLike | None) -> str | None:
    """The board build `value` names (``int8``, ``int16``: :data:`dtpu.board.design.
    BOARD_BUILDS`), else None (a path, or ``default``/empty for the default bitstream)."""
    from dtpu.board.design import BOARD_BUILDS

    text = str(value).strip().lower() if value is not None else ""
    return text if text in BOARD_BUILDS else None


def resolve_bitstream(value: str | os.PathLike | None = None) -> Path:
    """The .bit the delegate's ``bitstream`` option means: ``default`` (or nothing)
    :func:`default_bitstream`; an overlay's name (``int8``, ``int16``; make -C hw/overlays
    OVERLAY=<name> install) that overlay's file beside the default bitstream (on the board
    /home/xilinx/pynq/overlays/dtpu/dtpu_pynqz2_int16.bit; under DTPU_PYNQ_EMULATE the
    emulation writes both overlays there); anything else a path. Not checked for existence
    (:func:`check_bitstream`)."""
    from dtpu.board.design import board_build

    name = overlay_name(value)
    if name is not None:
        return default_bitstream().parent / f"{board_build(name).bitstream}.bit"
    if value is None or str(value).strip().lower() in ("", "default"):
        return default_bitstream()
    return Path(value)


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
    :class:`dtpu.board.ip.DtpuIP` and ``overlay.xadc`` a :class:`dtpu.board.ip.XadcIP`.

    The overlay is parsed first and downloaded after :func:`fill_clock_frequencies`: without
    it pynq 4.0 cannot download a Zynq-7000 design."""
    pynq = import_pynq()
    from dtpu.board import ip

    ip.drivers(pynq)
    path = check_bitstream(bitstream if bitstream is not None else default_bitstream())
    log.info("loading overlay %s", path)
    overlay = pynq.Overlay(str(path), download=False)
    fill_clock_frequencies(overlay)
    if download:
        overlay.download()
    return overlay


def fill_clock_frequencies(overlay) -> list[int]:
    """Give the overlay's enabled PL clocks the frequency the design was built for where pynq's
    metadata left it None; return the clock indices filled in.

    pynq 4.0's metadata parser (pynqmetadata 0.2) reads a PL clock's frequency from the Zynq
    UltraScale+ parameter only (``PSU__CRL_APB__PLn_REF_CTRL__ACT_FREQMHZ``), so for a
    Zynq-7000 .hwh ``clock_dict[n]["frequency"]`` is None, and ``Overlay.download`` fails in
    ``Clocks.set_pl_clk(n, clk_mhz=None)`` (TypeError). Vivado writes the Zynq-7000 figure as
    ``PCW_ACT_FPGAn_PERIPHERAL_FREQMHZ`` (achieved) and ``PCW_FPGAn_PERIPHERAL_FREQMHZ``
    (requested): the achieved one is used, else the requested one. pynq releases that fill the
    frequency themselves are left alone."""
    clocks = getattr(overlay, "clock_dict", None) or {}
    ps = [d for d in overlay.ip_dict.values() if str(d.get("type", "")).startswith(
        "xilinx.com:ip:processing_system7:")]
    params = ps[0].get("parameters", {}) if ps else {}
    filled = []
    for index, clock in clocks.items():
        if not clock.get("enable") or clock.get("frequency") is not None:
            continue
        for name in (f"PCW_ACT_FPGA{index}_PERIPHERAL_FREQMHZ", f"PCW_FPGA{index}_PERIPHERAL_FREQMHZ"):
            if params.get(name) not in (None, ""):
                clock["frequency"] = float(params[name])
                filled.append(index)
                log.debug("PL clock %s: %s MHz from %s", index, clock["frequency"], name)
                break
        else:
            raise RuntimeError(f"overlay {overlay.bitfile_name}: PL clock {index} is enabled but "
                               f"neither pynq's metadata nor the processing system's parameters "
                               f"give its frequency")
    return filled


__all__ = ["BITSTREAM_ENV", "DTPU_VLNV", "EMULATE_ENV", "check_bitstream", "default_bitstream",
           "emulation_requested", "fill_clock_frequencies", "import_pynq", "load_overlay",
           "overlay_name", "resolve_bitstream"]
