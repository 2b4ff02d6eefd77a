#!/usr/bin/env python3
"""Whole invoke on the PYNQ-Z2, estimated (the model is dtpu.board.costs and dtpu.board.estimate, the
same as `dtpu estimate MODEL`): device time at 100 MHz plus the host operations at
per-operation costs of the board's 650 MHz Cortex-A9, against TFLite's CPU time on that A9.

For VWW 96 (MLPerf Tiny), MobileNet v2 1.0 224 and ResNet-8 (MLPerf Tiny), on both paths:

* job by job (contract 1.2): every job driven from Python. Counts and stall-free cycles come from
  benchmarks/bench_host_ops.py's `today` (backend=model's protocol path over a counting
  transport): register reads and writes, CTRL.STARTs, DMA transfers and the bytes they move,
  host layout steps (transforms) and the bytes they write.
* command list (contract 2.0): one doorbell per partition. Counts and cycles (with the memory
  model of contract.json `contract2.memory_model`) from bench_host_ops's `command_list`
  (dtpu.driver.lists.ListProgram on the model's 2.0 register window), plus the input and output copies into
  and out of the partitions' DDR buffers.

Both paths also pay what stays on the CPU: the operators outside the partitions (PAD, ADD,
pooling, softmax...: TFLite kernels on the A9) and TFLite calling the delegate once per
partition. The TFLite baseline is the model's MACs at an A9 int8 rate plus the same CPU-side
operators. Every constant is in dtpu.board.costs.COSTS with its unit, kind (cited / derived / assumption)
and source; `--costs FILE` overrides values from a JSON object {name: value}. Nothing here is
measured on a board: the figures are an estimate to be replaced by measurements
(docs/board_estimate.md says which and how).

    PYTHONPATH=pylib python benchmarks/bench_board_estimate.py [--only NAME] [--json] [--costs F]
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
from dtpu.board.estimate import estimate as _estimate, format_results  # noqa: E402


def estimate(name: str, path: Path, c: dict) -> dict:
    """dtpu.board.estimate.estimate, the file named relative to the checkout."""
    out = _estimate(name, path, c)
    if Path(path).is_relative_to(ROOT):
        out["file"] = str(Path(path).relative_to(ROOT))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="directory holding mobilenet_v2_224__int8.tflite")
    ap.add_argument("--only", help="run only models whose name contains this")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead")
    ap.add_argument("--costs", help="JSON file {name: value} overriding entries of COSTS")
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
    if args.json:
        print(json.dumps(dict(costs={k: dict(v, value=c[k]) for k, v in COSTS.items()},
                              results=results), indent=1, default=float))
    else:
        print(format_results(results, c), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
