"""Throughput of dtpu.pack.pack / unpack on 4 MiB of data per precision, next to memcpy.

Packing sits on the host side of every DMA transfer, so it should not be the bottleneck: the
memcpy column (np.copyto of the same 4 MiB) is the scale to compare against.  Rates are
logical bytes (the element array's size) divided by the median of several timed calls.

Columns:
  pack        elements in their own dtype, a multiple of the lane count: often a pure view
  pack+pad    one element fewer, so the last word needs zero padding: a full copy
              (except int64/uint64, whose words have a single lane and never need padding)
  unpack      words back to elements (a view for integer/fp32, a conversion for bf16)

Run:  PYTHONPATH=pylib python benchmarks/bench_pack.py [--mib 4] [--runs 21]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from dtpu.pack import pack, unpack
from dtpu.precision import Precision


def median_seconds(fn, runs: int) -> float:
    fn()  # warm caches and page in the allocations
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def sample(prec: Precision, nbytes: int, rng: np.random.Generator) -> np.ndarray:
    dtype = prec.value_dtype
    n = nbytes // dtype.itemsize
    if prec.is_float:
        return rng.standard_normal(n).astype(np.float32)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)


def gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9


def rate(nbytes: int, seconds: float, view: bool) -> str:
    return f"{gbps(nbytes, seconds):>9.2f}{'*' if view else ' '}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mib", type=float, default=4.0, help="input size per case (MiB)")
    ap.add_argument("--runs", type=int, default=21, help="timed calls per case (median taken)")
    args = ap.parse_args()
    nbytes = int(args.mib * 2**20)
    rng = np.random.default_rng(0)

    src = np.frombuffer(rng.bytes(nbytes), np.uint8).copy()
    dst = np.empty_like(src)
    memcpy = gbps(nbytes, median_seconds(lambda: np.copyto(dst, src), args.runs))

    print(f"{args.mib:g} MiB per case, median of {args.runs} runs, GB/s = 1e9 bytes/s")
    header = f"{'precision':<16}{'pack':>10}{'pack+pad':>10}{'unpack':>10}{'memcpy':>10}"
    print(header)
    print("-" * len(header))

    for prec in Precision:
        x = sample(prec, nbytes, rng)
        ragged = x[:-1]
        words = pack(x, prec)
        n = x.size
        t_pack = median_seconds(lambda: pack(x, prec), args.runs)
        t_pad = median_seconds(lambda: pack(ragged, prec), args.runs)
        t_unpack = median_seconds(lambda: unpack(words, prec, n), args.runs)
        pack_view = np.shares_memory(words, x)
        unpack_view = np.shares_memory(unpack(words, prec, n), words)
        print(f"{prec.value:<16}{rate(x.nbytes, t_pack, pack_view)}"
              f"{rate(ragged.nbytes, t_pad, np.shares_memory(pack(ragged, prec), x))}{rate(x.nbytes, t_unpack, unpack_view)}"
              f"{memcpy:>10.2f}")

    print("* the result is a view of the input: the rate only reflects call overhead")

    # Values arriving in a wider dtype (a Python list becomes int64) need the range check and a
    # narrowing cast; rates are per byte of the int64 input.
    wide = rng.integers(-128, 128, size=nbytes // 8, dtype=np.int64)
    t_wide = median_seconds(lambda: pack(wide, "int8"), args.runs)
    print(f"{'int8 <- int64':<16}{rate(wide.nbytes, t_wide, False)}{'':>10}{'':>10}{memcpy:>10.2f}")
    wide64 = rng.standard_normal(nbytes // 8)
    t_f64 = median_seconds(lambda: pack(wide64, "bf16"), args.runs)
    print(f"{'bf16 <- float64':<16}{rate(wide64.nbytes, t_f64, False)}{'':>10}{'':>10}"
          f"{memcpy:>10.2f}")


if __name__ == "__main__":
    main()
