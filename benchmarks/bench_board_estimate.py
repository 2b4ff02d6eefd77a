#!/usr/bin/env python3
"""Whole invoke on the PYNQ-Z2, estimated (the model is dtpu.board.costs and dtpu.board.estimate, the
same as `dtpu estimate MODEL`): device time at 100 MHz plus the host operations at
per-operation costs of the board's 650 MHz Cortex-A9, against TFLite's CPU time on that A9.

For VWW 96 (MLPerf Tiny), MobileNet v2 1.0 224 and ResNet-8 (MLPerf Tiny), on three paths:

* job by job (contract 1.2): every job driven from Python. Counts and stall-free cycles come from
  benchmarks/bench_host_ops.py's `today` (backend=model's protocol path over a counting
  transport): register reads and writes, CTRL.STARTs, DMA transfers and the bytes they move,
  host layout steps (transforms) and the bytes they write.
* command list (contract 2.0): one doorbell per partition. Counts and cycles (with the memory
  model of contract.json `contract2.memory_model`) from bench_host_ops's `command_list`
  (dtpu.driver.lists.ListProgram on the model's 2.0 register window), plus the input and output copies into
  and out of the partitions' DDR buffers; from Python (invoke=python) and on the delegate's C
  invoke path (invoke=c, the default: the same lists and register accesses at C's prices, a nap
  of the run's time before CL_STATUS, no Python while no report is read; the comparison adds
  the Python that folds a run into its report for an application that reads every report).

Then the table a board user reads first (dtpu.board.compare): the C path's whole invoke for the
MLPerf Tiny tasks and MobileNet v1/v2 224 (the zoo models standing for them), at 100 MHz and at
the slowest fmax the timing proxy shows, beside published figures on the XC7Z020 and its
Cortex-A9, each with its source (`--no-compare` leaves it out).

Every path also pays what stays on the CPU: the operators outside the partitions (PAD, ADD,
pooling, softmax...: TFLite kernels on the A9) and TFLite calling the delegate once per
partition. The TFLite baseline is the model's MACs at an A9 int8 rate plus the same CPU-side
operators. Every constant is in dtpu.board.costs.COSTS with its unit, kind (cited / derived / measured / assumption)
and source; `--costs FILE` overrides values from a JSON object {name: value}. Nothing here is
measured on a board: the figures are an estimate to be replaced by measurements
(docs/board_estimate.md says which and how).

    PYTHONPATH=pylib python benchmarks/bench_board_estimate.py [--only NAME] [--json] [--costs F] [--no-compare]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_host_ops as hostops  # noqa: E402
from dtpu.board.costs import COSTS, costs  # noqa: E402,F401  (COSTS: the table, for readers)
from dtpu.board import compare  # noqa: E402
from dtpu.board.estimate import estimate as _estimate, format_results  # noqa: E402
from dtpu.board.estimate import before_after, format_before_after, on_default_build  # noqa: E402

#: the models of docs/board_estimate.md's "Before and after: one kick" (names of
#: bench_host_ops.model_paths)
BEFORE_AFTER = ("VWW 96", "ResNet-8", "MobileNet v2 1.0 224")


def estimate(name: str, path: Path, c: dict, paths=("1.2", "2.0", "c")) -> dict:
    """dtpu.board.estimate.estimate, the file named relative to the checkout."""
    out = _estimate(name, path, c, paths=paths)
    if Path(path).is_relative_to(ROOT):
        out["file"] = str(Path(path).relative_to(ROOT))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="directory holding mobilenet_v2_224__int8.tflite")
    ap.add_argument("--only", help="run only models whose name contains this")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead")
    ap.add_argument("--costs", help="JSON file {name: value} overriding entries of COSTS")
    ap.add_argument("--no-compare", action="store_true",
                    help="leave out the table against published results (KWS, MobileNet v1 224)")
    ap.add_argument("--no-before-after", action="store_true",
                    help="leave out the table of the int16 overlay's partitions against the default "
                         "int8 overlay's one kick")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    c = costs(json.loads(Path(args.costs).read_text()) if args.costs else None)
    results = []
    for name, path in hostops.model_paths(args.models):
        if args.only and args.only.lower() not in name.lower():
            continue
        if path is None or not path.exists():
            print(f"{name}: model file not found, skipped", file=sys.stderr)
            continue
        results.append(estimate(name, path, c))
    tasks = {} if args.no_compare else comparison(results, c, args.only)
    kicks = [] if args.no_before_after else one_kick(args.models, c, args.only)
    clock = compare.proven_clock()
    if args.json:
        print(json.dumps(dict(costs={k: dict(v, value=c[k]) for k, v in COSTS.items()},
                              results=results, clock=clock, published=compare.PUBLISHED,
                              tasks=tasks, before_after=kicks), indent=1, default=float))
        return 0
    print(format_results(results, c), end="")
    if kicks:
        print(format_one_kick(kicks), end="")
    if not args.no_compare:
        print(format_comparison(tasks, c, clock), end="")
    return 0


def comparison(results: list[dict], c: dict, only: str | None) -> dict[str, dict]:
    """task -> the C-path estimate of the model standing for it as the delegate runs it on the
    overlay's default board build (dtpu.board.estimate.on_default_build: one kick on the int8
    build; `results`, chains of convolutions, are not that bitstream's partitions)."""
    out = {}
    for task, file, _stands in compare.TASKS:
        if file is None or (only and only.lower() not in task.lower()):
            continue
        path = (ROOT / file).resolve()
        if not path.exists():
            print(f"{task}: {file} not found, skipped", file=sys.stderr)
            continue
        out[task] = on_default_build(task, path, c)
    return out


