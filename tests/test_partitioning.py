"""delegate/partitioning.py on small hand-made graphs: the subsets TFLite's greedy partitioner
forms (tests/test_vector_delegate.py checks it against the kernels TFLite makes on the zoo)."""
from __future__ import annotations

from dtpu.delegate.graph import NodeInfo
from dtpu.delegate.partitioning import partitions


def _graph(*edges):
    """Nodes 0.. in plan order, node i reading tensors `edges[i][0]` and writing `edges[i][1]`."""
    return [NodeInfo(i, -1, 1, tuple(ins), tuple(outs), None) for i, (ins, outs) in enumerate(edges)]


def test_a_chain_cut_by_a_cpu_node():
    nodes = _graph(([0], [1]), ([1], [2]), ([2], [3]), ([3], [4]))
    assert partitions(nodes, {0, 1, 3}) == [[0, 1], [3]]
    assert partitions(nodes, {0, 1, 2, 3}) == [[0, 1, 2, 3]]


def test_a_residual_block_joins_when_its_add_is_claimed():
    # conv a -> conv b -> ADD(a, b) -> conv
    nodes = _graph(([0], [1]), ([1], [2]), ([1, 2], [3]), ([3], [4]))
    assert partitions(nodes, {0, 1, 3}) == [[0, 1], [3]]
    assert partitions(nodes, {0, 1, 2, 3}) == [[0, 1, 2, 3]]


def test_a_node_after_a_cpu_node_that_reads_the_partition_starts_another():
    """Swish: conv -> LOGISTIC (CPU) -> MUL(conv, logistic): the MUL cannot join the conv's
    partition (it waits for the CPU node that waits for that partition)."""
    nodes = _graph(([0], [1]), ([1], [2]), ([1, 2], [3]), ([3], [4]))
    assert partitions(nodes, {0, 2, 3}) == [[0], [2, 3]]


def test_independent_branches_share_a_partition():
    """Greedy: a claimed node whose inputs are ready joins the current subset even after an
    unclaimed node in plan order (an inception block's branches)."""
    nodes = _graph(([0], [1]), ([0], [2]), ([0], [3]), ([1, 2, 3], [4]))
    assert partitions(nodes, {0, 2}) == [[0, 2]]
    # the node reading all branches waits for the CPU branch: a partition of its own
    assert partitions(nodes, {0, 2, 3}) == [[0, 2], [3]]


def test_nothing_claimed_nothing_made():
    nodes = _graph(([0], [1]), ([1], [2]))
    assert partitions(nodes, set()) == []
