"""The DTPU driver: the job protocol written once, and the transports it runs over.

``dtpu.driver.run_jobs(transport, jobs)`` drives any target that implements
:class:`Transport` (five methods: write_reg, read_reg, send, recv, wait_done): the golden model
(:class:`ModelTransport`), the RTL under cocotb (``sim/``), the PYNQ-Z2 board
(:mod:`dtpu.board`). Failures raise :class:`DtpuJobError` (ERR flags), :class:`DtpuTimeout`
(no DONE, a stuck DMA) or :class:`DtpuHardwareError` (stream lengths, wrong build), each with
the register state in its message.
"""
from dtpu.driver.jobs import (DEFAULT_JOB_TIMEOUT_S, Counters, check_identity, counter_delta,
                              read_counters, register_state, run_job, run_jobs)
from dtpu.driver.model_transport import ModelTransport
from dtpu.driver.transport import (DtpuError, DtpuHardwareError, DtpuJobError, DtpuTimeout,
                                   Transport)

__all__ = ["Counters", "DEFAULT_JOB_TIMEOUT_S", "DtpuError", "DtpuHardwareError", "DtpuJobError",
           "DtpuTimeout", "ModelTransport", "Transport", "check_identity", "counter_delta",
           "read_counters", "register_state", "run_job", "run_jobs"]
