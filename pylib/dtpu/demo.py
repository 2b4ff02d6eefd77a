"""`python -m dtpu.demo` (`make demo`): one model through the DTPU delegate and through the CPU.

Builds dtpu.so if it is missing or stale, runs the zoo's MobileNet-like int8 network (or, without
the zoo, the delegate's small int8 conv chain) through ``dtpu.make_interpreter`` and through the
plain TFLite interpreter on the same inputs, and prints first how fast it would be on the PYNQ-Z2
(an estimate: dtpu.board.costs), then whether the outputs agree, which ops the delegate took, the
simulator's own times on this machine (labelled as such) and the delegate's report table. Exits 1
if the outputs disagree.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from dtpu.run import random_inputs

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = (
    ROOT / "tests" / "models" / "zoo" / "mobilenet_like__int8.tflite",
    ROOT / "tests" / "data" / "delegate" / "chain_int8.tflite",
)


def _run(interpreter, inputs):
    for detail, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], value)
    start = time.perf_counter()
    interpreter.invoke()
    elapsed = time.perf_counter() - start
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()], elapsed


def _ops(interpreter) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in interpreter._get_ops_details():
        counts[op["op_name"]] = counts.get(op["op_name"], 0) + 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dtpu.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="a .tflite file (default: the "
                        "zoo's mobilenet_like__int8, else tests/data/delegate/chain_int8)")
    parser.add_argument("--backend", default=None, help="delegate backend (default: the delegate's)")
    parser.add_argument("--invokes", type=int, default=3, help="invokes to run (default 3)")
    args = parser.parse_args(argv)

    import numpy as np

    import dtpu
    from dtpu import tflite
    from dtpu.report import cpu_summary, format_table

    model = args.model or next((p for p in CANDIDATES if p.exists()), None)
    if model is None or not model.exists():
        print("dtpu demo: no model found; pass --model PATH", file=sys.stderr)
        return 2
    print(f"dtpu demo: {tflite.runtime_version()}, Python {sys.version.split()[0]}")
    print(f"delegate library: {dtpu.delegate_path()}")
    print(f"model: {model}")

    options = {"backend": args.backend} if args.backend else {}
    ours = dtpu.make_interpreter(model, options)
    ours.allocate_tensors()
    cpu = tflite.Interpreter(model_path=str(model))
    cpu.allocate_tensors()

    agree, worst, t_ours, t_cpu = True, 0.0, [], []
    for seed in range(max(1, args.invokes)):
        inputs = random_inputs(cpu, seed)
        got, dt_ours = _run(ours, inputs)
        want, dt_cpu = _run(cpu, inputs)
        t_ours.append(dt_ours)
        t_cpu.append(dt_cpu)
        for g, w in zip(got, want):
            if np.issubdtype(w.dtype, np.integer):
                agree &= bool(np.array_equal(g, w))
                worst = max(worst, float(np.max(np.abs(g.astype(np.int64) - w))))
            else:
                rel = float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30))
                agree &= rel <= 1e-5
                worst = max(worst, rel)

    report = dtpu.last_report()
    graph_ops = _ops(cpu)
    claimed = [n.node for n in report.nodes] if report else []
    # the question a user comes with first: how fast on the board? (an estimate, said so)
    est = report.board_estimate() if report else None
    if est is not None:
        print(f"on the PYNQ-Z2 (estimate): whole invoke {est['whole_ms']:.2f} ms (DTPU "
              f"{est['device_ms']:.3f} ms at {est['clock_mhz']:g} MHz, host {est['host_ms']:.2f} ms, "
              f"CPU operators {est['cpu_ms']:.2f} ms) against TFLite alone on its Cortex-A9 "
              f"{est['tflite_ms']:.2f} ms: {est['speedup']:.2f}x; `dtpu estimate {model}` for "
              "the table and its sources")
    else:
        print(f"on the PYNQ-Z2 (estimate): none: backend {report.backend if report else '-'} "
              "counts no device cycles (use backend=model)")
    verdict = "bit-exact" if agree else "DIFFERENT"
    print(f"outputs over {len(t_ours)} invokes: {verdict} (max difference {worst:g})")
    print(f"ops in the model: {graph_ops}")
    print(f"delegated to the DTPU ({report.backend if report else '-'}): {len(claimed)} nodes "
          f"{claimed}; " + (cpu_summary(report) if report else "left on the CPU: every node"))
    # the first invoke compiles jobs and loads weights: shown apart from the steady state
    steady, cpu_steady = t_ours[1:] or t_ours, t_cpu[1:] or t_cpu
    print(f"simulator time on this machine (not the board): delegate first "
          f"{1e3 * t_ours[0]:.2f} ms, then median {1e3 * float(np.median(steady)):.2f} ms over "
          f"{len(steady)} (the golden model in Python); TFLite's CPU kernels here median "
          f"{1e3 * float(np.median(cpu_steady)):.2f} ms over {len(cpu_steady)}")
    print()
    print(format_table(dtpu.reports()[-len(t_ours):]) if report else "no report")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
