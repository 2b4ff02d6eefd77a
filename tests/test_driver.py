"""The job driver (dtpu.driver): one protocol over any transport, bounded waits, clear errors.

Faults come from FaultyTransport around the golden model: each must raise its exception with the
register state in the message, leave the target reset, and let the next job run bit-exactly.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from dtpu.driver import (DtpuHardwareError, DtpuJobError, DtpuTimeout, ModelTransport, Transport,
                         check_identity, run_job, run_jobs)
from dtpu.driver.faults import Fault, FaultyTransport
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.core import Core
from dtpu.hw.lower import Job, lower
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant


def _node(seed=0, kind=OpKind.CONV_2D):
    rng = np.random.default_rng(seed)
    if kind is OpKind.DEPTHWISE_CONV_2D:
        spec = ConvSpec(kind, DataMode.INT8, (1, 7, 7, 16), (1, 3, 3, 16), padding=Padding.SAME,
                        input_q=Quant((0.02,), (-3,)), filter_q=Quant((0.01,) * 16, (0,) * 16),
                        output_q=Quant((0.05,), (2,)))
    else:
        spec = ConvSpec(kind, DataMode.INT8, (1, 6, 6, 16), (24, 3, 3, 16), padding=Padding.SAME,
                        input_q=Quant((0.02,), (-3,)),
                        filter_q=Quant(tuple(rng.uniform(0.005, 0.02, 24)), (0,) * 24),
                        output_q=Quant((0.4,), (5,)))
    x = rng.integers(-128, 128, spec.input_shape).astype(np.int8)
    f = rng.integers(-127, 128, spec.filter_shape).astype(np.int8)
    b = rng.integers(-1000, 1000, spec.out_channels).astype(np.int32)
    return spec, x, f, b


def _golden(spec, x, f, b):
    """The output and counters of a clean run on a fresh model."""
    t = ModelTransport(Core(get_config()))
    low = lower(spec, f, b)
    run_jobs(t, low.load_jobs)
    res, cnt = run_jobs(t, low.jobs(x))
    return low.assemble(res), cnt


def _loaded(transport, spec, f, b):
    low = lower(spec, f, b)
    run_jobs(transport, low.load_jobs)
    return low


def test_protocol_over_the_model_is_the_golden_result():
    spec, x, f, b = _node()
    want, cnt0 = _golden(spec, x, f, b)
    t = ModelTransport()
    low = _loaded(t, spec, f, b)
    res, cnt = run_jobs(t, low.jobs(x))
    assert np.array_equal(low.assemble(res), want)
    assert cnt == cnt0 and cnt.cycles > 0 and cnt.stall_cycles == 0
    assert cnt.words_in["act"] == sum(j.send["act"].size for j in low.jobs(x))


def test_job_errors_stay_runtime_errors():
    from dtpu import driver

    assert issubclass(driver.DtpuJobError, RuntimeError)


def test_transport_is_an_abc_with_five_required_methods():
    assert Transport.__abstractmethods__ == {"write_reg", "read_reg", "send", "recv", "wait_done"}
    with pytest.raises(TypeError):
        Transport()


def test_status_of_a_starved_job_reads_busy_instead_of_raising():
    c = get_config()
    t = ModelTransport()
    t.write_reg(c.REG_LOAD_ADDR, 0)
    t.write_reg(c.REG_LOAD_COUNT, 4)
    t.write_reg(c.REG_JOB, c.encode("JOB", OPCODE=c.OPCODE_LOAD_WGT))
    t.write_reg(c.REG_CTRL, c.encode("CTRL", START=1))
    status = c.decode("STATUS", t.read_reg(c.REG_STATUS))
    assert status["BUSY"] == 1 and status["DONE"] == 0
    assert not t.wait_done(0.01)
    t.send("wgt", np.arange(4, dtype=np.uint64))
    assert t.wait_done(0.01) and c.decode("STATUS", t.read_reg(c.REG_STATUS))["DONE"] == 1


# ------------------------------------------------------------------------------ injected faults

_CASES = {
    "hang": (DtpuTimeout, r"did not finish within 0\.05 s \(no STATUS\.DONE\); registers: STATUS="),
    "error": (DtpuJobError, r"ERR=0x400 \(OVERFLOW: .*registers: STATUS=.*ERR=0x400 \(OVERFLOW\)"),
    "config_error": (DtpuJobError, r"ERR=0x8 \(BAD_DIMS"),
    "short": (DtpuHardwareError, r"short result stream: \d+ words on m_axis_res, expected \d+; registers:"),
    "long": (DtpuHardwareError, r"long result stream: \d+ words on m_axis_res, expected \d+"),
    "stuck_input": (DtpuHardwareError, r"without taking all its input words \(act: some of \d+ left\)"),
    "recv_timeout": (DtpuTimeout, r"res channel did not complete .*registers: STATUS="),
}


@pytest.mark.parametrize("kind", sorted(_CASES))
def test_fault_raises_with_register_state_and_the_next_job_recovers(kind):
    spec, x, f, b = _node(1)
    want, _ = _golden(spec, x, f, b)
    err = {"error": 1 << 10, "config_error": 1 << 3}.get(kind, 0)
    t = FaultyTransport(ModelTransport())
    low = _loaded(t, spec, f, b)
    jobs = low.jobs(x)
    assert len(jobs) == 1
    t.faults.append(Fault(kind, job=t.job + 1, err=err, words=2))
    exc_type, pattern = _CASES[kind]
    started = time.perf_counter()
    with pytest.raises(exc_type, match=pattern) as info:
        run_jobs(t, jobs, timeout_s=0.05)
    assert time.perf_counter() - started < 2.0, "a fault must not cost more than its timeout"
    assert (t.job, kind) in t.injected and t.resets == 1
    if kind in ("error", "config_error"):
        assert info.value.err & err
    # the failure left nothing behind: the same node runs again, bit-exact
    res, cnt = run_jobs(t, low.jobs(x))
    assert np.array_equal(low.assemble(res), want)


def test_every_wait_is_bounded_even_with_a_hang_on_every_job():
    spec, x, f, b = _node(2)
    t = FaultyTransport(ModelTransport(), Fault("hang"))
    started = time.perf_counter()
    with pytest.raises(DtpuTimeout):
        run_jobs(t, lower(spec, f, b).load_jobs, timeout_s=0.02)
    assert time.perf_counter() - started < 1.0


# ------------------------------------------------------------------------- real device errors


def test_configuration_error_takes_no_stream_words():
    c = get_config()
    t = ModelTransport()
    bad = Job("gemm with M=0", [("GEMM_M", 0), ("GEMM_KW", 1), ("GEMM_NT", 1),
                                ("JOB", c.encode("JOB", OPCODE=c.OPCODE_GEMM, PREC=c.PREC_INT8,
                                                 OUT_MODE=c.OUT_MODE_RAW))],
              {"act": np.zeros(4, np.uint64)}, 4)
    with pytest.raises(DtpuJobError, match=r"'gemm with M=0' failed with ERR=0x8 \(BAD_DIMS") as info:
        run_job(t, bad)
    assert "JOB=0x103 (OPCODE=GEMM PREC=INT8 OUT_MODE=RAW RQ_VARIANT=DOUBLE)" in str(info.value)
    assert t.backlog("act") == 0 and t.read_reg(c.REG_ERR) == 0  # nothing sent, ERR cleared


def test_words_of_a_failed_job_do_not_leak_into_the_next():
    """A job sent more words than it takes (tlast late): the core flags TLAST_MISSING and the
    extra words would be the next job's first ones; the driver's reset flushes them."""
    spec, x, f, b = _node(3)
    want, _ = _golden(spec, x, f, b)
    t = ModelTransport()
    low = _loaded(t, spec, f, b)
    (job,) = low.jobs(x)
    padded = Job(job.label, job.regs, {"act": np.concatenate([job.send["act"], job.send["act"][:3]])},
                 job.recv)
    with pytest.raises(DtpuJobError, match="TLAST_MISSING"):
        run_job(t, padded)
    res, _ = run_jobs(t, low.jobs(x))
    assert np.array_equal(low.assemble(res), want)


def test_a_starved_job_times_out_naming_the_missing_words():
    spec, x, f, b = _node(4, OpKind.DEPTHWISE_CONV_2D)
    t = ModelTransport()
    low = _loaded(t, spec, f, b)
    (job,) = low.jobs(x)
    short = Job(job.label, job.regs, {"act": job.send["act"][:-5]}, job.recv)
    with pytest.raises(DtpuTimeout, match=r"STATUS=0x\w+ \(BUSY=1 DONE=0.*model streams \(words "
                                          r"queued\): wgt=0, act=\d+, res=0"):
        run_job(t, short, timeout_s=0.01)
    assert not t.busy and t.backlog("act") == 0  # reset: the starved job is gone


def test_identity_mismatch_names_the_build():
    t = ModelTransport(Core(HwConfig(COLS=4)))
    t.cfg = get_config()  # the host lowers for 8 columns, the device has 4
    with pytest.raises(DtpuHardwareError, match=r"HWCFG0.*the device is \{'ROWS': 8, 'COLS': 4"):
        check_identity(t)


class _DuckTyped:
    """A transport from before the ABC: cfg and the five methods, no hooks (sim/ has one)."""

    def __init__(self, hang=False):
        self._m = ModelTransport()
        self.cfg = self._m.cfg
        self.hang = hang

    def write_reg(self, offset, value):
        self._m.write_reg(offset, value)

    def read_reg(self, offset):
        return self._m.read_reg(offset)

    def send(self, stream, words):
        self._m.send(stream, words)

    def recv(self, stream, n):
        return self._m.recv(stream, n)

    def wait_done(self, timeout_s=None):
        if self.hang:
            raise TimeoutError("STATUS.DONE did not rise")
        return self._m.wait_done(timeout_s)


def test_duck_typed_transports_get_the_default_hooks():
    spec, x, f, b = _node(5)
    want, cnt0 = _golden(spec, x, f, b)
    t = _DuckTyped()
    low = _loaded(t, spec, f, b)
    res, cnt = run_jobs(t, low.jobs(x))
    assert np.array_equal(low.assemble(res), want) and cnt == cnt0
    t.hang = True
    with pytest.raises(DtpuTimeout, match=r"STATUS.DONE did not rise; registers: STATUS="):
        run_jobs(t, low.jobs(x))
    t.hang = False  # the default reset (CTRL.SOFT_RESET) left the model clean
    res, _ = run_jobs(t, low.jobs(x))
    assert np.array_equal(low.assemble(res), want)


def test_register_values_read_by_field_name():
    """CL_STATUS and the DMA's DMASR are read as named fields, from contract.json (or PG021)."""
    from dtpu.driver.registers import Dmasr, register_type
    from dtpu.hw.listformat import Format

    fmt = Format(get_config())
    status = register_type("CL_STATUS", fmt.regs["CL_STATUS"]["fields"])
    st = status(0b110)
    assert st.done and st.error and not st.running and st == 6 and f"{st:#x}" == "0x6"
    assert not status(0b001).done
    dmasr = Dmasr(0x1002)
    assert dmasr.idle and dmasr.ioc_irq and not dmasr.halted and not dmasr.err_irq


def test_optional_capabilities_are_declared_on_the_base_class():
    """No transport is probed with getattr: every capability has a declared default."""
    from dtpu.driver.transport import DeviceBuffer, DtpuHardwareError

    class Minimal(Transport):
        def __init__(self):
            self.cfg = get_config()

        write_reg = read_reg = send = recv = wait_done = lambda self, *a: None

    t = Minimal()
    assert t.streams and not t.command_lists and t.simulated and t.timeout_s > 0
    assert t.wait_list(1.0) is True and t.list_trace() is None and t.pending_input() == {}
    with pytest.raises(DtpuHardwareError, match="no memory port"):
        t.alloc_buffer(8)
    model = ModelTransport(lists=True)
    assert model.command_lists and not ModelTransport().command_lists
    assert isinstance(model.alloc_buffer(64), DeviceBuffer)

