"""`dtpu run MODEL --backend rtl`: the same command, run inside the RTL simulation.

Rather than a second implementation of `dtpu run`, the parent builds the Verilated core and
runs :func:`dtpu.run.run` itself inside the simulator (where backend=rtl has its transport),
with the parsed arguments. Its output (the per-invoke lines, report tables or JSON lines, the
verdict) is streamed back to this process's stdout/stderr while a progress bar shows the
jobs, and its return value is the exit status: 0 only when the delegated outputs equal the CPU
interpreter's. What only the parent knows (build, simulated cycles per second, the waveform)
is added at the end.
"""
from __future__ import annotations

import argparse
import sys
from typing import TextIO

from dtpu.rtl.build import RtlBuildError, choose_top
from dtpu.rtl.simulate import Simulation
from dtpu.run import run


def _run_inside(fields: dict) -> int:
    return run(argparse.Namespace(**fields))


def simulated_top(args: argparse.Namespace) -> str:
    """The simulated top for these arguments, chosen as for the in-process core."""
    opts = {k.strip(): v.strip().lower()
            for k, _, v in (o.partition("=") for o in getattr(args, "option", []) or [])}
    precision = getattr(args, "precision", None) or opts.get("precision", "auto")
    return choose_top(opts.get("path", "auto"), precision)


def run_in_simulator(args: argparse.Namespace, human: TextIO) -> int:
    try:
        sim = Simulation(args.mxu, waves=bool(getattr(args, "waves", False)), top=simulated_top(args))
    except ValueError as exc:
        print(f"dtpu run: {exc}", file=sys.stderr)
        return 2
    try:
        import dtpu

        dtpu.delegate_path()          # build dtpu.so here, not inside the simulator
        info = sim.build()
    except (RtlBuildError, RuntimeError, OSError) as exc:
        print(f"dtpu run: {exc}", file=sys.stderr)
        return 2
    how = "cached" if info.cached else f"built in {info.seconds:.0f} s"
    print(f"dtpu run: Verilated {sim.top} {info.parameters} ({how}): {info.path}", file=human)
    human.flush()
    try:
        # the parsed arguments without argparse's `func` (which may live in __main__)
        fields = {k: v for k, v in vars(args).items() if k != "func"}
        code = sim.run(_run_inside, (fields,), invokes=args.invokes)
    except Exception as exc:  # noqa: BLE001 - any failure in there is this command's failure
        where = f" (simulator log: {sim.last.log})" if sim.last and sim.last.kept else ""
        print(f"dtpu run: {exc}{where}", file=sys.stderr)
        return 1
    run = sim.last
    if run.jobs or run.cycles:
        rate = f"{run.cycles_per_s:,.0f}" if run.cycles_per_s else "-"
        what = f"{run.jobs} jobs" if run.jobs else "command lists"
        print(f"dtpu run: simulated {run.cycles} cycles ({what}) in {run.call_s:.1f} s, "
              f"{rate} cycles/s; simulator process {run.wall_s:.1f} s", file=human)
    if run.waves is not None:
        print(f"dtpu run: waveform {run.waves}", file=human)
    return int(code)


__all__ = ["run_in_simulator"]
