"""Former home of the job driver, kept so existing imports work; the driver is
:mod:`dtpu.driver` (protocol in ``dtpu.driver.jobs``, the model transport in
``dtpu.driver.model``, the Transport ABC and errors in ``dtpu.driver.transport``)."""
from dtpu.driver.jobs import (Counters, check_identity, counter_delta, read_counters,
                              register_state, run_job, run_jobs)
from dtpu.driver.model import ModelTransport
from dtpu.driver.transport import (DtpuError, DtpuHardwareError, DtpuJobError, DtpuTimeout,
                                   Transport)

__all__ = ["Counters", "DtpuError", "DtpuHardwareError", "DtpuJobError", "DtpuTimeout",
           "ModelTransport", "Transport", "check_identity", "counter_delta", "read_counters",
           "register_state", "run_job", "run_jobs"]
