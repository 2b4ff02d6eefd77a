"""PYNQ drivers for the overlay's IPs, bound by VLNV: ``overlay.dtpu`` and ``overlay.xadc``.

PYNQ instantiates the driver class registered for an IP's VLNV when ``overlay.<name>`` is first
used; defining a ``DefaultIP`` subclass with ``bindto`` registers it. The classes are defined
against the pynq :func:`dtpu.board.import_pynq` returns (on the board, or with the emulated
board as its active device), so importing this module needs pynq and a device;
:func:`drivers` gives the classes for a given pynq module.
"""
from __future__ import annotations

from typing import Any

from dtpu.board import import_pynq, xadc
from dtpu.board.design import DTPU_VLNV, VLNV
from dtpu.hw.config import HwConfig, get_config

_CLASSES: dict[int, tuple[type, type]] = {}


def config_from_hwcfg(hwcfg0: int, hwcfg1: int, base: HwConfig | None = None) -> HwConfig:
    """The HwConfig of a synthesized DTPU from its HWCFG registers (clock from `base`)."""
    base = base or get_config()
    f0, f1 = base.decode("HWCFG0", hwcfg0), base.decode("HWCFG1", hwcfg1)
    enabled = [p.value for p in (base.prec_of_code(code) for code in range(16)
                                 if f0["PREC_EN"] >> code & 1) if p is not None]
    return HwConfig(ROWS=f0["ROWS"], COLS=f0["COLS"], LOG_WEIGHT_WORDS=f1["LOG_WEIGHT_WORDS"],
                    LOG_PARAM_ENTRIES=f1["LOG_PARAM_ENTRIES"], LOG_ACT_WORDS=f1["LOG_ACT_WORDS"],
                    ENABLED=enabled, CLOCK_MHZ=base.CLOCK_MHZ, RQ_EN=base.rq_all & ~f1["RQ_OFF"])


def _define(pynq) -> tuple[type, type]:
    class DtpuIP(pynq.DefaultIP):
        """The DTPU's AXI4-Lite registers by name (docs/registers.md).

        ``ip.status``, ``ip.err_names``, ``ip.counters`` read; ``ip.start()``,
        ``ip.soft_reset()``, ``ip.clear_counters()`` pulse CTRL; ``ip.reg("GEMM_M")`` and
        ``ip.set_reg("GEMM_M", 36)`` reach any register. Jobs are run by the driver
        (:class:`dtpu.board.transport.PynqTransport`), which also owns the DMAs.
        """

        bindto = [DTPU_VLNV]

        def __init__(self, description: dict[str, Any]) -> None:
            super().__init__(description=description)
            self.cfg = get_config()

        # -- any register -------------------------------------------------------------------
        def reg(self, name: str) -> int:
            return self.read(self.cfg.reg(name).offset)

        def set_reg(self, name: str, value: int) -> None:
            self.write(self.cfg.reg(name).offset, int(value) & 0xFFFFFFFF)

        # -- identity -----------------------------------------------------------------------
        @property
        def id(self) -> int:
            return self.reg("ID")

        @property
        def version(self) -> tuple[int, int]:
            v = self.cfg.decode("VERSION", self.reg("VERSION"))
            return v["MAJOR"], v["MINOR"]

        @property
        def hwcfg(self) -> dict[str, int]:
            return {**self.cfg.decode("HWCFG0", self.reg("HWCFG0")),
                    **self.cfg.decode("HWCFG1", self.reg("HWCFG1"))}

        def config(self) -> HwConfig:
            """The build in the bitstream, as a HwConfig to lower for."""
            return config_from_hwcfg(self.reg("HWCFG0"), self.reg("HWCFG1"), self.cfg)

        # -- state --------------------------------------------------------------------------
        @property
        def status(self) -> dict[str, int]:
            return self.cfg.decode("STATUS", self.reg("STATUS"))

        @property
        def err(self) -> int:
            return self.reg("ERR")

        @property
        def err_names(self) -> list[str]:
            e = self.err
            return [n for n, b in self.cfg.errors.items() if e >> b & 1]

        def clear_err(self) -> None:
            self.set_reg("ERR", self.err)

        @property
        def counters(self) -> dict[str, int]:
            lo = self.reg("CYCLES_LO")
            cycles = lo | self.reg("CYCLES_HI") << 32
            lo = self.reg("STALL_LO")
            stall = lo | self.reg("STALL_HI") << 32
            return {"cycles": cycles, "stall_cycles": stall, "words_wgt": self.reg("WORDS_WGT"),
                    "words_act": self.reg("WORDS_ACT"), "words_res": self.reg("WORDS_RES"),
                    "job_cycles": self.reg("JOB_CYCLES")}

        # -- control ------------------------------------------------------------------------
        def start(self) -> None:
            self.set_reg("CTRL", self.cfg.encode("CTRL", START=1))

        def soft_reset(self) -> None:
            self.set_reg("CTRL", self.cfg.encode("CTRL", SOFT_RESET=1))

        def clear_counters(self) -> None:
            self.set_reg("CTRL", self.cfg.encode("CTRL", CLEAR_COUNTERS=1))

    class XadcIP(pynq.DefaultIP):
        """The AXI XADC Wizard: die temperature and supply voltages, one property each.

        Measured values only: the PYNQ-Z2 has no current sensors, so no power (docs/power.md).
        """

        bindto = [VLNV["xadc"]]

        def __init__(self, description: dict[str, Any]) -> None:
            super().__init__(description=description)

        def reset(self) -> None:
            self.write(xadc.SRR, xadc.SRR_RESET)

        @property
        def temperature(self) -> float:
            return xadc.temperature_c(self.read(xadc.TEMPERATURE))

        @property
        def max_temperature(self) -> float:
            return xadc.temperature_c(self.read(xadc.MAX_TEMPERATURE))

        @property
        def voltages(self) -> dict[str, float]:
            return {name: xadc.supply_v(self.read(reg)) for name, (reg, _) in xadc.SUPPLIES.items()}

        def sample(self) -> tuple[float, dict[str, float]]:
            return xadc.read_sensors(self.read)

    for name in xadc.SUPPLIES:
        reg = xadc.SUPPLIES[name][0]
        setattr(XadcIP, name, property(lambda self, _r=reg: xadc.supply_v(self.read(_r)),
                                       doc=f"{name.upper()} in volts"))
    return DtpuIP, XadcIP


def drivers(pynq=None) -> tuple[type, type]:
    """(DtpuIP, XadcIP) defined against `pynq` (default: :func:`import_pynq`), registered once."""
    pynq = pynq or import_pynq()
    key = id(pynq.DefaultIP)
    if key not in _CLASSES:
        _CLASSES[key] = _define(pynq)
    return _CLASSES[key]


def __getattr__(name: str):
    """``ip.DtpuIP`` / ``ip.XadcIP``, defined on first use: importing this module (and so
    dtpu.backends.pynq) must not need pynq or a board; :func:`load_overlay` registers them."""
    if name in ("DtpuIP", "XadcIP"):
        return drivers()[name == "XadcIP"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["DtpuIP", "XadcIP", "config_from_hwcfg", "drivers"]
