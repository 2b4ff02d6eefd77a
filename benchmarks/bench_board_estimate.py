#!/usr/bin/env python3
"""Whole invoke on the PYNQ-Z2, estimated: device time at 100 MHz plus the host operations at
per-operation costs of the board's 650 MHz Cortex-A9, against TFLite's CPU time on that A9.

For VWW 96 (MLPerf Tiny), MobileNet v2 1.0 224 and ResNet-8 (MLPerf Tiny), on both paths:

* job by job (contract 1.2): every job driven from Python. Counts and stall-free cycles come from
  benchmarks/bench_host_ops.py's `today` (backend=model's protocol path over a counting
  transport): register reads and writes, CTRL.STARTs, DMA transfers and the bytes they move,
  host layout steps (transforms) and the bytes they write.
* command list (contract 2.0): one doorbell per partition. Counts and cycles (with the memory
  model of contract.json `contract2.memory_model`) from bench_host_ops's `command_list`
  (dtpu.driver.lists.ListProgram on the model's 2.0 register window), plus the input and output copies into
  and out of the partitions' DDR buffers.

Both paths also pay what stays on the CPU: the operators outside the partitions (PAD, ADD,
pooling, softmax...: TFLite kernels on the A9) and TFLite calling the delegate once per
partition. The TFLite baseline is the model's MACs at an A9 int8 rate plus the same CPU-side
operators. Every constant is in COSTS below with its unit, kind (cited / derived / assumption)
and source; `--costs FILE` overrides values from a JSON object {name: value}. Nothing here is
measured on a board: the figures are an estimate to be replaced by measurements
(docs/board_estimate.md says which and how).

    PYTHONPATH=pylib python benchmarks/bench_board_estimate.py [--only NAME] [--json] [--costs F]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_host_ops as hostops  # noqa: E402
from dtpu import tflite_model  # noqa: E402
from dtpu.tflite_model import partitions_of  # noqa: E402

log = logging.getLogger("bench_board_estimate")

#: The per-operation costs, in one place. kind: "cited" (a published measurement on a
#: Zynq-7000 / PYNQ board), "derived" (computed from cited figures or from code, derivation in
#: `source`), "assumption" (no published figure found; how the value was chosen is in `source`).
COSTS: dict[str, dict] = {
    "fabric_mhz": dict(
        value=100.0, unit="MHz", kind="cited",
        source="the DTPU's fabric clock on the PYNQ-Z2 overlay (issue 14; docs/contract2.md "
               "memory model 'at the 100 MHz fabric clock')"),
    "mmio_write_us": dict(
        value=30.0, unit="us per register write", kind="cited",
        source="https://discuss.pynq.io/t/mmio-write-is-too-slow/389 (PYNQ-Z1, the same XC7Z020 "
               "and 650 MHz Cortex-A9: 5,600 MMIO.write calls in a Python loop took about "
               "150-200 ms, 27-36 us each) and https://github.com/KastnerRG/Read_the_docs/issues/25 "
               "(PYNQ-Z2: a Python function of four MMIO.write calls timed at 120-130 us with "
               "%timeit, about 30 us each)"),
    "mmio_read_us": dict(
        value=24.0, unit="us per register read", kind="derived",
        source="no published per-read figure found; pynq's MMIO.read runs the same Python path as "
               "MMIO.write (argument checks, one numpy element access of the /dev/mem mapping: "
               "pynq 4.0 pynq/mmio.py). On this x86 machine pynq 4.0's MMIO.read takes 0.30 us "
               "against 0.39 us for MMIO.write_mm; the cited 30 us write scaled by that ratio"),
    "dma_mmio_reads": dict(
        value=6.5, unit="register reads per DMA transfer", kind="derived",
        source="counted in the code: pynq 4.0 pynq/lib/dma.py _SDMAChannel.transfer (running, "
               "idle: 2 reads; address low/high and length: 3 writes) and wait (running, then "
               "DMASR, error and idle once the channel is done, transferred length: 5 reads), with "
               "pylib/dtpu/board/transport.py's settle and recv polls (idle, error: 2 reads each, "
               "one successful poll charged). A send costs 4 reads and 3 writes, a receive 9 reads "
               "and 3 writes; 6.5 is their mean"),
    "dma_mmio_writes": dict(
        value=3.0, unit="register writes per DMA transfer", kind="derived",
        source="pynq 4.0 pynq/lib/dma.py _SDMAChannel.transfer: source/destination address low "
               "and high words and the length register (3 writes per transfer)"),
    "cache_op_us": dict(
        value=20.0, unit="us per buffer flush or invalidate call", kind="assumption",
        source="one PynqBuffer.flush (send) or invalidate (receive) per transfer: on the Zynq "
               "pynq 4.0 calls XRT's bo.sync (pynq/pl_server/xrt_device.py), a system call; no "
               "published figure found, assumed 20 us on the A9"),
    "copy_MBps": dict(
        value=330.0, unit="MB/s (bytes copied per second)", kind="cited",
        source="https://github.com/ikwzm/udmabuf/issues/120 (Zynq-7000 on a ZYBO-Z7: 32 memcpy of "
               "16 MiB out of a cached DMA buffer in 1.537 s, about 350 MB/s); "
               "https://github.com/genodelabs/genode/issues/4456 (Zynq-7000 at 666 MHz: libc "
               "memcpy 393 MiB/s, a tuned one 1,062 MiB/s); "
               "https://github.com/bmartini/zynq-xdma/issues/10 (ZedBoard memcpy between buffers "
               "about 256 MB/s). numpy copies of contiguous arrays run at memcpy speed"),
    "uncached_read_MBps": dict(
        value=70.0, unit="MB/s (bytes copied out of a DMA buffer)", kind="cited",
        source="pynq.allocate buffers are not cacheable by default on the Zynq (pynq 4.0 "
               "pl_server/xrt_device.py: cacheable=0, XRT 'normal' buffer objects), and reading "
               "uncached memory is slow: https://github.com/ikwzm/udmabuf/issues/120 (Zynq-7000, "
               "the same 32 memcpy of 16 MiB out of an uncached DMA buffer took 7.634 s, about "
               "70 MB/s) and https://github.com/bmartini/zynq-xdma/issues/10 (ZedBoard: about "
               "64 MB/s out of the uncached CMA buffer). Writes into such a buffer are charged at "
               "copy_MBps (an assumption: the A9's store buffer merges them)"),
    "transform_MBps": dict(
        value=82.0, unit="MB/s (bytes a layout step writes)", kind="assumption",
        source="the host's layout steps (im2col windows, depthwise chunk transposes, channel "
               "slices and repeats, result tiles put back, split-K int64 sums) are strided numpy "
               "gathers, slower than memcpy: assumed a quarter of copy_MBps. (A random-index "
               "numpy gather on this x86 machine runs ~50x slower per byte than a contiguous "
               "copy; window gathers are far more regular than that)"),
    "numpy_call_us": dict(
        value=70.0, unit="us per layout step (fixed part)", kind="derived",
        source="a small numpy call costs ~0.9 us on this x86 machine; the A9 runs such Python "
               "code ~77x slower (the cited 30 us MMIO.write against 0.39 us for the same pynq "
               "code here); one call's worth per step (a step is usually several calls: favours "
               "the 1.2 path)"),
    "poll_reads_per_start": dict(
        value=1.0, unit="STATUS reads per 1.2 job", kind="assumption",
        source="1.2 waits for STATUS.DONE by polling (pylib/dtpu/board/transport.py wait_done), "
               "reads the host record does not count; the device's time is charged separately, so "
               "only the last poll is charged"),
    "irq_wait_us": dict(
        value=100.0, unit="us per 2.0 completion", kind="assumption",
        source="2.0 waits for IRQ_F2P through pynq.Interrupt (an asyncio event on the UIO "
               "device); PYNQ's own documentation only warns that 'an interrupt sent to the PS "
               "may have a relatively long latency before it is handled' "
               "(https://pynq.readthedocs.io/en/latest/13a_interrupts.html); assumed 100 us for the "
               "kernel's delivery plus the wake-up of a Python task. Polling CL_STATUS instead "
               "costs one read per poll"),
    "delegate_call_us": dict(
        value=50.0, unit="us per delegated partition", kind="assumption",
        source="TFLite calling the delegate's kernel for one partition (the C shim, into Python, "
               "tensor views); both paths pay it; assumed 50 us on the A9 (~0.6 us of Python "
               "call overhead here, x77)"),
    "cpu_op_us": dict(
        value=20.0, unit="us per CPU operator (fixed part)", kind="assumption",
        source="TFLite's C++ dispatch of one builtin operator left on the CPU (PAD, ADD, MEAN, "
               "AVERAGE_POOL_2D, SOFTMAX, RESHAPE...); assumed 20 us"),
    "cpu_op_MBps": dict(
        value=165.0, unit="MB/s (bytes read and written by a CPU operator)", kind="assumption",
        source="the operators left on the CPU are memory-bound element-wise or reduction "
               "kernels with int8 requantization: assumed half of copy_MBps per byte touched"),
    "tflite_a9_gmacs": dict(
        value=0.90, unit="G int8 MAC/s, one thread", kind="derived",
        source="scaled, not measured on an A9: no published TFLite latency on a Cortex-A9 was "
               "found in the sources searched (SECDA, arXiv 2110.00478, measured TFLite CPU-only "
               "inference on a PYNQ-Z1 but its figures could not be retrieved: they should replace "
               "this constant). ncnn's published int8 MobileNet v1 (569 M MACs) on an i.MX7 Dual "
               "(Cortex-A7, 64-bit NEON like the A9's, 1.0 GHz, one thread) takes 410 ms "
               "(https://github.com/Tencent/ncnn/blob/master/benchmark/README.md): 1.39 GMAC/s, "
               "scaled by clock to 650 MHz. Assumes TFLite's int8 kernels as fast as ncnn's and "
               "the A9 as fast per clock as the A7 on NEON-bound code (TinyMaix's table below has "
               "the A9 ~1.8x the A7 per clock on its own kernels: the A9 may be faster still)"),
    "a9_measured_gmacs": dict(
        value=0.17, unit="G int8 MAC/s, one thread", kind="cited",
        source="a runtime measured on a Zynq-7000 Cortex-A9: TinyMaix's benchmark table "
               "(https://github.com/sipeed/TinyMaix, benchmark.md) gives 44 ms for vww96 "
               "(MobileNet v1 0.25 96x96, the MLPerf Tiny VWW model, 7.5 M MACs) int8 on a "
               "ZYNQ7010's A9 at 667 MHz, and doc/porting/port_ZYNQ-7010.md (PYNQ image, NEON) "
               "43.7-50.2 ms: 0.17 GMAC/s. TinyMaix is a small library without TFLite's optimized "
               "kernels, so this rate is the slow end of the TFLite range (column in parentheses)"),
}


def costs(overrides: dict | None = None) -> dict[str, float]:
    """Name -> value of COSTS, with `overrides` (name -> number) applied; unknown names raise."""
    out = {k: float(v["value"]) for k, v in COSTS.items()}
    for k, v in (overrides or {}).items():
        if k not in out:
            raise KeyError(f"unknown cost {k!r}; known: {', '.join(sorted(out))}")
        out[k] = float(v)
    return out


# -- the arithmetic ------------------------------------------------------------------------------

def _bytes_ms(nbytes: float, mbps: float) -> float:
    return nbytes / (mbps * 1e3)        # MB/s = 1e3 bytes/ms


def _mmio_us(reads: float, writes: float, c: dict) -> float:
    """Microseconds of `reads` register reads and `writes` register writes."""
    return reads * c["mmio_read_us"] + writes * c["mmio_write_us"]


def _host(**parts: float) -> dict:
    """The host split (registers, dma, transforms, copies, completion in ms) with its total."""
    parts["total"] = sum(parts.values())
    return parts


def host_ms_12(ops: dict, c: dict) -> dict:
    """Host milliseconds of one job-by-job invoke from bench_host_ops.today's counts."""
    dma_us = _mmio_us(c["dma_mmio_reads"], c["dma_mmio_writes"], c) + c["cache_op_us"]
    return _host(
        registers=(_mmio_us(ops["mmio_reads"], ops["mmio_writes"], c)
                   + ops["starts"] * c["poll_reads_per_start"] * c["mmio_read_us"]) / 1e3,
        dma=ops["dma_starts"] * dma_us / 1e3 + _bytes_ms(ops["dma_send_bytes"], c["copy_MBps"])
        + _bytes_ms(ops["dma_recv_bytes"], c["uncached_read_MBps"]),
        transforms=ops["transforms"] * c["numpy_call_us"] / 1e3
        + _bytes_ms(ops["transform_bytes"], c["transform_MBps"]),
        copies=0.0, completion=0.0)


