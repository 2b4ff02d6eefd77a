"""The `dtpu` command. Subcommands register themselves in :data:`COMMANDS` (later: bench,
sim, isro, doctor).

    dtpu build [--force] [--verbose] [--out DIR]   build dtpu.so for this interpreter
    dtpu path                                     print the path of an up-to-date dtpu.so
    dtpu run MODEL [--backend B] [--mxu 8x8] [--report table|json|none] [--invokes N]
                                                  delegated vs CPU interpreter: agreement, reports
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any, Callable


def _build(args: argparse.Namespace) -> int:
    from dtpu.delegate import build

    path = build(force=args.force, verbose=args.verbose, out_dir=args.out)
    print(path)
    return 0


def _path(args: argparse.Namespace) -> int:
    from dtpu.delegate import library_path

    print(library_path(build_if_needed=not args.no_build))
    return 0


def _add_build(sub) -> None:
    p = sub.add_parser("build", help="build dtpu.so (the TFLite delegate) with this Python",
                       description="Build dtpu.so with the running interpreter; the library links "
                       "this interpreter's libpython, so build it with the Python that will load it.")
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")
    p.add_argument("--verbose", action="store_true", help="show the compiler's output")
    p.add_argument("--out", default=None, help="output directory (default: pylib/dtpu/_build/<soabi>-cffi<version>/, "
                   "or ~/.cache/dtpu/<same>/ if the package is read-only)")
    p.set_defaults(func=_build)


def _add_path(sub) -> None:
    p = sub.add_parser("path", help="print the path of dtpu.so (building it if needed)")
    p.add_argument("--no-build", action="store_true", help="fail instead of building")
    p.set_defaults(func=_path)


# -- dtpu run -------------------------------------------------------------------------------------

#: float outputs agree within this relative error (of the output's largest magnitude), as the
#: delegate's tests require; integer outputs must be bit-exact
FLOAT_RTOL = 1e-5


def _inputs(interpreter, seed: int) -> list:
    """Real values uniform in [-1, 1], quantized with each input's own parameters."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = []
    for detail in interpreter.get_input_details():
        real = rng.uniform(-1.0, 1.0, size=detail["shape"])
        dtype = np.dtype(detail["dtype"])
        scale, zero_point = detail["quantization"]
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            real = np.round(real / scale) + zero_point if scale else real * info.max
            real = np.clip(real, info.min, info.max)
        values.append(real.astype(dtype))
    return values


def _invoke(interpreter, inputs) -> list:
    for detail, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def _compare(got, want) -> tuple[bool, str, float]:
    """(agree, what differs, the largest difference: absolute for integers, relative for floats)."""
    import numpy as np

    if got.shape != want.shape or got.dtype != want.dtype:
        return False, f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}", float("inf")
    if np.issubdtype(want.dtype, np.integer):
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        bad = np.argwhere(diff != 0)
        if bad.size:
            first = tuple(bad[0])
            return False, (f"{len(bad)} of {want.size} values differ, first at {list(map(int, first))}: "
                           f"{got[first]} vs {want[first]}"), float(diff.max())
        return True, "", 0.0
    scale = max(float(np.max(np.abs(want))), 1e-30) if want.size else 1.0
    err = float(np.max(np.abs(got.astype(np.float64) - want))) / scale if want.size else 0.0
    if not err <= FLOAT_RTOL:
        return False, f"relative error {err:.3g} > {FLOAT_RTOL:g}", err
    return True, "", err


def _run_options(args: argparse.Namespace) -> dict[str, str]:
    options = {"mxu": args.mxu}
    for key in ("backend", "precision", "ops", "bitstream", "power_meter"):
        value = getattr(args, key)
        if value is not None:
            options[key] = value
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--option {item!r} is not KEY=VALUE")
        options[key.strip()] = value
    return options


