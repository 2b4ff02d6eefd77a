"""What the DTPU delegate path costs, and end-to-end times next to the CPU.

1. Per-invoke overhead of the delegate itself: backend=null (registered here, for benchmarking
   only: it computes nothing and returns zeros) on one-conv and three-conv models, against the
   CPU interpreter running the same model. The report's own probes split the delegate time into
   C (clock_gettime around the kernel), the C<->Python crossing and Python.
2. End to end: the zoo's MobileNet-like int8 net with backend=reference (and backend=model when
   registered) versus the CPU.

    python benchmarks/bench_delegate.py [--invokes N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))

import numpy as np  # noqa: E402

import dtpu  # noqa: E402
from dtpu import backends, tflite  # noqa: E402
from dtpu.backends.null import register_null_backend  # noqa: E402

DATA = ROOT / "tests" / "data" / "delegate"
ZOO = ROOT / "tests" / "models" / "zoo"


def inputs_for(interpreter, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for d in interpreter.get_input_details():
        dtype = np.dtype(d["dtype"])
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max, size=d["shape"], dtype=dtype))
        else:
            out.append(rng.uniform(-1, 1, size=d["shape"]).astype(dtype))
    return out


def time_invokes(interpreter, invokes: int, warmup: int = 5) -> list[float]:
    interpreter.allocate_tensors()
    for d, x in zip(interpreter.get_input_details(), inputs_for(interpreter)):
        interpreter.set_tensor(d["index"], x)
    for _ in range(warmup):
        interpreter.invoke()
    times = []
    for _ in range(invokes):
        start = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - start)
    return times


def us(times: list[float]) -> str:
    return f"{1e6 * statistics.median(times):9.1f}"


def overhead(model: Path, invokes: int) -> None:
    cpu = time_invokes(tflite.Interpreter(model_path=str(model)), invokes)
    ours = dtpu.make_interpreter(model, {"backend": "null"})
    null = time_invokes(ours, invokes)
    recent = dtpu.reports()[-invokes:]
    parts = {k: statistics.median(r.timing_us[k] for r in recent) for k in ("total", "crossing", "python")}
    nodes = len(recent[-1].nodes)
    print(f"{model.stem[:40]:40s} {nodes:5d} {us(cpu)} {us(null)} {parts['total']:9.1f} "
          f"{parts['crossing']:9.1f} {parts['python']:9.1f}")


def end_to_end(model: Path, invokes: int) -> None:
    rows = [("cpu (default interpreter)", time_invokes(tflite.Interpreter(model_path=str(model)), invokes))]
    for backend in ("reference", "model"):
        if backend in backends.names():
            it = dtpu.make_interpreter(model, {"backend": backend})
            rows.append((f"dtpu backend={backend}", time_invokes(it, invokes)))
    base = statistics.median(rows[0][1])
    for name, times in rows:
        print(f"  {name:28s} {us(times)} us  ({statistics.median(times) / base:6.1f}x cpu)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invokes", type=int, default=50)
    args = parser.parse_args(argv)
    register_null_backend()
    print(f"# bench_delegate: {tflite.runtime_version()}, library {dtpu.delegate_path()}")
    print("\n## delegate overhead per invoke (backend=null computes nothing), median microseconds")
    print(f"{'model':40s} {'nodes':>5s} {'cpu':>9s} {'dtpu-null':>9s} {'C total':>9s} "
          f"{'crossing':>9s} {'python':>9s}")
    for model in (ZOO / "conv_i8x8x3_o5_k3x3_s1x1_same_none__int8.tflite", DATA / "chain_int8.tflite",
                  DATA / "split_int8.tflite"):
        if model.exists():
            overhead(model, args.invokes)
    net = ZOO / "mobilenet_like__int8.tflite"
    if not net.exists():
        net = DATA / "chain_int8.tflite"
    print(f"\n## end to end: {net.name}, median of {args.invokes} invokes")
    end_to_end(net, args.invokes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
