"""backend=rtl: the DTPU's Verilog core (hw/rtl) simulated with Verilator.

Three ways in::

    dtpu run model.tflite --backend rtl [--mxu 8x8] [--waves]      # cocotb, in its simulator

    import dtpu.rtl
    def classify(path):                      # module level: the simulator imports it
        it = dtpu.make_interpreter(path, {"backend": "rtl"}); ...
        return it.get_tensor(...)
    out = dtpu.rtl.run_in_simulation(classify, ("model.tflite",), mxu=(8, 8))   # cocotb

    it = dtpu.make_interpreter("model.tflite", {"backend": "rtl"})   # native, in this process

The cocotb simulator hosts the Python process, so there the callable runs in another process
than the caller's: see :mod:`dtpu.rtl.simulate` for how it gets there and back,
:mod:`dtpu.rtl.transport` for the cocotb transport, :mod:`dtpu.rtl.native` for the in-process
one, :mod:`dtpu.rtl.build` for the cached Verilator builds and docs/rtl_backend.md for the whole
picture. Importing this package imports neither cocotb nor the native library.
"""
from dtpu.rtl.build import BuildInfo, RtlBuildError, SimConfig, build, cache_root, rtl_dir
from dtpu.rtl.session import NoSimulationError, current_transport, in_simulation
from dtpu.rtl.simulate import (RemoteTraceback, RtlSimulationError, RunInfo, Simulation,
                               run_in_simulation)

__all__ = ["BuildInfo", "NoSimulationError", "RemoteTraceback", "RtlBuildError",
           "RtlSimulationError", "RunInfo", "SimConfig", "Simulation", "build", "cache_root",
           "current_transport", "in_simulation", "rtl_dir", "run_in_simulation"]
