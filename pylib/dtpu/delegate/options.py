"""The delegate's options: one table, one parser.

``load_delegate(path, {"backend": "reference", "mxu": "8x8"})`` hands every key and value to the
C glue as UTF-8 strings; :func:`parse` turns them into a :class:`DelegateOptions` or raises
``ValueError`` naming the key, the value and what is accepted. ``dtpu.load_delegate`` runs the same
parser before loading, so both paths give the same message.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from dtpu.hw.config import MXU_MAX, parse_mxu
from dtpu.precision import Precision
from dtpu.spec import OpKind

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
REPORT_MODES = ("none", "summary")
# ops=auto: convolutions always, FULLY_CONNECTED when it joins other claimed nodes (issue #25), and
# the vector unit's nodes where they join convolutions (targets that have it)
DEFAULT_OPS = (OpKind.CONV_2D, OpKind.DEPTHWISE_CONV_2D, OpKind.FULLY_CONNECTED)


def default_backend() -> str:
    """`model` once that backend is registered, `reference` until then."""
    from dtpu import backends

    return "model" if "model" in backends.names() else "reference"


@dataclass(frozen=True)
class DelegateOptions:
    backend: str = field(default_factory=default_backend)
    precision: Precision | None = None            # None = auto (from each node's data types)
    mxu: tuple[int, int] = (8, 8)                  # MXU geometry: ROWS x COLS PEs
    ops: tuple[OpKind, ...] = DEFAULT_OPS
    ops_auto: bool = True                          # ops=auto (the default): see DEFAULT_OPS
    report: str = "none"                           # none | summary | path of a JSON-lines file
    clock_mhz: float = 100.0
    log_level: str | None = None                   # None = leave the "dtpu" logger alone
    bitstream: str | None = None                   # backend=pynq: the overlay's .bit (None: default)
    power_meter: float | str | None = None         # backend=pynq: external meter, W or file:PATH
    prefetch: bool = True                          # stream non-resident weights as job prefetch
    path: str = "auto"                             # auto | lists | jobs (contract 2.0 or 1.2)
    fold: bool = True                              # PADs folded, RESHAPE / SQUEEZE as views
    vector: bool = True                            # the vector unit's nodes claimed (ops=auto)
    invoke: str = "c"                              # c | python: who runs a compiled list's invoke
    board_wait_s: float = 0.0                      # backend=pynq: wait for the board's owner to go

    @property
    def report_path(self) -> str | None:
        return None if self.report in REPORT_MODES else self.report

    def backend_options(self) -> dict[str, Any]:
        """What the backend constructor receives."""
        options: dict[str, Any] = {
            "precision": "auto" if self.precision is None else self.precision.value,
            "mxu": self.mxu,
            "clock_mhz": self.clock_mhz,
        }
        if self.bitstream is not None:
            options["bitstream"] = self.bitstream
        if self.power_meter is not None:
            options["power_meter"] = self.power_meter
        if not self.prefetch:
            options["prefetch"] = False
        if self.path != "auto":
            options["path"] = self.path
        if self.board_wait_s:
            options["board_wait_s"] = self.board_wait_s
        return options

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "precision": "auto" if self.precision is None else self.precision.value,
            "mxu": f"{self.mxu[0]}x{self.mxu[1]}",
            "ops": "auto" if self.ops_auto else ",".join(op.value for op in self.ops),
            "report": self.report,
            "clock_mhz": self.clock_mhz,
            "log_level": self.log_level or "unchanged",
            "bitstream": self.bitstream or "default",
            "power_meter": "none" if self.power_meter is None else str(self.power_meter),
            "prefetch": "on" if self.prefetch else "off",
            "path": self.path,
            "fold": "on" if self.fold else "off",
            "vector": "on" if self.vector else "off",
            "invoke": self.invoke,
            "board_wait_s": f"{self.board_wait_s:g}",
        }


def _invalid(key: str, value: str, expected: str) -> ValueError:
    return ValueError(f"dtpu: option {key!r}={value!r} is invalid; expected {expected}")


def _backend(value: str) -> str:
    from dtpu import backends

    name = value.strip().lower()
    if name not in backends.names():
        raise _invalid("backend", value, "one of " + ", ".join(backends.names()))
    return name


def _precision(value: str) -> Precision | None:
    text = value.strip().lower()
    if text == "auto":
        return None
    try:
        return Precision.parse(text)
    except ValueError:
        raise _invalid("precision", value, "auto or one of " + ", ".join(p.value for p in Precision)) from None


def _ops(value: str) -> tuple[OpKind, ...] | None:
    """The kinds named, or None for `auto`."""
    accepted = "auto, or a comma-separated list of: " + ", ".join(op.value for op in OpKind)
    if value.strip().lower() == "auto":
        return None
    names = [part.strip().lower() for part in value.split(",") if part.strip()]
    if not names:
        raise _invalid("ops", value, accepted)
    kinds = []
    for name in names:
        try:
            kind = OpKind(name)
        except ValueError:
            raise _invalid("ops", value, accepted) from None
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)


def _report(value: str) -> str:
    text = value.strip()
    if text.lower() in REPORT_MODES:
        return text.lower()
    if not text:
        raise _invalid("report", value, "none, summary or the path of a JSON-lines file")
    parent = os.path.dirname(os.path.abspath(text)) or "."
    if os.path.isdir(text) or not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise _invalid("report", value, "none, summary or the path of a JSON-lines file in an "
                       "existing, writable directory")
    return text


def _clock(value: str) -> float:
    try:
        mhz = float(value)
    except ValueError:
        mhz = float("nan")
    if not (0.0 < mhz <= 10000.0):
        raise _invalid("clock_mhz", value, "a number of MHz in (0, 10000]")
    return mhz


def _log_level(value: str) -> str:
    text = value.strip().lower()
    if text not in LOG_LEVELS:
        raise _invalid("log_level", value, "one of " + ", ".join(LOG_LEVELS))
    return text


def _bitstream(value: str) -> str | None:
    from dtpu.board import check_bitstream, overlay_name

    text = value.strip()
    if text.lower() in ("", "default"):
        return None
    name = overlay_name(text)
    if name is not None:
        # an overlay's name: its file is looked for when the board is opened (beside the
        # default bitstream, which the board emulation writes only then)
        return name
    try:
        return str(check_bitstream(text))
    except ValueError as exc:
        raise _invalid("bitstream", value, f"'default', an overlay's name (int8, int16) or the "
                       f"path of an existing .bit with its .hwh beside it ({exc})") from None


def _power_meter(value: str) -> float | str | None:
    from dtpu.board.power import parse_power_meter

    try:
        return parse_power_meter(value)
    except ValueError as exc:
        raise _invalid("power_meter", value, f"none, a number of watts > 0, or file:PATH of an "
                       f"existing file holding the latest reading in watts ({exc})") from None


def _prefetch(value: str) -> bool:
    text = value.strip().lower()
    if text in ("on", "true", "1", "yes"):
        return True
    if text in ("off", "false", "0", "no"):
        return False
    raise _invalid("prefetch", value, "on or off")


PATHS = ("auto", "lists", "jobs")


def _fold(value: str) -> bool:
    text = value.strip().lower()
    if text not in ("on", "off"):
        raise _invalid("fold", value, "on or off")
    return text == "on"


def _vector(value: str) -> bool:
    text = value.strip().lower()
    if text not in ("on", "off"):
        raise _invalid("vector", value, "on or off")
    return text == "on"


def _path(value: str) -> str:
    text = value.strip().lower()
    if text not in PATHS:
        raise _invalid("path", value, "auto, lists or jobs")
    return text


INVOKES = ("c", "python")


def _invoke(value: str) -> str:
    text = value.strip().lower()
    if text not in INVOKES:
        raise _invalid("invoke", value, "c or python")
    return text
#: the longest board_wait_s accepted (a day): longer is a typo, not a plan
BOARD_WAIT_MAX_S = 86400.0


def _board_wait(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not (0.0 <= seconds <= BOARD_WAIT_MAX_S):
        raise _invalid("board_wait_s", value, f"a number of seconds in [0, {BOARD_WAIT_MAX_S:g}]")
    return seconds


#: option key -> its parser (the text of a value -> the value, or ValueError naming what is
#: accepted); docs/delegate.md's TABLE documents the same keys in the same order
PARSERS: dict[str, Callable[[str], Any]] = {
    "backend": _backend,
    "precision": _precision,
    "mxu": parse_mxu,
    "ops": _ops,
    "report": _report,
    "clock_mhz": _clock,
    "log_level": _log_level,
    "bitstream": _bitstream,
    "power_meter": _power_meter,
    "prefetch": _prefetch,
    "path": _path,
    "fold": _fold,
    "vector": _vector,
    "invoke": _invoke,
    "board_wait_s": _board_wait,
}

# The option table of docs/delegate.md: key -> (accepted values, default, meaning).
TABLE = {
    "backend": ("`reference`, `model`, `rtl`, `pynq`, `isro` (those registered)",
                "`model` if registered, else `reference`", "who computes the claimed nodes"),
    "precision": ("`auto` or one of " + ", ".join(f"`{p.value}`" for p in Precision), "`auto`",
                  "lane precision of the 64-bit words; `auto` follows each node's types; a forced "
                  "precision that cannot hold a node's operands exactly leaves that node on the CPU"),
    "mxu": (f"`ROWSxCOLS`, each 1..{MXU_MAX}", "`8x8`", "MXU geometry (ROWS x COLS PEs) given to the backend"),
    "ops": ("`auto`, or a comma list of `conv2d`, `depthwise_conv2d`, `fully_connected`", "`auto`",
            "op kinds the delegate may claim; `auto`: the convolutions, and `FULLY_CONNECTED` where "
            "it joins other claimed nodes (alone it would add a partition), and on a target with "
            "the vector unit (backend=model) `ADD`, `SUB`, `MUL`, the pools, `MEAN`, "
            "`CONCATENATION`, `RESIZE_NEAREST_NEIGHBOR` and the table operators where they join "
            "convolutions; a list claims "
            "those kinds wherever they can run, and no vector-unit node"),
    "report": ("`none`, `summary`, or a file path", "`none`",
               "`summary` prints a per-node table (stderr) when the delegate is destroyed or the "
               "process exits; a path appends one JSON line per invoke; `none`: reports are "
               "only read (`dtpu.last_report()`, `dtpu.reports()`), so the C invoke path builds "
               "them then, of its latest runs (docs/delegate.md, \"The C invoke path\")"),
    "clock_mhz": ("number in (0, 10000]", "`100`", "accelerator clock used to turn cycles into time"),
    "log_level": ("`debug`, `info`, `warning`, `error`, `critical`", "unchanged",
                  "level of the `dtpu` logger while this delegate lives (adds a stderr handler if none is configured); restored when it is destroyed"),
    "bitstream": ("`default`, `int8`, `int16`, or the path of a `.bit` with its `.hwh` beside it",
                  "`default`: `$DTPU_BITSTREAM`, else `/home/xilinx/pynq/overlays/dtpu/dtpu_pynqz2.bit`",
                  "backend=pynq: the overlay to load (hw/overlays); `int8` / `int16` name the "
                  "board builds (`make -C hw/overlays OVERLAY=`: int8/uint8 with the vector unit, "
                  "whole models in one kick, the default; int8/uint8/int16 without it, for int16x8 "
                  "models), their files beside the default one (docs/board.md)"),
    "power_meter": ("`none`, watts > 0, or `file:PATH`", "`none`",
                    "backend=pynq: an external power meter's reading (the board cannot measure "
                    "power); without one, power is estimated (docs/power.md)"),
    "prefetch": ("`on`, `off`", "`on`",
                 "backends model/rtl/pynq: weights of nodes that do not stay resident stream into "
                 "free weight memory as prefetch carried by earlier jobs (`off`: loaded before each "
                 "job through a scratch region; docs/architecture.md)"),
    "path": ("`auto`, `lists`, `jobs`", "`auto`",
             "backends model/pynq/rtl: `lists` runs each delegated partition as one command list "
             "(contract 2.0: one doorbell per partition, docs/contract2.md), `jobs` drives it job "
             "by job (contract 1.2); `auto` takes lists when the core's VERSION is 2.0 and the "
             "graph compiles to lists, else jobs (the reason is logged); `lists` on a 1.2 core "
             "fails at load; backend=rtl: `auto`/`lists` simulate the 2.0 top (dtpu_cl_top, its "
             "AXI4 master on the contract's memory model; in process, or under cocotb from `dtpu "
             "run --backend rtl`), `jobs` (or a forced `precision`) the 1.2 top job by job "
             "(docs/rtl.md)"),
    "fold": ("`on`, `off`", "`on`",
             "claim a `PAD` / `PADV2` whose fill is the zero point and whose pads are those of "
             "a SAME convolution reading it (run as that SAME convolution), `RESHAPE` / "
             "`SQUEEZE` next to claimed nodes as views (tensors are dense in DDR), and the "
             "`SHAPE` -> `STRIDED_SLICE` -> `PACK` chains computing a view's shape, evaluated "
             "at Prepare; `off` leaves them on the CPU (docs/partitions.md)"),
    "vector": ("`on`, `off`", "`on`",
               "on a target with contract 2.1's vector unit (backend=model, backend=rtl's 2.0 "
               "top, the board's default int8 overlay): claim `ADD`, `SUB`, "
               "`MUL` (a constant operand too), `AVERAGE_POOL_2D`, `MAX_POOL_2D`, `MEAN`, "
               "`CONCATENATION` along channels, `RESIZE_NEAREST_NEIGHBOR` by integer factors "
               "and the table operators (`LOGISTIC`, `TANH`, "
               "`HARD_SWISH`, `LEAKY_RELU`, `RELU`, `RELU6`, `RELU_N1_TO_1`, `QUANTIZE`) where "
               "they join convolutions (`ops=auto`; docs/partitions.md); `off` leaves them on the "
               "CPU, the partitions of a target without the unit (the board's int16 overlay, the "
               "1.2 top), e.g. to compare cycles with it"),
    "invoke": ("`c`, `python`", "`c`",
               "backends model/rtl: `c` runs a partition compiled as a command list from TFLite's "
               "kernel call to its completion in C once its first invoke ran in Python (copies, "
               "cache maintenance, doorbell, completion, counters; Python enters only to build "
               "reports: when one is read, or each invoke's with `report=summary` or a path), "
               "`python` keeps every invoke in Python (docs/delegate.md, \"The C invoke "
               "path\")"),
    "board_wait_s": ("number of seconds in [0, 86400]", "`0`",
                     "backend=pynq: one process owns the board at a time (a lock held while the "
                     "delegate lives, released when its process ends, even by `kill -9`); when "
                     "another process, or another delegate of this process with another overlay, "
                     "owns it, wait up to this long for it to go, then fail naming the owner's PID "
                     "(docs/board.md)"),
}


def markdown_table() -> str:
    """:data:`TABLE` as the Markdown table of README.md and docs/delegate.md (tests keep them equal)."""
    lines = ["| option | accepted values | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{key}` | {values} | {default} | {meaning} |"
              for key, (values, default, meaning) in TABLE.items()]
    return "\n".join(lines) + "\n"

def parse(raw: Mapping[str, Any] | None) -> DelegateOptions:
    """Parse key/value options (values converted with str()); raise ValueError on any problem."""
    values: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        key_text = str(key)
        text = value if isinstance(value, str) else str(value)
        parser = PARSERS.get(key_text.strip().lower())
        if parser is None:
            raise ValueError(f"dtpu: unknown option {key_text!r}={text!r}; accepted keys: "
                             + ", ".join(PARSERS))
        values[key_text.strip().lower()] = parser(text)
    if "ops" in values:
        ops = values.pop("ops")
        if ops is not None:
            values.update(ops=ops, ops_auto=False)
    return DelegateOptions(**values)


# log_level scopes of the delegates alive now (creation order) and the "dtpu" logger's state
# before the first of them: the option lasts as long as its delegate, never beyond
_LOG_SCOPES: list[tuple[object, str]] = []
_LOG_BASE: dict[str, Any] = {}


def _set_logger(level: int | str, want_handler: bool) -> None:
    logger = logging.getLogger("dtpu")
    logger.setLevel(level)
    ours = [h for h in logger.handlers if getattr(h, "_dtpu_default", False)]
    if want_handler and not ours:
        real = [h for h in logger.handlers if not isinstance(h, logging.NullHandler)]
        if not real and not logging.getLogger().handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
            handler._dtpu_default = True  # type: ignore[attr-defined]
            logger.addHandler(handler)
    elif not want_handler:
        for h in ours:
            logger.removeHandler(h)


def apply_log_level(level: str | None, owner: object = None) -> object | None:
    """Set the "dtpu" logger's level for as long as `owner` (a delegate) lives; give it a stderr
    handler if nobody configured logging. Returns a token for :func:`restore_log_level` (None when
    `level` is None: the logger is left alone). With several delegates alive, the newest one's
    level holds; when the last one goes, the logger is as it was before the first."""
    if level is None:
        return None
    logger = logging.getLogger("dtpu")
    if not _LOG_SCOPES:
        _LOG_BASE.clear()
        _LOG_BASE["level"] = logger.level
    token = owner if owner is not None else object()
    _LOG_SCOPES.append((token, level.upper()))
    _set_logger(level.upper(), True)
    return token


def restore_log_level(token: object | None) -> None:
    """End the scope `token` opened (a destroyed delegate): the level of the newest delegate
    still alive, or the logger's state from before the first scope."""
    if token is None:
        return
    _LOG_SCOPES[:] = [s for s in _LOG_SCOPES if s[0] is not token]
    if _LOG_SCOPES:
        _set_logger(_LOG_SCOPES[-1][1], True)
    else:
        _set_logger(_LOG_BASE.get("level", logging.NOTSET), False)
