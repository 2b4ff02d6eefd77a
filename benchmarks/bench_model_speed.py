#!/usr/bin/env python3
"""backend=model vs TFLite's own CPU kernels (1 thread) on the zoo's MobileNet-like nets.

Median time of many invokes of the whole model, the delegate with backend=model against the
plain interpreter, side by side with the ratio (target: within 3x), plus the model's
MAC-weighted MXU utilization over the delegated nodes. Model names are the zoo's, or files
NAME.tflite in $DTPU_MODEL_CACHE (e.g. mobilenet_v2_224__int8 with ``--large``); benchmarks/
bench_scale.py adds allocate, first invoke and RSS. The two interpreters are invoked
alternately, so both see the same machine; besides wall time, the thread's CPU time is reported
(on a busy machine a longer invoke is more often preempted, which inflates its wall time only).

``--nodes`` adds the per-node breakdown from the delegate's reports (medians, microseconds):
pack (im2col, packing), compute (the model's jobs), unpack, post (the copy into TFLite's
buffer), and what is left of the invoke outside the nodes' probes (delegate glue, the C side,
the CPU ops that stay on TFLite).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_model_speed.py [--invokes N] [--nodes]
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))
sys.path.insert(0, str(ROOT))

DEFAULT_MODELS = "mobilenet_like__int8,mobilenet_v1_025_96__int8,dscnn_like__int8,mobilenet_like__float32"
PHASES = ("pack", "compute", "unpack", "post")


def _setup(interpreter, inputs):
    for d, v in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], v)
    for _ in range(3):  # warm-up: compiled jobs, caches, first-touch of buffers
        interpreter.invoke()


def _timed(interpreter) -> tuple[float, float]:
    c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
    interpreter.invoke()
    return (time.perf_counter_ns() - t0) / 1e3, (time.thread_time_ns() - c0) / 1e3


def measure(name: str, invokes: int, ops: str, large: bool = False):
    import dtpu
    from dtpu import tflite
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_scale import LARGE, _inputs, _resolve

    path, entry = _resolve(name)
    if path is None:
        return None
    cpu = tflite.Interpreter(model_path=str(path), num_threads=1)
    cpu.allocate_tensors()
    inputs = _inputs(cpu, entry)
    options = {"backend": "model", "ops": ops}
    if large:   # every node resident (a testing configuration, see bench_scale.py)
        from dtpu.hw.config import HwConfig
        with HwConfig(**LARGE):
            ours = dtpu.make_interpreter(path, options, num_threads=1)
    else:
        ours = dtpu.make_interpreter(path, options, num_threads=1)
    ours.allocate_tensors()
    _setup(cpu, inputs)
    _setup(ours, inputs)
    cpu_t, our_t = [], []
    for _ in range(invokes):
        cpu_t.append(_timed(cpu))
        our_t.append(_timed(ours))
    reports = dtpu.reports()[-invokes:]   # one per invoke of `ours` (the last DTPU_REPORT_KEEP)
    return cpu_t, our_t, reports


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--invokes", type=int, default=300)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--ops", default="conv2d,depthwise_conv2d,fully_connected")
    ap.add_argument("--nodes", action="store_true", help="per-node breakdown from the reports")
    ap.add_argument("--large", action="store_true",
                    help="enlarged model memories, every node resident (the 224 nets until they "
                         "fit the default ones); names not in the zoo are looked up in "
                         "$DTPU_MODEL_CACHE (default tests/models/cache/)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    log = logging.getLogger("bench")
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        log.info("note: OPENBLAS_NUM_THREADS is not 1; numpy's BLAS may use more threads than TFLite")

    med = statistics.median
    log.info(f"{'model':<28}{'nodes':>6}{'CPU 1 thread us':>16}{'backend=model us':>18}{'ratio':>8}"
             f"{'CPU-time ratio':>16}{'MXU util':>10}{'cycles':>9}")
    breakdowns = []
    for name in args.models.split(","):
        got = measure(name, args.invokes, args.ops, args.large)
        if got is None:
            log.info(f"{name}: skipped (no model file)")
            continue
        cpu_t, our_t, reports = got
        nodes = reports[-1].to_dict()["nodes"]
        macs = sum(n["hw"]["macs"] or 0 for n in nodes)
        cycles = sum(n["hw"]["cycles"] or 0 for n in nodes)
        util = macs / (cycles * 64) if cycles else float("nan")
        wall_cpu, wall_ours = med(t for t, _ in cpu_t), med(t for t, _ in our_t)
        thr_cpu, thr_ours = med(c for _, c in cpu_t), med(c for _, c in our_t)
        log.info(f"{name:<28}{len(nodes):>6}{wall_cpu:>16.0f}{wall_ours:>18.0f}{wall_ours / wall_cpu:>7.2f}x"
                 f"{thr_ours / thr_cpu:>15.2f}x{util:>10.1%}{cycles:>9}")
        breakdowns.append((name, wall_ours, reports))
    if args.nodes:
        for name, wall, reports in breakdowns:
            log.info(f"\n{name}: per node, median of {len(reports)} invokes (us)")
            log.info(f"{'node':>5} {'op':<18}{'output':<14}" + "".join(f"{p:>9}" for p in PHASES)
                     + f"{'sum':>9}")
            total = 0.0
            for i, node in enumerate(reports[-1].nodes):
                ph = {p: med(r.nodes[i].timing_us.get(p, 0.0) for r in reports) for p in PHASES}
                total += sum(ph.values())
                log.info(f"{node.node:>5} {node.op:<18}{'x'.join(map(str, node.output_shape)):<14}"
                         + "".join(f"{ph[p]:>9.1f}" for p in PHASES) + f"{sum(ph.values()):>9.1f}")
            python = med(r.timing_us["python"] for r in reports)
            log.info(f"nodes' probes {total:.0f} us; Python side of the delegate {python:.0f} us "
                     f"(of which outside the probes {python - total:.0f} us: delegate glue and the "
                     f"backend's bookkeeping); whole invoke {wall:.0f} us (the rest: C side and "
                     f"the CPU ops TFLite keeps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
