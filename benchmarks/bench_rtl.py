#!/usr/bin/env python3
"""backend=rtl speed: the zoo's MobileNet-like net through the Verilog core under Verilator.

For each model: the Verilator build (cold or cached), the simulator process's wall time, the
time to prepare (weights loaded into the simulated core) and per invoke, the device cycles the
report counts and the simulated clock cycles per wall second (bus traffic between jobs
included). `--models mobilenet_v1_025_96__int8` measures the issue's 10-minute target; `--cold`
rebuilds first so the build time is measured too.
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


def measure(path: str, invokes: int) -> dict:
    """Runs inside the simulator: one delegated interpreter, `invokes` invokes, checked against
    the CPU interpreter on the same inputs."""
    import numpy as np

    import dtpu
    from dtpu import tflite
    from dtpu.rtl import current_transport
    from tests.models import zoo

    t = current_transport()
    entry = zoo.get_entry(Path(path).stem)
    cpu = tflite.Interpreter(model_path=path)
    cpu.allocate_tensors()
    c0, w0 = t.cycle, time.perf_counter()
    ours = dtpu.make_interpreter(path, {"backend": "rtl"})
    ours.allocate_tensors()
    prepare = {"wall_s": time.perf_counter() - w0, "cycles": t.cycle - c0}
    runs, exact = [], True
    for i in range(invokes):
        inputs = zoo.make_inputs(entry, seed=i)
        outs = []
        for it in (ours, cpu):
            for d, v in zip(it.get_input_details(), inputs):
                it.set_tensor(d["index"], v)
        c0, w0 = t.cycle, time.perf_counter()
        ours.invoke()
        wall, sim_cycles = time.perf_counter() - w0, t.cycle - c0
        cpu.invoke()
        for it in (ours, cpu):
            outs.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
        exact &= all(np.array_equal(a, b) for a, b in zip(*outs))
        nodes = dtpu.last_report().to_dict()["nodes"]
        runs.append({"wall_s": wall, "sim_cycles": sim_cycles,
                     "device_cycles": sum(n["hw"]["cycles"] or 0 for n in nodes), "nodes": len(nodes)})
    return {"prepare": prepare, "invokes": runs, "exact": exact}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenet_like__int8",
                    help="comma-separated zoo names (e.g. mobilenet_v1_025_96__int8, dscnn_like__int8)")
    ap.add_argument("--invokes", type=int, default=3)
    ap.add_argument("--mxu", default="8x8")
    ap.add_argument("--cold", action="store_true", help="rebuild the Verilated model first")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    log = logging.getLogger("bench")
    import dtpu
    from dtpu.rtl import Simulation
    from tests.models import zoo

    dtpu.delegate_path()
    sim = Simulation(args.mxu)
    t0 = time.perf_counter()
    info = sim.build(force=args.cold)
    how = "cached" if info.cached else f"built in {info.seconds:.1f} s"
    log.info(f"Verilated dtpu_axi {info.parameters}: {how} ({time.perf_counter() - t0:.1f} s here)")
    log.info(f"{'model':<28}{'total s':>9}{'sim proc s':>11}{'prepare s':>10}{'invoke s':>10}"
             f"{'device cyc':>11}{'sim cyc':>9}{'sim cyc/s':>11}{'exact':>7}")
    ok = True
    for name in args.models.split(","):
        path = zoo.model_path(name.strip())
        t0 = time.perf_counter()
        r = sim.run(measure, (str(path), args.invokes))
        total = time.perf_counter() - t0
        inv = r["invokes"]
        wall = statistics.median(x["wall_s"] for x in inv)
        cycles = sum(x["sim_cycles"] for x in inv) + r["prepare"]["cycles"]
        busy = sum(x["wall_s"] for x in inv) + r["prepare"]["wall_s"]
        log.info(f"{name:<28}{total:>9.1f}{sim.last.wall_s:>11.1f}{r['prepare']['wall_s']:>10.2f}"
                 f"{wall:>10.2f}{inv[0]['device_cycles']:>11}{inv[0]['sim_cycles']:>9}"
                 f"{cycles / busy:>11,.0f}{str(r['exact']):>7}")
        ok &= r["exact"]
    log.info("total s: this script's wall time for the model (simulator start, TFLite, all invokes); "
             "device cyc: the report's CYCLES per invoke; sim cyc: clock cycles simulated per invoke "
             "(register traffic between jobs included)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
