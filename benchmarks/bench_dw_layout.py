#!/usr/bin/env python3
"""The depthwise layouts compared on the zoo: every depthwise node's stall-free cycles
(`dw_schedule` at one result word per item) and weight words, banked (DW_ROTATE 0) -> rotated
(DW_ROTATE 1), at the given array widths. The table of docs/architecture.md ("Depthwise
crossbars linear in COLS"); golden-model arithmetic only, a few seconds per width.

    python benchmarks/bench_dw_layout.py            # 8, 16 and 32 columns
    python benchmarks/bench_dw_layout.py --cols 8
    python benchmarks/bench_dw_layout.py --pairs    # rotated -> rotated with PE pairs (PE_PAIR 1:
                                                    # TAP_CYCLES 2 for rows of more than COLS/2 items)
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))

from dtpu import tflite_model  # noqa: E402
from dtpu.hw.config import HwConfig  # noqa: E402
from dtpu.hw.core import dw_schedule  # noqa: E402
from dtpu.hw.dw_format import dw_weight_words  # noqa: E402
from dtpu.hw.lower import dw_geometry, precision_of  # noqa: E402

log = logging.getLogger("bench_dw_layout")

ZOO = ROOT / "tests" / "models" / "zoo"
NETS = [("MobileNet v1 1.0 224", "mobilenet_v1_224__int8"),
        ("MobileNet v1 0.25 96", "mobilenet_v1_025_96__int8"),
        ("MobileNet v2 1.0 224", "mobilenet_v2_224__int8"),
        ("EfficientNet-B0 224", "efficientnet_b0_224__int8"),
        ("DS-CNN (dscnn_like)", "dscnn_like__int8"),
        ("mobilenet_like", "mobilenet_like__int8")]


def depthwise_costs(model, cfg: HwConfig) -> tuple[int, int]:
    """(cycles, weight words) of the model's depthwise nodes, each as one job."""
    cycles = words = 0
    for op in model.operators("DEPTHWISE_CONV_2D"):
        spec, _, _ = tflite_model.conv_spec(model.main, op)
        g = dw_geometry(spec, cfg, precision_of(spec))
        cycles += dw_schedule(cfg, g, 1).cycles
        words += dw_weight_words(cfg, g)
    return cycles, words


def _n(v: int) -> str:
    return f"{v:,}".replace(",", " ")


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cols", type=int, nargs="*", default=[8, 16, 32])
    ap.add_argument("--pairs", action="store_true",
                    help="compare the rotated layout without and with PE pairs instead")
    args = ap.parse_args(argv)
    builds = ({"DW_ROTATE": 1, "PE_PAIR": 0}, {"DW_ROTATE": 1, "PE_PAIR": 1}) if args.pairs else \
        ({"DW_ROTATE": 0}, {"DW_ROTATE": 1})
    head = " | ".join(f"{c} columns: cycles | {c} columns: weight words" for c in args.cols)
    print(f"| net | {head} |")
    print("| --- |" + " --- | --- |" * len(args.cols))
    for title, stem in NETS:
        path = ZOO / f"{stem}.tflite"
        if not path.exists():
            log.warning("%s: %s is not in the zoo, skipped", title, path.name)
            continue
        model = tflite_model.load(path)
        cells = []
        for cols in args.cols:
            (c0, w0), (c1, w1) = (depthwise_costs(model, HwConfig(COLS=cols, **b)) for b in builds)
            cells += [f"{_n(c0)} -> {_n(c1)}", f"{_n(w0)} -> {_n(w1)}"]
        print(f"| {title} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
