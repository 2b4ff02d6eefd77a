#!/usr/bin/env python3
"""MXU utilization of the DTPU (golden-model cycles, all stalls counted) on realistic layer shapes.

Layers of MobileNet-v1-0.25 at 96x96 and of DS-CNN (Hello Edge, S) are generated as int8
ConvSpecs (no model files), prepared on backend=model in network order (so weight residency is
what a whole-network run gets: with prefetch on, chosen over the whole net at its first invoke,
see docs/architecture.md; off, first come first served) and invoked once. For every layer the table shows the model's
cycles and utilization = MACs / (cycles * ROWS * COLS), the bandwidth bound (the best any design
with one 64-bit word per cycle per stream port could do given this layer's words in and out) and
where the cycles go:

  ideal    MACs / (ROWS*COLS)
  pad      issue slots whose PEs idle: K, channels or output items not a multiple of the array,
           and the extra cycles of depthwise taps served over TAP_CYCLES > 1 (stride-2 bank
           conflicts)
  sched    cycles with no issue at all: configuration, pipeline fill/drain, waiting for input
           rows (depthwise start-up, stride-2 input bandwidth), output-bound steps, parameter
           pages (LOAD_PARAM), and weight words streamed for nodes that do not stay resident
           (LOAD_WGT, or prefetch words a job carries beyond what its computation hides)

The net is invoked once before the measured invoke: with weight prefetch (the default) the
streamed weights of the first nodes ride on the previous invoke's last jobs, so the measured
invoke is the steady state of a network run over and over. `--prefetch both` (the default)
prints the tables with prefetch on and with it off (paging through a scratch region).

ImageNet scale (issue #12): MobileNet v1 1.0 and v2 1.0 at 224x224 (int8, random weights; the
files ``mobilenet_v1_224__int8.tflite`` / ``mobilenet_v2_224__int8.tflite`` that
tests/models/make_imagenet.py writes into the committed zoo: ``--models DIR``, else
``$DTPU_MODEL_CACHE``, else tests/models/zoo/, else tests/models/cache/; skipped with a message
when absent). Their
weights (430 k words for v2) and parameters (17 k entries) far exceed the 32 k-word weight and
4 k-entry parameter memories: the residency selection keeps some nodes, the rest streams through
the prefetch planner, depthwise nodes that do not fit run in channel groups and parameters that
do not fit are paged (LOAD_PARAM, serially). Beside each layer: the weight-bandwidth bound (the
best utilization if the layer's weights had to come in during its own computation at one word
per cycle; "-" when they stay resident), and under the table where the cycles go:

  issue      cycles in which the MXU issues (ideal + pad above)
  job        the rest of the compute jobs as lowered: configuration, fill/drain, depthwise
             start-up and input-bound steps
  params     LOAD_PARAM of paged parameter entries: CFG + 2*entries + LOAD_LATENCY per page
  weights    weight words not hidden behind computation: LOAD_WGT of what no carrier took and
             prefetch words that lengthen their carrier

Targets (issue #DTPU contract): >= 90 % on 1x1 convolutions, >= 80 % on stride-1 3x3 depthwise,
>= 80 % of the bandwidth bound on stride-2 depthwise, >= 75 % MAC-weighted over the whole net;
>= 85 % MAC-weighted on MobileNet v1 / v2 1.0 224 with streamed weights (issue #12).
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pylib"))

from dtpu import reference, tflite_model  # noqa: E402
from dtpu.backends.base import Probes  # noqa: E402
from dtpu.backends.model import ModelBackend  # noqa: E402
from dtpu.hw.fast import job_cycles  # noqa: E402
from dtpu.hw.config import ceil_div  # noqa: E402
from dtpu.hw.core import Core  # noqa: E402
from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding, Quant  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
IMAGENET = ("mobilenet_v1_224__int8", "mobilenet_v2_224__int8")

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


def job_costs(spec: ConvSpec, backend: ModelBackend, low) -> dict[str, int]:
    """Per invoke of the node as lowered: MXU issue slots (every PE works or idles for padding),
    stall-free compute-job cycles, and the cycles of its LOAD_PARAM jobs (parameter pages)."""
    cfg = backend.cfg
    decoder = Core(cfg)
    ops = {v: k for k, v in cfg.enums["OPCODE"].items()}
    out = dict(slots=0, compute=0, params=0)
    x = np.zeros(spec.input_shape, reference.io_dtypes(spec)[0])
    for job in low.jobs(x):
        regs = dict(job.regs)
        op = ops[cfg.decode("JOB", regs["JOB"])["OPCODE"]]
        if op == "GEMM":
            out["slots"] += regs["GEMM_M"] * regs["GEMM_NT"] * regs["GEMM_KW"]
        elif op == "DWCONV":
            groups, dout = cfg.decode("DW_GROUPS", regs["DW_GROUPS"]), cfg.decode("DW_OUT", regs["DW_OUT"])
            kern, ring = cfg.decode("DW_KERNEL", regs["DW_KERNEL"]), cfg.decode("DW_RING", regs["DW_RING"])
            out["slots"] += (groups["NCHUNK"] * dout["H"] * ceil_div(dout["W"] * groups["GC"], cfg.COLS)
                             * kern["KH"] * kern["KW"] * ring["TAP_CYCLES"])
        elif op == "LOAD_PARAM":
            out["params"] += cfg.CFG_CYCLES + int(job.send["wgt"].size) + cfg.LOAD_LATENCY
            continue
        else:
            continue
        out["compute"] += job_cycles(decoder, job.regs)
    return out


def measure(layers: list, backend: ModelBackend):
    """Prepare `layers` ((spec, filters, bias) or specs: random weights) in order, invoke the net
    once to reach the steady state, then measure one invoke per layer."""
    rng = np.random.default_rng(0)
    handles, nodes = [], []
    for layer in layers:
        if isinstance(layer, ConvSpec):
            spec = layer
            f = rng.integers(-127, 128, spec.filter_shape).astype(np.int8)
            b = rng.integers(-500, 500, spec.out_channels).astype(np.int32)
        else:
            spec, f, b = layer
        nodes.append(spec)
        handles.append(backend.prepare(spec, f, b))
    for spec, h in zip(nodes, handles):  # warm-up invoke: the steady state is measured
        backend.invoke(h, np.zeros(spec.input_shape, reference.io_dtypes(spec)[0]), Probes())
    peak = backend.cfg.ROWS * backend.cfg.COLS
    rows = []
    for spec, h in zip(nodes, handles):
        dt = reference.io_dtypes(spec)[0]
        x = rng.integers(np.iinfo(dt).min, int(np.iinfo(dt).max) + 1, spec.input_shape).astype(dt)
        _, hw = backend.invoke(h, x, Probes())
        words = max(hw.words_in.get("act", 0), hw.words_out.get("res", 0), hw.words_in.get("wgt", 0))
        bound_cycles = max(spec.macs / peak, words)
        low = h.lowered
        costs = job_costs(spec, backend, low)
        streamed = not low.resident
        wwords = h.src[3] if h.src else low.weight_words
        rows.append(dict(name=spec.name, cat=category(spec), macs=spec.macs, cycles=hw.cycles,
                         util=hw.utilization, bound=spec.macs / (peak * bound_cycles),
                         wbound=(min(1.0, spec.macs / peak / wwords) if streamed else None),
                         ideal=spec.macs / peak, pad=costs["slots"] - spec.macs / peak,
                         sched=hw.cycles - costs["slots"], job=costs["compute"] - costs["slots"],
                         params=costs["params"],
                         weights=hw.cycles - costs["compute"] - costs["params"],
                         act=hw.words_in.get("act", 0), wgt=hw.words_in.get("wgt", 0),
                         res=hw.words_out.get("res", 0), resident=low.resident,
                         paged_params=h.param_base is None,
                         shape="x".join(map(str, spec.input_shape[1:])) + "->" + str(spec.out_channels)))
    return rows


def print_table(title: str, rows: list[dict], clock_mhz: float) -> dict[str, float]:
    log = logging.getLogger("bench")
    log.info("\n%s", title)
    hdr = (f"{'layer':<22}{'in->oc':>16}{'MACs':>10}{'cycles':>9}{'util':>7}{'bound':>7}{'u/bnd':>7}"
           f"{'w-bnd':>7}{'pad':>8}{'sched':>8}{'act w':>8}{'wgt w':>8}{'res w':>7}")
    log.info(hdr)
    log.info("-" * len(hdr))
    for r in rows:
        wb = "-" if r["wbound"] is None else f"{r['wbound']:.1%}"
        note = [] if r["resident"] else ["weights streamed"]
        if r["paged_params"]:
            note.append("parameters paged")
        log.info(f"{r['name'][:21]:<22}{r['shape']:>16}{r['macs']:>10}{r['cycles']:>9}{r['util']:>7.1%}"
                 f"{r['bound']:>7.1%}{r['util'] / r['bound']:>7.1%}{wb:>7}{r['pad']:>8.0f}{r['sched']:>8.0f}"
                 f"{r['act']:>8}{r['wgt']:>8}{r['res']:>7}" + (f"  ({', '.join(note)})" if note else ""))
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
    parts = {k: sum(r[k] for r in rows) for k in ("ideal", "pad", "job", "params", "weights")}
    log.info("  where cycles go: " + ", ".join(
        f"{label} {parts[k]:.0f} ({parts[k] / cyc:.1%})" for label, k in (
            ("MACs", "ideal"), ("padding", "pad"), ("job overhead", "job"),
            ("parameter pages", "params"), ("exposed weights", "weights"))))
    per_cat = {}
    for r in rows:
        per_cat[r["cat"]] = per_cat.get(r["cat"], 0) + r["cycles"] - r["ideal"]
    log.info("  cycles lost by category: " + ", ".join(
        f"{cat} {lost:.0f}" for cat, lost in sorted(per_cat.items(), key=lambda kv: -kv[1])))
    return out


def model_path(given: str | None, name: str) -> Path:
    """Where an ImageNet-scale model file is: --models, $DTPU_MODEL_CACHE, the committed zoo
    (tests/models/zoo, where MobileNet v1/v2 224 are), tests/models/cache."""
    dirs = [given, os.environ.get("DTPU_MODEL_CACHE"), ROOT / "tests" / "models" / "zoo",
            ROOT / "tests" / "models" / "cache"]
    for d in dirs:
        if d and (Path(d) / f"{name}.tflite").exists():
            return Path(d) / f"{name}.tflite"
    return Path(given or ROOT / "tests" / "models" / "zoo") / f"{name}.tflite"


def tflite_layers(path: Path) -> list:
    """(spec, filters, bias) of every CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED, in order."""
    model = tflite_model.load(path)
    sg = model.subgraphs[0]
    layers = []
    for op in sg.operators:
        if op.opcode in tflite_model.CONV_OPCODES:
            spec, f, b = tflite_model.conv_spec(sg, op)
            short = spec.name.split(";")[0].split("/")
            layers.append((dataclasses.replace(spec, name=short[1] if len(short) > 2 else short[-1]),
                           f, b))
    return layers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cols", type=int, default=8)
    ap.add_argument("--prefetch", choices=("on", "off", "both"), default="both",
                    help="weight prefetch of the streamed nodes (backend option prefetch)")
    ap.add_argument("--nets", choices=("small", "imagenet", "all"), default="all",
                    help="the generated small nets, the ImageNet-scale model files, or both")
    ap.add_argument("--models", default=None,
                    help="directory of mobilenet_v1_224__int8.tflite / mobilenet_v2_224__int8.tflite "
                         "(default: $DTPU_MODEL_CACHE, the zoo, tests/models/cache)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    modes = ("on", "off") if args.prefetch == "both" else (args.prefetch,)
    nets = []
    if args.nets in ("small", "all"):
        nets += [("MobileNet-v1-0.25, 96x96, int8", mobilenet_v1_025_96()),
                 ("DS-CNN (S), 49x10, int8", ds_cnn_s())]
    if args.nets in ("imagenet", "all"):
        for name in IMAGENET:
            path = model_path(args.models, name)
            if not path.exists():
                logging.getLogger("bench").info("\n%s: %s not found, skipped (tests/models/"
                                                "make_imagenet.py --cache writes it; --models DIR "
                                                "or $DTPU_MODEL_CACHE point elsewhere)", name, path)
                continue
            nets.append((f"{name} (random weights), 224x224", tflite_layers(path)))
    for title, layers in nets:
        for mode in modes:
            backend = ModelBackend({"mxu": (8, args.cols), "prefetch": mode})
            rows = measure(layers, backend)
            print_table(f"{title} on {backend.cfg.model_name}, prefetch {mode}", rows,
                        backend.cfg.CLOCK_MHZ)
    return 0


if __name__ == "__main__":
    sys.exit(main())
