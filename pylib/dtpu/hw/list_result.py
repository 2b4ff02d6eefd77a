"""What one command list did, as the golden model reports it: the CL_* register values and, per
descriptor TAG, the split of CL_CYCLES and of the stream words by node (no register holds it),
which the RTL's node trace (:mod:`dtpu.rtl.nodetrace`) folds its events into as well.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunResult:
    """What one command list did: CL_* register values, as the core would report them."""

    cycles: int = 0
    idle_cycles: int = 0
    compute_cycles: int = 0
    rd_beats: int = 0
    wr_beats: int = 0
    descs: int = 0
    runs: int = 0
    error: int = 0                  # CL_ERR bits
    error_pc: int = 0
    error_tag: int = 0
    job_err: int = 0                # the 1.2 ERR bits of a failed RUN
    message: str = ""
    #: per descriptor TAG (see :func:`tag_span`): the golden model's split of CL_CYCLES and of
    #: the stream words by node (no register holds it)
    tags: dict = field(default_factory=dict)

    def node_words(self, tag: int) -> tuple[dict, dict]:
        """(words in by stream, words out by stream) of one node, as the 1.2 counters name them."""
        span = self.tags.get(tag, [0, 0, 0, 0, 0])
        return {"wgt": span[4], "act": span[2]}, {"res": span[3]}

    def node_cycles(self, tags) -> list[tuple[int, int]]:
        """(cycles, idle cycles) per tag of `tags` (a partition's nodes in list order): each
        node from the end of the one before to the end of its last job, the last to the end of
        the list, so they add up to CL_CYCLES and IDLE."""
        out, prev = [], 0
        for i, t in enumerate(tags):
            end, comp = self.tags.get(t, (prev, 0))[:2]
            if i == len(tags) - 1:
                end = self.cycles
            out.append((end - prev, end - prev - comp))
            prev = end
        return out


def tag_span(r: RunResult, tag: int, end: int | None, cycles: int = 0, act: int = 0,
              res: int = 0, wgt: int = 0) -> None:
    """Per TAG: [end of its last job, stall-free cycles, words on the core's act / res / wgt
    streams] (the 1.2 core's WORDS_* counters, split by node)."""
    span = r.tags.get(tag)
    if span is None:
        span = r.tags[tag] = [0, 0, 0, 0, 0]
    if end is not None:
        span[0] = end
    span[1] += cycles
    span[2] += act
    span[3] += res
    span[4] += wgt
