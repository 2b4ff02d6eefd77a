"""Per-invoke reports of the DTPU delegate: what ran where, how long each part took, what the
hardware (or its model) counted.

One :class:`Report` covers one ``Interpreter.invoke()`` as seen by one delegate: every delegated
node that ran, with timing probes (total kernel time measured in C with ``clock_gettime``, the
C→Python crossing, and the Python-side pack / transfer / compute / unpack / post phases that the
backend's :class:`~dtpu.backends.base.Probes` recorded), hardware counters and power. Nodes the
delegate left on the CPU are listed under ``rejected`` with the reason.

Reports are kept in memory (the last :data:`KEEP` of them, process-wide) for
``dtpu.last_report()`` / ``dtpu.reports()``, printed as a table with ``report=summary`` and
appended as JSON lines with ``report=<path>``. Times are in microseconds; a counter or a power
field a backend cannot know is ``None`` (``null`` in JSON).
"""
from __future__ import annotations

import collections
import json
import statistics
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

KEEP = int(os.environ.get("DTPU_REPORT_KEEP", "1000"))

TIMING_FIELDS = ("total", "crossing", "python", "pack", "transfer", "compute", "unpack", "post")
HW_FIELDS = ("cycles", "stall_cycles", "idle_cycles", "macs", "utilization", "latency_us",
             "words_in", "words_out", "model_cycles", "cycle_note")
#: the host's work per invoke on a device backend (dtpu.driver.hostops); None on backends with
#: no device protocol (reference, isro, null)
HOST_FIELDS = ("mmio_reads", "mmio_writes", "doorbells", "dma_starts", "transforms", "us")
POWER_FIELDS = ("method", "avg_w", "max_w", "energy_j", "temperature_c", "voltages_v")


def empty_timing() -> dict[str, float]:
    return {name: 0.0 for name in TIMING_FIELDS}


def empty_hw() -> dict[str, Any]:
    return {name: None for name in HW_FIELDS}


def empty_host() -> dict[str, Any]:
    return {name: None for name in HOST_FIELDS}


def empty_power() -> dict[str, Any]:
    return {name: None for name in POWER_FIELDS}


@dataclass
class NodeRecord:
    node: int
    op: str
    name: str
    mode: str
    precision: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    timing_us: dict[str, float] = field(default_factory=empty_timing)
    hw: dict[str, Any] = field(default_factory=empty_hw)
    host: dict[str, Any] = field(default_factory=empty_host)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "op": self.op, "name": self.name, "mode": self.mode,
                "precision": self.precision, "input_shape": list(self.input_shape),
                "output_shape": list(self.output_shape), "timing_us": dict(self.timing_us),
                "hw": dict(self.hw), "host": dict(self.host)}


@dataclass(frozen=True)
class BoardPricing:
    """A cost model that prices a :class:`Report` on a board: `estimate(report)` gives the
    estimate's fields (None when the report cannot be priced), `lines(estimate)` the lines a
    report table prints for them (dtpu.board.costs' ``for_report`` and ``report_lines``)."""
    estimate: Callable[[Report], dict[str, Any] | None]
    lines: Callable[[dict[str, Any]], list[str]]


