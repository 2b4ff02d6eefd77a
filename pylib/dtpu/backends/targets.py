"""One way to reach a DTPU: ``open_target(name, cfg, ...)`` opens the target a backend drives
(the golden model, the Verilog core under Verilator, the PYNQ-Z2 or its emulation) and returns
its :class:`~dtpu.driver.Transport` with the build configuration the host must lower for.

The backends above it (:mod:`dtpu.backends.model` and its rtl/pynq variants) differ only in
which target they name; how each target is found (a running simulation's transport or a
Verilated core of this process, the top chosen by :func:`dtpu.rtl.build.choose_top`; the
bitstream's overlay, real or emulated as ``$DTPU_PYNQ_EMULATE`` asks through
:func:`dtpu.board.import_pynq`) is written here once.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from dtpu.driver import ModelTransport, Transport
from dtpu.hw.config import HwConfig
from dtpu.hw.core import Core

log = logging.getLogger(__name__)

#: the targets open_target knows, by backend name
TARGETS = ("model", "rtl", "pynq")

#: knobs of an RTL build the host lowers with (its memory sizes); the clock stays the option's
_RTL_BUILD_KNOBS = ("COLS", "LOG_WEIGHT_WORDS", "LOG_PARAM_ENTRIES", "LOG_ACT_WORDS")


@dataclass
class Target:
    """An opened target. `cfg` is what the host lowers for: the build's (its memory sizes, its
    precisions), which the options' geometry only asks for."""

    transport: Transport
    cfg: HwConfig
    #: backend=rtl in this process: the Verilated library (this backend owns and closes it);
    #: None for a running simulation's transport, which is the simulation's
    native_build: Any = None
    #: backend=pynq: the loaded overlay (its XADC is read for power)
    overlay: Any = None


def open_target(name: str, cfg: HwConfig, *, path: str = "auto", precision: str = "auto",
                bitstream: str | None = None, board_wait_s: float = 0.0) -> Target:
    """Open target `name` (one of :data:`TARGETS`) for a host configured as `cfg`, with the
    delegate options `path` and `precision` (they choose the RTL top) and, for the board,
    `bitstream` and `board_wait_s` (how long to wait for another owner of the board to go)."""
    if name == "model":
        # the golden model of a 2.1 core with the vector unit (as the default board overlay)
        return Target(ModelTransport(Core(cfg), lists=True, vector_unit=True), cfg)
    if name == "rtl":
        return _open_rtl(cfg, str(path).lower(), precision)
    if name == "pynq":
        if bitstream is None:
            raise ValueError("open_target('pynq'): no bitstream; pass the overlay's .bit")
        return _open_pynq(cfg, bitstream, float(board_wait_s))
    raise ValueError(f"open_target: unknown target {name!r}; accepted: {', '.join(TARGETS)}")


def _sim_config(cfg: HwConfig, vec_en: int = 0):
    """The in-process build for `cfg`: its COLS, and its depthwise layout (DW_ROTATE) and the
    vector unit's requantizing lanes (VEC_RQ_LANES), which the golden model beside it and the
    lowering must share; `vec_en`: with the vector unit (the command-list top only)."""
    from dtpu.rtl.build import SimConfig

    return dataclasses.replace(SimConfig.from_mxu((8, cfg.COLS)), dw_rotate=int(cfg.DW_ROTATE),
                               vec_en=int(vec_en), vec_rq_lanes=int(cfg.VEC_RQ_LANES))


