"""Cycles into time, throughput and energy, from the chip profile's marked assumptions.

The machine counts what a program costs (cycles at one block per cycle, MACs, adds, compares,
bytes moved in each memory); the profile says what a cycle, a MAC and a byte are worth on the
chip (``clock_mhz``, ``power``). Both sides are stated, so a figure here can be set beside a
published one (RC64's VGG-19 frames/s and frames/s/W) with its assumptions next to it, and
changes when the chip team's numbers replace ours.

Energy is static power x time, plus ``mac_pj`` per MAC, add and compare (an adder or comparator
priced as a MAC: an upper bound), plus ``sram_pj_per_byte`` per byte the machine counts in frame
and filter memory (each operand once per instruction: the traffic of perfect local reuse), plus
``dram_pj_per_byte`` per byte moved to or from external memory.

GOP/s counts two operations per MAC (multiply and add). RC64's published VGG-19 figures count
one: 19.6 G MACs a frame at 2.8 frames/s is 55 G/s, its "80 % of 70 GOP/s".
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from dtpu.isro.profile import Profile

# RC64's published VGG-19 224x224 figures as the seed report quotes them (issue 28): 2.8 frames/s at
# 80 % of its 70 GOP/s peak, 0.56 frames/s/W; its ops are MACs (19.6 G MACs x 2.8 = 55 G/s).
RC64_VGG19 = {"net": "VGG-19 224 (RC64, published)", "frames_per_s": 2.8, "peak_gop_per_s": 70.0,
              "fraction_of_peak": 0.80, "frames_per_s_per_w": 0.56, "macs": 19_632_000_000}

CYCLE_MODEL = ("one block per cycle per instruction (a block: the MACs of one output element, at "
               "most pe of them; a convolution runs `lanes` blocks side by side, one output channel each); an XFER costs the external memory's latency + bytes / bandwidth and runs "
               "on a load or store unit beside the compute unit, and a staged program's ADD (split partials "
               "reduced) on the adder beside it, each in program order, waiting only for its data")


@dataclass(frozen=True)
class Figures:
    """One frame's cost; None where the profile gives no clock or no power model."""

    cycles: int                      # START to the end of the last instruction (dtpu.isro.timing)
    macs: int
    pe: int | None
    transfer_cycles: int             # the DMA engine busy (XFER)
    hidden_cycles: int               # of those, while the compute unit was busy too
    clock_mhz: float | None
    seconds: float | None
    frames_per_s: float | None
    gop_per_s: float | None          # 2 ops per MAC
    peak_gop_per_s: float | None
    utilization: float | None        # MACs / (cycles x pe): the fraction of the MAC array's peak used
    energy_j: float | None
    energy_static_j: float | None
    energy_mac_j: float | None
    energy_memory_j: float | None
    power_w: float | None
    frames_per_s_per_w: float | None

    def to_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        """What `run` prints: every figure with the assumption it rests on."""
        util = "" if self.utilization is None else f", MAC utilization {100 * self.utilization:.1f} %"
        if self.seconds is None:
            return [f"{self.cycles:,} cycles{util}; the chip profile gives no clock_mhz, so no time, "
                    f"frames/s or energy"]
        peak = "" if self.peak_gop_per_s is None else f" of {self.peak_gop_per_s:.1f} peak"
        out = [f"at {self.clock_mhz:g} MHz (profile clock, an assumption): {self.seconds * 1e3:.3f} ms per "
               f"frame, {self.frames_per_s:.2f} frames/s, {self.gop_per_s:.2f} GOP/s{peak} "
               f"(2 ops per MAC){util}"]
        if self.energy_j is None:
            out.append("no energy: the chip profile gives no power model")
        else:
            out.append(f"energy (profile power model, an assumption): {self.energy_j * 1e3:.3f} mJ per frame "
                       f"(static {self.energy_static_j * 1e3:.3f}, arithmetic {self.energy_mac_j * 1e3:.3f}, "
                       f"memory {self.energy_memory_j * 1e3:.3f}), {self.power_w:.3f} W, "
                       f"{self.frames_per_s_per_w:.2f} frames/s/W")
        if self.transfer_cycles:
            out.append(f"transfers: {self.transfer_cycles:,} cycles on the load/store units, {self.hidden_cycles:,} of them "
                       f"hidden behind compute; {self.transfer_cycles - self.hidden_cycles:,} cycles "
                       f"({100 * (self.transfer_cycles - self.hidden_cycles) / self.cycles:.1f} % of the "
                       f"{self.cycles:,}) stall it")
        out.append(f"cycle model: {CYCLE_MODEL}")
        return out


