"""Time dtpu.reference per call on realistic layer shapes, and against tflite-runtime on zoo models.

The reference backend runs every claimed node through these kernels and every other backend
finishes with requantize(), so their cost is the delegate's host overhead floor. Prints one line
per case: milliseconds per call (median of repeats) for accumulate, requantize and run.

    PYTHONPATH=pylib .venv/bin/python benchmarks/bench_reference.py [--repeat N] [--zoo N]

On a loaded machine multi-threaded OpenBLAS makes the GEMM figures jump by 5x between runs;
OPENBLAS_NUM_THREADS=1 gives stable single-core numbers.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "pylib"), str(ROOT)]

from dtpu import reference, tflite_model  # noqa: E402
from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding, Quant  # noqa: E402

SHAPES = [
    # (label, kind, input NHWC, filter shape, stride, padding)
    ("conv 3x3 48x48x16->32", OpKind.CONV_2D, (1, 48, 48, 16), (32, 3, 3, 16), (1, 1), Padding.SAME),
    ("conv 3x3 s2 96x96x8->16", OpKind.CONV_2D, (1, 96, 96, 8), (16, 3, 3, 8), (2, 2), Padding.SAME),
    ("depthwise 3x3 48x48x32", OpKind.DEPTHWISE_CONV_2D, (1, 48, 48, 32), (1, 3, 3, 32), (1, 1), Padding.SAME),
    ("conv 1x1 24x24x64->128", OpKind.CONV_2D, (1, 24, 24, 64), (128, 1, 1, 64), (1, 1), Padding.VALID),
]
MODES = (DataMode.INT8, DataMode.UINT8, DataMode.INT16X8, DataMode.FLOAT32)


def timed(fn, repeat: int) -> float:
    fn()  # warm-up (BLAS threads, page faults)
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e3


def make_case(kind, mode, in_shape, f_shape, stride, padding, rng):
    oc = f_shape[3] if kind is OpKind.DEPTHWISE_CONV_2D else f_shape[0]
    quant = {}
    if mode is DataMode.FLOAT32:
        x = rng.standard_normal(in_shape).astype(np.float32)
        w = rng.standard_normal(f_shape).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
    else:
        a_dt, w_dt = {DataMode.INT8: (np.int8, np.int8), DataMode.UINT8: (np.uint8, np.uint8),
                      DataMode.INT16X8: (np.int16, np.int8)}[mode]
        ai, wi = np.iinfo(a_dt), np.iinfo(w_dt)
        x = rng.integers(ai.min, ai.max, in_shape, endpoint=True).astype(a_dt)
        w = rng.integers(wi.min + 1, wi.max, f_shape, endpoint=True).astype(w_dt)
        b = rng.integers(-5000, 5000, oc).astype(np.int64 if mode is DataMode.INT16X8 else np.int32)
        zp_in = 0 if mode is DataMode.INT16X8 else int(rng.integers(ai.min, ai.max))
        w_q = (Quant((0.01,), (128,)) if mode is DataMode.UINT8 else
               Quant(tuple(rng.uniform(0.001, 0.01, oc)), (0,) * oc))
        quant = dict(input_q=Quant((0.02,), (zp_in,)), filter_q=w_q,
                     output_q=Quant((0.05,), (0 if mode is DataMode.INT16X8 else 3,)))
    spec = ConvSpec(kind, mode, in_shape, f_shape, stride=stride, padding=padding,
                    activation=Activation.RELU6, **quant)
    return spec, x, w, b


def bench_shapes(repeat: int) -> None:
    rng = np.random.default_rng(0)
    print(f"{'shape':28s} {'mode':8s} {'MMAC':>7s} {'accumulate':>11s} {'requantize':>11s} {'run':>9s}")
    for label, kind, in_shape, f_shape, stride, padding in SHAPES:
        for mode in MODES:
            spec, x, w, b = make_case(kind, mode, in_shape, f_shape, stride, padding, rng)
            acc = reference.accumulate(spec, x, w)
            t_acc = timed(lambda: reference.accumulate(spec, x, w), repeat)
            t_rq = timed(lambda: reference.requantize(spec, acc, b), repeat)
            t_run = timed(lambda: reference.run(spec, x, w, b), repeat)
            print(f"{label:28s} {mode.value:8s} {spec.macs / 1e6:7.2f} {t_acc:9.2f}ms {t_rq:9.2f}ms "
                  f"{t_run:7.2f}ms")


def bench_zoo(repeat: int, limit: int) -> None:
    """The largest single-op zoo model of each (op, mode): reference.run vs the interpreter's invoke
    on the same input (the zoo has no layer of the realistic shapes above)."""
    try:
        from dtpu.tflite import Interpreter, OpResolverType
        from tests.models.zoo import load_index, make_inputs, model_path
    except ImportError as exc:
        print(f"\n(no zoo comparison: {exc})")
        return
    entries = [e for e in load_index(mode=("int8", "int16x8", "uint8", "float32"))
               if e["kind"] != "net"]
    if not entries:
        print("\n(no zoo comparison: the zoo has no single-op model)")
        return
    def work(e):
        return int(np.prod(e["params"]["output_shape"])) * int(np.prod(e["params"]["kernel"]))
    largest = {}
    for e in entries:  # the largest model of each (op, mode)
        key = (e["kind"], e["mode"])
        if key not in largest or work(e) > work(largest[key]):
            largest[key] = e
    entries = sorted(largest.values(), key=lambda e: (e["kind"], e["mode"]))
    print(f"\n{'zoo model (single op)':60s} {'reference':>10s} {'tflite':>9s} {'tflite default':>15s}")
    for e in entries[:limit]:
        path = model_path(e)
        model = tflite_model.load(path)
        (op,) = model.operators("CONV_2D", "DEPTHWISE_CONV_2D")
        spec, w, b = tflite_model.conv_spec(model.main, op)
        x = make_inputs(e, seed=0)[0]
        t_ref = timed(lambda: reference.run(spec, x, w, b), repeat)
        times = []
        for resolver in (OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, OpResolverType.AUTO):
            interp = Interpreter(model_path=str(path), experimental_op_resolver_type=resolver)
            interp.allocate_tensors()
            interp.set_tensor(interp.get_input_details()[0]["index"], x)
            times.append(timed(interp.invoke, repeat))
        print(f"{e['name']:60s} {t_ref:8.3f}ms {times[0]:7.3f}ms {times[1]:13.3f}ms")
    print("(tflite: builtin kernels without delegates; tflite default: the plain Interpreter, "
          "XNNPACK for float32)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--zoo", type=int, default=8, help="zoo models to compare (0: none)")
    args = parser.parse_args()
    import os
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"numpy {np.__version__}, {os.cpu_count()} CPUs, load {load:.1f}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; "
          f"median of {args.repeat} calls\n")
    bench_shapes(args.repeat)
    if args.zoo:
        bench_zoo(args.repeat, args.zoo)


if __name__ == "__main__":
    main()
