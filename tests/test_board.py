"""backend=pynq on the emulated PYNQ-Z2 (dtpu.board.emulate): the board transport's exact
register and DMA sequence, run against the golden model behind emulated AXI DMAs.

The board code does not know it is emulated: the real `pynq` package, whose active device is the
emulated board (dtpu.board.emulate.device), and an emulated overlay (.bit with placeholder
configuration data + .hwh of the hw/overlays design) that pynq.Overlay parses and downloads. A
whole zoo model through the delegate must equal the CPU interpreter bit for bit, with the same
cycles as backend=model. Without pynq installed (the LiteRT venv) the emulated-board tests skip.
"""
from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dtpu.board import design
from dtpu.driver import DtpuHardwareError, DtpuTimeout, run_job, run_jobs
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.lower import Job, lower
from dtpu.spec import OpKind
from tests.delegate_util import assert_matches, dtpu_so, emulated_board, run, tfl  # noqa: F401
from tests.test_driver import _node  # the same small conv / depthwise nodes as the job driver's

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "zoo" / "mobilenet_like__int8.tflite"


PYNQ_MISSING = "the board emulation runs the pynq package, not installed here (pip install pynq)"


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    """The emulated board as pynq's active device for this module, with the contract-1.2 design
    (make CONTRACT=1: the DMA protocol this module tests); deactivated afterwards. The default
    design is 2.0's: test_the_default_design_is_2_0_and_runs_lists, tests/test_lists_path.py."""
    pytest.importorskip("pynq", reason=PYNQ_MISSING)
    yield from emulated_board(tmp_path_factory.mktemp("overlay"), contract=1)


def _transport(bit):
    from dtpu.board import load_overlay
    from dtpu.board.transport import PynqTransport

    overlay = load_overlay(bit)
    return overlay, PynqTransport(overlay, get_config(), timeout_s=0.2)


# ------------------------------------------------------------------------------ the overlay


def test_overlay_gives_named_drivers_bound_by_vlnv(emu):
    from dtpu.board import ip, load_overlay
    from dtpu.board.design import ADDRESS_MAP, DTPU_VLNV

    import pynq
    from pynq.lib.dma import DMA

    from dtpu.board.emulate import current_board, device

    overlay = load_overlay(emu)
    assert isinstance(overlay, pynq.Overlay) and overlay.is_loaded()
    assert overlay.device is device.device() is pynq.Device.active_device
    assert overlay.ip_dict["dtpu"]["type"] == DTPU_VLNV
    addressable = {n: (d["phys_addr"], d["addr_range"]) for n, d in overlay.ip_dict.items()
                   if "phys_addr" in d}
    assert addressable == ADDRESS_MAP
    assert overlay.ip_dict["processing_system7_0"]["type"] == "xilinx.com:ip:processing_system7:5.5"
    dtpu = overlay.dtpu
    DtpuIP, XadcIP = ip.drivers()
    assert isinstance(dtpu, DtpuIP) and isinstance(overlay.xadc, XadcIP)
    assert isinstance(dtpu, pynq.DefaultIP) and isinstance(dtpu.mmio, pynq.MMIO)
    assert isinstance(overlay.dma_act, DMA) and isinstance(overlay.dma_wgt, DMA)
    assert overlay.dma_wgt.recvchannel is None and overlay.dma_act.buffer_max_size == (1 << 26) - 1
    # the download went through pynq's Clocks (FCLK0 in the emulated SLCR) and bit2bin
    assert pynq.Clocks.fclk0_mhz == current_board().slcr.fclk_mhz(0) == 100.0
    assert current_board().bitstream == overlay.bitfile_name and current_board().bitstream_bytes > 0
    # the 1.2 design (make CONTRACT=1: DMAs, the fallback bitstream): a 1.2 core
    assert dtpu.id == 0x44545055 and dtpu.version == (get_config().VERSION >> 16, get_config().VERSION & 0xFFFF)
    assert dtpu.hwcfg["COLS"] == 8 and dtpu.config().model_name == get_config().model_name
    assert dtpu.status == {"BUSY": 0, "DONE": 0, "ERROR": 0, "STATE": 0}
    assert dtpu.counters["cycles"] == 0 and dtpu.err_names == []
    assert 20.0 < overlay.xadc.temperature < 80.0
    volts = overlay.xadc.voltages
    assert set(volts) == {"vccint", "vccaux", "vccbram", "vccpint", "vccpaux", "vccoddr"}
    assert abs(volts["vccaux"] - 1.8) < 0.01 and abs(overlay.xadc.vccoddr - 1.5) < 0.01