def comparison(rows: list[tuple[str, str, "Figures"]]) -> str:
    """A table of (net, placement, figures) beside RC64's VGG-19, MAC rates in RC64's convention."""
    head = (f"{'net':<34} {'placement':<9} {'G MACs':>7} {'cycles':>12} {'frames/s':>9} {'G MAC/s':>8} "
            f"{'of peak':>8} {'frames/s/W':>10}")
    lines = [head]
    for net, placement, f in rows:
        rate = f.macs * f.frames_per_s / 1e9 if f.frames_per_s else float("nan")
        peak = f"{100 * f.utilization:.1f} %" if f.utilization is not None else "-"
        fpw = f"{f.frames_per_s_per_w:.2f}" if f.frames_per_s_per_w else "-"
        fps = f"{f.frames_per_s:.2f}" if f.frames_per_s else "-"
        lines.append(f"{net[:34]:<34} {placement:<9} {f.macs / 1e9:>7.2f} {f.cycles:>12,} {fps:>9} {rate:>8.2f} "
                     f"{peak:>8} {fpw:>10}")
    r = RC64_VGG19
    lines.append(f"{r['net']:<34} {'-':<9} {r['macs'] / 1e9:>7.2f} {'-':>12} {r['frames_per_s']:>9.2f} "
                 f"{r['macs'] * r['frames_per_s'] / 1e9:>8.2f} {100 * r['fraction_of_peak']:>6.1f} % "
                 f"{r['frames_per_s_per_w']:>10.2f}")
    lines.append("G MAC/s counts a MAC as one operation, as RC64's GOP/s do; ours rest on the chip profile's "
                 "clock and power assumptions")
    return "\n".join(lines)


def figures(counters, profile: Profile, fmt: str, pe: int | None, schedule=None) -> Figures:
    """A run's counters (:class:`dtpu.isro.machine.Counters`) under `profile`, for programs in
    format `fmt` ("i8", "f32") run with `pe` processing elements (None: unlimited); `schedule`
    (:class:`dtpu.isro.timing.Schedule`) overlaps transfers with compute, without it every
    instruction waits for the one before."""
    macs = int(counters.macs)
    xfer = int(getattr(counters, "transfer_cycles", 0))
    if schedule is not None:
        cycles, hidden = int(schedule.cycles), int(schedule.hidden_cycles)
    else:
        cycles, hidden = int(counters.cycles), 0
    util = macs / (cycles * pe) if pe and cycles else None
    clock = profile.clock_mhz
    none = dict(seconds=None, frames_per_s=None, gop_per_s=None, peak_gop_per_s=None, energy_j=None,
                energy_static_j=None, energy_mac_j=None, energy_memory_j=None, power_w=None,
                frames_per_s_per_w=None)
    if clock is None or cycles == 0:
        return Figures(cycles, macs, pe, xfer, hidden, clock, utilization=util, **none)
    seconds = cycles / (clock * 1e6)
    timing = dict(seconds=seconds, frames_per_s=1.0 / seconds, gop_per_s=2 * macs / seconds / 1e9,
                  peak_gop_per_s=None if pe is None else 2 * pe * clock * 1e6 / 1e9)
    pw = profile.power
    if pw is None:
        return Figures(cycles, macs, pe, xfer, hidden, clock, utilization=util, **{**none, **timing})
    static = pw.static_w * seconds
    arith = (macs + int(counters.adds) + int(counters.compares)) * pw.mac(fmt) * 1e-12
    moved = counters.frame_read + counters.frame_write + counters.filter_read + counters.filter_write
    external = int(getattr(counters, "external_read", 0)) + int(getattr(counters, "external_write", 0))
    memory = int(moved) * pw.sram_pj_per_byte * 1e-12 + external * (pw.dram_pj_per_byte or 0.0) * 1e-12
    energy = static + arith + memory
    power = energy / seconds
    return Figures(cycles, macs, pe, xfer, hidden, clock, utilization=util, **timing, energy_j=energy,
                   energy_static_j=static, energy_mac_j=arith, energy_memory_j=memory, power_w=power,
                   frames_per_s_per_w=(1.0 / seconds) / power)