@dataclass
class Report:
    seq: int
    delegate: int
    graph: int
    backend: str
    runtime: str
    started_unix: float
    complete: bool = False
    kernels: int = 0
    timing_us: dict[str, float] = field(default_factory=empty_timing)
    _hw: dict[str, Any] = field(default_factory=empty_hw, repr=False)
    power: dict[str, Any] = field(default_factory=empty_power)
    nodes: list[NodeRecord] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    #: the first invoke after a (re)prepare: it compiles jobs and loads weights, so tables and
    #: means keep it apart from the steady state; `prepare_us` is the kernel Prepare time before it
    first: bool = False
    prepare_us: float | None = None
    #: how the device ran the partitions: "lists" (one command list each, contract 2.0), "jobs"
    #: (job by job, contract 1.2), "lists+jobs" if both in one invoke; None: no device protocol
    path: str | None = None
    #: what TFLite keeps on the CPU around the partitions, seen at Prepare
    #: (dtpu.board.costs.cpu_side_of_graph), and the bytes the list path copies into and out of
    #: the partitions' buffers: with hw and host, what the PYNQ-Z2 estimate prices
    cpu_side: dict[str, Any] | None = None
    io_bytes: list[int] = field(default_factory=lambda: [0, 0])
    #: delegated partitions of the graph (runs of claimed nodes the CPU's nodes separate): each is
    #: one kernel, one doorbell on the command-list path
    partitions: int = 0
    #: host time of each partition run as one command list, {"nodes": [...], "timing_us":
    #: {phase: us}}: the host's phases are the partition's, not any one node's (their nodes'
    #: timing_us stays zero; their device time is hw.latency_us)
    partition_us: list[dict[str, Any]] = field(default_factory=list)
    #: how this report is priced on the board: given by whoever makes the report (the
    #: delegate runtime passes the board's cost model), so that this module, which every layer
    #: reads, imports nothing above it
    pricing: BoardPricing | None = field(default=None, repr=False, compare=False)
    _hw_stale: bool = field(default=False, repr=False, compare=False)
    _host: dict[str, Any] = field(default_factory=empty_host, repr=False)

    @property
    def hw(self) -> dict[str, Any]:
        """Run-level counters: sums over the nodes (utilization weighted by cycles), summed
        when first read rather than at every invoke (they cost microseconds per invoke)."""
        if self._hw_stale:
            self._hw_stale = False
            self._summarize_hw()
        return self._hw

    @property
    def host(self) -> dict[str, Any]:
        """The host's work of the invoke: sums over the nodes (None where no node knows)."""
        if self._hw_stale:
            self._hw_stale = False
            self._summarize_hw()
        return self._host

    def to_dict(self) -> dict[str, Any]:
        return {"type": "invoke", "seq": self.seq, "delegate": self.delegate, "graph": self.graph,
                "backend": self.backend, "runtime": self.runtime, "started_unix": self.started_unix,
                "complete": self.complete, "kernels": self.kernels, "first": self.first,
                "prepare_us": self.prepare_us, "path": self.path, "partitions": self.partitions,
                "partition_us": [dict(p) for p in self.partition_us], "timing_us": dict(self.timing_us),
                "hw": dict(self.hw), "host": dict(self.host), "power": dict(self.power),
                "nodes": [n.to_dict() for n in self.nodes], "rejected": [dict(r) for r in self.rejected]}

    def table(self) -> str:
        return format_table([self])

    def board_estimate(self) -> dict[str, Any] | None:
        """The whole invoke on the PYNQ-Z2 estimated from this report (by its :attr:`pricing`,
        dtpu.board.costs': device cycles at the build's clock, this invoke's host operations at
        the board's per-operation costs, the CPU operators around the partitions); None without
        device cycles and host counts, or for a report nobody gave a pricing."""
        return None if self.pricing is None else self.pricing.estimate(self)

    def summarize_hw(self) -> None:
        """The nodes are all in: :attr:`hw` sums them when read."""
        self._hw_stale = True

    def _summarize_hw(self) -> None:
        sums: dict[str, Any] = {"cycles": None, "stall_cycles": None, "idle_cycles": None,
                                "macs": None, "latency_us": None}
        host: dict[str, Any] = empty_host()
        words: dict[str, dict[str, int] | None] = {"words_in": None, "words_out": None}
        w_sum = w_cycles = u_sum = 0.0
        u_n = 0
        for node in self.nodes:
            hw = node.hw
            for name, total in sums.items():
                v = hw.get(name)
                if v is not None:
                    sums[name] = v if total is None else total + v
            for name, total in words.items():  # 64-bit words per stream port
                d = hw.get(name)
                if d is not None:
                    if total is None:
                        total = words[name] = {}
                    for stream, n in d.items():
                        total[stream] = total.get(stream, 0) + n
            for name, v in node.host.items():
                if v is not None:
                    total = host.get(name)
                    host[name] = v if total is None else total + v
            u, c = hw.get("utilization"), hw.get("cycles")
            if u is not None:
                u_sum += u
                u_n += 1
                if c:
                    w_sum += u * c
                    w_cycles += c
        self._hw.update(sums)
        self._hw.update(words)
        self._host.update(host)
        self._hw["utilization"] = (w_sum / w_cycles if w_cycles else u_sum / u_n if u_n else None)


