#!/usr/bin/env python3
"""MXU utilization of the DTPU (golden-model cycles, all stalls counted) on realistic layer shapes.

Layers of MobileNet-v1-0.25 at 96x96 and of DS-CNN (Hello Edge, S) are generated as int8
ConvSpecs (no model files), prepared on backend=model in network order (so weight residency is
what a whole-network run gets) and invoked once. For every layer the table shows the model's
cycles and utilization = MACs / (cycles * ROWS * COLS), the bandwidth bound (the best any design
with one 64-bit word per cycle per stream port could do given this layer's words in and out) and
where the cycles go:

  ideal    MACs / (ROWS*COLS)
  pad      issue slots whose PEs idle: K, channels or output items not a multiple of the array
  sched    cycles with no issue at all: configuration, pipeline fill/drain, waiting for input
           rows (depthwise start-up, stride-2 input bandwidth), output-bound steps, and weight
           words streamed for nodes that do not stay resident (LOAD_WGT, or prefetch words a
           job carries beyond what its computation hides)

The net is invoked once before the measured invoke: with weight prefetch (the default) the
streamed weights of the first nodes ride on the previous invoke's last jobs, so the measured
invoke is the steady state of a network run over and over. `--prefetch both` (the default)
prints the tables with prefetch on and with it off (paging through a scratch region).

Targets (issue #DTPU contract): >= 90 % on 1x1 convolutions, >= 80 % on stride-1 3x3 depthwise,
>= 80 % of the bandwidth bound on stride-2 depthwise, >= 75 % MAC-weighted over the whole net.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pylib"))

from dtpu.backends.base import Probes  # noqa: E402
from dtpu.backends.model import ModelBackend  # noqa: E402
from dtpu.hw.config import ceil_div  # noqa: E402
from dtpu.hw.lower import dw_geometry  # noqa: E402
from dtpu.precision import Precision  # noqa: E402
from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding, Quant  # noqa: E402

Q = dict(input_q=Quant((0.02,), (-5,)), output_q=Quant((0.05,), (3,)))


def _conv(name, hw, cin, cout, k, s=1, pad=Padding.SAME):
    return ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, hw[0], hw[1], cin), (cout, k[0], k[1], cin),
                    stride=(s, s), padding=pad, activation=Activation.RELU6,
                    filter_q=Quant(tuple([0.01] * cout), (0,) * cout), name=name, **Q)


def _dw(name, hw, c, s=1):
    return ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, hw[0], hw[1], c), (1, 3, 3, c),
                    stride=(s, s), padding=Padding.SAME, activation=Activation.RELU6,
                    filter_q=Quant(tuple([0.01] * c), (0,) * c), name=name, **Q)


def _fc(name, cin, cout):
    return ConvSpec(OpKind.FULLY_CONNECTED, DataMode.INT8, (1, 1, 1, cin), (cout, cin),
                    filter_q=Quant((0.01,), (0,)), name=name, **Q)


def mobilenet_v1_025_96() -> list[ConvSpec]:
    a = lambda c: int(c * 0.25)  # noqa: E731
    layers = [_conv("conv0 3x3 s2", (96, 96), 3, a(32), (3, 3), 2)]
    hw, c = 48, a(32)
    plan = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
    for i, (out, s) in enumerate(plan, 1):
        layers.append(_dw(f"dw{i} s{s}", (hw, hw), c, s))
        hw = ceil_div(hw, s)
        layers.append(_conv(f"pw{i}", (hw, hw), c, a(out), (1, 1)))
        c = a(out)
    layers.append(_fc("fc 1000", c, 1000))
    return layers


def ds_cnn_s() -> list[ConvSpec]:
    layers = [_conv("conv0 10x4 s2", (49, 10), 1, 64, (10, 4), 2)]
    for i in range(1, 5):
        layers.append(_dw(f"dw{i} s1", (25, 5), 64))
        layers.append(_conv(f"pw{i}", (25, 5), 64, 64, (1, 1)))
    layers.append(_fc("fc 12", 64, 12))
    return layers


def category(spec: ConvSpec) -> str:
    if spec.kind is OpKind.FULLY_CONNECTED:
        return "fc"
    if spec.kind is OpKind.DEPTHWISE_CONV_2D:
        return f"dw s{spec.stride[0]}"
    return "1x1" if spec.kernel == (1, 1) else "conv kxk"


def issue_slots(spec: ConvSpec, backend: ModelBackend, low) -> int:
    """Cycles in which the sequencer issues (every PE either works or idles for padding)."""
    cfg = backend.cfg
    if low.dataflow == "dwconv":
        g = dw_geometry(spec, cfg, Precision.INT8)
        return g.nchunk * g.oh * g.steps_per_row(cfg.COLS) * g.kh * g.kw * g.tap_cycles
    slots = 0
    for job in low.jobs(np.zeros(spec.input_shape, np.int8)):
        regs = dict(job.regs)
        if "GEMM_M" in regs:
            slots += regs["GEMM_M"] * regs["GEMM_NT"] * regs["GEMM_KW"]
    return slots


def measure(layers: list[ConvSpec], backend: ModelBackend):
    rng = np.random.default_rng(0)
    handles = []
    for spec in layers:
        f = rng.integers(-127, 128, spec.filter_shape).astype(np.int8)
        b = rng.integers(-500, 500, spec.out_channels).astype(np.int32)
        handles.append(backend.prepare(spec, f, b))
    for spec, h in zip(layers, handles):  # warm-up invoke: the steady state is measured
        backend.invoke(h, np.zeros(spec.input_shape, np.int8), Probes())
    peak = backend.cfg.ROWS * backend.cfg.COLS
    rows = []
    for spec, h in zip(layers, handles):
        x = rng.integers(-128, 128, spec.input_shape).astype(np.int8)
        _, hw = backend.invoke(h, x, Probes())
        words = max(hw.words_in.get("act", 0), hw.words_out.get("res", 0), hw.words_in.get("wgt", 0))
        bound_cycles = max(spec.macs / peak, words)
        slots = issue_slots(spec, backend, h.lowered)
        rows.append(dict(name=spec.name, cat=category(spec), macs=spec.macs, cycles=hw.cycles,
                         util=hw.utilization, bound=spec.macs / (peak * bound_cycles),
                         ideal=spec.macs / peak, pad=slots - spec.macs / peak, sched=hw.cycles - slots,
                         act=hw.words_in.get("act", 0), wgt=hw.words_in.get("wgt", 0),
                         res=hw.words_out.get("res", 0), resident=h.lowered.resident,
                         shape="x".join(map(str, spec.input_shape[1:])) + "->" + str(spec.out_channels)))
    return rows


def print_table(title: str, rows: list[dict], clock_mhz: float) -> dict[str, float]:
    log = logging.getLogger("bench")
    log.info("\n%s", title)
    hdr = (f"{'layer':<14}{'in->oc':>14}{'MACs':>10}{'cycles':>9}{'util':>7}{'bound':>7}{'u/bnd':>7}"
           f"{'pad':>8}{'sched':>8}{'act w':>8}{'wgt w':>8}{'res w':>7}")
    log.info(hdr)
    log.info("-" * len(hdr))
    for r in rows:
        log.info(f"{r['name']:<14}{r['shape']:>14}{r['macs']:>10}{r['cycles']:>9}{r['util']:>7.1%}"
                 f"{r['bound']:>7.1%}{r['util'] / r['bound']:>7.1%}{r['pad']:>8.0f}{r['sched']:>8.0f}"
                 f"{r['act']:>8}{r['wgt']:>8}{r['res']:>7}" + ("" if r["resident"] else "  (weights paged)"))
    out = {}
    for cat in sorted({r["cat"] for r in rows}):
        sel = [r for r in rows if r["cat"] == cat]
        macs, cyc = sum(r["macs"] for r in sel), sum(r["cycles"] for r in sel)
        bound_cyc = sum(r["macs"] / r["bound"] for r in sel) / 64
        out[cat] = macs / (cyc * 64)
        log.info(f"  {cat:<10} MAC-weighted utilization {out[cat]:6.1%}   of bandwidth bound "
                 f"{bound_cyc / cyc:6.1%}   ({len(sel)} layers)")
    macs, cyc = sum(r["macs"] for r in rows), sum(r["cycles"] for r in rows)
    out["net"] = macs / (cyc * 64)
    no_fc = [r for r in rows if r["cat"] != "fc"]
    out["net_no_fc"] = sum(r["macs"] for r in no_fc) / (sum(r["cycles"] for r in no_fc) * 64)
    log.info(f"  whole net  MAC-weighted utilization {out['net']:6.1%}  (without the classifier "
             f"{out['net_no_fc']:6.1%}); {cyc} cycles = {cyc / clock_mhz:.0f} us at {clock_mhz:g} MHz")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cols", type=int, default=8)
    ap.add_argument("--prefetch", choices=("on", "off", "both"), default="both",
                    help="weight prefetch of the streamed nodes (backend option prefetch)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    modes = ("on", "off") if args.prefetch == "both" else (args.prefetch,)
    for title, layers in (("MobileNet-v1-0.25, 96x96, int8", mobilenet_v1_025_96()),
                          ("DS-CNN (S), 49x10, int8", ds_cnn_s())):
        for mode in modes:
            backend = ModelBackend({"mxu": (8, args.cols), "prefetch": mode})
            rows = measure(layers, backend)
            print_table(f"{title} on {backend.cfg.model_name}, prefetch {mode}", rows,
                        backend.cfg.CLOCK_MHZ)
    return 0


if __name__ == "__main__":
    sys.exit(main())
