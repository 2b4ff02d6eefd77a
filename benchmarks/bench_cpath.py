#!/usr/bin/env python3
"""The host's cost of an invoke: the delegate's C invoke path (option invoke=c, the default)
against the Python path (invoke=python), paired, on the same model and backend.

Two interpreters on one delegate each, invoked alternately (C, Python, C, ...) on the same
inputs after a warm-up (the first invoke of each runs in Python and loads the prologue); from
each steady-state report:

* ``host us``: the report's ``host.us``, what the backend counts as the host's own time of the
  partitions' runs (the invoke minus the time inside the target; dtpu.driver.hostops);
* ``kernel us``: the whole delegate kernel invoke as C stamps it (``timing_us.total``) minus the
  device's time (``timing_us.compute``: inside the simulated target): on the Python path that
  includes the C->Python crossing and the report's bookkeeping, which the C path leaves until a
  report is read;
* ``unread us``: the C path when nobody reads a report (report=none, the default), over a
  block of invokes with no report read: the median ``kernel us`` of the block's reports (read
  after it; a median, as above: on a shared machine a few runs take milliseconds) plus the
  Python the C path entered during the block to fold its runs (the time inside
  ``PartitionKernel.drain_c``, C's call into Python, per invoke: a fold paid every n-th invoke
  counts in full); ``read ms``: building the block's reports when they are read at its end.

Medians of the pairs and the median of the per-pair ratios. On backend=model the target is the
golden model called back from C (its register calls are the device's time); backend=rtl drives
the Verilated core through its own C API.

    PYTHONPATH=pylib python benchmarks/bench_cpath.py [--backend model|rtl] [--invokes N]
        [--block N] [--only NAME ...]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))

MODELS = {
    "vww": ROOT / "tests/models/zoo/mobilenet_v1_025_96__int8.tflite",
    "mobilenet_v2_224": ROOT / "tests/models/zoo/mobilenet_v2_224__int8.tflite",
    "mobilenet_like": ROOT / "tests/models/zoo/mobilenet_like__int8.tflite",
    "dscnn_like": ROOT / "tests/models/zoo/dscnn_like__int8.tflite",
    "resnet8": ROOT / "tests/isro/resnet8_int8.tflite",
    "autoencoder": ROOT / "tests/models/zoo/autoencoder_toyadmos__int8.tflite",
}


def _interpreter(model: Path, backend: str, invoke: str):
    import dtpu

    it = dtpu.make_interpreter(model, {"backend": backend, "invoke": invoke})
    it.allocate_tensors()
    return it


def _invoke(it, inputs) -> dict:
    import dtpu

    for detail, x in zip(it.get_input_details(), inputs):
        it.set_tensor(detail["index"], x)
    it.invoke()
    r = dtpu.last_report()
    t = r.timing_us
    return {"host": r.host["us"], "kernel": t["total"] - t.get("compute", 0.0),
            "python": t["python"], "partitions": r.partitions, "cycles": r.hw["cycles"]}


def unread(it, inputs, invokes: int) -> float:
    """(mean host us of an invoke while no report is read, ms to read the block's reports):
    see the module's docstring."""
    import time

    import dtpu
    from dtpu.delegate import runtime as rt

    spent = [0]
    drain = rt.PartitionKernel.drain_c

    def timed(self):
        t0 = time.perf_counter_ns()
        try:
            drain(self)
        finally:
            spent[0] += time.perf_counter_ns() - t0

    details = it.get_input_details()
    rt.PartitionKernel.drain_c = timed
    try:
        for _ in range(invokes):
            for detail, x in zip(details, inputs):
                it.set_tensor(detail["index"], x)
            it.invoke()
    finally:
        rt.PartitionKernel.drain_c = drain
    t0 = time.perf_counter()
    reports = dtpu.reports()[-invokes:]
    read_ms = (time.perf_counter() - t0) * 1e3
    assert len(reports) == invokes, "the report store keeps fewer reports than the block"
    kernel = statistics.median(r.timing_us["total"] - r.timing_us.get("compute", 0.0)
                              for r in reports)
    return kernel + spent[0] / 1e3 / invokes, read_ms


def bench(name: str, model: Path, backend: str, invokes: int, block: int) -> dict:
    from dtpu.run import random_inputs

    c, py = _interpreter(model, backend, "c"), _interpreter(model, backend, "python")
    inputs = random_inputs(c, 0)
    for it in (c, py):          # the first invoke: Python path, prologue; then one more
        _invoke(it, inputs)
        _invoke(it, inputs)
    pairs = []
    for _ in range(invokes):
        pairs.append((_invoke(c, inputs), _invoke(py, inputs)))
    assert all(a["python"] == 0 for a, _ in pairs), "an invoke=c run went through Python"
    assert all(a["cycles"] == b["cycles"] for a, b in pairs)
    out = {"model": name, "backend": backend, "partitions": pairs[0][0]["partitions"],
           "invokes": invokes}
    for key in ("host", "kernel"):
        out[f"{key}_c"] = statistics.median(a[key] for a, _ in pairs)
        out[f"{key}_py"] = statistics.median(b[key] for _, b in pairs)
        out[f"{key}_ratio"] = statistics.median(b[key] / a[key] for a, b in pairs if a[key] > 0)
    dtpu_reports_read = _invoke(c, inputs)    # the pairs' runs folded before the block
    assert dtpu_reports_read["python"] == 0
    out["unread_c"], out["read_ms"] = unread(c, inputs, block)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="model", choices=("model", "rtl"))
    ap.add_argument("--invokes", type=int, default=20, help="paired invokes per model")
    ap.add_argument("--block", type=int, default=256,
                    help="invokes of the C path with no report read, for `unread us`")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS),
                    default=["vww", "resnet8", "mobilenet_v2_224"])
    args = ap.parse_args(argv)
    print(f"{'model':<18} {'backend':<7} {'parts':>5} {'n':>4} | {'host us C':>10} "
          f"{'Python':>9} {'x':>6} | {'kernel us C':>11} {'Python':>9} {'x':>6} | "
          f"{'unread us C':>11} {'read ms':>7}")
    for name in args.only:
        r = bench(name, MODELS[name], args.backend, args.invokes, args.block)
        print(f"{r['model']:<18} {r['backend']:<7} {r['partitions']:>5} {r['invokes']:>4} | "
              f"{r['host_c']:>10.1f} {r['host_py']:>9.1f} {r['host_ratio']:>6.1f} | "
              f"{r['kernel_c']:>11.1f} {r['kernel_py']:>9.1f} {r['kernel_ratio']:>6.1f} | "
              f"{r['unread_c']:>11.1f} {r['read_ms']:>7.1f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