def layer_table(bundle, result) -> str:
    """Where a run's cycles go, layer by layer: MACs, the cycles a full MAC array would need
    (MACs / pe), the compute, adder (ADD) and transfer cycles its instructions cost, the cycles
    it added to the frame's elapsed time (from the previous layer's last instruction to its own,
    :mod:`dtpu.isro.timing`), and its MAC utilization over them. The table is how a figure below
    the goal is traced to a layer: a wide gap between ideal and compute is the array's mapping
    (a block smaller than pe, the split blocks), between compute and elapsed waiting for data."""
    pe = bundle.meta.get("pe")
    ends = result.schedule.ends if result.schedule is not None else ()
    head = (f"{'layer':<28} {'kind':<8} {'M MACs':>8} {'ideal':>11} {'compute':>11} {'adder':>10} "
            f"{'transfer':>11} {'elapsed':>11} {'util':>6}  staging")
    lines, prev = [head], 0
    total = {"macs": 0, "ideal": 0, "compute": 0, "adder": 0, "transfer": 0}
    for layer in bundle.layers:
        if layer["kind"] == "input":
            continue
        a, z = layer["instructions"]
        cost = {"compute": 0, "adder": 0, "transfer": 0}
        for i in range(a, z + 1):
            op = bundle.program[i].op.name
            unit = "transfer" if op == "XFER" else "adder" if op == "ADD" and bundle.meta.get("staged") else "compute"
            cost[unit] += int(result.trace[i].cycles)
        end = max(ends[a:z + 1]) if ends else prev + sum(cost.values())
        elapsed, prev = end - prev, max(prev, end)
        macs = int(layer["macs"])
        ideal = macs / pe if pe else 0
        util = f"{100 * ideal / elapsed:5.1f}%" if pe and elapsed > 0 else "    -"
        st = layer.get("staging")
        staging = (f"{st['chunks']} chunk(s) x {st['bands']} band(s){', double' if st['double'] else ''}"
                   if st else "on chip")
        lines.append(f"{layer['name'][:28]:<28} {layer['kind']:<8} {macs / 1e6:>8.1f} {ideal:>11,.0f} "
                     f"{cost['compute']:>11,} {cost['adder']:>10,} {cost['transfer']:>11,} {elapsed:>11,} {util}  "
                     f"{staging}")
        total["macs"] += macs
        total["ideal"] += ideal
        for k in cost:
            total[k] += cost[k]
    cycles = result.schedule.cycles if result.schedule is not None else prev
    util = f"{100 * total['ideal'] / cycles:5.1f}%" if pe and cycles else "    -"
    lines.append(f"{'total':<28} {'':<8} {total['macs'] / 1e6:>8.1f} {total['ideal']:>11,.0f} "
                 f"{total['compute']:>11,} {total['adder']:>10,} {total['transfer']:>11,} {cycles:>11,} {util}")
    return "\n".join(lines)