def _open_rtl(cfg: HwConfig, path: str, precision: str) -> Target:
    """Inside a simulation (``dtpu run --backend rtl``, :func:`dtpu.rtl.run_in_simulation`) its
    transport; anywhere else a Verilated core of this process, the top for `path` and
    `precision`."""
    from dtpu.rtl import session
    from dtpu.rtl.build import TOPLEVEL_CL, SimConfig, choose_top

    native_build = None
    if session.in_simulation():
        t = session.current_transport()
        if path == "lists" and not t.command_lists:
            raise ValueError("backend=rtl: path=lists, but this simulation runs the 1.2 top "
                             "(dtpu_axi, job by job); accepted: path=auto or path=jobs here, "
                             "or start the simulation on the 2.0 top (run_in_simulation(..., "
                             "top='dtpu_cl_top'), dtpu run --backend rtl --option path=lists)")
        if cfg.COLS != t.cfg.COLS:
            raise ValueError(f"backend=rtl: mxu=8x{cfg.COLS}, but the simulated core was "
                             f"built with COLS={t.cfg.COLS}; accepted: mxu=8x{t.cfg.COLS} (start "
                             f"the simulation with the geometry you want: --mxu / "
                             f"run_in_simulation(mxu=...))")
    elif choose_top(path, precision) == TOPLEVEL_CL:
        from dtpu.rtl.native import open_native_lists

        # the command-list top with its vector unit (VEC_EN=1), so a model's vector-unit nodes
        # join its partitions as on backend=model (docs/rtl_backend.md)
        t, native_build = open_native_lists(_sim_config(cfg, vec_en=1))
    else:
        from dtpu.rtl.native import open_native

        t, native_build = open_native(_sim_config(cfg))
    built = t.cfg
    if cfg.CLOCK_MHZ != built.CLOCK_MHZ:
        host = HwConfig(**{k: getattr(built, k) for k in _RTL_BUILD_KNOBS}, DW_ROTATE=built.DW_ROTATE,
                        VEC_RQ_LANES=built.VEC_RQ_LANES, CLOCK_MHZ=cfg.CLOCK_MHZ)
    else:
        host = built      # the build's memory sizes: the lowering must use the same
    return Target(t, host, native_build=native_build)


def _open_pynq(cfg: HwConfig, bitstream: str, wait_s: float) -> Target:
    """The DTPU of the bitstream, lowered for the build it reports (HWCFG0/1: array, memory
    sizes, precisions): a board build synthesized with fewer precisions than the contract's
    defaults (the one that fits the xc7z020, docs/synthesis.md) just claims less.

    The board's owner lock (:mod:`dtpu.board.owner`) is taken before the overlay is touched
    (loading it reprograms the PL) and held by the transport until it is closed; an opener of
    this process with the same overlay shares it and does not download the overlay again."""
    from pathlib import Path

    from dtpu.board import import_pynq, load_overlay, owner
    from dtpu.board.transport import PynqTransport

    pynq = import_pynq()
    lease = owner.acquire(owner.device_name(pynq.Device.active_device),
                          str(Path(bitstream).resolve()), wait_s)
    try:
        overlay = load_overlay(bitstream, download=False)
        if not (lease.shared and overlay.is_loaded()):
            overlay.download()
        t = PynqTransport(overlay, cfg, lease=lease)
        return _check_build(t, cfg, bitstream, overlay)
    except BaseException:
        lease.release()
        raise


def _check_build(t, cfg: HwConfig, bitstream: str, overlay) -> Target:
    from dtpu.board.ip import config_from_hwcfg

    ip, c = t.ip, cfg
    if ip.reg("ID") == c.ID and ip.reg("VERSION") in (c.VERSION, c.VERSION2):  # else check_identity names it
        built = config_from_hwcfg(ip.reg("HWCFG0"), ip.reg("HWCFG1"), c)
        if (built.ROWS, built.COLS) != (c.ROWS, c.COLS):
            raise ValueError(f"backend=pynq: mxu={c.ROWS}x{c.COLS}, but {bitstream} holds a "
                             f"{built.ROWS}x{built.COLS} DTPU; accepted: mxu={built.ROWS}x{built.COLS}")
        if built.ENABLED != c.ENABLED:
            log.info("bitstream %s: precisions %s (nodes needing others stay on the CPU)",
                     bitstream, ", ".join(p.value for p in built.ENABLED))
        cfg = t.cfg = built
    if not t.streams and not t.vector_unit:     # the 2.0 design without the unit
        log.info("bitstream %s: no vector unit (its .hwh: VEC_EN=0, e.g. the int16 overlay, hw/overlays OVERLAY=int16): "
                 "ADD, pools, MEAN and the table operators stay on the CPU", bitstream)
    return Target(t, cfg, overlay=overlay)


__all__ = ["TARGETS", "Target", "open_target"]
