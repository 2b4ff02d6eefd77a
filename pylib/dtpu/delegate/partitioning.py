"""The partitions TFLite will make of a set of claimed nodes, known before it makes them.

Which nodes are worth claiming depends on the partitions they end up in: a vector-unit node
(ADD, MUL, MEAN...) saves CPU work only inside convolutions' partition; alone between CPU
operators it costs a delegate call, a doorbell and copies of its tensors for an element-wise
pass the CPU does as fast. The delegate hands TFLite a set of nodes and TFLite's
``PartitionGraphIntoIndependentNodeSubsets`` (graph_info.cc, greedy mode, the default) cuts
them; :func:`partitions` follows that algorithm so the claim can be settled first:

* every tensor no node of the plan writes (graph inputs, constants) is ready;
* a subset grows by sweeping the plan in order again and again, taking every node not yet
  placed whose inputs are all ready and whose kind (claimed or not) is the subset's (the
  first node taken decides it); its outputs become ready; the subset closes when a sweep
  takes nothing, and the next one begins.
"""
from __future__ import annotations

from typing import Iterable

from dtpu.delegate.graph import NodeInfo


def partitions(nodes: list[NodeInfo], claimed: Iterable[int]) -> list[list[int]]:
    """The claimed subsets TFLite forms (node indices, in the order it adds them), in the order
    it runs them. `nodes`: the execution plan's nodes, in plan order."""
    claimed = set(claimed)
    produced = {t for n in nodes for t in n.outputs if t >= 0}
    ready: set[int] = set()
    placed: set[int] = set()
    out: list[list[int]] = []
    while len(placed) < len(nodes):
        kind = None
        subset: list[int] = []
        while True:
            took = False
            for node in nodes:
                if node.index in placed:
                    continue
                if any(t >= 0 and t in produced and t not in ready for t in node.inputs):
                    continue
                mine = node.index in claimed
                if kind is None:
                    kind = mine
                if mine != kind:
                    continue
                placed.add(node.index)
                subset.append(node.index)
                ready.update(t for t in node.outputs if t >= 0)
                took = True
            if not took:
                break
        if not subset:      # a cycle (dataflow_reason keeps such graphs on the CPU whole)
            break
        if kind:
            out.append(subset)
    return out