def host_ms_20(ops: dict, c: dict) -> dict:
    """Host milliseconds of one command-list invoke: the driver's register accesses, one
    completion per doorbell, the input copy into and the output copy out of the partitions'
    DDR buffers (a flush and an invalidate call each)."""
    return _host(
        registers=_mmio_us(ops["mmio_reads"], ops["mmio_writes"], c) / 1e3,
        dma=0.0, transforms=0.0,
        copies=_bytes_ms(ops["copy_in_bytes"], c["copy_MBps"])
        + _bytes_ms(ops["copy_out_bytes"], c["uncached_read_MBps"])
        + 2 * ops["partitions"] * c["cache_op_us"] / 1e3,
        completion=ops["doorbells"] * c["irq_wait_us"] / 1e3)


def _nbytes(t) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * (t.dtype.itemsize if t.dtype is not None else 1)


def cpu_side(path: Path, parts) -> dict:
    """What TFLite runs on the CPU around the partitions: the non-convolution operators (count and
    bytes of their activation inputs and outputs) and the convolutions no partition holds."""
    sg = tflite_model.load(path).main
    placed = sum(n.spec.macs for p in parts for n in p)
    conv_macs, ops, nbytes, names = 0, 0, 0, {}
    for op in sg.operators:
        if op.opcode in tflite_model.CONV_OPCODES:
            try:
                conv_macs += tflite_model.conv_spec(sg, op)[0].macs
            except ValueError as e:
                log.warning("operator %d (%s): MACs unknown (%s)", op.index, op.opcode, e)
            continue
        ops += 1
        names[op.opcode] = names.get(op.opcode, 0) + 1
        for i in list(op.inputs) + list(op.outputs):
            t = sg.tensor(i)
            if t is not None and not t.is_constant:
                nbytes += _nbytes(t)
    return dict(ops=ops, bytes=nbytes, opcodes=names, model_macs=max(conv_macs, placed),
                placed_macs=placed, cpu_conv_macs=max(conv_macs - placed, 0))


