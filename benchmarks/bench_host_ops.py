#!/usr/bin/env python3
"""Host operations per invoke: today's job-by-job protocol (contract 1.2) against one command
list per partition (contract 2.0, dtpu.driver.lists), and MXU utilization with the memory model.

Today: backend=model over a counting transport (the protocol path every backend shares:
register writes and reads, one DMA transfer per stream packet), steady state (the second
invoke), nodes chained per partition as the delegate runs them. `transforms` counts the host's
layout steps between device work: a compute job whose activation words are not the input
tensor's own bytes (im2col, chunk transposes, channel slices, packing) and a node whose output
is not its result words as they came (tiles or parts put back, split-K sums). `us` is the
invoke's wall time minus the time spent inside the transport (the emulated device).

Command list: the same partitions compiled once and run as the delegate runs them on a 2.0
core: dtpu.driver.lists.ListProgram over the model transport's 2.0 register window
(dtpu.driver.model_transport.ModelTransport with lists=True), its host operations counted by the driver
(dtpu.driver.hostops.HostOps), `us` likewise the invoke's wall time minus the device's.
Cycles: today's are the stall-free job cycles backend=model reports (streams assumed never
empty, host time between jobs not counted); the command list's include the memory model of
contract.json "contract2.memory_model" (latency, one beat per cycle per channel, fetch, waits on
loads and on the previous job's results). Utilization = MACs / (cycles * ROWS * COLS) over the
whole model (MAC-weighted).

Models: VWW 96 (tests/models/zoo/mobilenet_v1_025_96__int8.tflite), MobileNet v2 1.0 224
(mobilenet_v2_224__int8.tflite in --models, $DTPU_MODEL_CACHE or /work/scratch_models; skipped
when absent), ResNet-8 (tests/isro/resnet8_int8.tflite). Partitions here are chains of placed
convolution nodes split at every other operator (dtpu.tflite_model.partitions_of), as the
delegate's partitions are today (MobileNet v2's residual ADDs and ResNet-8's split them).

Delegate reports: the same models through the delegate (dtpu.make_interpreter), the `host` record
of the steady-state invoke's report (dtpu.report, counted by dtpu.driver.hostops) on backend=model
and, with --board, on the emulated PYNQ-Z2 (the real pynq package; DTPU_PYNQ_EMULATE), each with
path=jobs (1.2 job by job; on backend=model its compiled path, counts derived from the protocol)
and path=lists (2.0, the default on a 2.0 core: one command list per delegated partition). That
is the figure as users see it: all delegated partitions of the interpreter, nodes the delegate
claims (which may differ from the chains above).

    PYTHONPATH=pylib python benchmarks/bench_host_ops.py [--models DIR] [--only NAME] [--board]
        [--reports-only] [--host-share 200]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))

from dtpu.board.estimate import jobs_counts, list_counts  # noqa: E402
from dtpu.hw.config import get_config  # noqa: E402
from dtpu.tflite_model import partitions_of  # noqa: E402

log = logging.getLogger("bench_host_ops")
PEAK = get_config().ROWS * get_config().COLS   # MACs per cycle of the default 8x8 build


# the counting, shared with `dtpu estimate` (one implementation): job by job with the bytes the
# transfers and the layout steps move, and the command lists as the delegate drives them
today = jobs_counts
command_list = list_counts


def model_paths(models_dir):
    cands = [Path(models_dir)] if models_dir else []
    if os.environ.get("DTPU_MODEL_CACHE"):
        cands.append(Path(os.environ["DTPU_MODEL_CACHE"]))
    cands += [ROOT / "tests" / "models" / "zoo", Path("/work/scratch_models"),
              ROOT / "tests" / "models" / "cache"]
    v2 = next((d / "mobilenet_v2_224__int8.tflite" for d in cands
               if (d / "mobilenet_v2_224__int8.tflite").exists()), None)
    return [("VWW 96 (mobilenet_v1_025_96)", ROOT / "tests/models/zoo/mobilenet_v1_025_96__int8.tflite"),
            ("MobileNet v2 1.0 224", v2),
            ("ResNet-8 (tests/isro)", ROOT / "tests/isro/resnet8_int8.tflite"),
            ("AD autoencoder (autoencoder_toyadmos)",
             ROOT / "tests/models/zoo/autoencoder_toyadmos__int8.tflite")]


def reported(path: Path, options: dict, invokes: int = 3) -> dict:
    """The host record, hw counters and node count of a steady-state invoke's delegate report."""
    import dtpu

    it = dtpu.make_interpreter(path, options)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for _ in range(invokes):
        for d in it.get_input_details():
            info = np.iinfo(d["dtype"]) if np.issubdtype(d["dtype"], np.integer) else None
            x = (rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"]) if info
                 else rng.standard_normal(d["shape"]).astype(d["dtype"]))
            it.set_tensor(d["index"], x)
        it.invoke()
    reports = [r for r in dtpu.reports()[-invokes:] if not r.first]
    r = reports[-1]
    return {"host": dict(r.host), "cycles": r.hw["cycles"], "idle": r.hw["idle_cycles"],
            "nodes": len(r.nodes), "partitions": r.kernels, "macs": r.hw["macs"]}


def host_share(path: Path, invokes: int = 200) -> tuple[float, float, float]:
    """(TFLite CPU invoke, the delegate's host us, host us / CPU) as medians over `invokes`
    alternating invokes in one process, 1 thread each, backend=model on its default path: the
    issue's "host us under 5 % of the same model's TFLite CPU time"."""
    import dtpu
    from dtpu.tflite import Interpreter

    cpu = Interpreter(model_path=str(path), num_threads=1)
    ours = dtpu.make_interpreter(path, {"backend": "model"}, num_threads=1)
    for it in (cpu, ours):
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        it.invoke()
    cpu_s, host_us = [], []
    for _ in range(invokes):
        t0 = time.perf_counter()
        cpu.invoke()
        cpu_s.append(time.perf_counter() - t0)
        ours.invoke()
        host_us.append(dtpu.last_report().host["us"])
    c, h = float(np.median(cpu_s)) * 1e6, float(np.median(host_us))
    return c, h, h / c


