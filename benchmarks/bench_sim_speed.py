#!/usr/bin/env python3
"""Simulated cycles per second in process: the contract-2.0 top (dtpu_cl_top with the C++
memory model, NativeListTransport) on a long LOAD list, against the 1.2 top (dtpu_axi,
NativeTransport) moving the same words through s_axis_wgt as LOAD_WGT jobs.

Both are the board's build unless ``--small``: COLS 8, every precision (PREC_EN 0x7F), the
contract's memory sizes. Figures printed, nothing asserted:

* lists, contract memory: a list of LOADs (weights, up to WEIGHT_WORDS words each) of
  ``--words`` words in all, the memory model at contract2.memory_model's latency; cycles/s
  = CL_CYCLES-long wait_list runs over their wall time (the clock loop, the memory model and
  the doorbell wait all in C++);
* lists, idle: the clock with nothing to do (the 2.0 top's raw Verilator speed);
* 1.2 jobs: LOAD_WGT jobs of the same sizes through the stream queue of native.cpp
  (register writes, START, the words, the wait for DONE), cycles/s over their wall time.

docs/rtl.md ("In-process lists transport") quotes the figures of this machine.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))

log = logging.getLogger("bench_sim_speed")
U64 = np.dtype("<u8")


def lists_speed(config, words: int, stall: float) -> dict:
    from dtpu.hw.executor import Executor
    from dtpu.hw.listformat import Format
    from dtpu.rtl.build import build_native_cl
    from dtpu.rtl.native import NativeListTransport

    t0 = time.perf_counter()
    info = build_native_cl(config)
    build_s = time.perf_counter() - t0
    cfg = config.hw_config()
    fmt = Format(cfg)
    chunk = min(cfg.WEIGHT_WORDS, 4096)
    n_loads = -(-words // chunk)
    t = NativeListTransport(cfg, info.product, ddr_bytes=max(1 << 20, 8 * chunk * 4 + (1 << 20)),
                            stall=stall, seed=1, timeout_cycles=1 << 40)
    data = t.alloc_buffer(8 * chunk * 4)
    data.array[:] = np.random.default_rng(0).integers(0, 256, data.array.size, dtype=np.uint8)
    desc = []
    for i in range(n_loads):
        n = min(chunk, words - i * chunk)
        hdr = fmt.word("HEADER", OP=fmt.opcodes["LOAD"], LEN=fmt.length("LOAD"), TAG=i)
        desc += [hdr, fmt.word("LOAD1", SRC=data.addr + 8 * chunk * (i % 4), COUNT=n),
                 fmt.word("LOAD2", MEM=0, ADDR=(i * chunk) % (cfg.WEIGHT_WORDS - chunk + 1), AFTER=0)]
    desc.append(fmt.word("HEADER", OP=fmt.opcodes["END"], LEN=fmt.length("END"), TAG=0xFFFF))
    lst = t.alloc_buffer(8 * len(desc))
    lst.array[:8 * len(desc)] = np.array(desc, U64).view(np.uint8)
    off = {n: fmt.reg_offset(n) for n in ("CL_BASE", "DOORBELL", "CL_ERR", "CL_CYCLES_LO",
                                           "CL_CYCLES_HI", "RD_BEATS", "IRQ")}
    t.write_reg(off["IRQ"], 1)
    t.write_reg(off["CL_BASE"], lst.addr)
    c0, w0 = t.cycle, time.perf_counter()
    t.write_reg(off["DOORBELL"], 1)
    t.wait_list(3600.0)
    wall, cycles = time.perf_counter() - w0, t.cycle - c0
    err = t.read_reg(off["CL_ERR"])
    cl_cycles = t.read_reg(off["CL_CYCLES_LO"]) | t.read_reg(off["CL_CYCLES_HI"]) << 32
    beats = t.read_reg(off["RD_BEATS"])
    # the golden model on the same bytes: its CL_CYCLES for the same list (memory model timing)
    from dtpu.hw.core import Core

    class _Ddr:                       # the HP port's view of the simulated DDR
        def read(self, a, n):
            return t.ddr.view(a, n)

        def write(self, a, d):
            t.ddr.view(a, d.nbytes)[:] = np.ascontiguousarray(d).view(np.uint8).reshape(-1)

    model_cycles = Executor(Core(cfg), fmt).run(_Ddr(), lst.addr).cycles
    # idle: the clock alone
    w1 = time.perf_counter()
    idle_cycles = t._lib.dtpu_run(t._h, 1_000_000, 0)
    idle_wall = time.perf_counter() - w1
    t.close()
    return {"build": info, "build_s": build_s, "words": words, "loads": n_loads, "err": err,
            "model_cycles": model_cycles,
            "cycles": cycles, "cl_cycles": cl_cycles, "rd_beats": beats, "wall": wall,
            "rate": cycles / wall, "idle_rate": idle_cycles / idle_wall}


def jobs_speed(config, words: int) -> dict:
    from dtpu.rtl.build import build_native
    from dtpu.rtl.native import NativeTransport

    t0 = time.perf_counter()
    info = build_native(config)
    build_s = time.perf_counter() - t0
    cfg = config.hw_config()
    chunk = min(cfg.WEIGHT_WORDS, 4096)
    t = NativeTransport(cfg, info.product)
    rng = np.random.default_rng(0)
    src = rng.integers(0, 1 << 63, chunk, dtype=np.uint64).astype(U64)
    opcode = cfg.enums["OPCODE"]["LOAD_WGT"]
    c0, w0 = t.cycle, time.perf_counter()
    done = 0
    i = 0
    while done < words:
        n = min(chunk, words - done)
        t.write_reg(cfg.reg("LOAD_ADDR").offset, (i * chunk) % (cfg.WEIGHT_WORDS - chunk + 1))
        t.write_reg(cfg.reg("LOAD_COUNT").offset, n)
        t.write_reg(cfg.reg("JOB").offset, cfg.encode("JOB", OPCODE=opcode))
        t.write_reg(cfg.REG_CTRL, cfg.encode("CTRL", START=1))
        t.send("wgt", src[:n])
        if not t.wait_done(600.0):
            raise RuntimeError(f"LOAD_WGT job {i} did not finish: {t.describe()}")
        err = t.read_reg(cfg.REG_ERR)
        if err:
            raise RuntimeError(f"LOAD_WGT job {i}: ERR={err:#x}")
        done += n
        i += 1
    wall, cycles = time.perf_counter() - w0, t.cycle - c0
    w1 = time.perf_counter()
    idle_cycles = t._lib.dtpu_run(t._h, 1_000_000, 0)
    idle_wall = time.perf_counter() - w1
    t.close()
    return {"build": info, "build_s": build_s, "jobs": i, "cycles": cycles, "wall": wall,
            "rate": cycles / wall, "idle_rate": idle_cycles / idle_wall}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=1 << 20, help="64-bit words the LOADs move")
    ap.add_argument("--small", action="store_true",
                    help="memories 2^10/2^8/2^9 instead of the contract's (faster builds)")
    ap.add_argument("--stall", type=float, default=0.0,
                    help="the memory model's stall probability (0: the contract's memory)")
    ap.add_argument("--no-12", dest="jobs", action="store_false",
                    help="skip the 1.2 top (dtpu_axi) comparison (it is a build of its own)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from dtpu.rtl.build import SimConfig

    config = SimConfig.from_mxu((8, 8), memory=(10, 8, 9) if args.small else None)
    r = lists_speed(config, args.words, args.stall)
    b = r["build"]
    log.info(f"dtpu_cl_top {b.parameters}: {'cached' if b.cached else f'built in {b.seconds:.0f} s'}")
    log.info(f"lists (dtpu_cl_top + C++ memory model, stall {args.stall}): {r['loads']} LOADs, "
             f"{r['words']} words, CL_ERR {r['err']:#x}, CL_CYCLES {r['cl_cycles']} (golden model "
             f"{r['model_cycles']}), RD_BEATS "
             f"{r['rd_beats']}, {r['cycles']} simulated cycles in {r['wall']:.2f} s: "
             f"{r['rate']:,.0f} cycles/s (idle clock: {r['idle_rate']:,.0f} cycles/s)")
    if args.jobs:
        j = jobs_speed(config, args.words)
        b = j["build"]
        log.info(f"dtpu_axi {b.parameters}: {'cached' if b.cached else f'built in {b.seconds:.0f} s'}")
        log.info(f"1.2 jobs (dtpu_axi, LOAD_WGT through s_axis_wgt): {j['jobs']} jobs, "
                 f"{args.words} words, {j['cycles']} simulated cycles in {j['wall']:.2f} s: "
                 f"{j['rate']:,.0f} cycles/s (idle clock: {j['idle_rate']:,.0f} cycles/s)")
        log.info(f"lists / 1.2: {r['rate'] / j['rate']:.2f}x (busy), "
                 f"{r['idle_rate'] / j['idle_rate']:.2f}x (idle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