def _non_conv_ms(side: dict, c: dict) -> float:
    """Milliseconds of the non-convolution operators on the CPU (every path and TFLite pay them)."""
    return side["ops"] * c["cpu_op_us"] / 1e3 + _bytes_ms(side["bytes"], c["cpu_op_MBps"])


def cpu_ops_ms(side: dict, c: dict) -> float:
    """Milliseconds of the operators left on the CPU (non-convolutions, unplaced convolutions)."""
    return _non_conv_ms(side, c) + side["cpu_conv_macs"] / (c["tflite_a9_gmacs"] * 1e6)


def tflite_a9_ms(side: dict, c: dict, rate: str = "tflite_a9_gmacs") -> float:
    """TFLite alone on the A9: the model's convolution MACs at the int8 rate `rate` plus the
    same CPU-side operators the delegated paths keep."""
    return side["model_macs"] / (c[rate] * 1e6) + _non_conv_ms(side, c)


def row(path: str, cycles: int, ops: dict, side: dict, nparts: int, c: dict) -> dict:
    """One table row: device, host, CPU-side and whole-invoke milliseconds, TFLite and speedup."""
    device = cycles / (c["fabric_mhz"] * 1e3)
    host = host_ms_12(ops, c) if path == "1.2" else host_ms_20(ops, c)
    cpu = cpu_ops_ms(side, c) + nparts * c["delegate_call_us"] / 1e3
    whole = device + host["total"] + cpu
    tfl, slow = tflite_a9_ms(side, c), tflite_a9_ms(side, c, "a9_measured_gmacs")
    return dict(path=path, cycles=int(cycles), device_ms=device, host_ms=host["total"], host=host,
                cpu_ms=cpu, whole_ms=whole, tflite_ms=tfl, speedup=tfl / whole,
                tflite_slow_ms=slow, speedup_slow=slow / whole, ops=ops)


