"""The `dtpu` command: --help of the command and of every subcommand, and the behaviour of doctor,
bench, sim, synth and isro (exit codes and messages a script can rely on). `dtpu run` has its own
tests (tests/test_cli_run.py)."""
from __future__ import annotations

import argparse
import re
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dtpu import cli

ROOT = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ("build", "path", "install", "uninstall", "run", "estimate", "bench", "sim", "synth", "isro", "doctor")


def _dtpu(*args, env=None, timeout=300):
    e = {k: v for k, v in os.environ.items() if k not in ("DTPU_PYNQ_EMULATE", "DTPU_BITSTREAM")}
    e["PYTHONPATH"] = str(ROOT / "pylib") + os.pathsep + str(ROOT)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "dtpu.cli", *args], env=e, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _all_parsers():
    """(command words, parser) for dtpu and every (nested) subcommand."""
    out, todo = [], [((), cli.parser())]
    while todo:
        words, p = todo.pop()
        out.append((words, p))
        todo.extend((words + (name,), sub) for name, sub in _subparsers(p).items())
    return out


# -- --help --------------------------------------------------------------------------------------

def test_top_level_help_lists_every_subcommand_and_the_exit_codes():
    proc = _dtpu("--help")
    assert proc.returncode == 0 and proc.stderr == ""
    for command in SUBCOMMANDS:
        assert re.search(rf"\n    {command}\s", proc.stdout), command   # name, then its help
    assert "exit codes: 0 success" in proc.stdout.replace("\n", " ")


def test_every_subcommand_is_registered():
    assert set(_subparsers(cli.parser())) == set(SUBCOMMANDS)


