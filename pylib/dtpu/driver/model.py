"""Former name of :mod:`dtpu.driver.model_transport` (the golden model as a transport), kept
importable for one release; nothing in this repository imports it but tests/test_driver.py,
which checks the re-export."""
from dtpu.driver.model_transport import (ModelTransport, compiled, run_compiled,  # noqa: F401
                                         run_jobs_compiled)

__all__ = ["ModelTransport", "compiled", "run_compiled", "run_jobs_compiled"]