# -- gathering the counts -----------------------------------------------------------------------

def counts(parts) -> tuple[dict, int, dict, int, bool]:
    """(1.2 ops, 1.2 stall-free cycles, 2.0 ops, 2.0 cycles with the memory model, outputs equal)."""
    old, old_cycles, old_outs = hostops.today(parts)
    new, cycles, _compute, _idle, new_outs, lp = hostops.command_list(parts)
    parts20 = lp.program.partitions
    ops20 = dict(new, copy_in_bytes=sum(p.input.nbytes for p in parts20),
                 copy_out_bytes=sum(p.output.nbytes for p in parts20), partitions=len(parts20))
    exact = all(np.array_equal(a.reshape(-1), b.reshape(-1)) for a, b in zip(old_outs, new_outs))
    return dict(old, partitions=len(parts)), old_cycles, ops20, cycles, exact


def estimate(name: str, path: Path, c: dict) -> dict:
    t0 = time.perf_counter()
    parts = partitions_of(path)
    old, old_cycles, new, cycles, exact = counts(parts)
    side = cpu_side(path, parts)
    return dict(model=name, file=str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
                partitions=len(parts), nodes=sum(len(p) for p in parts), cpu_side=side,
                bit_exact=exact, seconds=time.perf_counter() - t0,
                rows=[row("1.2", old_cycles, old, side, len(parts), c),
                      row("2.0", cycles, new, side, len(parts), c)])


