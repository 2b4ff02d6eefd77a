"""Run a model delegated and on the CPU interpreter, on the same inputs, and compare (`dtpu run`).

One module for what `dtpu run` does once it has its arguments, so that both callers use it
without importing each other: :mod:`dtpu.cli` (which sends ``--backend rtl`` into the Verilator
simulation first) and :mod:`dtpu.rtl.cli` (which calls :func:`run` inside that simulation).
:func:`random_inputs` is also the input generator of ``dtpu.demo`` and the RTL tests.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

#: float outputs agree within this relative error (of the output's largest magnitude), as the
#: delegate's tests require; integer outputs must be bit-exact
FLOAT_RTOL = 1e-5


def random_inputs(interpreter, seed: int) -> list:
    """Real values uniform in [-1, 1], quantized with each input's own parameters (an integer
    input without a scale takes the values times its type's maximum)."""
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


def invoke(interpreter, inputs) -> list:
    """Set the inputs, invoke, and return copies of the outputs."""
    for detail, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def compare(got, want) -> tuple[bool, str, float]:
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


def delegate_options(args: argparse.Namespace) -> dict[str, str]:
    """The delegate options `dtpu run`'s arguments ask for."""
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


def check_arguments(args: argparse.Namespace) -> int:
    """0 if the model file and the invoke count can run, else 2 with the reason on stderr. The
    model is checked before any TFLite sees it: a damaged file is a message, not a signal
    (issue #12)."""
    model = Path(args.model)
    if not model.is_file():
        print(f"dtpu run: model {str(model)!r} does not exist", file=sys.stderr)
        return 2
    if args.invokes < 1:
        print(f"dtpu run: --invokes {args.invokes} is invalid; expected 1 or more", file=sys.stderr)
        return 2
    from dtpu import model_check

    try:
        model_check.check_file(model)
    except (ValueError, OSError) as exc:
        print(f"dtpu run: {exc}", file=sys.stderr)
        return 2
    return 0


def human_stream(args: argparse.Namespace) -> TextIO:
    """Where the human-readable lines go: stderr when stdout carries JSON lines."""
    if not logging.getLogger().handlers:  # warnings (e.g. an emulated board) reach the user
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
    return sys.stderr if args.report == "json" else sys.stdout


def run(args: argparse.Namespace) -> int:
    """`dtpu run` in this process, whatever the backend (inside the RTL simulation, backend=rtl
    finds the simulation's transport): the exit status, 0 only when the outputs agree."""
    code = check_arguments(args)
    if code:
        return code
    return compare_with_cpu(args, human_stream(args))


def compare_with_cpu(args: argparse.Namespace, human: TextIO) -> int:
    """Invoke the delegated and the CPU interpreter ``args.invokes`` times on the same inputs,
    print a line per invoke, the reports and the verdict; 0 agree, 1 differ, 2 cannot run."""
    import dtpu
    from dtpu import tflite

    model = Path(args.model)
    try:
        options = delegate_options(args)
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
        inputs = random_inputs(cpu, args.seed + i)
        got, want = invoke(ours, inputs), invoke(cpu, inputs)
        ok = True
        for k, (g, w) in enumerate(zip(got, want)):
            agree, what, diff = compare(g, w)
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
    elif args.report == "table" and reports:
        # one table over the invokes: the first (it compiles and loads weights) apart, the
        # means over the steady state after it
        from dtpu.report import format_table

        print(format_table(reports), end="", file=human)
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


__all__ = ["FLOAT_RTOL", "check_arguments", "compare", "compare_with_cpu", "delegate_options",
           "human_stream", "invoke", "random_inputs", "run"]
