#!/usr/bin/env python3
"""backend=model vs TFLite's own CPU kernels (1 thread): the bounds of issue 23, item 7.

Median time of many invokes of the whole model, the delegate with backend=model (its default
options unless ``--ops`` / ``--options`` say otherwise) against the plain interpreter, side by
side with the ratio, plus the model's MAC-weighted MXU utilization over the delegated nodes.
The two interpreters are invoked alternately, so each pair sees the same machine: the ratio
column is the median of the pairs' ratios (``median wall`` columns are the plain medians);
besides wall time, the thread's CPU time is reported (on a busy machine a longer invoke is
more often preempted, which inflates its wall time only).

Model sets (``--set``, or ``--models`` names): ``tiny`` MLPerf Tiny (VWW = the zoo's MobileNet
v1 0.25 96, ResNet-8, DS-CNN, the ToyADMOS autoencoder), bound 3x; ``224`` every ImageNet-scale
net of the zoo and of the generated cache (tests/models/make_imagenet.py --cache, in
$DTPU_MODEL_CACHE or tests/models/cache/; its Inception v3 is 299x299), bound 1.5x; ``all``
both. Other names: the zoo's, NAME.tflite in the cache, or a path. benchmarks/bench_scale.py adds
allocate, first invoke and RSS.

``--nodes`` adds the per-node breakdown from the delegate's reports (medians, microseconds):
pack (im2col, packing), compute (the model's jobs), unpack, post (the copy into TFLite's
buffer), and what is left of the invoke outside the nodes' probes (delegate glue, the C side,
the CPU ops that stay on TFLite).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_model_speed.py --set all [--invokes N] [--nodes]
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
#: MLPerf Tiny's four tasks as the repository has them
TINY = ("mobilenet_v1_025_96__int8", str(ROOT / "tests" / "isro" / "resnet8_int8.tflite"),
        "dscnn_like__int8", "autoencoder_toyadmos__int8")
#: issue 23 item 7: backend=model within this factor of the CPU (1 thread)
BOUND_TINY, BOUND_224 = 3.0, 1.5


def imagenet_models() -> list[str]:
    """The zoo's ImageNet-scale nets, then the cache's (when generated)."""
    from tests.models import zoo
    return ([e["name"] for e in zoo.load_index(kind="imagenet")]
            + [e["name"] for e in zoo.load_cache_index()])


def model_set(name: str) -> list[str]:
    if name == "tiny":
        return list(TINY)
    if name == "224":
        return imagenet_models()
    if name == "all":
        return list(TINY) + imagenet_models()
    raise ValueError(f"--set {name!r}; accepted: tiny, 224, all")


def bound(name: str) -> float | None:
    """The model's bound, None for a model outside both sets."""
    if name in TINY:
        return BOUND_TINY
    return BOUND_224 if name in imagenet_models() else None


def resolve(name: str):
    """(path, zoo or cache entry or None): bench_scale's lookup, plus the cache's index entries
    (their inputs then come from the entry's quantization, as the zoo's do)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_scale import _resolve
    from tests.models import zoo

    path, entry = _resolve(name)
    if path is not None and entry is None:
        entry = next((e for e in zoo.load_cache_index() if e["name"] == name), None)
    return path, entry
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


def measure(name: str, invokes: int, options: dict, large: bool = False):
    import dtpu
    from dtpu import tflite
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_scale import LARGE, _inputs

    path, entry = resolve(name)
    if path is None:
        return None
    cpu = tflite.Interpreter(model_path=str(path), num_threads=1)
    cpu.allocate_tensors()
    inputs = _inputs(cpu, entry)
    options = {"backend": "model", **options}
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
    ap.add_argument("--models", default=None, help=f"comma list (default: {DEFAULT_MODELS})")
    ap.add_argument("--set", default=None, choices=("tiny", "224", "all"),
                    help="MLPerf Tiny (bound 3x), the ImageNet-scale nets (bound 1.5x), or both")
    ap.add_argument("--ops", default=None, help="the delegate's ops option (default: its own, auto)")
    ap.add_argument("--options", default="", help="more delegate options, k=v,k=v")
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

    options = {}
    if args.ops:
        options["ops"] = args.ops
    for item in filter(None, args.options.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--options {item!r}: expected key=value")
        options[key.strip()] = value.strip()
    names = (model_set(args.set) if args.set else []) + (args.models.split(",") if args.models else [])
    names = names or DEFAULT_MODELS.split(",")
    log.info("load average before: %s (2-core machine shared with other jobs: paired medians)",
             " ".join(f"{x:.2f}" for x in os.getloadavg()))

    med = statistics.median
    log.info(f"{'model':<38}{'nodes':>6}{'CPU ms':>9}{'model ms':>10}{'ratio':>8}{'bound':>7}"
             f"{'CPU-time ratio':>16}{'MXU util':>10}{'cycles':>10}")
    breakdowns, over = [], []
    for name in names:
        got = measure(name, args.invokes, options, args.large)
        label = Path(name).stem if name.endswith(".tflite") else name
        if got is None:
            log.info(f"{label}: skipped (no model file)")
            continue
        cpu_t, our_t, reports = got
        nodes = reports[-1].to_dict()["nodes"]
        macs = sum(n["hw"]["macs"] or 0 for n in nodes)
        cycles = sum(n["hw"]["cycles"] or 0 for n in nodes)
        util = macs / (cycles * 64) if cycles else float("nan")
        wall_cpu, wall_ours = med(t for t, _ in cpu_t), med(t for t, _ in our_t)
        ratio = med(o[0] / c[0] for c, o in zip(cpu_t, our_t))
        thr_ratio = med(o[1] / c[1] for c, o in zip(cpu_t, our_t) if c[1] > 0)
        limit = bound(name)
        mark = "" if limit is None else (" ok" if ratio <= limit else " OVER")
        if mark == " OVER":
            over.append(label)
        shown = "-" if limit is None else f"{limit:.1f}x"
        log.info(f"{label:<38}{len(nodes):>6}{wall_cpu / 1e3:>9.2f}{wall_ours / 1e3:>10.2f}"
                 f"{ratio:>7.2f}x{shown:>7}{thr_ratio:>15.2f}x{util:>10.1%}{cycles:>10}{mark}")
        breakdowns.append((label, wall_ours, reports))
    log.info("load average after: %s", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    log.info("over their bound: %s", ", ".join(over) if over else "none")
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
