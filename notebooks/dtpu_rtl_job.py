"""Run DTPU jobs through the Verilog core (hw/rtl, top ``dtpu_axi``) under cocotb + Verilator, with
a VCD of the run, and read that VCD back: the machinery behind notebook 04_rtl.ipynb.

Host side (a notebook, a script)::

    from dtpu_rtl_job import run_on_rtl, read_vcd
    run = run_on_rtl(jobs, cfg)          # builds once (cached under sim_build/), then simulates
    run.results, run.counters, run.vcd   # result words per job, the core's counters, dump.vcd
    waves = read_vcd(run.vcd, ["clk", "s_axis_act_tvalid"], scope="dtpu_axi")

Simulator side: :func:`run_jobs_from_file` is the cocotb test; it unpickles the jobs named by
``$DTPU_NB_REQUEST``, drives them with the project's own job driver (:func:`dtpu.driver.run_jobs`
through the sim harness's AXI models, the same register sequence the board sees) and pickles the
results next to it.
"""
from __future__ import annotations

import os
import pickle
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (ROOT / "sim", ROOT / "pylib"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

#: small memories keep the Verilator build short (the regressions use the same, sim/test_top.py)
SMALL_MEMORIES = {"LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


@dataclass
class RtlRun:
    results: list            # per job: result words (numpy uint64) or None
    counters: dict           # the core's counters over all jobs (cycles, stall_cycles, words)
    job_windows: list        # per job: (label, start ns, end ns) of simulated time
    vcd: Path | None         # the waveform (None when built without waves)
    build_s: float = 0.0     # wall time of the build step (about 0 once cached)
    sim_s: float = 0.0       # wall time of the simulation
    log: Path | None = None
    extra: dict = field(default_factory=dict)


def run_on_rtl(jobs, cfg, waves: bool = True, work: str | os.PathLike | None = None) -> RtlRun:
    """Build dtpu_axi for `cfg` (COLS and memory sizes) and run `jobs` on it; see module doc."""
    from dtpu_sim import build, ensure_verilator
    from cocotb_tools.runner import get_runner

    ensure_verilator()
    params = {"COLS": cfg.COLS, "LOG_WEIGHT_WORDS": cfg.LOG_WEIGHT_WORDS,
              "LOG_PARAM_ENTRIES": cfg.LOG_PARAM_ENTRIES, "LOG_ACT_WORDS": cfg.LOG_ACT_WORDS}
    old = os.environ.get("WAVES")
    os.environ["WAVES"] = "1" if waves else "0"
    try:
        t0 = time.time()
        build_dir = build("dtpu_axi", params, name="top")  # shared with sim/test_top.py
        build_s = time.time() - t0
    finally:
        if old is None:
            os.environ.pop("WAVES", None)
        else:
            os.environ["WAVES"] = old
    work = Path(work) if work is not None else build_dir / "nb_run"
    work.mkdir(parents=True, exist_ok=True)
    request, reply = work / "request.pkl", work / "reply.pkl"
    reply.unlink(missing_ok=True)
    (work / "dump.vcd").unlink(missing_ok=True)
    with request.open("wb") as fh:
        pickle.dump({"params": params, "jobs": list(jobs)}, fh)
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT / "sim"), str(ROOT / "pylib"), *sys.path]),
           "DTPU_NB_REQUEST": str(request), "DTPU_NB_REPLY": str(reply)}
    t0 = time.time()
    get_runner("verilator").test(test_module="dtpu_rtl_job", hdl_toplevel="dtpu_axi",
                                 hdl_toplevel_lang="verilog", build_dir=build_dir, test_dir=work,
                                 testcase="run_jobs_from_file", extra_env=env, waves=waves,
                                 parameters=params, log_file=work / "sim.log")
    sim_s = time.time() - t0
    if not reply.exists():
        raise RuntimeError(f"the RTL run produced no results; see {work / 'sim.log'}")
    with reply.open("rb") as fh:
        out = pickle.load(fh)
    if out.get("error"):
        raise RuntimeError(f"the RTL run failed: {out['error']} (log: {work / 'sim.log'})")
    vcd = work / "dump.vcd"
    return RtlRun(out["results"], out["counters"], out["windows"], vcd if vcd.exists() else None,
                  build_s, sim_s, work / "sim.log")


# -- VCD ----------------------------------------------------------------------------------------

