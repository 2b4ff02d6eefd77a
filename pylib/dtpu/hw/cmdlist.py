"""Former home of contract 2.0's golden model, kept importable for one release so that code
written against ``dtpu.hw.cmdlist`` keeps working, with a DeprecationWarning; nothing in this repository imports it any more
(tests/test_module_names.py checks). Its parts now live in modules named for what they do:

* :mod:`dtpu.hw.listformat`: the descriptor format (:class:`Format`, :class:`CmdlistError`);
* :mod:`dtpu.hw.listcompiler`: :func:`compile_program`, :class:`NodeIn`, :class:`Program`;
* :mod:`dtpu.hw.ddr`: :class:`Ddr`, :class:`DdrFault`, :class:`DdrPool`;
* :mod:`dtpu.hw.timeline`, :mod:`dtpu.hw.executor`: the list's cycles and its execution;
* :mod:`dtpu.hw.units`: the per-unit cycle simulations beside their C twins;
* :mod:`dtpu.hw.regwindow`: the emulated 2.0 register window (:class:`Device`);
* :func:`dtpu.tflite_model.partitions_of`: a .tflite model's chains of placed nodes.

``Driver``, ``HostOps`` and ``DtpuListError`` are gone: the one driver is
:class:`dtpu.driver.lists.ListProgram` (its :class:`~dtpu.driver.lists.DtpuListError`, a
``DtpuHardwareError``) with :class:`dtpu.driver.hostops.HostOps`, over
``dtpu.driver.model_transport.ModelTransport(lists=True)`` on the model.
"""
from __future__ import annotations

import warnings

from dtpu.hw.ddr import Ddr, DdrFault, DdrPool, DeviceBuffer
from dtpu.hw.executor import Executor, RunResult
from dtpu.hw.listcompiler import Buffer, NodeIn, Partition, Program, compile_program
from dtpu.hw.listformat import DEFAULT_DDR_BASE, CmdlistError, Format
from dtpu.hw.regwindow import Device
from dtpu.hw.timeline import Timeline

warnings.warn("dtpu.hw.cmdlist is split into dtpu.hw.listformat, listcompiler, ddr, timeline, "
              "executor and regwindow; the old name goes in the next release",
              DeprecationWarning, stacklevel=2)


def partitions_of(path_or_model, cfg=None) -> list:
    """:func:`dtpu.tflite_model.partitions_of` (this module stays below the TFLite reader)."""
    from dtpu import tflite_model
    return tflite_model.partitions_of(path_or_model, cfg)


__all__ = ["partitions_of", "Buffer", "CmdlistError", "DEFAULT_DDR_BASE", "Ddr", "DdrFault", "DdrPool",
           "DeviceBuffer", "Device", "Executor", "Format", "NodeIn", "Partition", "Program", "RunResult",
           "Timeline", "compile_program"]
