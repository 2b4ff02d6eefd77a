"""What the delegate's live objects share (:mod:`dtpu.delegate.runtime`'s states and
:mod:`dtpu.delegate.partition_kernel`'s partition kernels): the registries that map C handles to them and
the lock guarding them, one id counter, what the glue saw of the host's structs, the error
meant for TFLite's reporter, and :class:`Step`, the claimed node the claim hands to a kernel.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from dtpu.delegate import graph as g
from dtpu.delegate.support import Decision
from dtpu.spec import ConvSpec

LOCK = threading.RLock()          # guards the registries and report bookkeeping (not compute)
#: ids of delegates and partition kernels (their C handles)
ids = itertools.count(1)
DELEGATES: dict[int, "DelegateState"] = {}
KERNELS: dict[int, "PartitionKernel"] = {}

# What the glue saw of the host runtime's structs, for tests/test_delegate_abi.py: the last
# graph read at a delegate Prepare, and data-pointer observations at kernel Prepare / Invoke.
OBSERVED: dict[str, Any] = {"nodes": {}, "tensors": {}, "input_data_at_prepare": [],
                            "internal_data_at_invoke": []}


class DelegateError(Exception):
    """A failure with a message meant for TFLite's error reporter."""


@dataclass
class Step:
    """One claimed node inside a partition."""

    node: g.NodeInfo
    decision: Decision
    filters: np.ndarray
    bias: np.ndarray | None
    spec: ConvSpec | None = None
    handle: Any = None
    output_shape: tuple[int, ...] = ()
    record: dict | None = None    # the NodeRecord fields that do not change between invokes
    taken: bool = False           # a partition kernel owns it (and its backend handle)
    #: its tensors have no elements with the current shapes (TFLite's CPU kernels then compute
    #: nothing and nor does the kernel): it runs nowhere, its output just has its empty shape
    empty: bool = False
    in_shape: tuple[int, ...] = ()    # a folded PAD's / view's input shape (kernel Prepare)
    #: "node": the DTPU computes it; "pad": a PAD folded into the convolution reading it;
    #: "view": a RESHAPE / SQUEEZE (dtpu.delegate.folding); "vec": a node of the vector unit
    #: (contract 2.1), run only in command lists; "shape": a SHAPE / STRIDED_SLICE / PACK
    #: evaluated at kernel Prepare (dtpu.shape_fold)
    kind: str = "node"
    fold: Any = None     # a convolution's folding.PadFold (it reads the PAD's input)
    pad: Any = None      # a "pad" step's folding.PadFold
    #: a "vec" step (the vector unit: ADD, SUB, MUL, pools, MEAN): its claim (the spec with
    #: the current shapes after kernel Prepare, the tensors it reads, a MEAN's axes)
    vec: Any = None
    #: a "shape" step's model constants (begin, end...), read at the claim
    shape_consts: Any = None

    @property
    def x(self) -> int:
        return self.decision.input_index

    @property
    def y(self) -> int:
        return self.decision.output_index