def test_the_default_design_is_2_0_and_runs_lists(emu, tmp_path):
    """The emulated board's default design is the default `make -C hw/overlays` builds, 2.0's:
    no DMAs, the DTPU (dtpu_cl_top in the .hwh) reports contract 2.0, and the transport has no
    streams, so the driver runs command lists (path=auto)."""
    from dtpu.board import design, load_overlay
    from dtpu.board.emulate import write_design
    from dtpu.driver.lists import lists_supported

    bit = write_design(tmp_path)
    assert "dtpu_cl_top" in bit.with_suffix(".hwh").read_text()
    overlay, t = _transport(bit)
    assert {n for n, d in overlay.ip_dict.items() if "phys_addr" in d} == set(design.ADDRESS_MAP_2)
    assert not t.streams and lists_supported(t)
    assert overlay.dtpu.version == (2, 1)


@pytest.mark.parametrize("value, contract", [("1", 2), ("2", 2), ("yes", 2), ("1.2", 1)])
def test_the_emulation_loads_the_default_design_unless_told_1_2(monkeypatch, value, contract):
    from dtpu.board import emulated_contract

    monkeypatch.setenv("DTPU_PYNQ_EMULATE", value)
    assert emulated_contract() == contract


class _FakeIP:
    """A DTPU that answers `version` for VERSION and the ID for every other register."""

    def __init__(self, version):
        self.version = version

    def read(self, offset):
        return self.version if offset == get_config().REG_VERSION else 0x44545055


class _FakeOverlay:
    def __init__(self, ip_dict, ip):
        self.ip_dict, self.dtpu = ip_dict, ip


def test_the_2_0_design_needs_a_core_that_reports_version_2():
    """The driver picks its path from VERSION; dtpu_cl_top reports 2.0 (dtpu_regfile CONTRACT2).
    A 2.0 design (no stream DMAs) whose core still says 1.2 is a stale bitstream: opening it fails
    naming the value and what is accepted; the 1.2 design reads the core's 1.2."""
    from dtpu.board import design
    from dtpu.board.transport import PynqTransport
    from dtpu.driver.lists import lists_supported
    from dtpu.driver.transport import DtpuHardwareError

    c = get_config()
    ip_dict2 = {n: {"type": v} for n, v in design.INSTANCES_2.items()}
    t = PynqTransport(_FakeOverlay(ip_dict2, _FakeIP(c.VERSION2)), c, allocate=object)
    assert t.read_reg(c.REG_VERSION) == c.VERSION2 and lists_supported(t)
    assert t.read_reg(c.REG_VERSION + 4) == 0x44545055
    with pytest.raises(DtpuHardwareError, match=f"VERSION 0x{c.VERSION:08x}.*0x{c.VERSION2:08x}"):
        PynqTransport(_FakeOverlay(ip_dict2, _FakeIP(c.VERSION)), c, allocate=object)

    class _Dma:
        sendchannel = recvchannel = object()

    ip_dict1 = {n: {"type": v} for n, v in design.INSTANCES.items()}
    overlay1 = _FakeOverlay(ip_dict1, _FakeIP(c.VERSION))
    overlay1.dma_wgt = overlay1.dma_act = _Dma()
    t = PynqTransport(overlay1, c, allocate=object)
    assert t.read_reg(c.REG_VERSION) == c.VERSION and not lists_supported(t)


def test_board_transport_runs_jobs_like_the_model(emu):
    from dtpu.driver import ModelTransport

    spec, x, f, b = _node(1)
    low = lower(spec, f, b)
    _, t = _transport(emu)
    m = ModelTransport()
    for target in (t, m):
        run_jobs(target, low.load_jobs)
    got, cnt = run_jobs(t, low.jobs(x))
    want, cnt_m = run_jobs(m, low.jobs(x))
    assert all(np.array_equal(g, w) for g, w in zip(got, want)) and cnt == cnt_m


