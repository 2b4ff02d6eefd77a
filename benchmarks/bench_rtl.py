#!/usr/bin/env python3
"""backend=rtl speed: the zoo's MobileNet-like net through the Verilog core under Verilator.

For each model and transport (cocotb: the simulator hosts Python and cocotbext-axi drives the
buses; native: the core as a shared library in this process, bus loops in C++): the Verilator
build (cold or cached), the wall time of the whole run, the time to prepare (weights loaded
into the simulated core) and per invoke, the device cycles the report counts and the simulated
clock cycles per wall second (bus traffic between jobs included). Both transports run the 1.2
top job by job (`path=jobs`), so they simulate the same core; the 2.0 top's speed is
bench_sim_speed.py's.
`--models mobilenet_v1_025_96__int8` measures the issue's 10-minute target; `--cold` rebuilds
first so the build time is measured too.
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


def _backend_transport():
    """The transport of the delegate this process created last (the native case: its own core)."""
    from dtpu.delegate import runtime

    return list(runtime.DELEGATES.values())[-1].backend.transport


def measure(path: str, invokes: int) -> dict:
    """Runs inside the simulator (cocotb) or here (native): one delegated interpreter, `invokes`
    invokes, checked against the CPU interpreter on the same inputs."""
    import numpy as np

    import dtpu
    from dtpu import tflite
    from dtpu.rtl import current_transport, in_simulation
    from tests.models import zoo

    entry = zoo.get_entry(Path(path).stem)
    cpu = tflite.Interpreter(model_path=path)
    cpu.allocate_tensors()
    w0 = time.perf_counter()
    c0 = current_transport().cycle if in_simulation() else 0
    ours = dtpu.make_interpreter(path, {"backend": "rtl", "path": "jobs"})
    ours.allocate_tensors()
    t = current_transport() if in_simulation() else _backend_transport()
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
    ap.add_argument("--transport", choices=("cocotb", "native", "both"), default="both")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("dtpu.delegate").setLevel(logging.WARNING)   # which nodes stay on the CPU
    log = logging.getLogger("bench")
    import dtpu
    from dtpu.rtl import Simulation
    from tests.models import zoo

    dtpu.delegate_path()
    transports = ("cocotb", "native") if args.transport == "both" else (args.transport,)
    sim = Simulation(args.mxu)
    builds = {}
    for kind in transports:
        t0 = time.perf_counter()
        if kind == "cocotb":
            info = sim.build(force=args.cold)
        else:
            from dtpu.rtl.build import SimConfig, build_native
            info = build_native(SimConfig.from_mxu(args.mxu), force=args.cold)
        how = "cached" if info.cached else f"built in {info.seconds:.1f} s"
        builds[kind] = info
        log.info(f"{kind}: Verilated dtpu_axi {info.parameters}: {how} ({time.perf_counter() - t0:.1f} s here)")
    log.info(f"{'model':<28}{'transport':>10}{'total s':>9}{'prepare s':>10}{'invoke s':>10}"
             f"{'device cyc':>11}{'sim cyc':>9}{'sim cyc/s':>11}{'exact':>7}")
    ok = True
    for name in args.models.split(","):
        path = zoo.model_path(name.strip())
        for kind in transports:
            t0 = time.perf_counter()
            if kind == "cocotb":
                r = sim.run(measure, (str(path), args.invokes))
            else:
                if args.mxu != "8x8":
                    raise SystemExit("--transport native measures the default 8x8 build only")
                r = measure(str(path), args.invokes)
            total = time.perf_counter() - t0
            inv = r["invokes"]
            wall = statistics.median(x["wall_s"] for x in inv)
            cycles = sum(x["sim_cycles"] for x in inv) + r["prepare"]["cycles"]
            busy = sum(x["wall_s"] for x in inv) + r["prepare"]["wall_s"]
            log.info(f"{name:<28}{kind:>10}{total:>9.1f}{r['prepare']['wall_s']:>10.2f}"
                     f"{wall:>10.2f}{inv[0]['device_cycles']:>11}{inv[0]['sim_cycles']:>9}"
                     f"{cycles / busy:>11,.0f}{str(r['exact']):>7}")
            ok &= r["exact"]
    log.info("total s: this script's wall time for the model (cocotb: simulator start included; "
             "TFLite, prepare, all invokes); "
             "device cyc: the report's CYCLES per invoke; sim cyc: clock cycles simulated per invoke "
             "(register traffic between jobs included)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
