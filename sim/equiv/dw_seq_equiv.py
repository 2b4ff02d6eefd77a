"""Run sim/equiv/tb_dw_seq_equiv.sv: this tree's dtpu_dw_seq against the same file at a git
revision (default `main`), side by side under one Verilator binary, on random DWCONV jobs.

Why: a change meant to keep the sequencer's behaviour (narrowing its widths to what a job that
passed the CONFIG checks needs) is proven there cycle by cycle on every output the core reads,
including corners the cocotb regressions do not reach (the widest column coordinate, the ring
and weight bounds at the board's memory sizes). Not part of the test suite (a few minutes):

    python sim/equiv/dw_seq_equiv.py --base 8fdb29b
"""
import argparse
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "pylib"))
from dtpu.rtl.build import ensure_verilator  # noqa: E402

log = logging.getLogger("dw_seq_equiv")

# (name, parameters, jobs, cycle limit a job): the cocotb tests' small memories and the board's
RUNS = [
    ("rotated, small memories", {"ROT": 1}, 2000, 6000),
    ("banked, small memories", {"ROT": 0}, 2000, 6000),
    ("rotated, board memories", {"ROT": 1, "LAW": 12, "LWW": 15, "LPE": 12}, 100, 300000),
    ("banked, board memories", {"ROT": 0, "LAW": 12, "LWW": 15, "LPE": 12}, 100, 300000),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="git revision of the reference dtpu_dw_seq.v")
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    exe = ensure_verilator()
    old = subprocess.run(["git", "-C", str(ROOT), "show", f"{args.base}:hw/rtl/dtpu_dw_seq.v"],
                         check=True, capture_output=True, text=True).stdout
    env = dict(os.environ)
    env["MAKEFLAGS"] = (env.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include").strip()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="dw_seq_equiv_") as tmp:
        work = Path(tmp)
        (work / "dtpu_dw_seq_old.v").write_text(
            old.replace("module dtpu_dw_seq #", "module dtpu_dw_seq_old #", 1))
        for i, (name, params, jobs, maxcyc) in enumerate(RUNS):
            mdir = work / f"obj{i}"
            g = [f"-G{k}={v}" for k, v in {**params, "NJOBS": jobs, "MAXCYC": maxcyc,
                                            "SEED": args.seed + i}.items()]
            cmd = [exe, "--binary", "--timing", "-CFLAGS", "-fcoroutines", "-Wno-fatal", "-Wno-lint",
                   "-Wno-style", f"-I{ROOT / 'hw' / 'rtl'}", "--top-module", "tb_dw_seq_equiv", *g,
                   str(ROOT / "sim" / "equiv" / "tb_dw_seq_equiv.sv"),
                   str(ROOT / "hw" / "rtl" / "dtpu_dw_seq.v"), str(work / "dtpu_dw_seq_old.v"),
                   "-Mdir", str(mdir), "-j", "1"]
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            r = subprocess.run([str(mdir / "Vtb_dw_seq_equiv")], capture_output=True, text=True)
            summary = [ln for ln in r.stdout.splitlines() if ln.startswith(("DONE", "valid", "MISMATCH"))]
            log.info("%s: %s", name, "; ".join(summary[-2:]))
            if r.returncode != 0:
                failed += 1
                log.error("%s: differs from %s\n%s", name, args.base, "\n".join(summary[:20]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