class ReportStore:
    """The process-wide ring of recent reports behind dtpu.last_report() / dtpu.reports()."""

    def __init__(self, keep: int = KEEP) -> None:
        self._reports: collections.deque[Report] = collections.deque(maxlen=max(1, keep))
        self._lock = threading.Lock()
        self.before_read: Callable[[], None] | None = None  # finalizes pending reports

    @property
    def capacity(self) -> int:
        """How many reports the ring keeps (older ones are dropped as new ones come)."""
        return self._reports.maxlen or 0

    def add(self, report: Report) -> None:
        with self._lock:
            self._reports.append(report)

    def _settle(self) -> None:
        if self.before_read is not None:
            self.before_read()

    def last(self) -> Report | None:
        self._settle()
        with self._lock:
            return self._reports[-1] if self._reports else None

    def all(self) -> list[Report]:
        self._settle()
        with self._lock:
            return list(self._reports)

    def clear(self) -> None:
        with self._lock:
            self._reports.clear()


STORE = ReportStore()


class JsonLinesSink:
    """Appends one JSON object per line; opened per write so no file handle outlives a write."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=_jsonable) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _board_lines(reports: list[Report]) -> list[str]:
    """Device time at the build's clock and the estimated whole invoke on the PYNQ-Z2, for the
    last of `reports` that can be priced; a line saying why not otherwise."""
    for report in reversed(reports):
        est = report.board_estimate()
        if est is not None:
            return report.pricing.lines(est)
    return ["device time and PYNQ-Z2 estimate: none (this backend counts no device cycles "
            "and host operations)"]


def format_table(reports: Iterable[Report]) -> str:
    """Per-node steady-state means over `reports` (one table row per delegated node), the first
    invoke and the prepare time apart, then power and rejected nodes.

    A first invoke after a prepare compiles jobs and loads weights: folded into a mean it makes
    the steady state look several times slower than it is, so every mean here is over the other
    invokes (over all of them, said so, when there is nothing else)."""
    reports = [r for r in reports if r is not None]
    if not reports:
        return "dtpu: no delegated invokes recorded\n"
    firsts = [r for r in reports if r.first]
    steady = [r for r in reports if not r.first]
    base = steady or reports
    rows: dict[int, list[NodeRecord]] = collections.OrderedDict()
    for report in base:
        for node in report.nodes:
            rows.setdefault(node.node, []).append(node)
    head = reports[-1]
    cols = ("node", "op", "mode/prec", "output", "pack", "xfer", "compute", "unpack", "post",
            "cycles", "device", "MACs", "util")
    in_lists = {n for r in base for p in r.partition_us for n in p["nodes"]}
    lines = []
    for node_id, records in rows.items():
        first, count = records[0], len(records)
        mean = {k: sum(r.timing_us.get(k, 0.0) for r in records) / count for k in TIMING_FIELDS}
        cycles = [r.hw.get("cycles") for r in records if r.hw.get("cycles") is not None]
        device = [r.hw.get("latency_us") for r in records if r.hw.get("latency_us") is not None]
        util = [r.hw.get("utilization") for r in records if r.hw.get("utilization") is not None]
        # a node of a command list has no host time of its own: it is its partition's, below
        host = (["-"] * 5 if node_id in in_lists else
                [_fmt(mean[k]) for k in ("pack", "transfer", "compute", "unpack", "post")])
        lines.append((str(node_id), first.op, f"{first.mode}/{first.precision}",
                      "x".join(map(str, first.output_shape)), *host,
                      _fmt(sum(cycles) // len(cycles) if cycles else None),
                      _fmt(sum(device) / len(device) if device else None, 2),
                      _fmt(first.hw.get("macs")),
                      _fmt(sum(util) / len(util) if util else None, 3)))
    widths = [max(len(c), *(len(row[i]) for row in lines)) if lines else len(c)
              for i, c in enumerate(cols)]
    which = (f"steady state: {len(steady)} invokes after the first" if steady else
             f"{len(base)} first invoke{'s' if len(base) > 1 else ''} only, no steady state yet")
    out = [f"dtpu report: backend={head.backend}"
           + (f" path={head.path}" if head.path else "")
           + f" runtime={head.runtime} invokes={len(reports)} "
           f"(per-node means over the {which}; microseconds)"]
    out.append("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    out.extend("  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in lines)
    out.append("(pack .. post: host time; device: the node's cycles at the build's clock)")
    parts = _partition_lines(base)
    if parts:
        out.append("host time per command list (compute: the backend's wall time for the "
                   "device's work, a simulator's own time on backends model and rtl):")
        out.extend(parts)
    total = {k: sum(r.timing_us.get(k, 0.0) for r in base) / len(base) for k in TIMING_FIELDS}
    median = statistics.median(r.timing_us.get("total", 0.0) for r in base)
    board = _board_lines(base)
    out.extend(board)
    out.extend(cycle_check_lines(head))
    out.append(f"simulator host time on this machine (not the board), "
               f"per invoke ({'steady state' if steady else 'first invokes'}): total mean "
               f"{total['total']:.1f} us, median {median:.1f} us (C, clock_gettime), crossing "
               f"C<->Python {total['crossing']:.1f} us, Python {total['python']:.1f} us")
    if firsts:
        prep = [r.prepare_us for r in firsts if r.prepare_us is not None]
        out.append(f"first invoke after prepare (not in the means): total "
                   f"{firsts[-1].timing_us.get('total', 0.0):.1f} us"
                   + (f"; prepare {prep[-1]:.1f} us" if prep else "")
                   + (f" ({len(firsts)} prepares in these invokes)" if len(firsts) > 1 else ""))
    hosts = [r.host for r in base if r.host.get("doorbells") is not None]
    if hosts:
        mean_h = {k: sum(h.get(k) or 0 for h in hosts) / len(hosts) for k in HOST_FIELDS}
        out.append(f"host per invoke ({'steady state' if steady else 'first invokes'}): "
                   f"{mean_h['mmio_reads']:.0f} register reads, {mean_h['mmio_writes']:.0f} "
                   f"writes, {mean_h['doorbells']:.0f} doorbells, {mean_h['dma_starts']:.0f} DMA "
                   f"starts, {mean_h['transforms']:.0f} transforms, {mean_h['us']:.1f} us "
                   f"(host time without the device's)")
    else:
        out.append("host per invoke: not counted by this backend (no device protocol)")
    power = head.power
    if any(power.get(k) is not None for k in ("avg_w", "energy_j", "temperature_c")):
        temp = power.get("temperature_c")
        if isinstance(temp, dict):  # sampled on the board: min/avg/max over the invoke
            temp = (f", temperature {_fmt(temp.get('avg'), 1)} C "
                    f"({_fmt(temp.get('min'), 1)}-{_fmt(temp.get('max'), 1)})")
        else:
            temp = f", temperature {_fmt(temp, 1)} C" if temp is not None else ""
        out.append(f"power: avg {_fmt(power.get('avg_w'), 3)} W, max {_fmt(power.get('max_w'), 3)} W, "
                   f"energy {_fmt(power.get('energy_j'), 6)} J{temp} ({power_scope(power)})")
    else:
        out.append("power: not measured by this backend")
    out.extend(cpu_lines(head))
    return "\n".join(out) + "\n"


def cycle_check_lines(report: Report) -> list[str]:
    """The hardware's cycles against the golden model's, where the backend ran both on the same
    command lists (backend=rtl): one line when every node agrees, else each differing node with
    the cause the compiler names (a documented modelling limit, or none: a bug to report)."""
    checked = [n for n in report.nodes if n.hw.get("model_cycles") is not None]
    if not checked:
        return []
    rtl = sum(n.hw.get("cycles") or 0 for n in checked)
    model = sum(n.hw["model_cycles"] for n in checked)
    differ = [n for n in checked if n.hw.get("cycles") != n.hw["model_cycles"]]
    if not differ:
        return [f"cycles against the golden model (run beside the {report.backend.upper()} on the "
                f"same command lists): equal on all {len(checked)} nodes ({rtl:,} cycles)"]
    out = [f"cycles against the golden model (run beside the {report.backend.upper()} on the same "
           f"command lists): {report.backend.upper()} {rtl:,}, model {model:,}; {len(differ)} of "
           f"{len(checked)} nodes differ:"]
    for n in differ:
        c, m = n.hw.get("cycles") or 0, n.hw["model_cycles"]
        out.append(f"  node {n.node} {n.op} {'x'.join(map(str, n.output_shape))}: {c:,} against "
                   f"{m:,} ({c - m:+,}): {n.hw.get('cycle_note') or 'cause not recorded'}")
    return out


def _partition_lines(reports: list[Report]) -> list[str]:
    """Host time per command-list partition, means over `reports` (one line per partition)."""
    parts: dict[tuple, list[dict[str, float]]] = collections.OrderedDict()
    for report in reports:
        for p in report.partition_us:
            parts.setdefault(tuple(p["nodes"]), []).append(p["timing_us"])
    out = []
    for i, (nodes, timings) in enumerate(parts.items()):
        mean = {k: sum(t.get(k, 0.0) for t in timings) / len(timings)
                for k in ("pack", "transfer", "compute", "unpack", "post")}
        span = f"node {nodes[0]}" if len(nodes) == 1 else f"nodes {nodes[0]}-{nodes[-1]}"
        out.append(f"  partition {i + 1} ({span}): " + ", ".join(
            f"{k} {v:.1f} us" for k, v in mean.items() if v))
    return out


def power_scope(power: dict[str, Any]) -> str:
    """What a power figure covers, by its method (docs/power.md)."""
    method = power.get("method")
    if method == "estimated":
        return ("estimated: the DTPU's own, the xc7z020's static power plus its MACs, on-chip "
                "memory accesses and DDR words, over its busy time (cycles / clock); "
                "docs/power.md")
    if method == "external":
        return ("external meter: the whole board at its supply; energy = that power x the "
                "DTPU's busy time")
    return str(method)


def cpu_summary(report: Report) -> str:
    """One line: how many nodes the CPU runs, of which kinds, and the partitions they cause."""
    rejected = report.rejected
    if not rejected:
        return (f"left on the CPU: nothing; the delegated nodes run as {report.partitions} "
                f"partition{'s' if report.partitions != 1 else ''}")
    kinds = collections.Counter(r["op"] for r in rejected)
    what = ", ".join(f"{n} {op}" for op, n in kinds.most_common())
    split = (f"the delegated nodes run as {report.partitions} partition"
             f"{'s' if report.partitions != 1 else ''} between them" if report.partitions
             else "nothing delegated")
    return f"left on the CPU: {len(rejected)} node{'s' if len(rejected) != 1 else ''} ({what}); {split}"


def cpu_lines(report: Report) -> list[str]:
    """The CPU summary, then every node left on the CPU with its reason."""
    if not report.rejected and not report.partitions:
        return []
    return [cpu_summary(report) + (":" if report.rejected else "")] + [
        f"  node {r['node']} {r['op']}{' ' + r['name'] if r.get('name') else ''}: {r['reason']}"
        for r in report.rejected]