def one_kick(models_dir, c: dict, only: str | None) -> list[dict]:
    """dtpu.board.estimate.before_after of the BEFORE_AFTER models."""
    out = []
    for name, path in hostops.model_paths(models_dir):
        if not name.startswith(BEFORE_AFTER) or (only and only.lower() not in name.lower()):
            continue
        if path is None or not path.exists():
            print(f"{name}: model file not found, skipped", file=sys.stderr)
            continue
        out.append(before_after(name.split(" (")[0], path, c))
    return out


def format_one_kick(results: list[dict]) -> str:
    """docs/board_estimate.md's "Before and after: one kick" table with its markers."""
    return "\n".join([
        "", "## Before and after: one kick (the delegate's partitions on each overlay, C path)", "",
        "<!-- generated by `PYTHONPATH=pylib python benchmarks/bench_board_estimate.py`; "
        "tests/test_doc_claims.py regenerates it and fails when it differs (before/after) -->",
        format_before_after(results).rstrip("\n"),
        "<!-- end of generated before/after -->", ""])


def format_comparison(tasks: dict[str, dict], c: dict, clock: dict) -> str:
    """The board user's table (docs/board_estimate.md, "Against published results") with the
    clock it assumes and where each published figure comes from."""
    return "\n".join([
        "", "## Against published results on the same chip (DTPU: estimate, C invoke path)", "",
        "The DTPU's figures are the delegate's partitions on the overlay's default board build "
        f"({compare.default_build_summary()}), priced from its steady-state report.", "",
        f"The DTPU's device time at {c['fabric_mhz']:.0f} MHz is not proven: the slowest unit "
        f"placed so far on the timing proxy, {clock['module']}, reaches {clock['fmax_mhz']:g} MHz "
        f"({clock['below']} of {clock['placed']} placed units below 100 MHz, {clock['not_run']} "
        "not placed yet; docs/synthesis.md).", "",
        "<!-- generated by `PYTHONPATH=pylib python benchmarks/bench_board_estimate.py`; "
        "tests/test_doc_claims.py regenerates it and fails when it differs -->",
        compare.table(tasks, c, clock),
        "<!-- end of generated comparison -->", "", "published figures:", *compare.sources(),
        ""])


if __name__ == "__main__":
    sys.exit(main())