def _report_rows(name: str, path: Path, board: bool) -> None:
    rows = [(f"delegate, backend=model, path={p}", {"backend": "model", "path": p})
            for p in ("jobs", "lists")]
    if board:
        from dtpu.board import emulate

        import tempfile

        bit = emulate.install()    # the 1.2 design (DMAs, a 1.2 core): job by job
        bit2 = emulate.write_design(tempfile.mkdtemp(prefix="dtpu-emu2-"), contract=2)
        rows += [("delegate, backend=pynq (emulated 1.2 design), path=auto",
                  {"backend": "pynq", "bitstream": str(bit)}),
                 ("delegate, backend=pynq (emulated 2.0 design), path=auto",
                  {"backend": "pynq", "bitstream": str(bit2)})]
    print(f"   delegate reports ({name}, steady state, per invoke):")
    print("| report | nodes (kernels) | mmio reads | mmio writes | doorbells | DMA starts | transforms "
          "| host us | cycles | idle cycles | utilization |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, options in rows:
        got = reported(path, options)
        h = got["host"]
        print(f"| {label} | {got['nodes']} ({got['partitions']}) | {h['mmio_reads']} | {h['mmio_writes']} | "
              f"{h['doorbells']} | {h['dma_starts']} | {h['transforms']} | {h['us']:.0f} | "
              f"{got['cycles']} | {got['idle']} | {100 * got['macs'] / (got['cycles'] * PEAK):.1f} % |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="directory holding mobilenet_v2_224__int8.tflite")
    ap.add_argument("--only", help="run only models whose name contains this")
    ap.add_argument("--board", action="store_true",
                    help="also report through the emulated PYNQ-Z2 (needs the pynq package)")
    ap.add_argument("--reports-only", action="store_true",
                    help="only the delegate reports' host records (no command-list comparison)")
    ap.add_argument("--host-share", type=int, metavar="N", default=0,
                    help="also the delegate's host us against TFLite's CPU time: medians of N "
                         "alternating invokes (e.g. 200)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    cfg = get_config()
    peak = cfg.ROWS * cfg.COLS
    rows = []
    for name, path in model_paths(args.models):
        if args.only and args.only.lower() not in name.lower():
            continue
        if path is None or not path.exists():
            print(f"{name}: model file not found, skipped")
            continue
        if args.host_share:
            c, h, share = host_share(path, args.host_share)
            print(f"{name}: TFLite CPU {c:.0f} us, delegate host {h:.1f} us per invoke: "
                  f"{100 * share:.1f} % (medians of {args.host_share} alternating invokes, "
                  f"1 thread; target < 5 %)")
        if args.reports_only:
            _report_rows(name, path, args.board)
            continue
        parts = partitions_of(path)
        nodes = sum(len(p) for p in parts)
        macs = sum(n.spec.macs for p in parts for n in p)
        t0 = time.perf_counter()
        old, old_cycles, old_outs = today(parts)
        t1 = time.perf_counter()
        new, cycles, compute, idle, new_outs, lp = command_list(parts)
        t2 = time.perf_counter()
        exact = all(np.array_equal(a.reshape(-1), b.reshape(-1)) for a, b in zip(old_outs, new_outs))
        rows.append((name, len(parts), nodes, old, new, old_cycles, cycles, compute, idle, macs,
                     exact, lp, path))
        log.info("%s: today %.1f s, command list %.1f s", name, t1 - t0, t2 - t1)
    for (name, nparts, nodes, old, new, old_cycles, cycles, compute, idle, macs, exact, lp,
         path) in rows:
        print(f"\n## {name}: {nodes} delegated nodes in {nparts} partitions, {macs / 1e6:.1f} M MACs, "
              f"outputs bit-identical: {exact}")
        print(f"   DDR image {lp.size / 1e6:.2f} MB, {lp.program.streamed_nodes} nodes streamed "
              f"(resident weight words {lp.program.resident_words})")
        print("| path | mmio reads | mmio writes | doorbells / STARTs | DMA starts | transforms | host us "
              "| cycles | idle | utilization |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        print(f"| job by job (1.2) | {old['mmio_reads']} | {old['mmio_writes']} | "
              f"{old['starts']} | {old['dma_starts']} | {old['transforms']} | {old['us']:.0f} | "
              f"{old_cycles} (stall-free) | - | {100 * macs / (old_cycles * peak):.1f} % |")
        print(f"| command list (2.0) | {new['mmio_reads']} | {new['mmio_writes']} | {new['doorbells']} | "
              f"{new['dma_starts']} | {new['transforms']} | {new['us']:.0f} | {cycles} | {idle} | "
              f"{100 * macs / (cycles * peak):.1f} % |")
        print(f"   per partition (2.0): {new['mmio_reads'] / nparts:.0f} reads, "
              f"{new['mmio_writes'] / nparts:.0f} writes, {new['doorbells'] / nparts:.0f} doorbell; "
              f"stall-free compute {compute} cycles ({100 * macs / (compute * peak):.1f} %), "
              f"memory model adds {idle} ({100 * idle / cycles:.1f} % of the list's cycles)")
        _report_rows(name, path, args.board)
    return 0


if __name__ == "__main__":
    sys.exit(main())