def _job_tokens(trace, start_index=0):
    """The trace as tokens: 'dtpu:w:0x1c', 'dma_act:w:0x58', 'dma_act:dma:s2mm start', ..."""
    out = []
    for a in trace[start_index:]:
        if a.op == "dma":
            out.append(f"{a.device}:dma:{' '.join(a.note.split()[:2])}")
        else:
            out.append(f"{a.device}:{a.op}:{a.offset:#x}")
    return out


def test_register_and_dma_sequence_of_a_job(emu):
    from dtpu.board.emulate import current_board

    spec, x, f, b = _node(2)
    low = lower(spec, f, b)
    _, t = _transport(emu)
    run_jobs(t, low.load_jobs)
    board = current_board()
    (job,) = low.jobs(x)
    board.trace.clear()
    res = run_job(t, job)
    assert res.size == job.recv
    tokens = " ".join(_job_tokens(board.trace))
    c = get_config()
    regs = " ".join(f"dtpu:w:{c.reg(n).offset:#x}" for n, _ in job.regs)
    assert job.regs[-1][0] == "JOB"
    pattern = (
        re.escape(regs)                                              # job registers, JOB last
        + r"( dma_act:r:0x34)*"                                      # S2MM running/idle checks
        + r" dma_act:w:0x48 dma_act:w:0x4c dma_act:w:0x58 dma_act:dma:s2mm start"  # armed first
        + r" dtpu:w:0x10 dtpu:r:0x14"                                # START, one STATUS read
        + r"( dma_act:r:0x4)*"                                       # MM2S checks
        + r" dma_act:w:0x18 dma_act:w:0x1c dma_act:w:0x28 dma_act:dma:mm2s start"
        + r" dma_act:dma:mm2s done dma_act:dma:s2mm done"            # core takes all, results out
        + r"( dtpu:r:0x14)+ dtpu:r:0x18"                             # STATUS until DONE, ERR
        + r"( dma_act:r:0x4)*"                                       # inputs all taken
        + r"( dma_act:r:0x34)+ dma_act:r:0x58$"                      # S2MM idle, received length
    )
    assert re.match(pattern, tokens), tokens
    # the load jobs use the weight DMA and never arm a receive channel
    board.trace.clear()
    run_jobs(t, low.load_jobs)
    tokens = _job_tokens(board.trace)
    assert "dma_wgt:dma:mm2s start" in tokens and not any("s2mm" in tok for tok in tokens)
    assert tokens.index("dtpu:w:0x10") < tokens.index("dma_wgt:dma:mm2s start")


@pytest.mark.parametrize("delta,error,pattern", [
    (3, DtpuHardwareError, r"long result stream: \d+ words on m_axis_res, expected \d+"),
    (20, DtpuHardwareError, r"res DMA channel error \(DMASR=0x\w+ \(halted, internal error"),
    (-3, DtpuHardwareError, r"short result stream"),
])
def test_wrong_result_lengths_are_caught_at_the_dma(emu, delta, error, pattern):
    spec, x, f, b = _node(3)
    low = lower(spec, f, b)
    _, t = _transport(emu)
    run_jobs(t, low.load_jobs)
    (job,) = low.jobs(x)
    wrong = Job(job.label, job.regs, job.send, job.recv - delta)
    with pytest.raises(error, match=pattern):
        run_job(t, wrong)
    # reset: DMAs and core back to idle, the same job now runs right
    assert np.array_equal(run_job(t, job), run_job(t, job))


