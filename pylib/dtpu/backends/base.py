"""The one interface every backend implements, so the delegate never knows which it drives.

A backend is given a node once (`prepare`: weights are packed and made resident there, like the
DTPU's stationary weights) and then runs it many times (`invoke`). Whatever a backend cannot do on
its "hardware" it finishes on the host with :mod:`dtpu.reference`, so every backend returns the
same TFLite-exact tensor.
"""
from __future__ import annotations

import abc
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

import numpy as np

from dtpu.precision import Precision
from dtpu.spec import ConvSpec


@dataclass
class HwCounters:
    """What the hardware (or its model) says about one node's run; None where a backend cannot know."""

    cycles: int | None = None
    stall_cycles: int | None = None
    macs: int | None = None
    utilization: float | None = None
    words_in: dict[str, int] = field(default_factory=dict)
    words_out: dict[str, int] = field(default_factory=dict)
    latency_us: float | None = None
    #: cycles the core waited on memory or the host; on today's 1.2 core the STALL counter
    #: (stall_cycles: a started job waiting for stream words), the same number
    idle_cycles: int | None = None
    #: the host's work for this node's invoke (dtpu.driver.hostops.HOST_FIELDS); None: a backend
    #: without a device protocol
    host: dict[str, Any] | None = None
    #: the golden model's cycles for the node, where a backend runs it beside the hardware
    #: (backend=rtl on command lists); None elsewhere
    model_cycles: int | None = None
    #: a note on `cycles`: why they differ from `model_cycles` (the documented modelling limit),
    #: or how they were derived where the target cannot count them per node; None otherwise
    cycle_note: str | None = None

    def __post_init__(self) -> None:
        if self.idle_cycles is None:
            self.idle_cycles = self.stall_cycles

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PowerReading:
    """Power over one invoke. `method` says how it was obtained ("xadc", "external", "estimated")."""

    method: str | None = None
    avg_w: float | None = None
    max_w: float | None = None
    energy_j: float | None = None
    temperature_c: dict[str, float] | None = None
    voltages_v: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Probes:
    """Accumulating wall-clock probes; names are the report's timing fields."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def measure(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds


class Backend(abc.ABC):
    """Base class; subclasses register themselves in :mod:`dtpu.backends` under `name`."""

    name: str = ""
    #: the TFLite runtime whose default interpreter the results must equal ("tflite_runtime",
    #: "ai_edge_litert"; None: dtpu.reference's default). The delegate sets it at its first
    #: Prepare, before any `prepare`; it picks the output stage (dtpu.reference.rounding_variant).
    runtime: str | None = None

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})

    @property
    def enabled_precisions(self) -> tuple[Precision, ...] | None:
        """Lane precisions this target can run (None: any). The delegate leaves nodes of other
        precisions on the CPU: a board build synthesized with fewer precisions claims less."""
        return None

    @property
    def rq_variants(self) -> tuple[str, ...] | None:
        """Names of the requantization variants (dtpu.reference.Variant) this target's post lanes
        have (None: all). The delegate leaves a node whose interpreter requantizes with another
        on the CPU: a build with fewer variants (HwConfig RQ_EN) claims less."""
        return None

    def placement_error(self, spec: ConvSpec) -> str | None:
        """Why this target cannot place `spec` in its memories (None: it can). The delegate
        asks before it claims a node, so that prepare never fails for lack of on-chip memory."""
        return None

    def check(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None) -> None:
        """Raise ValueError when :meth:`prepare` would refuse the node (register field widths,
        the build's buffers), without making it resident: the delegate's claim of a node on a
        backend that runs command lists, whose nodes are compiled per graph at Prepare and
        never prepared one by one. The default prepares and releases."""
        self.release(self.prepare(spec, filters, bias))

    @abc.abstractmethod
    def prepare(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None) -> Any:
        """Make a node resident; return an opaque handle passed back to `invoke`."""

    @abc.abstractmethod
    def invoke(self, handle: Any, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        """Run one node on `x` (NHWC, the TFLite input dtype); return the TFLite output and counters."""

    #: runs whole delegated partitions as command lists (contract 2.0) when True: the delegate
    #: then claims nodes with :meth:`check`, compiles a graph's partitions once at Prepare with
    #: :meth:`prepare_partitions` and runs them with :meth:`invoke_partition`; :meth:`prepare`
    #: and :meth:`invoke` only for a graph the compiler refuses (job by job)
    lists: bool = False

    #: partitions may run on the delegate's C invoke path (delegate/dtpu_cpath.c) after their
    #: first invoke: the backend then offers ``owner_cell`` (an int64 numpy word: the cid of the
    #: ListProgram its core holds loaded, else 0), ``transport`` and ``finish_partition``
    c_invoke: bool = False
    #: with :attr:`c_invoke`: each C run is handed to ``finish_partition`` at once, with its
    #: inputs and outputs (a backend that checks every run), not when a report is read
    c_invoke_eager: bool = False

    #: an optional `invoke_into(handle, x, probes, out) -> HwCounters` that writes the node's
    #: output into `out` (TFLite's tensor) instead of returning it; None: :meth:`invoke` only
    invoke_into = None

    @property
    def vector_unit(self) -> bool:
        """Whether the target has contract 2.1's vector unit (ADD/SUB, MUL, pooling, MEAN in
        command lists); declared by the target's transport, False for targets without lists."""
        return False

    def vector_error(self, spec) -> str | None:
        """Why this target's vector unit cannot run `spec` (a :class:`dtpu.hw.vec_lower.VecSpec`;
        None: it can): the unit's buffers and fields are the build's, known to the backend."""
        return "target has no vector unit"

    @property
    def job_streams(self) -> bool:
        """Whether the target can run nodes job by job (the 1.2 stream path): a graph the list
        compiler refuses falls back to it. False on the 2.0 overlay (no stream DMAs)."""
        return True

    def prepare_partitions(self, partitions: list, keep: list | None = None) -> Any:
        """Compile a graph's partitions (lists of :class:`dtpu.hw.listcompiler.NodeIn`) once; the
        handle goes to :meth:`invoke_partition`. `keep`: per partition, the nodes whose outputs
        are read (the others are intermediate). Raises ValueError (CmdlistError) with the
        reason when they cannot be expressed; the delegate then runs the nodes one by one."""
        raise NotImplementedError(f"backend {self.name} runs nodes one by one")

    def invoke_partition(self, program: Any, index: int, inputs: list[np.ndarray],
                         outputs: dict[int, np.ndarray], probes: Probes) -> list[HwCounters]:
        """Run partition `index` of `program`: `inputs` by k of NodeIn.src = -1 - k, `outputs`
        (node index -> array) filled; returns the counters of every node of the partition."""
        raise NotImplementedError(f"backend {self.name} runs nodes one by one")

    def release_partitions(self, program: Any) -> None:
        """Free what :meth:`prepare_partitions` allocated."""

    def settle(self) -> None:
        """A graph's nodes are all prepared and it runs them one by one: whatever the backend
        decides over the whole set (which nodes stay on chip) is decided now, at Prepare, so
        that the first invoke does no more than later ones. Nothing to decide here."""

    def power(self) -> PowerReading:
        """Power over the last invoke; backends with a sensor or a model override this."""
        return PowerReading()

    def release(self, handle: Any) -> None:
        """Free what `prepare` made resident."""

    def close(self) -> None:
        """Free the backend itself (simulator, board handles)."""