def _run(args: argparse.Namespace) -> int:
    model = Path(args.model)
    if not model.is_file():
        print(f"dtpu run: model {str(model)!r} does not exist", file=sys.stderr)
        return 2
    if args.invokes < 1:
        print(f"dtpu run: --invokes {args.invokes} is invalid; expected 1 or more", file=sys.stderr)
        return 2
    human = sys.stderr if args.report == "json" else sys.stdout
    if not logging.getLogger().handlers:  # warnings (e.g. an emulated board) reach the user
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
    import dtpu
    from dtpu import tflite

    try:
        options = _run_options(args)
        cpu = tflite.Interpreter(model_path=str(model))
        cpu.allocate_tensors()
        ours = dtpu.make_interpreter(model, options)
        ours.allocate_tensors()
    except (ValueError, RuntimeError) as exc:
        print(f"dtpu run: {exc}", file=sys.stderr)
        return 2
    last = dtpu.last_report()
    seen = last.seq if last is not None else 0
    names = [d["name"] for d in cpu.get_output_details()]
    problems: list[str] = []
    reports = []
    worst = 0.0
    for i in range(args.invokes):
        inputs = _inputs(cpu, args.seed + i)
        got, want = _invoke(ours, inputs), _invoke(cpu, inputs)
        ok = True
        for k, (g, w) in enumerate(zip(got, want)):
            agree, what, diff = _compare(g, w)
            worst = max(worst, diff)
            if not agree:
                ok = False
                problems.append(f"invoke {i} (seed {args.seed + i}), output {k} ({names[k]}): {what}")
        report = dtpu.last_report()
        if report is not None and report.seq > seen:
            seen = report.seq
            reports.append(report)
        delegated = len(report.nodes) if reports and report is reports[-1] else 0
        print(f"invoke {i}: outputs {'equal' if ok else 'DIFFER'} "
              f"({delegated} nodes on the DTPU, max difference {worst:g})", file=human)
    backend = reports[-1].backend if reports else options.get("backend", "default")
    if args.report == "json":
        for r in reports:
            print(json.dumps(r.to_dict(), default=str))
    elif args.report == "table":
        for i, r in enumerate(reports):
            print(f"-- invoke {i}", file=human)
            print(r.table(), end="", file=human)
    agree = not problems
    summary: dict[str, Any] = {"type": "summary", "model": str(model), "backend": backend,
                               "invokes": args.invokes, "agree": agree, "max_difference": worst,
                               "delegated_nodes": len(reports[-1].nodes) if reports else 0}
    if args.report == "json":
        print(json.dumps(summary))
    if not reports:
        print("dtpu run: no node was delegated (nothing ran on the DTPU)", file=human)
    if not agree:
        print(f"dtpu run: {model.name}: the delegated outputs (backend={backend}) differ from the "
              f"CPU interpreter's:", file=sys.stderr)
        for p in problems[:10]:
            print(f"  {p}", file=sys.stderr)
        return 1
    kind = "bit-exact" if worst == 0.0 else f"within {FLOAT_RTOL:g} relative"
    print(f"dtpu run: {model.name}: backend={backend}, {args.invokes} invoke(s), outputs agree with "
          f"the CPU interpreter ({kind})", file=human)
    return 0


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run a model delegated and on the CPU; compare outputs, show reports",
                       description="Run MODEL through the DTPU delegate and through the plain CPU "
                       "interpreter on the same inputs (real values uniform in [-1, 1], quantized per "
                       "input). Exit 0 when the outputs agree (integers bit-exact, floats within "
                       f"{FLOAT_RTOL:g} relative), 1 when they differ, 2 when the model cannot run.")
    p.add_argument("model", help="a .tflite file")
    p.add_argument("--backend", default=None, help="delegate backend (model, pynq, reference, ...; "
                   "default: the delegate's)")
    p.add_argument("--mxu", default="8x8", help="array geometry ROWSxCOLS (default 8x8)")
    p.add_argument("--report", choices=("table", "json", "none"), default="table",
                   help="per-invoke reports: tables, JSON lines on stdout (human text then goes to "
                   "stderr), or none")
    p.add_argument("--invokes", type=int, default=1, help="invokes, each with new inputs (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first invoke's inputs")
    p.add_argument("--ops", default=None, help="op kinds the delegate may claim (delegate option ops)")
    p.add_argument("--precision", default=None, help="delegate option precision")
    p.add_argument("--bitstream", default=None, help="backend=pynq: the overlay's .bit")
    p.add_argument("--power-meter", dest="power_meter", default=None,
                   help="backend=pynq: external meter reading, watts or file:PATH")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other delegate option (repeatable)")
    p.set_defaults(func=_run)


COMMANDS: list[Callable] = [_add_build, _add_path, _add_run]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dtpu", description="DTPU accelerator tools")
    from dtpu import __version__

    p.add_argument("--version", action="version", version=f"dtpu {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if not getattr(args, "func", None):
        p.print_help()
        return 2
    try:
        return args.func(args)
    except (RuntimeError, FileNotFoundError, ValueError) as exc:
        print(f"dtpu {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