def test_starved_job_times_out_with_dma_state_and_the_board_recovers(emu):
    spec, x, f, b = _node(4, OpKind.DEPTHWISE_CONV_2D)
    low = lower(spec, f, b)
    _, t = _transport(emu)
    run_jobs(t, low.load_jobs)
    (job,) = low.jobs(x)
    want = run_job(t, job)
    starved = Job(job.label, job.regs, {"act": job.send["act"][:-7]}, job.recv)
    with pytest.raises(DtpuTimeout, match=r"did not finish within 0\.05 s .*STATUS=0x1 \(BUSY=1.*"
                                          r"DMA wgt .*act \(dma_act\.sendchannel\): DMASR=0x\w+ \(busy"
                                          r"[^)]*\) transfer outstanding"):
        run_job(t, starved, timeout_s=0.05)
    assert np.array_equal(run_job(t, job), want)


def test_too_many_input_words_flag_tlast_and_are_flushed(emu):
    spec, x, f, b = _node(5)
    low = lower(spec, f, b)
    _, t = _transport(emu)
    run_jobs(t, low.load_jobs)
    (job,) = low.jobs(x)
    want = run_job(t, job)
    extra = Job(job.label, job.regs, {"act": np.concatenate([job.send["act"], job.send["act"][:4]])},
                job.recv)
    with pytest.raises(DtpuHardwareError, match="TLAST_MISSING"):
        run_job(t, extra)
    assert np.array_equal(run_job(t, job), want)


def test_bitstream_of_another_build_is_refused(emu, tmp_path):
    from dtpu.backends import get
    from dtpu.board.emulate import write_design

    bit = write_design(tmp_path, HwConfig(COLS=4))
    with pytest.raises(ValueError, match=r"mxu=8x8, but .* holds a 8x4 DTPU; accepted: mxu=8x4"):
        get("pynq")({"bitstream": str(bit), "mxu": (8, 8)})
    backend = get("pynq")({"bitstream": str(bit), "mxu": (8, 4)})
    assert backend.cfg.COLS == 4
    backend.close()


def test_int16_nodes_need_the_int16_overlay(emu, dtpu_so, tfl, tmp_path, caplog):
    """The default int8 overlay (OVERLAY=int8: int8/uint8 lanes and the vector unit) keeps an
    int16x8 model's convolutions on the CPU, each with the reason (the backend lowers for what
    the bitstream reports, HWCFG0.PREC_EN); the int16 overlay (OVERLAY=int16, `bitstream=int16`)
    delegates them. Both bit-exact with the CPU."""
    import dtpu
    from dtpu.board.emulate import write_design
    from dtpu.delegate import runtime
    from tests.models import zoo

    name = "dscnn_like__int16x8"
    path = ROOT / "tests" / "models" / "zoo" / f"{name}.tflite"
    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    inputs = zoo.make_inputs(zoo.get_entry(name), seed=1)
    want = run(cpu, inputs)
    for build, delegated in (("int8", False), ("int16", True)):
        bit = write_design(tmp_path / build, build=build)
        with caplog.at_level("INFO", logger="dtpu"):
            board = dtpu.make_interpreter(path, {"backend": "pynq", "bitstream": str(bit)})
        board.allocate_tensors()
        for g, w in zip(run(board, inputs), want):
            assert_matches(g, w, f"int16x8 on the {build} overlay")
        state = list(runtime.DELEGATES.values())[-1]      # this interpreter's delegate
        rejected = [(r["op"], r["reason"]) for graph in state.graphs.values() for r in graph.rejected]
        convs = [reason for op, reason in rejected if "CONV" in op]
        if delegated:
            assert not convs and dtpu.last_report().kernels >= 1, rejected
        else:
            assert convs and all("int16x8 needs int16 lanes, which this DTPU build does not have "
                                 "(enabled: int8, uint8)" in r for r in convs), rejected
        del board, state
        gc.collect()        # closes the delegate: it owns the (emulated) board


