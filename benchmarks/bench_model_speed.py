#!/usr/bin/env python3
"""backend=model vs TFLite's own CPU kernels (1 thread) on the zoo's MobileNet-like nets.

Median wall time of many invokes of the whole model, the delegate with backend=model against the
plain interpreter, printed side by side with the ratio (target: within 3x), plus the model's
MAC-weighted MXU utilization over the delegated nodes.
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))
sys.path.insert(0, str(ROOT))


def _median_us(interpreter, inputs, n: int) -> float:
    for d, v in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(d["index"], v)
    interpreter.invoke()  # warm-up
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--invokes", type=int, default=200)
    ap.add_argument("--models", default="mobilenet_like__int8,mobilenet_like__float32,dscnn_like__int8")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    log = logging.getLogger("bench")
    import dtpu
    from dtpu import tflite
    from tests.models import zoo

    log.info(f"{'model':<28}{'CPU 1 thread us':>16}{'backend=model us':>18}{'ratio':>8}{'MXU util':>10}{'cycles':>9}")
    for name in args.models.split(","):
        entry = zoo.get_entry(name)
        path = zoo.model_path(entry)
        inputs = zoo.make_inputs(entry, seed=0)
        cpu = tflite.Interpreter(model_path=str(path), num_threads=1)
        cpu.allocate_tensors()
        ours = dtpu.make_interpreter(path, {"backend": "model", "ops": "conv2d,depthwise_conv2d,fully_connected"},
                                     num_threads=1)
        ours.allocate_tensors()
        t_cpu = _median_us(cpu, inputs, args.invokes)
        t_ours = _median_us(ours, inputs, args.invokes)
        nodes = dtpu.last_report().to_dict()["nodes"]
        macs = sum(n["hw"]["macs"] or 0 for n in nodes)
        cycles = sum(n["hw"]["cycles"] or 0 for n in nodes)
        util = macs / (cycles * 64) if cycles else float("nan")
        log.info(f"{name:<28}{t_cpu:>16.0f}{t_ours:>18.0f}{t_ours / t_cpu:>7.2f}x{util:>10.1%}{cycles:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
