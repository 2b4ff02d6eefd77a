#!/usr/bin/env python3
"""The ISRO-ASIC's performance model beside RC64's published VGG-19 figures (issue 28.4).

RC64 (Ramon Chips' radiation-hardened 64-core DSP) is what the seed report compares against:
VGG-19 at 224x224, 2.8 frames/s at 80 % of its 70 GOP/s peak, 0.56 frames/s/W. Those three are
the published numbers, as the seed report quotes them (issue 28); RC64's row below derives its
G MACs (19.63, VGG-19's layer shapes) and its MAC rate from them, and counts one operation per
MAC as RC64's GOP/s do. Every ISRO-ASIC figure is the machine model's cycles (dtpu.isro.timing:
transfers on load/store units beside the MAC array, double-buffered staging) under the default
chip profile's marked assumptions (200 MHz, 256 PEs, 8 B/cycle of external memory, the power
model): docs/isro_isa.md sections 0 and 1a.

Networks: VGG-19 and VGG-16 at 224 (int8, written by dtpu.isro.vgg_models into
~/.cache/dtpu/isro on first use: about 10 s and 140 MB each), ResNet-18-half 224 and MobileNet
v2 224 from the committed zoo. Each is compiled for the default profile and run once on a seeded
random input (about a minute for each VGG). Then VGG-19's cycles layer by layer, and the
utilization of its convolution layers alone beside the whole network's, which is where the
goal of 80 % of peak is judged (docs/isro_isa.md, "VGG-class nets against RC64").

    python benchmarks/bench_isro_rc64.py [--quick]    # --quick: VGG-16 only, no VGG-19
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))

from dtpu.isro import compile_model, profile, run, vgg_models  # noqa: E402
from dtpu.isro.bundle import bundle_profile  # noqa: E402
from dtpu.isro.performance import comparison, figures, layer_table  # noqa: E402

ZOO = ROOT / "tests" / "models" / "zoo"


def _measure(path: Path):
    bundle = compile_model(path)
    c, h, w = bundle.meta["input"]["shape"]
    x = np.random.default_rng(0).integers(-128, 128, (1, h, w, c)).astype(np.int8)
    result = run(bundle, x)
    fig = figures(result.counters, bundle_profile(bundle.meta), "i8", bundle.meta["pe"], result.schedule)
    return bundle, result, fig


def _conv_share(bundle, result) -> tuple[float, float, float]:
    """(utilization of the convolution layers over their own elapsed cycles, the fully connected
    layers' share of the frame, their external bytes per cycle of elapsed time)."""
    ends, prev = result.schedule.ends, 0
    conv_macs = conv_cycles = dense_cycles = 0
    for layer in bundle.layers:
        a, z = layer["instructions"]
        end = max(ends[a:z + 1])
        elapsed, prev = end - prev, max(prev, end)
        if layer["kind"] == "conv":
            conv_macs += layer["macs"]
            conv_cycles += elapsed
        elif layer["kind"] == "dense":
            dense_cycles += elapsed
    pe = bundle.meta["pe"]
    return conv_macs / pe / conv_cycles, dense_cycles / result.schedule.cycles, dense_cycles


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="VGG-16 only (no VGG-19)")
    args = ap.parse_args()
    chip = profile.load()
    nets = ([] if args.quick else [("vgg19_224_int8", vgg_models.cached(19))]) + [
        ("vgg16_224_int8", vgg_models.cached(16)),
        ("resnet18_half_224__int8", ZOO / "resnet18_half_224__int8.tflite"),
        ("mobilenet_v2_224__int8", ZOO / "mobilenet_v2_224__int8.tflite")]
    rows, runs = [], {}
    for name, path in nets:
        if not path.is_file():
            print(f"{name}: {path} not present, skipped")
            continue
        t = time.time()
        bundle, result, fig = _measure(path)
        runs[name] = (bundle, result)
        rows.append((name, "staged" if bundle.meta.get("staged") else "on-chip", fig))
        print(f"{name}: {len(bundle.program):,} instructions, {time.time() - t:.0f} s on the machine model")
    print(f"\nchip profile {chip.name}: pe {chip.pe}, clock {chip.clock_mhz} MHz, external memory "
          f"{chip.external.bytes_per_cycle:g} B/cycle (assumptions)")
    print(comparison(rows))
    vgg = "vgg19_224_int8" if "vgg19_224_int8" in runs else "vgg16_224_int8"
    if vgg in runs:
        bundle, result = runs[vgg]
        print(f"\n{vgg}, layer by layer:\n{layer_table(bundle, result)}")
        conv, share, dense = _conv_share(bundle, result)
        s = result.schedule
        print(f"\n{vgg}: convolution layers at {100 * conv:.1f} % of peak over their own cycles; the fully "
              f"connected layers take {dense:,} cycles ({100 * share:.1f} % of the frame), streaming their "
              f"weights at the profile's {chip.external.bytes_per_cycle:g} B/cycle (batch 1: each weight "
              f"is used once); transfers {s.transfer_cycles:,} cycles, {s.hidden_cycles:,} hidden behind "
              f"compute; the adder {s.post_cycles:,} cycles beside it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