@pytest.mark.parametrize("build", sorted(design.BOARD_BUILDS))
def test_the_driver_lowers_for_the_board_builds_knobs(emu, tmp_path, build):
    """What a board build passes to Vivado beyond the geometry (dtpu.board.design.build_params:
    RQ_EN, and on the 2.0 top VEC_RQ_LANES) is what the driver lowers for: RQ_EN read back from
    HWCFG1.RQ_OFF, the vector unit's requantizing lanes from the .hwh (no register holds them);
    and what the emulated core computes with, so its cycles are that RTL's. The int8 build
    (one lane, RQ_EN 25) differs from the contract's defaults in both."""
    from dtpu.board import emulate, load_overlay
    from dtpu.board.emulate import write_design
    from dtpu.board.transport import PynqTransport

    b = design.BOARD_BUILDS[build]
    overlay = load_overlay(write_design(tmp_path / build, build=build))
    t = PynqTransport(overlay, timeout_s=0.2)
    try:
        core = emulate.current_board().dtpu.cfg
        for cfg in (t.cfg, core):
            assert (cfg.VEC_RQ_LANES, cfg.RQ_EN, cfg.ENABLED) == \
                (b.vec_rq_lanes, b.rq_en, design.board_config(build).ENABLED), build
        assert t.vector_unit == bool(b.vec_en)
    finally:
        t.close()
    if build == "int8":
        assert (b.vec_rq_lanes, b.rq_en) != (get_config().VEC_RQ_LANES, get_config().RQ_EN)


def test_integer_only_bitstream_claims_only_its_precisions(emu, dtpu_so, tfl, tmp_path, caplog):
    """The int16 board build (hw/overlays OVERLAY=int16: int8/uint8/int16, no vector unit): the
    backend lowers for the precisions the bitstream reports, and float nodes stay on the CPU."""
    import dtpu
    from dtpu.board.emulate import write_design
    from dtpu.precision import Precision
    from tests.models import zoo

    bit = write_design(tmp_path, build="int16")
    board = dtpu.make_interpreter(MODEL, {"backend": "pynq", "bitstream": str(bit)})
    board.allocate_tensors()
    cpu = tfl.Interpreter(model_path=str(MODEL))
    cpu.allocate_tensors()
    inputs = zoo.make_inputs(zoo.get_entry("mobilenet_like__int8"), seed=3)
    for g, w in zip(run(board, inputs), run(cpu, inputs)):
        assert_matches(g, w, "int8 on the integer-only board")
    report = dtpu.last_report()
    assert len(report.nodes) == 13 and report.backend == "pynq"
    assert all("build" not in r["reason"] for r in report.rejected)

    name = "conv_i10x10x32_o40_k1x1_s1x1_valid_relu6__float32"
    path = ROOT / "tests" / "models" / "zoo" / f"{name}.tflite"
    with caplog.at_level("INFO", logger="dtpu"):
        fboard = dtpu.make_interpreter(path, {"backend": "pynq", "bitstream": str(bit)})
    assert "float32 needs fp32 lanes, which this DTPU build does not have (enabled: int8, uint8, " \
           "int16)" in caplog.text
    fboard.allocate_tensors()
    fcpu = tfl.Interpreter(model_path=str(path))
    fcpu.allocate_tensors()
    finputs = zoo.make_inputs(zoo.get_entry(name), seed=0)
    for g, w in zip(run(fboard, finputs), run(fcpu, finputs)):
        assert np.array_equal(g, w)  # on the CPU: the same kernel, bit for bit
    from dtpu.backends import get
    backend = get("pynq")({"bitstream": str(bit)})
    assert backend.enabled_precisions == (Precision.INT8, Precision.UINT8, Precision.INT16)
    backend.close()


