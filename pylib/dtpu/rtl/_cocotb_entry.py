"""The cocotb test module the simulator runs for :func:`dtpu.rtl.run_in_simulation`.

It is loaded by cocotb inside the Verilator binary, never by the user. Everything it needs comes
from the run directory named by ``$DTPU_RTL_RUN`` (written by the parent, :mod:`dtpu.rtl.simulate`):
``spec.pkl`` holds the callable's reference, its arguments, the build's HwConfig and the
transport's settings. The one test starts the clock, resets the core, publishes the transport
(:mod:`dtpu.rtl.session`) and runs the callable in a ``cocotb.task.bridge`` thread, so that
synchronous code (the TFLite interpreter, the delegate, the driver) can drive the simulated
core. The outcome (the return value, or the exception with its traceback) goes to
``result.pkl``; the test itself passes whenever that file was written, because a failure of the
callable is the parent's to report, not cocotb's.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import pickle
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import cocotb

from dtpu.hw.config import HwConfig
from dtpu.rtl import session
from dtpu.rtl.build import TOPLEVEL_CL, VEC_UNIT
from dtpu.rtl.transport import CocotbListTransport, CocotbTransport


def resolve(target: tuple[str, str, str]):
    """("module", name, qualname) or ("file", path, qualname) -> the callable."""
    kind, where, qualname = target
    if kind == "module":
        obj: Any = importlib.import_module(where)
    elif kind == "file":
        name = f"_dtpu_rtl_script_{Path(where).stem}"
        spec = importlib.util.spec_from_file_location(name, where)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {where}")
        obj = importlib.util.module_from_spec(spec)
        sys.modules[name] = obj
        spec.loader.exec_module(obj)
    else:
        raise ValueError(f"unknown target kind {kind!r}")
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _portable(exc: BaseException):
    """Something that unpickles in the parent as `exc` (same type, message and attributes), or
    failing that as a RuntimeError naming it."""
    for candidate in (exc, session.PortableException(exc)):
        try:
            pickle.loads(pickle.dumps(candidate))
            return candidate
        except Exception:  # noqa: BLE001
            continue
    return RuntimeError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}")


@contextlib.contextmanager
def _captured(run_dir: Path, capture: bool):
    """The callable's stdout/stderr (and the dtpu logger's warnings) into files the parent
    streams to its own terminal; cocotb's log keeps the simulator's stdout."""
    if not capture:
        yield
        return
    with open(run_dir / "stdout.txt", "w", buffering=1) as out, \
            open(run_dir / "stderr.txt", "w", buffering=1) as err:
        handler = logging.StreamHandler(err)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.WARNING)
        logger = logging.getLogger("dtpu")
        logger.addHandler(handler)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield
        finally:
            logger.removeHandler(handler)


def _call(spec: dict, run_dir: Path) -> tuple:
    with _captured(run_dir, spec.get("capture", False)):
        try:
            # relative paths mean what they meant to the caller; the simulator's own files
            # (sim.log, dump.vcd, results.xml) are open already or named absolutely
            if spec.get("cwd"):
                os.chdir(spec["cwd"])
            fn = resolve(spec["target"])
            start = time.monotonic()
            value = fn(*spec.get("args", ()), **spec.get("kwargs", {}))
            return "ok", value, time.monotonic() - start
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            text = traceback.format_exc()
            print(text, file=sys.__stderr__)
            return "error", _portable(exc), text


def _write_result(run_dir: Path, outcome: tuple) -> None:
    tmp = run_dir / "result.tmp"
    tmp.write_bytes(pickle.dumps(outcome))
    os.replace(tmp, run_dir / "result.pkl")


@cocotb.test()
async def run_callable(dut):
    run_dir = Path(os.environ[session.RUN_DIR_ENV])
    meta: dict[str, Any] = {"cycles": 0, "jobs": 0, "wall_s": 0.0}
    try:
        spec = pickle.loads((run_dir / "spec.pkl").read_bytes())
        progress = session.Progress(run_dir / "progress.json")
        session.set_progress(progress)
        cls = CocotbListTransport if spec.get("top") == TOPLEVEL_CL else CocotbTransport
        hw = dict(spec["hw"])
        vec_en = hw.pop("VEC_EN", 0)        # a unit beside the core, not a core knob
        transport = cls(dut, HwConfig(**hw), **spec.get("transport", {}))
        if vec_en:      # the target declares the unit it was built with (as open_native_lists)
            transport.vector_unit, transport.vector_build = True, VEC_UNIT
        await transport.start()
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        _write_result(run_dir, ("error", _portable(exc), traceback.format_exc(), meta))
        raise
    session.set_transport(transport)
    progress.set(phase="running")
    progress.flush(force=True)
    wall0, cycle0 = time.monotonic(), transport.cycle
    try:
        outcome = await cocotb.task.bridge(_call)(spec, run_dir)
    finally:
        session.clear_transport()
    meta = {"cycles": transport.cycle - cycle0, "jobs": transport.jobs,
            "wall_s": time.monotonic() - wall0}
    if outcome[0] == "ok":
        meta["call_s"] = outcome[2]
        try:
            pickle.dumps(outcome[1])
            result = ("ok", outcome[1], meta)
        except Exception as exc:  # noqa: BLE001
            result = ("error", TypeError(
                f"the callable's result ({type(outcome[1]).__qualname__}) cannot be pickled back "
                f"to the parent: {exc}"), "", meta)
    else:
        result = ("error", outcome[1], outcome[2], meta)
    progress.set(phase="done", cycles=transport.cycle)
    progress.flush(force=True)
    _write_result(run_dir, result)
