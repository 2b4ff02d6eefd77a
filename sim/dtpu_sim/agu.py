"""What the contract-2.0 address-generator benches share: sim/tb/tb_agu.py (hw/rtl/dtpu_act_agu.v)
and sim/tb/tb_res_agu.py (hw/rtl/dtpu_res_agu.v).

Both units have the same face: descriptor fields on ``cfg_<field>`` inputs, a ``start`` pulse,
``busy`` / ``empty`` status, and a request stream (``m_valid`` / ``m_ready``, ``m_index``, a flag
for a request without an element, ``m_last``). The benches differ in their descriptors and in
the golden-model sequence they compare against (executor.Executor's gather or scatter); driving
the unit, taking its stream under random backpressure and comparing it are the same, and are
here (:class:`AguBench`), so a fix to the handshake loop reaches both.

Environment (both benches): DTPU_AGU_CASES (random cases per test), DTPU_AGU_SEED,
DTPU_AGU_MAX_ELEMS (cap of one case's stream).
"""
from __future__ import annotations

import os

from cocotb.triggers import FallingEdge

from dtpu_sim.signals import drive, start_clock

CASES = int(os.environ.get("DTPU_AGU_CASES", "8"))
SEED = int(os.environ.get("DTPU_AGU_SEED", "1"))
MAX_ELEMS = int(os.environ.get("DTPU_AGU_MAX_ELEMS", "2500"))
#: a request without an element (the act AGU's PAD, the result AGU's dropped lane)
NO_ELEMENT = -1
#: the backpressure of the random tests: m_ready high with one of these probabilities per case
P_READY = [1.0, 0.8, 0.5, 0.2]


def ceil_div(a, b):
    return -(-a // b)


class AguBench:
    """One AGU under test. `fields`: the descriptor fields the unit takes (as ``cfg_<field
    lower-case>``), looked up in a case, a tuple of field dicts as the golden model has them
    (field names are unique across a case's dicts); `no_element`: the output that flags a
    request without an element (``m_pad``, ``m_drop``)."""

    def __init__(self, dut, fields, no_element):
        self.dut = dut
        self.fields = tuple(fields)
        self.no_element = getattr(dut, no_element)

    async def reset(self):
        dut = self.dut
        start_clock(dut)
        drive(dut, rst_n=0, start=0, m_ready=0)
        for _ in range(2):
            await FallingEdge(dut.clk)
        dut.rst_n.value = 1
        await FallingEdge(dut.clk)

    def set_fields(self, case):
        values = {k: v for part in case for k, v in part.items()}
        for k in self.fields:
            getattr(self.dut, f"cfg_{k.lower()}").value = values[k]

    def take(self):
        """The request on the bus (at a handshake): (element index or NO_ELEMENT, last)."""
        dut = self.dut
        idx = NO_ELEMENT if self.no_element.value else int(dut.m_index.value)
        return idx, bool(dut.m_last.value)

    async def run_case(self, case, rng, p_ready):
        """Start the unit on `case`, take its requests with m_ready high with probability p_ready
        each cycle; returns (requests [(index or NO_ELEMENT, last)], edges from start to the
        last handshake)."""
        dut = self.dut
        self.set_fields(case)
        dut.start.value = 1
        await FallingEdge(dut.clk)        # the rising edge before this one sampled start
        dut.start.value = 0
        got = []
        edges = 0
        limit = 200 + 50 * (MAX_ELEMS + 100) / max(p_ready, 0.02)
        while True:
            edges += 1
            assert edges < limit, f"no end of stream after {edges} cycles ({len(got)} requests)"
            ready = rng.random() < p_ready
            dut.m_ready.value = int(ready)
            valid = bool(dut.m_valid.value)
            if valid and ready:
                got.append(self.take())
            await FallingEdge(dut.clk)
            if valid and ready and got[-1][1]:
                break
        dut.m_ready.value = 0
        assert not dut.m_valid.value and not dut.busy.value, "requests after m_last"
        return got, edges

    async def random_cases(self, rng, cases):
        """Each (case, expected) of `cases` under a random backpressure of P_READY; returns the
        requests compared. `rng` must be the generator the cases came from (the draws of the
        backpressure follow theirs)."""
        total = 0
        for case, exp in cases:
            got, _ = await self.run_case(case, rng, rng.choice(P_READY))
            check(case, exp, got)
            total += len(exp)
        return total

    async def empty_streams(self, bad, cycles, rng, good):
        """Each case of `bad` (a stream without elements): nothing streamed for `cycles` cycles,
        `empty` set, the unit idle; then the good (case, expected) clears `empty`."""
        dut = self.dut
        for case in bad:
            self.set_fields(case)
            dut.m_ready.value = 1
            dut.start.value = 1
            await FallingEdge(dut.clk)
            dut.start.value = 0
            for _ in range(cycles):
                assert not dut.m_valid.value, f"{case}: a request from an empty stream"
                await FallingEdge(dut.clk)
            assert dut.empty.value and not dut.busy.value, case
        case, exp = good
        got, _ = await self.run_case(case, rng, 0.7)
        check(case, exp, got)
        assert not dut.empty.value


def check(case, exp, got):
    """The requests `got` [(index, last)] are the golden model's `exp` with m_last on the last."""
    idx = [g[0] for g in got]
    lasts = [i for i, g in enumerate(got) if g[1]]
    if idx != exp:
        first = next((i for i, (a, b) in enumerate(zip(idx, exp)) if a != b), min(len(idx), len(exp)))
        raise AssertionError(f"{case}: {len(idx)} requests, expected {len(exp)}; first difference "
                             f"at {first}: got {idx[first:first + 8]}, expected {exp[first:first + 8]}")
    assert lasts == [len(exp) - 1], f"{case}: m_last at {lasts}"