def _backend_error(block_pynq: bool, emulate: bool) -> str:
    """stderr of creating a pynq backend in a fresh process (pynq made unimportable or not)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DTPU_PYNQ_EMULATE", "DTPU_BITSTREAM")}
    env["PYTHONPATH"] = str(ROOT / "pylib")
    if emulate:
        env["DTPU_PYNQ_EMULATE"] = "1"
    code = ("import sys; sys.modules['pynq'] = None\n" if block_pynq else "") + \
        "from dtpu.backends import get; get('pynq')({})"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    return proc.stderr


def test_pynq_missing_is_a_clear_error():
    err = _backend_error(block_pynq=True, emulate=False)
    assert "backend=pynq needs the pynq package" in err and "DTPU_PYNQ_EMULATE=1" in err
    err = _backend_error(block_pynq=True, emulate=True)
    assert "DTPU_PYNQ_EMULATE=1 runs the board emulation through the pynq package" in err
    assert "pip install pynq" in err


def test_pynq_without_a_board_is_a_clear_error():
    pytest.importorskip("pynq", reason=PYNQ_MISSING)
    err = _backend_error(block_pynq=False, emulate=False)
    assert "is installed here but found no device" in err and "DTPU_PYNQ_EMULATE=1" in err


# ------------------------------------------------------------------ a whole model, end to end


def test_zoo_model_through_the_delegate_on_the_emulated_board(emu, dtpu_so, tfl):
    import dtpu
    from dtpu.board.emulate import current_board
    from tests.models import zoo

    entry = zoo.get_entry("mobilenet_like__int8")
    cpu = tfl.Interpreter(model_path=str(MODEL))
    cpu.allocate_tensors()
    # job by job (contract 1.2, what a 1.2 bitstream runs): the DMA protocol under test here;
    # the command-list path on the emulated board is tests/test_lists_path.py's
    model = dtpu.make_interpreter(MODEL, {"backend": "model", "path": "jobs"})
    model.allocate_tensors()
    board = dtpu.make_interpreter(MODEL, {"backend": "pynq", "bitstream": str(emu), "path": "jobs"})
    board.allocate_tensors()
    for seed in range(2):
        inputs = zoo.make_inputs(entry, seed=seed)
        want = run(cpu, inputs)
        got_model = run(model, inputs)
        report_model = dtpu.last_report()
        current_board().trace.clear()
        got = run(board, inputs)
        report = dtpu.last_report()
        for g, w in zip(got, want):
            assert_matches(g, w, f"pynq seed {seed}")
        for g, w in zip(got_model, want):
            assert_matches(g, w, f"model seed {seed}")
    assert report.backend == "pynq" and len(report.nodes) == 13
    assert [n.hw["cycles"] for n in report.nodes] == [n.hw["cycles"] for n in report_model.nodes]
    assert report.hw["cycles"] == report_model.hw["cycles"] > 0
    assert all(n.hw["stall_cycles"] == 0 for n in report.nodes)
    # one invoke's trace: per node one compute job (weights stay resident), each START preceded
    # by an armed receive channel, and no weight-DMA traffic at all
    tokens = _job_tokens(current_board().trace)
    starts = [i for i, tok in enumerate(tokens) if tok == "dtpu:w:0x10"]
    assert len(starts) == 13
    for i in starts:
        assert "dma_act:dma:s2mm start" in tokens[max(0, i - 4):i]
    assert not any(tok.startswith("dma_wgt:dma") for tok in tokens)
    assert tokens.count("dma_act:dma:mm2s done") == tokens.count("dma_act:dma:s2mm done") == 13
    # the host record: the same jobs as backend=model, so the same counts node by node; what
    # the board saw agrees (its DTPU writes are the driver's; its reads add the STATUS polls of
    # the completion wait, which the record leaves out)
    from dtpu.report import HOST_FIELDS
    counts = [k for k in HOST_FIELDS if k != "us"]
    assert [{k: n.host[k] for k in counts} for n in report.nodes] == \
        [{k: n.host[k] for k in counts} for n in report_model.nodes]
    host = report.host
    assert host["doorbells"] == 13 and host["dma_starts"] == 26 and host["us"] > 0
    assert host["mmio_writes"] == sum(tok.startswith("dtpu:w:") for tok in tokens)
    assert host["mmio_reads"] <= sum(tok.startswith("dtpu:r:") for tok in tokens)
    assert host["dma_starts"] == sum(tok.endswith(" start") and ":dma:" in tok for tok in tokens)
    assert report.hw["idle_cycles"] == report_model.hw["idle_cycles"] == 0
    # power: XADC statistics measured (synthetic here), energy estimated from the counters
    p = report.power
    assert p["method"] == "estimated" and p["energy_j"] > 0 and p["avg_w"] > 0
    assert set(p["temperature_c"]) == {"min", "avg", "max"}
    assert p["temperature_c"]["min"] <= p["temperature_c"]["avg"] <= p["temperature_c"]["max"]
    assert abs(p["voltages_v"]["vccint"] - 1.0) < 0.01 and "vccoddr_max" in p["voltages_v"]


def test_pynq_allocate_buffers_are_not_coherent_with_the_emulated_ddr(emu):
    """pynq.allocate(cacheable=True) gives pynq's own PynqBuffer whose host view is a cache: the
    device sees the emulated DDR, which only flush (host -> DDR) and invalidate (DDR -> host)
    bring in step, as on the board; freebuffer gives the region back. pynq's default buffer is
    uncached (XRT's cacheable=0 on the board): the host writes and reads DDR itself."""
    import pynq

    from dtpu.board.emulate import current_board

    ddr = current_board().ddr
    buf = pynq.allocate((4,), dtype=np.uint64, cacheable=True)
    assert isinstance(buf, pynq.buffer.PynqBuffer) and buf.physical_address % 4096 == 0
    assert buf.cacheable and buf[1:].physical_address == buf.physical_address + 8
    buf[:] = [1, 2, 3, 4]
    assert not ddr.read(buf.physical_address, 32).any()          # not flushed yet
    buf[1:3].flush()
    assert list(ddr.read(buf.physical_address, 32).view(np.uint64)) == [0, 2, 3, 0]
    ddr.write(buf.physical_address, np.array([7, 8, 9, 10], dtype=np.uint64))
    assert list(buf) == [1, 2, 3, 4]                               # stale until invalidated
    buf.invalidate()
    assert list(buf) == [7, 8, 9, 10]
    addr = buf.physical_address
    buf.freebuffer()
    assert addr not in ddr

    plain = pynq.allocate((4,), dtype=np.uint64)
    assert not plain.cacheable
    plain[:] = [5, 6, 7, 8]
    assert list(ddr.read(plain.physical_address, 32).view(np.uint64)) == [5, 6, 7, 8]
    ddr.write(plain.physical_address, np.array([1, 1, 1, 1], dtype=np.uint64))
    assert list(plain) == [1, 1, 1, 1]
    plain.freebuffer()


def test_the_device_reading_unflushed_bytes_is_an_error(emu):
    """The stale-cache model: the device (its memory port, an MM2S DMA) reading bytes of a
    cacheable buffer that the host changed since their last flush raises, naming the first such
    byte; flushed, or never changed, bytes read fine; an invalidate makes the host's copy DDR's."""
    import pynq

    from dtpu.board.emulate import current_board
    from dtpu.board.emulate.board import HpPort, StaleCacheError

    port = HpPort(current_board().ddr)
    buf = pynq.allocate((64,), dtype=np.uint8, cacheable=True)
    addr = buf.physical_address
    buf[:] = np.arange(64, dtype=np.uint8)
    buf[:40].flush()
    assert list(port.read(addr, 40)) == list(range(40))        # flushed: read as written
    with pytest.raises(StaleCacheError, match=rf"24 of which the host wrote and did not flush "
                                              rf"\(the first at {addr + 40:#x}, offset 40"):
        port.read(addr + 32, 32)
    buf[40:].flush()
    assert list(port.read(addr + 32, 32)) == list(range(32, 64))
    port.write(addr, np.full(8, 0xEE, np.uint8))                # the device writes 8 bytes
    assert list(buf[:8]) == list(range(8))                      # the host still has its old copy
    buf[:8].invalidate()
    assert list(buf[:8]) == [0xEE] * 8
    buf.freebuffer()


def test_the_transport_streams_through_pynq_buffers_and_pynq_dma_channels(emu):
    import pynq
    from pynq.lib.dma import _SDMAChannel

    spec, x, f, b = _node(6)
    low = lower(spec, f, b)
    _, t = _transport(emu)
    run_jobs(t, low.load_jobs)
    run_jobs(t, low.jobs(x))
    assert all(isinstance(ch, _SDMAChannel) for ch in t.dma_channels.values())
    assert {s: type(buf) for s, buf in t.stream_buffers.items()} == dict.fromkeys(("wgt", "act", "res"),
                                                                         pynq.buffer.PynqBuffer)
    assert t.dma_channels["res"].transferred > 0


def test_dtpu_irq_through_pynq_interrupt_and_the_axi_intc(emu, tmp_path):
    """The interrupts=True design (DTPU irq -> AXI INTC -> IRQ_F2P): pynq binds a pynq.Interrupt
    to overlay.dtpu.irq, and its wait ends only once the core raises irq (CTRL.IRQ_EN with
    STATUS.DONE); pynq's interrupt controller code then disables and acknowledges the input."""
    import asyncio

    import pynq

    from dtpu.board import load_overlay
    from dtpu.board.emulate import current_board, write_design
    from dtpu.board.transport import PynqTransport

    bit = write_design(tmp_path, interrupts=True, contract=1)
    overlay = load_overlay(bit)
    assert isinstance(overlay.dtpu.irq, pynq.Interrupt)
    assert overlay.interrupt_controllers["axi_intc_0"]["raw_irq"] == 61
    t = PynqTransport(overlay, get_config(), timeout_s=0.2)
    spec, x, f, b = _node(7)
    low = lower(spec, f, b)
    run_jobs(t, low.load_jobs)
    run_jobs(t, low.jobs(x))
    assert overlay.dtpu.status["DONE"] == 1
    c = get_config()
    board = current_board()

    async def main():
        waiter = asyncio.ensure_future(overlay.dtpu.irq.wait())
        done, _ = await asyncio.wait([waiter], timeout=0.1)
        assert not done, "irq fired with CTRL.IRQ_EN clear"
        board.trace.clear()
        overlay.dtpu.set_reg("CTRL", c.encode("CTRL", IRQ_EN=1))
        await asyncio.wait_for(waiter, 5)

    asyncio.run(main())
    intc = [(a.op, a.offset, a.value) for a in board.trace if a.device == "axi_intc_0"]
    assert intc == [("r", 0x04, 1), ("w", 0x14, 1), ("w", 0x0C, 1)]  # IPR, CIE, IAR


def test_emulated_board_is_the_board_build(tmp_path):
    """Issue 24.5: DTPU_PYNQ_EMULATE=1 with backend=pynq and no bitstream named emulates the
    default board build (int8/uint8 with the vector unit, dtpu.board.design.board_config),
    not the contract's default configuration: a float model's nodes stay on the CPU, each with the build's reason, and its
    outputs are the CPU's. In a fresh process: the emulation installs itself from the
    environment there."""
    script = (
        "import json, numpy as np, dtpu\n"
        "from dtpu import tflite\n"
        f"path = {str(ROOT / 'tests' / 'models' / 'zoo' / 'mobilenet_like__float32.tflite')!r}\n"
        "it = dtpu.make_interpreter(path, {'backend': 'pynq'})\n"
        "it.allocate_tensors()\n"
        "cpu = tflite.Interpreter(model_path=path); cpu.allocate_tensors()\n"
        "x = np.random.default_rng(0).uniform(-1, 1, it.get_input_details()[0]['shape'])"
        ".astype(np.float32)\n"
        "for i in (it, cpu):\n"
        "    i.set_tensor(i.get_input_details()[0]['index'], x); i.invoke()\n"
        "o = it.get_output_details()[0]['index']\n"
        "same = bool(np.array_equal(it.get_tensor(o), cpu.get_tensor(o)))\n"
        "report = dtpu.last_report()   # None: no DTPU partition ran\n"
        "delegated = report.partitions if report is not None else 0\n"
        "from dtpu.delegate import runtime\n"
        "rejected = [(r['op'], r['reason']) for state in runtime.DELEGATES.values()\n"
        "            for graph in state.graphs.values() for r in graph.rejected]\n"
        "print(json.dumps({'delegated': delegated, 'same': same, 'rejected': rejected}))\n")
    env = {k: v for k, v in os.environ.items() if k != "DTPU_BITSTREAM"}
    env.update(PYTHONPATH=str(ROOT / "pylib"), DTPU_PYNQ_EMULATE="1", HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["delegated"] == 0 and got["same"], got
    convs = [reason for op, reason in got["rejected"] if "CONV" in op]
    assert len(convs) == 13, got["rejected"]
    assert all("fp32 lanes, which this DTPU build does not have (enabled: int8, uint8)"
               in reason for reason in convs), convs
