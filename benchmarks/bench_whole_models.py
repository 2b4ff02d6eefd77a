#!/usr/bin/env python3
"""Whole models through the delegate (issue #25 item 5): per model and target, the partitions,
the operators left on the CPU, the host operations of one steady-state invoke, the device
cycles, and how busy the MXU and the vector unit are. Prints; asserts nothing.

Each model runs through the delegate with default options (``dtpu.make_interpreter``), two
seeded full-range invokes, the second one's report read (dtpu.last_report()); outputs are
compared with TFLite's CPU interpreter (the column `exact`). Targets:

  int8     backend=model: the golden model of a contract-2.1 core with the vector unit, which is
           what the emulated board's default overlay, int8 (hw/overlays OVERLAY=int8, the
           whole-model build, which fits the xc7z020), runs: its reports carry the same
           partitions, host counts and cycles (tests/test_one_kick.py runs both)
  int16    backend=model with `vector=off`: the vector unit's operators on the CPU, as on the
           board's int16 overlay (no vector unit): the same partitions, counts and cycles as
           `bitstream=int16`

Columns:

  parts      delegated partitions (DELEGATE nodes TFLite made)
  CPU ops    TFLite operators outside them (report.rejected: each with the delegate's reason)
  r / w / db register reads, writes and doorbells of the invoke (dtpu.driver.hostops); DMA
             starts and host transforms are listed when not 0
  cycles     device cycles of the invoke (the golden model's, memory model included)
  MXU        MACs / (cycles * PEAK_MACS_PER_CYCLE): the MXU's utilization over the whole
             device time; in parentheses over the cycles of the MXU's own nodes only
  vec share  the cycles of the vector unit's nodes over all device cycles
  vec rate   the vector unit's lane occupancy over its own nodes: per node the larger of its
             (first) input's and its output's element count, summed, / (8 lanes * their cycles).
             1.0 = eight 8-bit elements every cycle, one 64-bit word on its busier port (a table
             operator or MEAN streaming its input); an ADD or MUL of two full tensors reads two
             words a result word on one read port, so it is bound near 0.5

Models: the canonical ones of issue #25 (tests/delegate_util.CANONICAL_MODELS), the uint8
MobileNet 1.0 224 twins (tests/models/derive_uint8.py, written into the model cache on first use)
and the real-model patterns (tests/models/patterns.py).

    PYTHONPATH=pylib python benchmarks/bench_whole_models.py [--only NAME] [--targets int8,int16] [--json]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "pylib"), str(ROOT)]

TARGETS = {"int8": {"backend": "model"}, "int16": {"backend": "model", "vector": "off"}}
#: the delegate report's names of the vector unit's nodes
VEC_OPS = {"add", "sub", "mul", "average_pool_2d", "max_pool_2d", "mean", "concatenation",
           "resize_nearest_neighbor", "logistic", "tanh", "hard_swish", "leaky_relu", "relu",
           "relu6", "relu_n1_to_1", "quantize"}


def models(only: str | None) -> dict[str, Path]:
    from tests.delegate_util import CANONICAL_MODELS
    from tests.models import derive_uint8
    from tests.models.patterns import PATTERNS

    out = {k: Path(v) for k, v in CANONICAL_MODELS.items()}
    for name in derive_uint8.TWINS:
        if not only or only in name:
            out[name] = derive_uint8.twin_path(name)
    tmp = Path(tempfile.mkdtemp(prefix="dtpu_patterns_"))
    for name, build in PATTERNS.items():
        if not only or only in name:
            out[name] = tmp / f"{name}.tflite"
            out[name].write_bytes(build())
    return {k: v for k, v in out.items() if not only or only in k}


def measure(path: Path, options: dict) -> dict:
    """One model on one target: the steady-state report's figures (module docstring)."""
    import dtpu
    from dtpu import tflite as tfl
    from dtpu.hw.config import get_config
    from tests.delegate_util import run

    t0 = time.perf_counter()
    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, options)
    ours.allocate_tensors()
    exact = True
    for seed in range(2):
        rng = np.random.default_rng(seed)
        xs = []
        for d in cpu.get_input_details():
            info = np.iinfo(d["dtype"])
            xs.append(rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"]))
        exact &= all(np.array_equal(a, b) for a, b in zip(run(ours, xs), run(cpu, xs)))
    r = dtpu.last_report()
    peak = get_config().PEAK_MACS_PER_CYCLE
    cycles = int(r.hw["cycles"] or 0)
    vec = [n for n in r.nodes if n.op in VEC_OPS]
    vec_cycles = sum(int(n.hw["cycles"] or 0) for n in vec)
    vec_elems = sum(max(int(np.prod(n.input_shape)), int(np.prod(n.output_shape))) for n in vec)
    mxu_cycles = cycles - vec_cycles
    macs = int(r.hw["macs"] or 0)
    cpu_ops: dict[str, int] = {}
    for rej in r.rejected:
        cpu_ops[rej["op"]] = cpu_ops.get(rej["op"], 0) + 1
    return dict(partitions=r.kernels, nodes=len(r.nodes), cpu_ops=cpu_ops,
                reasons=sorted({f"{x['op']}: {x['reason']}" for x in r.rejected}),
                host={k: r.host[k] for k in ("mmio_reads", "mmio_writes", "doorbells",
                                             "dma_starts", "transforms")},
                cycles=cycles, macs=macs, vec_nodes=len(vec), vec_cycles=vec_cycles,
                mxu=macs / (cycles * peak) if cycles else 0.0,
                mxu_own=macs / (mxu_cycles * peak) if mxu_cycles else 0.0,
                vec_share=vec_cycles / cycles if cycles else 0.0,
                vec_rate=vec_elems / (8 * vec_cycles) if vec_cycles else 0.0,
                exact=bool(exact), seconds=time.perf_counter() - t0)


def table(results: dict) -> str:
    out = ["| model | target | parts | CPU ops | r / w / db | cycles | MXU (own) | vec share "
           "| vec rate | exact |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, per in results.items():
        for target, m in per.items():
            h = m["host"]
            extra = "".join(f", {k} {h[k]}" for k in ("dma_starts", "transforms") if h[k])
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(m["cpu_ops"].items())) or "-"
            out.append(f"| {name} | {target} | {m['partitions']} | {ops} | {h['mmio_reads']} / "
                       f"{h['mmio_writes']} / {h['doorbells']}{extra} | {m['cycles']:,} | "
                       f"{m['mxu']:.1%} ({m['mxu_own']:.1%}) | {m['vec_share']:.1%} "
                       f"({m['vec_nodes']} nodes) | {m['vec_rate']:.2f} | {m['exact']} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="models whose name contains this")
    ap.add_argument("--targets", default="int8,int16",
                    help=f"comma list of {', '.join(TARGETS)} (default both)")
    ap.add_argument("--json", action="store_true", help="one JSON document instead")
    ap.add_argument("--reasons", action="store_true",
                    help="also list each CPU operator's reason per model and target")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    bad = [t for t in targets if t not in TARGETS]
    if bad:
        ap.error(f"--targets {args.targets!r}: {', '.join(bad)} unknown; accepted: "
                 f"{', '.join(TARGETS)}")
    t0 = time.perf_counter()
    results = {name: {t: measure(path, TARGETS[t]) for t in targets}
               for name, path in models(args.only).items()}
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(table(results), end="")
    if args.reasons:
        for name, per in results.items():
            for target, m in per.items():
                for why in m["reasons"]:
                    print(f"  {name} [{target}] {why}")
    print(f"\n{len(results)} models, {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