@dataclass
class Signal:
    name: str
    width: int
    times: list          # change times, in the VCD's timescale units
    values: list         # int values (x/z read as 0) at those times

    def at(self, t) -> int:
        import bisect
        i = bisect.bisect_right(self.times, t) - 1
        return self.values[i] if i >= 0 else 0

    def steps(self, t0, t1):
        """(times, values) clipped to [t0, t1] for a step plot."""
        import bisect
        i0 = max(bisect.bisect_right(self.times, t0) - 1, 0)
        i1 = bisect.bisect_right(self.times, t1)
        ts = [t0] + [t for t in self.times[i0 + 1:i1]] + [t1]
        vs = [self.at(t0)] + self.values[i0 + 1:i1] + [self.at(t1)]
        return ts, vs


def read_vcd(path, names: list[str], scope: str | None = None) -> tuple[dict[str, Signal], str]:
    """The named signals of a VCD (first match of each name, in `scope` if given) and the timescale.

    A minimal reader for what Verilator writes: $scope/$var/$upscope headers, then #time lines and
    value changes (``0!``, ``b1010 "``). x and z bits read as 0.
    """
    want = set(names)
    ids: dict[str, list[str]] = {}
    sigs: dict[str, Signal] = {}
    timescale = "1ps"
    stack: list[str] = []
    t = 0
    with open(path) as fh:
        header = True
        pending = ""
        for line in fh:
            if header:
                pending += line
                if "$end" not in line:
                    continue
                tok = pending.split()
                pending = ""
                if not tok:
                    continue
                if tok[0] == "$timescale":
                    timescale = "".join(tok[1:-1])
                elif tok[0] == "$scope":
                    stack.append(tok[2])
                elif tok[0] == "$upscope":
                    stack.pop()
                elif tok[0] == "$var":
                    width, code, name = int(tok[2]), tok[3], tok[4]
                    if name in want and name not in sigs and (scope is None or (stack and stack[-1] == scope)):
                        sigs[name] = Signal(name, width, [], [])
                        ids.setdefault(code, []).append(name)
                elif tok[0] == "$enddefinitions":
                    header = False
                continue
            line = line.strip()
            if not line:
                continue
            c = line[0]
            if c == "#":
                t = int(line[1:])
            elif c in "01xzXZ":
                for name in ids.get(line[1:], ()):
                    _change(sigs[name], t, 1 if c == "1" else 0)
            elif c in "bB":
                bits, _, code = line[1:].partition(" ")
                names_ = ids.get(code)
                if names_:
                    v = int(bits.replace("x", "0").replace("z", "0").replace("X", "0").replace("Z", "0"), 2)
                    for name in names_:
                        _change(sigs[name], t, v)
    missing = want - set(sigs)
    if missing:
        raise KeyError(f"not in {path}: {', '.join(sorted(missing))}")
    return sigs, timescale


def _change(s: Signal, t: int, v: int) -> None:
    if s.times and s.times[-1] == t:
        s.values[-1] = v
    elif not s.values or s.values[-1] != v:
        s.times.append(t)
        s.values.append(v)


# -- the cocotb test ----------------------------------------------------------------------------

try:
    import cocotb
except ImportError:  # host side without cocotb: only run_on_rtl's callers need it
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def run_jobs_from_file(dut):
        """Run the pickled jobs with dtpu.driver.run_job through the AXI models; pickle the results."""
        from cocotb.utils import get_sim_time

        from dtpu.driver import run_job
        from dtpu.driver.jobs import counter_delta, read_counters
        from dtpu.hw.config import HwConfig
        from dtpu_sim.axi import BridgeTransport, DtpuTB

        with open(os.environ["DTPU_NB_REQUEST"], "rb") as fh:
            req = pickle.load(fh)
        cfg = HwConfig(**req["params"])
        tb = DtpuTB(dut, cfg)
        await tb.reset()
        out = {"results": [], "windows": [], "counters": {}, "error": None}

        @cocotb.task.bridge
        def drive(t, job):
            return run_job(t, job)

        @cocotb.task.bridge
        def counters(t):
            return read_counters(t)

        t = BridgeTransport(tb)
        try:
            before = await counters(t)
            for job in req["jobs"]:
                start = get_sim_time("ns")
                out["results"].append(await drive(t, job))
                out["windows"].append((job.label, start, get_sim_time("ns")))
            out["counters"] = vars(counter_delta(before, await counters(t)))
        except Exception as exc:  # reported to the host, which raises it
            out["error"] = f"{type(exc).__name__}: {exc}"
        with open(os.environ["DTPU_NB_REPLY"], "wb") as fh:
            pickle.dump(out, fh)
        assert out["error"] is None, out["error"]
