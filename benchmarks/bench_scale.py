#!/usr/bin/env python3
"""backend=model at scale: MobileNet v1/v2 1.0 224 and the zoo's MLPerf-Tiny-class nets against
TFLite's CPU interpreter (1 thread), on the figures of issue #12 point 3.

Per net, each in fresh child processes (so that nothing one measurement loads or warms
affects another):

* ``cpu`` / ``model``: allocate_tensors() time, first invoke, peak RSS (ru_maxrss at the end of
  the child, which ran a few invokes) and a digest of the output, the CPU interpreter alone
  and the delegate alone (backend=model);
* ``pair``: steady state, the two interpreters in one process invoked alternately (both see the
  same machine), medians of wall time and of the thread's CPU time, and the median of the
  per-pair ratios.

Targets (printed, never asserted): steady state within 1.5x of the CPU on the 224 nets (goal
1x), within 3x on the tiny nets; first invoke < 3 s; allocate < 1 s; RSS <= 2x the CPU's.

Models: zoo names (tests/models/zoo), or ``NAME`` found as NAME.tflite in ``$DTPU_MODEL_CACHE``
(default tests/models/cache/), or paths; a net whose file is absent is skipped with a message.
``--memories``: ``default`` measures the shipping configuration only; ``large`` enlarges the
model's memories so that every node is resident (a testing configuration:
``HwConfig(LOG_WEIGHT_WORDS=.., LOG_PARAM_ENTRIES=..)`` around the delegate's creation);
``auto`` (default) measures with the default memories and, when allocate_tensors() fails
there, again with large ones (both rows printed).

``--rtl-from NET``: also runs one invoke of NET on backend=rtl (the in-process Verilator core)
and prints simulated cycles per second, and what that rate means for each measured net's
device cycles (backend=model's report counts the same cycles).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py [--models a,b] [--invokes N]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))
sys.path.insert(0, str(ROOT))

DEFAULT_MODELS = ("mobilenet_v1_224__int8,mobilenet_v2_224__int8,mobilenet_v1_025_96__int8,"
                  "dscnn_like__int8,mobilenet_like__int8")
#: memories large enough for MobileNet v1/v2 1.0 224 to be resident (with the backend's
#: scratch eighth): 2^20 weight words (8 MiB), 2^15 parameter entries
LARGE = dict(LOG_WEIGHT_WORDS=20, LOG_PARAM_ENTRIES=15)
TINY = ("mobilenet_v1_025_96", "dscnn_like", "mobilenet_like")

log = logging.getLogger("bench")


# ------------------------------------------------------------------------------------------------
# children


def _resolve(name: str) -> tuple[Path | None, dict | None]:
    """(path, zoo entry or None); path None if absent."""
    p = Path(name)
    if p.suffix == ".tflite":
        return (p if p.is_file() else None), None
    try:
        from tests.models import zoo
        entry = zoo.get_entry(name)
        path = zoo.model_path(entry)
        return (path if path.is_file() else None), entry
    except KeyError:
        pass
    cache = Path(os.environ.get("DTPU_MODEL_CACHE", ROOT / "tests" / "models" / "cache"))
    p = cache / f"{name}.tflite"
    return (p if p.is_file() else None), None


def _inputs(interpreter, entry, seed: int = 0):
    import numpy as np
    if entry is not None:
        from tests.models import zoo
        return zoo.make_inputs(entry, seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    for d in interpreter.get_input_details():
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            out.append(rng.uniform(-1, 1, d["shape"]).astype(dt))
        else:
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, int(info.max) + 1, d["shape"]).astype(dt))
    return out


def _make(kind: str, path: Path, large: bool):
    """The interpreter, not yet allocated (the delegate, and with it the backend and its
    memories, is created here: with `large`, inside the enlarged configuration)."""
    import dtpu
    from dtpu import tflite
    if kind == "cpu":
        return tflite.Interpreter(model_path=str(path), num_threads=1)
    if large:
        from dtpu.hw.config import HwConfig
        with HwConfig(**LARGE):
            return dtpu.make_interpreter(path, {"backend": "model"}, num_threads=1)
    return dtpu.make_interpreter(path, {"backend": "model"}, num_threads=1)


def _digest(interpreter) -> str:
    h = hashlib.sha256()
    for d in interpreter.get_output_details():
        h.update(interpreter.get_tensor(d["index"]).tobytes())
    return h.hexdigest()[:16]


def child_single(kind: str, name: str, large: bool, invokes: int) -> dict:
    """allocate, first invoke, a few more, RSS, output digest."""
    import resource
    path, entry = _resolve(name)
    t0 = time.perf_counter()
    it = _make(kind, path, large)
    create = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        it.allocate_tensors()
    except Exception as exc:   # the report says why (e.g. the node does not fit the memories)
        return {"error": str(exc).splitlines()[0][:300]}
    alloc = time.perf_counter() - t0
    for d, v in zip(it.get_input_details(), _inputs(it, entry)):
        it.set_tensor(d["index"], v)
    t0 = time.perf_counter()
    it.invoke()
    first = time.perf_counter() - t0
    digest = _digest(it)
    times = []
    for _ in range(invokes):
        t0 = time.perf_counter()
        it.invoke()
        times.append(time.perf_counter() - t0)
    out = {"create_s": create, "alloc_s": alloc, "first_s": first, "median_s": statistics.median(times),
           "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "digest": digest}
    if kind == "model":
        import dtpu
        nodes = dtpu.last_report().to_dict()["nodes"]
        out["cycles"] = sum(n["hw"]["cycles"] or 0 for n in nodes)
        out["nodes"] = len(nodes)
    return out


def child_pair(name: str, large: bool, invokes: int) -> dict:
    """Steady state: CPU and model interpreters invoked alternately."""
    path, entry = _resolve(name)
    cpu, ours = _make("cpu", path, False), _make("model", path, large)
    cpu.allocate_tensors()
    ours.allocate_tensors()
    inputs = _inputs(cpu, entry)
    for it in (cpu, ours):
        for d, v in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], v)
        for _ in range(3):
            it.invoke()
    exact = _digest(cpu) == _digest(ours)
    wall = {"cpu": [], "model": []}
    thread = {"cpu": [], "model": []}
    for _ in range(invokes):
        for k, it in (("cpu", cpu), ("model", ours)):
            c0, t0 = time.thread_time(), time.perf_counter()
            it.invoke()
            wall[k].append(time.perf_counter() - t0)
            thread[k].append(time.thread_time() - c0)
    med = statistics.median
    return {"cpu_s": med(wall["cpu"]), "model_s": med(wall["model"]),
            "cpu_thread_s": med(thread["cpu"]), "model_thread_s": med(thread["model"]),
            "pair_ratio": med(m / c for m, c in zip(wall["model"], wall["cpu"])),
            "exact": exact}


def child_rtl(name: str) -> dict:
    """One invoke on backend=rtl (in-process Verilator core): simulated cycles per second."""
    import dtpu
    from dtpu.delegate import runtime
    path, entry = _resolve(name)
    t0 = time.perf_counter()
    it = dtpu.make_interpreter(path, {"backend": "rtl"}, num_threads=1)
    it.allocate_tensors()
    prep = time.perf_counter() - t0
    t = list(runtime.DELEGATES.values())[-1].backend.transport
    for d, v in zip(it.get_input_details(), _inputs(it, entry)):
        it.set_tensor(d["index"], v)
    c0, t0 = t.cycle, time.perf_counter()
    it.invoke()
    wall, cycles = time.perf_counter() - t0, t.cycle - c0
    nodes = dtpu.last_report().to_dict()["nodes"]
    cpu = _make("cpu", path, False)
    cpu.allocate_tensors()
    for d, v in zip(cpu.get_input_details(), _inputs(cpu, entry)):
        cpu.set_tensor(d["index"], v)
    cpu.invoke()
    return {"prepare_s": prep, "invoke_s": wall, "sim_cycles": cycles,
            "device_cycles": sum(n["hw"]["cycles"] or 0 for n in nodes),
            "cycles_per_s": cycles / wall, "exact": _digest(cpu) == _digest(it)}


# ------------------------------------------------------------------------------------------------
# parent


def _run_child(args: list[str], timeout: float) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    try:
        p = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                           text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def _fmt_ms(s) -> str:
    return f"{s * 1e3:9.2f}" if s is not None else f"{'-':>9}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--invokes", type=int, default=40, help="paired steady-state invokes")
    ap.add_argument("--memories", choices=("auto", "default", "large"), default="auto")
    ap.add_argument("--rtl-from", default=None, metavar="NET",
                    help="measure backend=rtl's simulated cycles/s on NET (e.g. mobilenet_v1_025_96__int8)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        what, rest = args.child[0], args.child[1:]
        if what in ("cpu", "model"):
            r = child_single(what, rest[0], rest[1] == "large", int(rest[2]))
        elif what == "pair":
            r = child_pair(rest[0], rest[1] == "large", int(rest[0 + 2]))
        else:
            r = child_rtl(rest[0])
        print(json.dumps(r))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        log.info("note: OPENBLAS_NUM_THREADS is not 1; numpy's BLAS may use more threads than TFLite")
    import dtpu
    dtpu.delegate_path()   # built once here, not inside a timed child
    from dtpu.hw import kernels
    kernels.get()

    rows = []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        path, _ = _resolve(name)
        if path is None:
            log.info(f"{name}: skipped (no {name}.tflite in the zoo, $DTPU_MODEL_CACHE or as a path)")
            continue
        cpu = _run_child(["cpu", name, "default", "5"], args.timeout)
        tries = {"default": ["default"], "large": ["large"], "auto": ["default"]}[args.memories]
        for mem in tries:
            model = _run_child(["model", name, mem, "5"], args.timeout)
            if "error" in model:
                log.info(f"{name} ({mem} memories): backend=model fails: {model['error']}")
                if args.memories == "auto" and mem == "default":
                    tries.append("large")
                continue
            pair = _run_child(["pair", name, mem, str(args.invokes)], args.timeout)
            rows.append((name, mem, cpu, model, pair))
    log.info("")
    log.info(f"{'net':<28}{'mem':>8}{'CPU ms':>9}{'model ms':>9}{'ratio':>7}{'pair':>7}{'thread':>7}"
             f"{'target':>7}{'alloc s':>8}{'first s':>8}{'CPU RSS':>8}{'RSS':>7}{'RSS x':>6}"
             f"{'exact':>6}{'cycles':>10}")
    for name, mem, cpu, model, pair in rows:
        if "error" in pair:
            log.info(f"{name:<28}{mem:>8}  paired run failed: {pair['error']}")
            continue
        target = 3.0 if any(name.startswith(t) for t in TINY) else 1.5
        ratio = pair["model_s"] / pair["cpu_s"]
        exact = pair["exact"] and model.get("digest") == cpu.get("digest")
        log.info(f"{name:<28}{mem:>8}{_fmt_ms(pair['cpu_s'])}{_fmt_ms(pair['model_s'])}"
                 f"{ratio:>6.2f}x{pair['pair_ratio']:>6.2f}x"
                 f"{pair['model_thread_s'] / pair['cpu_thread_s']:>6.2f}x{target:>6.1f}x"
                 f"{model['alloc_s']:>8.2f}{model['first_s']:>8.2f}{cpu['rss_mb']:>8.0f}"
                 f"{model['rss_mb']:>7.0f}{model['rss_mb'] / cpu['rss_mb']:>5.2f}x"
                 f"{str(exact):>6}{model.get('cycles', 0):>10}")
    log.info("ms: medians of alternating invokes in one process (ratio: of the medians; pair: "
             "median of per-pair ratios; thread: of the thread CPU times); alloc/first: "
             "allocate_tensors() and the first invoke of a fresh process with the delegate; "
             "RSS: peak MB of a child with only that interpreter (CPU / delegate; with large "
             "memories, 2^20 weight words are held twice: the core's and the backend's copy, "
             "16 MiB); targets: "
             "ratio <= target (goal 1x on the 224 nets), alloc < 1 s, first < 3 s, RSS x <= 2")
    if args.rtl_from:
        r = _run_child(["rtl", args.rtl_from], max(args.timeout, 3600))
        if "error" in r:
            log.info(f"backend=rtl on {args.rtl_from}: failed: {r['error']}")
        else:
            rate = r["cycles_per_s"]
            log.info(f"\nbackend=rtl on {args.rtl_from}: {r['sim_cycles']} simulated cycles "
                     f"({r['device_cycles']} device cycles) in {r['invoke_s']:.1f} s = "
                     f"{rate:,.0f} cycles/s; prepare {r['prepare_s']:.1f} s; exact {r['exact']}")
            for name, mem, cpu, model, pair in rows:
                cyc = model.get("cycles") or 0
                if cyc >= 1_000_000:
                    target = (f"; the < 120 s target needs >= {cyc / 120:,.0f} cycles/s"
                              if "v2_224" in name else "")
                    log.info(f"  {name} ({mem} memories): {cyc:,} device cycles -> about "
                             f"{cyc / rate:,.0f} s per invoke at that rate{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