# -- printing -----------------------------------------------------------------------------------

def _print(results: list[dict], c: dict) -> None:
    print("## Whole invoke on the PYNQ-Z2 (estimate): device at "
          f"{c['fabric_mhz']:.0f} MHz + host on the 650 MHz Cortex-A9\n")
    print("| model | path | device ms | reads | writes | STARTs / doorbells | DMA (MB) "
          "| transforms (MB) | host ms | CPU-side ms | whole invoke ms | TFLite A9 ms | speedup |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        for w in r["rows"]:
            o = w["ops"]
            kicks = o.get("starts", o.get("doorbells"))
            dma = (f"{o['dma_starts']} ({(o['dma_send_bytes'] + o['dma_recv_bytes']) / 1e6:.2f})"
                   if w["path"] == "1.2" else
                   f"0 (copies {(o['copy_in_bytes'] + o['copy_out_bytes']) / 1e6:.2f})")
            tr = (f"{o['transforms']} ({o['transform_bytes'] / 1e6:.2f})" if w["path"] == "1.2"
                  else "0")
            label = "1.2 job by job" if w["path"] == "1.2" else "2.0 command list"
            print(f"| {r['model']} | {label} | {w['device_ms']:.2f} | {o['mmio_reads']:,} "
                  f"| {o['mmio_writes']:,} | {kicks:,} | {dma} | {tr} | {w['host_ms']:.1f} "
                  f"| {w['cpu_ms']:.1f} | {w['whole_ms']:.1f} | {w['tflite_ms']:.1f} "
                  f"({w['tflite_slow_ms']:.0f}) | {w['speedup']:.2f}x ({w['speedup_slow']:.1f}x) |")
    print("\nTFLite A9 ms: the model's MACs at tflite_a9_gmacs (scaled from a published A7 "
          "figure), in parentheses at a9_measured_gmacs (TinyMaix measured on a Zynq A9: the slow "
          "end); speedup = TFLite / whole invoke, likewise")
    print("\nhost ms split (registers / DMA / transforms / copies / completion):")
    for r in results:
        for w in r["rows"]:
            h = w["host"]
            print(f"  {r['model']}, {w['path']}: {h['registers']:.1f} / {h['dma']:.1f} / "
                  f"{h['transforms']:.1f} / {h['copies']:.2f} / {h['completion']:.2f}")
    print("\nCPU side (both paths and the TFLite baseline): operators outside the partitions")
    for r in results:
        s = r["cpu_side"]
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(s["opcodes"].items()))
        print(f"  {r['model']}: {r['nodes']} nodes in {r['partitions']} partitions, "
              f"{s['model_macs'] / 1e6:.1f} M MACs ({s['cpu_conv_macs'] / 1e6:.1f} M on the CPU); "
              f"{s['ops']} CPU operators ({ops}), {s['bytes'] / 1e6:.2f} MB touched; "
              f"outputs 1.2 = 2.0: {r['bit_exact']}; counted in {r['seconds']:.1f} s")
    print("\ncosts (kind: source):")
    for k, v in COSTS.items():
        note = "" if c[k] == float(v["value"]) else f" (overridden: {c[k]:g})"
        print(f"  {k} = {v['value']:g} {v['unit']}{note} [{v['kind']}]: {v['source']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="directory holding mobilenet_v2_224__int8.tflite")
    ap.add_argument("--only", help="run only models whose name contains this")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead")
    ap.add_argument("--costs", help="JSON file {name: value} overriding entries of COSTS")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    c = costs(json.loads(Path(args.costs).read_text()) if args.costs else None)
    results = []
    for name, path in hostops._model_paths(args.models):
        if args.only and args.only.lower() not in name.lower():
            continue
        if path is None or not path.exists():
            print(f"{name}: model file not found, skipped", file=sys.stderr)
            continue
        results.append(estimate(name, path, c))
    if args.json:
        print(json.dumps(dict(costs={k: dict(v, value=c[k]) for k, v in COSTS.items()},
                              results=results), indent=1, default=float))
    else:
        _print(results, c)
    return 0


if __name__ == "__main__":
    sys.exit(main())
