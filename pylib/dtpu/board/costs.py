"""What an invoke would cost on the PYNQ-Z2: the per-operation costs and the arithmetic that
turns counts (device cycles, register accesses, doorbells, DMA transfers, copies, operators left
on the CPU) into milliseconds on the board.

The answer to "how fast would this be on the board?" without a board: device time is the
cycles at the build's clock; host time is the host operations the driver counted, each at a cost
of the board's 650 MHz Cortex-A9 running the delegate from Python or from C (its C invoke path);
what stays on the CPU is TFLite's kernels on that A9. Every constant is in :data:`COSTS` with its
unit, its kind (cited / derived / measured / assumption) and its source, and docs/board_estimate.md explains them. It is an estimate, never a
measurement, and every figure printed from it says so.

Two callers: :func:`for_report` prices one delegate report (what ``Report.table()``,
``dtpu run`` and ``make demo`` print), and :mod:`dtpu.board.estimate` prices a model file on both
contracts and both invoke paths (``dtpu estimate``, benchmarks/bench_board_estimate.py). This module imports nothing
of dtpu's at import (the operator names of :mod:`dtpu.tflite_model` when a graph is read), so
the report can use it without pulling in a backend.
"""
from __future__ import annotations

from typing import Any, Iterable

#: The per-operation costs, in one place. kind: "cited" (a published measurement on a
#: Zynq-7000 / PYNQ board), "derived" (computed from cited figures or from code, derivation in
#: `source`), "measured" (timed on this machine, scaled to the A9 by python_a9_factor),
#: "assumption" (no published figure found; how the value was chosen is in `source`).
COSTS: dict[str, dict] = {
    "fabric_mhz": dict(
        value=100.0, unit="MHz", kind="assumption",
        source="the design's target fabric clock on the PYNQ-Z2 overlay (contract.json "
               "CLOCK_MHZ; docs/contract2.md memory model 'at the 100 MHz fabric clock'), not "
               "proven: not every unit placed on the timing proxy reaches it yet (the slowest "
               "one's fmax: dtpu.board.compare.proven_clock, from hw/synth/results.json; "
               "docs/synthesis.md, 'Timing evidence')"),
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
    "cache_maint_MBps": dict(
        value=500.0, unit="MB/s (bytes of a cacheable buffer flushed or invalidated)",
        kind="assumption",
        source="2.0 copies through cacheable buffers (pynq.allocate(cacheable=True), "
               "pylib/dtpu/board/transport.py) and flushes or invalidates exactly the bytes "
               "moved (pylib/dtpu/driver/lists.py): the kernel walks the range line by line, "
               "the Cortex-A9's L1 (32-byte lines, one maintenance instruction each) and the "
               "PL310 L2 controller (one register operation per line). No published figure "
               "found; assumed ~40 cycles per 32-byte line at 650 MHz, about 500 MB/s, on top "
               "of the per-call cache_op_us"),
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
               "pl_server/xrt_device.py: cacheable=0, XRT 'normal' buffer objects; the 1.2 "
               "path's DMA buffers are such, the 2.0 path's list buffer is cacheable), and reading "
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
    "python_a9_factor": dict(
        value=77.0, unit="x (the A9's time of Python code over this machine's)", kind="derived",
        source="the cited 30 us of one pynq MMIO.write on a PYNQ board against 0.39 us for the "
               "same pynq code on this x86 machine (pynq 4.0, Python 3.11)"),
    "py_partition_here_us": dict(
        value=290.0, unit="us of Python per delegated partition on this machine (Python path)",
        kind="measured",
        source="measured here, scaled to the A9 by python_a9_factor: TFLite's kernel invoke on the Python path "
               "(invoke=python) less the time inside the target, per partition, is 313 us for "
               "VWW 96 (2 partitions) and 268 us for MobileNet v2 224 (11) on this machine "
               "(benchmarks/bench_cpath.py, backend=model, 'kernel us': the crossing into "
               "Python, ListProgram.invoke's Python around its register accesses, the report's "
               "bookkeeping): about 290 us. Both 1.2 and 2.0 Python paths pay it; "
               "their register accesses, copies and layout steps are charged on top"),
    "cpu_op_us": dict(
        value=20.0, unit="us per CPU operator (fixed part)", kind="assumption",
        source="TFLite's C++ dispatch of one builtin operator left on the CPU (PAD, ADD, MEAN, "
               "AVERAGE_POOL_2D, SOFTMAX, RESHAPE...); assumed 20 us"),
    "cpu_op_MBps": dict(
        value=165.0, unit="MB/s (bytes read and written by a CPU operator)", kind="assumption",
        source="the operators left on the CPU are memory-bound element-wise or reduction "
               "kernels with int8 requantization: assumed half of copy_MBps per byte touched"),
    # -- the C invoke path (delegate/dtpu_cpath.c): what an invoke costs once Python is out -----
    "c_mmio_read_us": dict(
        value=0.5, unit="us per register read from C", kind="assumption",
        source="one load from the /dev/mem mapping of M_AXI_GP0 (dtpu_cpath.c dtpu_mmio_read): "
               "uncached, it crosses the PS interconnect, the GP0 port's clock crossing and the "
               "overlay's AXI-Lite interconnect to the DTPU at the 100 MHz fabric clock and back; "
               "no published Zynq-7000 figure found, assumed ~50 fabric cycles"),
    "c_mmio_write_us": dict(
        value=0.5, unit="us per register write from C", kind="assumption",
        source="one store to the mapping followed by a barrier (dtpu_cpath.c dtpu_mmio_write: "
               "__sync_synchronize, a DMB, so that CL_BASE lands before DOORBELL); charged as a "
               "read (no published figure found)"),
    "c_run_us": dict(
        value=3.5, unit="us per C run (code, no copies, registers or system calls)",
        kind="derived",
        source="delegate/dtpu_cpath.c compiled for the board (ziglang cc -target "
               "arm-linux-gnueabihf.2.35 -mcpu=cortex_a9 -O2 -S): dtpu_cpath_run 216 "
               "instructions, dtpu_cp_kick 699 (its error path included), the register "
               "wrappers ~18 each, the ring and counter locks ~50: about 1,100 static "
               "instructions, an upper bound of the success path's; at 0.5 instructions per "
               "cycle (an assumption for branchy code on the dual-issue A9) at 650 MHz, 3.4 us; "
               "plus the kernel invoke's gather of the tensors' data pointers "
               "(dtpu_delegate.c)"),
    "c_clock_us": dict(
        value=1.0, unit="us per clock_gettime", kind="assumption",
        source="a C run reads CLOCK_MONOTONIC about 5 times (dtpu_delegate.c dtpu_kernel_invoke's "
               "enter stamp; dtpu_cpath.c the start, completion and end stamps) plus once per "
               "CL_STATUS poll that finds the list running; on 32-bit ARM Linux the vDSO serves "
               "clock_gettime only from the architected timer, which the Cortex-A9 does not "
               "have, so each is a system call: assumed 1 us"),
    "c_poll_nap_us": dict(
        value=100.0, unit="us between CL_STATUS polls after the first", kind="derived",
        source="read off delegate/dtpu_cpath.c dtpu_cp_kick: on the board (a mapped window, no "
               "wait call) C sleeps the armed run's time (its cycles at clock_mhz) after the "
               "doorbell, reads CL_STATUS, and only if the list is not DONE yet sleeps 0.1 ms "
               "(nanosleep) between reads; the estimate's runs are the armed ones (DONE at the "
               "first read, one nap of the device time plus timer_slack_us)"),
    "timer_slack_us": dict(
        value=50.0, unit="us added to each nap", kind="cited",
        source="Linux's default timer slack of a normal thread, 50 us (man 2 prctl, "
               "PR_SET_TIMERSLACK: https://man7.org/linux/man-pages/man2/prctl.2.html): a "
               "nanosleep of 100 us wakes 100-150 us later"),
    "c_sync_call_us": dict(
        value=5.0, unit="us per cache maintenance call from C", kind="assumption",
        source="the flush of each input and the invalidate of each output as one system call "
               "on exactly their bytes: XRT's zocl driver, DRM_IOCTL_ZOCL_SYNC_BO "
               "(Xilinx/XRT src/runtime_src/core/edge/drm/zocl, zocl_sync_bo_ioctl: offset and "
               "size honoured, a DMA sync of that range); the lines walked are charged at "
               "cache_maint_MBps. No figure found for the call itself: assumed 5 us"),
    "c_delegate_call_us": dict(
        value=5.0, unit="us per delegated partition (C path)", kind="assumption",
        source="TFLite's interpreter calling the delegate kernel's invoke (a C function through "
               "its TfLiteRegistration), no Python crossing; assumed 5 us on the A9 (cpu_op_us "
               "charges 20 us for a builtin operator's whole dispatch)"),
    "c_fold_node_here_us": dict(
        value=9.5, unit="us of Python per node of a C run on this machine (amortized)",
        kind="measured",
        source="measured here, scaled to the A9 by python_a9_factor: C keeps up to 64 runs per "
               "partition and hands them to Python when its ring is full (pylib/dtpu/delegate/"
               "cpath.py CAPACITY), where every run is folded into a report "
               "(PartitionKernel.fold_c: counters, one record per node, the finished report) "
               "whether or not anyone reads it. The median fold of one run on this machine "
               "(backend=model, each run timed): 146 us for VWW 96 (14 nodes per partition, 514 "
               "runs), 38 us for MobileNet v2 224 (4.7 nodes per partition, 737 runs): about "
               "9.5 us per node. Paid only for the runs whose reports are read: with "
               "report=none (the default) C keeps its latest runs and Python folds them only "
               "when a report is read (docs/delegate.md, 'The C invoke path'); the comparison "
               "table's 'each report read' column charges it on every invoke"),
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


#: what every printed figure of this module carries: where it comes from and what it is not
LABEL = ("estimate: device cycles at the build's clock + counted host operations at PYNQ-Z2 "
         "Cortex-A9 costs + TFLite's CPU operators on that A9; not measured on a board "
         "(docs/board_estimate.md)")


# -- the arithmetic ------------------------------------------------------------------------------

def bytes_ms(nbytes: float, mbps: float) -> float:
    return nbytes / (mbps * 1e3)        # MB/s = 1e3 bytes/ms


def mmio_us(reads: float, writes: float, c: dict) -> float:
    """Microseconds of `reads` register reads and `writes` register writes."""
    return reads * c["mmio_read_us"] + writes * c["mmio_write_us"]


def _host(**parts: float) -> dict:
    """The host split (registers, dma, transforms, copies, completion in ms) with its total."""
    parts["total"] = sum(parts.values())
    return parts


def host_ms_12(ops: dict, c: dict) -> dict:
    """Host milliseconds of one job-by-job invoke (contract 1.2): register accesses, a STATUS
    poll per job, DMA transfers (their register accesses, a cache call and the bytes moved)
    and the host's layout steps. `ops` holds mmio_reads, mmio_writes, starts, dma_starts,
    dma_send_bytes, dma_recv_bytes, transforms, transform_bytes."""
    dma_us = mmio_us(c["dma_mmio_reads"], c["dma_mmio_writes"], c) + c["cache_op_us"]
    return _host(
        registers=(mmio_us(ops["mmio_reads"], ops["mmio_writes"], c)
                   + ops["starts"] * c["poll_reads_per_start"] * c["mmio_read_us"]) / 1e3,
        dma=ops["dma_starts"] * dma_us / 1e3 + bytes_ms(ops["dma_send_bytes"], c["copy_MBps"])
        + bytes_ms(ops["dma_recv_bytes"], c["uncached_read_MBps"]),
        transforms=ops["transforms"] * c["numpy_call_us"] / 1e3
        + bytes_ms(ops["transform_bytes"], c["transform_MBps"]),
        copies=0.0, completion=0.0)


def host_ms_20(ops: dict, c: dict) -> dict:
    """Host milliseconds of one command-list invoke (contract 2.0): the driver's register
    accesses, one completion per doorbell, the input copy into and the output copy out of the
    partitions' cacheable DDR buffer at memcpy rate, with a flush of the bytes copied in and
    an invalidate of the bytes copied out (a call each per partition, and the lines walked).
    `ops` holds mmio_reads, mmio_writes, doorbells, copy_in_bytes, copy_out_bytes, partitions."""
    moved = ops["copy_in_bytes"] + ops["copy_out_bytes"]
    return _host(
        registers=mmio_us(ops["mmio_reads"], ops["mmio_writes"], c) / 1e3,
        dma=0.0, transforms=0.0,
        copies=bytes_ms(moved, c["copy_MBps"]) + bytes_ms(moved, c["cache_maint_MBps"])
        + 2 * ops["partitions"] * c["cache_op_us"] / 1e3,
        completion=ops["doorbells"] * c["irq_wait_us"] / 1e3)


def host_ms_c(ops: dict, c: dict, device_ms: float, reports_read: float = 0.0) -> dict:
    """Host milliseconds of one command-list invoke on the C invoke path (delegate/dtpu_cpath.c
    on the board's mapped register window): its register accesses from C, the nap of the
    armed run's time past the doorbell (it overshoots by the timer slack; the first CL_STATUS
    read finds DONE), the copies at memcpy rate with one cache maintenance call per tensor on
    exactly its bytes, the C code itself, and the Python that folds a run into a report for
    the reports that are read (`reports_read` per invoke: 0 with report=none and no report
    read; 1 with report=summary, a report file, or a read after each invoke). `ops` as for :func:`host_ms_20`, plus
    `inputs` / `outputs` (tensors copied in and out, default one each per partition, as the
    copies' bytes are counted) and `nodes` (nodes of the partitions, default one each);
    `device_ms` is slept through, not the host's."""
    moved = ops["copy_in_bytes"] + ops["copy_out_bytes"]
    parts = ops["partitions"]
    syncs = ops.get("inputs", parts) + ops.get("outputs", parts)
    return _host(
        registers=(ops["mmio_reads"] * c["c_mmio_read_us"]
                   + ops["mmio_writes"] * c["c_mmio_write_us"]) / 1e3,
        dma=0.0, transforms=0.0,
        copies=bytes_ms(moved, c["copy_MBps"]) + bytes_ms(moved, c["cache_maint_MBps"])
        + syncs * c["c_sync_call_us"] / 1e3,
        completion=ops["doorbells"] * (c["timer_slack_us"] + c["c_clock_us"]) / 1e3,
        code=parts * (c["c_run_us"] + 5 * c["c_clock_us"]) / 1e3,
        python=reports_read * fold_ms(ops.get("nodes", parts), c))


def fold_ms(nodes: int, c: dict) -> float:
    """Milliseconds of Python that fold one C run of `nodes` nodes into its report (paid for
    the reports that are read)."""
    return nodes * c["c_fold_node_here_us"] * c["python_a9_factor"] / 1e3


def non_conv_ms(side: dict, c: dict) -> float:
    """Milliseconds of the non-convolution operators on the CPU (every path and TFLite pay them)."""
    return side["ops"] * c["cpu_op_us"] / 1e3 + bytes_ms(side["bytes"], c["cpu_op_MBps"])


def cpu_ops_ms(side: dict, c: dict) -> float:
    """Milliseconds of the operators left on the CPU (non-convolutions, unplaced convolutions)."""
    return non_conv_ms(side, c) + side["cpu_conv_macs"] / (c["tflite_a9_gmacs"] * 1e6)


def tflite_a9_ms(side: dict, c: dict, rate: str = "tflite_a9_gmacs") -> float:
    """TFLite alone on the A9: the model's convolution MACs at the int8 rate `rate` plus the
    same CPU-side operators the delegated paths keep, and those the delegate claims without
    computing them (folded PADs, views: `side["folded"]`), which TFLite alone runs."""
    folded = side.get("folded")
    return (side["model_macs"] / (c[rate] * 1e6) + non_conv_ms(side, c)
            + (non_conv_ms(folded, c) if folded else 0.0))


def row(path: str, cycles: int, ops: dict, side: dict, nparts: int, c: dict,
        device_ms: float | None = None) -> dict:
    """One estimate: device, host, CPU-side and whole-invoke milliseconds, TFLite and speedup.
    `path` "1.2" (job by job, Python), "2.0" (command lists, Python) or "c" (command lists on
    the C invoke path); `device_ms` defaults to the cycles at the board's fabric clock."""
    device = cycles / (c["fabric_mhz"] * 1e3) if device_ms is None else device_ms
    if path == "c":
        host = host_ms_c(ops, c, device)
        call_us = c["c_delegate_call_us"]
    else:
        host = host_ms_12(ops, c) if path == "1.2" else host_ms_20(ops, c)
        call_us = c["py_partition_here_us"] * c["python_a9_factor"]
    cpu = cpu_ops_ms(side, c) + nparts * call_us / 1e3
    whole = device + host["total"] + cpu
    tfl, slow = tflite_a9_ms(side, c), tflite_a9_ms(side, c, "a9_measured_gmacs")
    return dict(path=path, cycles=int(cycles), device_ms=device, host_ms=host["total"], host=host,
                cpu_ms=cpu, whole_ms=whole, tflite_ms=tfl, speedup=tfl / whole,
                tflite_slow_ms=slow, speedup_slow=slow / whole, ops=ops)


# -- what the delegate saw of the graph ------------------------------------------------------------

#: TFLite builtin codes of the operators the delegate may claim (CONV_2D, DEPTHWISE_CONV_2D,
#: FULLY_CONNECTED)
CONV_CODES = {3: "conv", 4: "depthwise", 9: "fully_connected"}


def _conv_macs(code: int, node, tensor) -> int:
    """MACs of a convolution node from its tensors' shapes (TFLite layouts: CONV_2D filters
    O x KH x KW x I, DEPTHWISE_CONV_2D 1 x KH x KW x C*M, FULLY_CONNECTED O x I)."""
    out = tensor(node.outputs[0]).shape
    w = tensor(node.inputs[1]).shape
    n_out = 1
    for d in out:
        n_out *= int(d)
    if code == 3 and len(w) == 4:
        return n_out * int(w[1]) * int(w[2]) * int(w[3])
    if code == 4 and len(w) == 4:
        return n_out * int(w[1]) * int(w[2])
    if code == 9 and len(w) == 2:
        return n_out * int(w[1])
    raise ValueError(f"filter shape {tuple(w)} does not fit builtin {code}")


def cpu_side_of_graph(nodes: Iterable, tensor, claimed: Iterable[int]) -> dict:
    """What TFLite runs on the CPU around the delegate's partitions, from the nodes of its
    execution plan (dtpu.delegate.graph.NodeInfo: builtin_code, inputs, outputs) and a tensor
    reader (index -> TensorInfo: shape, nbytes, constant): the non-convolution operators (count,
    opcodes, bytes of their non-constant inputs and outputs) and the MACs of the convolutions,
    all of them (the TFLite baseline) and those left on the CPU."""
    from dtpu.tflite_model import BUILTIN_OPERATORS   # names only; lazily, at Prepare

    claimed = set(claimed)
    ops, nbytes, names = 0, 0, {}
    folded = dict(ops=0, bytes=0)
    model_macs = cpu_conv_macs = 0
    for node in nodes:
        code = node.builtin_code
        if code in CONV_CODES:
            try:
                macs = _conv_macs(code, node, tensor)
            except (ValueError, IndexError):
                macs = 0
            model_macs += macs
            if node.index not in claimed:
                cpu_conv_macs += macs
            continue
        touched = 0
        for i in list(node.inputs) + list(node.outputs):
            if i < 0:
                continue
            try:
                t = tensor(i)
            except IndexError:
                continue
            if not t.constant:
                touched += int(t.nbytes)
        if node.index in claimed:    # a folded PAD or a view: TFLite alone would run it
            folded["ops"] += 1
            folded["bytes"] += touched
            continue
        ops += 1
        nbytes += touched
        op = BUILTIN_OPERATORS[code] if 0 <= code < len(BUILTIN_OPERATORS) else f"BUILTIN_{code}"
        names[op] = names.get(op, 0) + 1
    return dict(ops=ops, bytes=nbytes, opcodes=names, model_macs=model_macs,
                placed_macs=model_macs - cpu_conv_macs, cpu_conv_macs=cpu_conv_macs,
                folded=folded)


# -- one delegate report --------------------------------------------------------------------------

def for_report(report, c: dict | None = None) -> dict | None:
    """The whole invoke on the PYNQ-Z2 for one delegate report (dtpu.report.Report), priced on
    the path the report ran (lists on the C invoke path or from Python: contract 2.0, jobs:
    contract 1.2), or None when the report
    has no device cycles or host counts (backends without a device protocol).

    Device time is the report's own (cycles at the delegate's clock_mhz, the build's clock by
    default); host operations are the report's `host` record; the copies are the bytes the
    partitions' inputs and outputs hold (`io_bytes`); the CPU side is what the delegate saw of
    the graph at Prepare (`cpu_side`). The 1.2 layout steps are charged their fixed part only
    (the report does not count the bytes they write): listed under `not_counted`."""
    c = costs() if c is None else c
    hw, host = report.hw, report.host
    cycles, latency = hw.get("cycles"), hw.get("latency_us")
    if cycles is None or host.get("doorbells") is None or report.path not in ("lists", "jobs"):
        return None
    side = getattr(report, "cpu_side", None)
    not_counted = []
    if side is None:
        side = dict(ops=0, bytes=0, opcodes={}, model_macs=hw.get("macs") or 0,
                    placed_macs=hw.get("macs") or 0, cpu_conv_macs=0)
        not_counted.append("operators outside the partitions (not seen at Prepare)")
    nparts = report.kernels or 1
    if report.path == "lists":
        io_in, io_out = getattr(report, "io_bytes", None) or (0, 0)
        ops = dict(mmio_reads=host["mmio_reads"], mmio_writes=host["mmio_writes"],
                   doorbells=host["doorbells"], copy_in_bytes=io_in, copy_out_bytes=io_out,
                   partitions=nparts, nodes=len(report.nodes) or nparts)
        # every partition ran on the C invoke path when the report holds no Python time
        path = "c" if not (report.timing_us or {}).get("python") else "2.0"
    else:
        words_in, words_out = hw.get("words_in") or {}, hw.get("words_out") or {}
        ops = dict(mmio_reads=host["mmio_reads"], mmio_writes=host["mmio_writes"],
                   starts=host["doorbells"], dma_starts=host["dma_starts"] or 0,
                   dma_send_bytes=8 * sum(words_in.values()),
                   dma_recv_bytes=8 * sum(words_out.values()),
                   transforms=host["transforms"] or 0, transform_bytes=0)
        not_counted.append("bytes written by the host's layout steps")
        path = "1.2"
    out = row(path, cycles, ops, side, nparts, c,
              device_ms=None if latency is None else latency / 1e3)
    out["clock_mhz"] = cycles / latency if latency else c["fabric_mhz"]
    out["not_counted"] = not_counted
    out["cpu_side"] = side
    return out


#: how a report's estimate names the path it priced
PATH_NAMES = {"1.2": "1.2 path", "2.0": "2.0 path from Python", "c": "2.0 path in C"}


def report_lines(est: dict[str, Any]) -> list[str]:
    """The two lines every report prints: device time at the build's clock, and the whole
    invoke on the PYNQ-Z2 beside TFLite alone on its A9, labelled as estimates."""
    side = est["cpu_side"]
    cpu_ops = ", ".join(f"{k} x{v}" for k, v in sorted(side["opcodes"].items())) or "none"
    lines = [f"device time at {est['clock_mhz']:g} MHz: {est['device_ms']:.3f} ms per invoke "
             f"({est['cycles']:,} cycles)",
             f"estimated whole invoke on the PYNQ-Z2: {est['whole_ms']:.2f} ms = device "
             f"{est['device_ms']:.2f} + host {est['host_ms']:.2f} ({PATH_NAMES[est['path']]}) + CPU "
             f"operators and delegate calls {est['cpu_ms']:.2f}; TFLite alone on its Cortex-A9 "
             f"{est['tflite_ms']:.2f} ms (int8 rate; {est['tflite_slow_ms']:.1f} ms at the slow "
             f"end): {est['speedup']:.2f}x ({est['speedup_slow']:.1f}x) [{LABEL}]",
             f"  CPU operators outside the partitions: {cpu_ops}"]
    if est["not_counted"]:
        lines.append("  not in the estimate: " + "; ".join(est["not_counted"]))
    return lines