@pytest.mark.parametrize("words,p", [(w, p) for w, p in _all_parsers() if w],
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_option_and_subcommand_has_help(words, p):
    """Each option and positional explains itself, and `dtpu ... --help` prints it."""
    text = p.format_help()
    assert text.startswith(f"usage: dtpu {' '.join(words)}")
    for action in p._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        assert action.help and action.help.strip(), f"dtpu {' '.join(words)}: {action.dest} has no help"
        for option in action.option_strings:
            assert option in text
    for name, sub in _subparsers(p).items():
        assert name in text and sub.description or sub.format_help()


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_subcommand_help_runs(command):
    proc = _dtpu(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: dtpu {command}")


def test_no_command_prints_help_and_exits_2():
    proc = _dtpu()
    assert proc.returncode == 2 and "usage: dtpu" in proc.stdout


def test_unknown_command_and_bad_option_exit_2():
    assert _dtpu("frobnicate").returncode == 2
    proc = _dtpu("doctor", "--no-such-option")
    assert proc.returncode == 2 and "unrecognized arguments: --no-such-option" in proc.stderr


# -- doctor -------------------------------------------------------------------------------------

def test_doctor_reports_what_is_installed():
    proc = _dtpu("doctor", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    items = {r["item"]: r for r in report["checks"]}
    assert report["ok"] is True
    for item in ("python", "libpython (shared)", "Python headers", "numpy", "cffi", "TFLite runtime", "C compiler",
                 "dtpu.so", "backends", "Verilator", "cocotb", "yosys", "Vivado", "pynq", "board"):
        assert item in items, item
        assert items[item]["status"] in ("ok", "missing", "info")
    from dtpu import tflite

    assert items["TFLite runtime"]["detail"] == tflite.runtime_version()
    assert items["board"]["detail"].startswith(("absent", "present"))
    assert items["Python headers"]["status"] == "ok"   # this machine builds dtpu.so


def test_doctor_names_missing_python_headers(monkeypatch, tmp_path):
    """dtpu.so is compiled against Python.h: an image without python3-dev (the PYNQ image until
    step 2 of docs/board.md) gets a required row saying what to install."""
    import sysconfig

    from dtpu.cli import doctor_checks

    paths = dict(sysconfig.get_paths(), include=str(tmp_path))
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: paths)
    row = next(r for r in doctor_checks() if r["item"] == "Python headers")
    assert row["status"] == "missing" and row["required"]
    assert f"no Python.h in {tmp_path}" in row["detail"] and "apt-get install python3-dev" in row["detail"]


def test_doctor_table_and_emulated_board():
    proc = _dtpu("doctor", env={"DTPU_PYNQ_EMULATE": "1"})
    assert proc.returncode == 0
    assert "board" in proc.stdout and "emulated" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("dtpu doctor: everything the delegate needs")


def test_doctor_exits_1_naming_a_missing_required_part():
    proc = _dtpu("doctor", env={"DTPU_TFLITE_RUNTIME": "no_such_runtime"})
    assert proc.returncode == 1
    assert "!!  TFLite runtime" in proc.stdout
    assert "missing: TFLite runtime" in proc.stdout


def test_doctor_load_loads_the_delegate():
    proc = _dtpu("doctor", "--load", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    items = {r["item"]: r for r in json.loads(proc.stdout)["checks"]}
    assert items["dtpu.so loads"]["status"] == "ok"


# -- bench --------------------------------------------------------------------------------------

def test_bench_list_and_unknown():
    proc = _dtpu("bench", "--list")
    assert proc.returncode == 0
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names == sorted(p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py"))
    proc = _dtpu("bench", "nonesuch")
    assert proc.returncode == 2 and "unknown benchmark 'nonesuch'" in proc.stderr


def test_bench_runs_one_benchmark_with_its_arguments():
    proc = _dtpu("bench", "pack", "--", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "== pack (benchmarks/bench_pack.py)" in proc.stdout and "usage:" in proc.stdout
    proc = _dtpu("bench", "pack", "--", "--no-such-flag")
    assert proc.returncode == 1 and "failed: pack (exit 2)" in proc.stderr
    proc = _dtpu("bench", "pack", "utilization", "--", "--x")
    assert proc.returncode == 2 and "name exactly one" in proc.stderr


# -- sim ----------------------------------------------------------------------------------------

def test_sim_collects_the_regressions():
    proc = _dtpu("sim", "--", "--collect-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # sim/test_vec.py has default tests (sim/test_top.py's 1.2-top runs are all slow now)
    assert "sim/test_vec.py::" in proc.stdout and "-m not slow" in proc.stderr


def test_sim_exit_1_when_nothing_runs():
    proc = _dtpu("sim", "-k", "no_test_is_called_this")
    assert proc.returncode == 1


# -- synth --------------------------------------------------------------------------------------

FAKE_YOSYS = """#!/bin/sh
# stand-in for yosys: writes a `stat` table where the script's `tee -o` points
script="$3"
out=$(printf '%s' "$script" | sed -n 's/.*tee -q -o \\([^;]*\\) stat.*/\\1/p')
printf '   LUT6  %s\\n   FDRE  200\\n   DSP48E1  8\\n   RAMB36E1  4\\n' "$DTPU_FAKE_LUTS" > "$out"
"""


def test_synth_without_yosys_exits_2(tmp_path):
    proc = _dtpu("synth", "--cols", "8", env={"PATH": str(tmp_path)})
    assert proc.returncode == 2 and "no yosys on PATH" in proc.stderr


@pytest.mark.skipif(not (ROOT / "hw" / "synth" / "synth.py").exists(), reason="no hw/synth/synth.py")
def test_synth_tabulates_what_yosys_reports(tmp_path):
    fake = tmp_path / "bin" / "yosys"
    fake.parent.mkdir()
    fake.write_text(FAKE_YOSYS)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    results = tmp_path / "results.json"
    proc = _dtpu("synth", "--cols", "4", "8", "--results", str(results),
                 env={"PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}", "DTPU_FAKE_LUTS": "1234"})
    assert proc.returncode == 0, proc.stderr
    assert "| 8x4 | 1234 (2 %) |" in proc.stdout and "| 8x8 | 1234 (2 %) |" in proc.stdout
    assert set(json.loads(results.read_text())) == {"4", "8"}


# -- isro ---------------------------------------------------------------------------------------

def test_isro_through_dtpu(tmp_path):
    out = tmp_path / "bundle"
    proc = _dtpu("isro", "compile", str(ROOT / "tests" / "isro" / "alexnet_s.h5"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "instructions" in proc.stdout and (out / "program.lst").exists()
    proc = _dtpu("isro", "run", str(tmp_path / "missing"))
    assert proc.returncode == 2 and proc.stderr.startswith("error:")
