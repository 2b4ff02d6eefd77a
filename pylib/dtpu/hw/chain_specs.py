"""The node graphs the cycle regressions compile (sim/tb/tb_cl_run.py under cocotb and
tests/test_rtl_lists.py in process): one description, so that both benches run the same classes
of RUN (docs/rtl.md "Contract 2.0: RUN / POST cycles against the Timeline")."""
from __future__ import annotations

from typing import Callable

from dtpu.spec import ConvSpec, DataMode, OpKind, Padding


def chain_specs(nodes, hw: int, c: int, quant: Callable[[int], dict],
                mode: DataMode = DataMode.INT8) -> tuple[list, list]:
    """ConvSpecs (int8, or `mode`) of `nodes` over an hw x hw x c input, and the node each one
    reads (-1: the partition's input). A node is (kind, OC) reading the node before, or (kind,
    OC, k) reading node k: kind "pw" a 1x1 convolution, "c3" a 3x3 SAME one ("c3v" VALID, "c3s"
    stride 2, both letters allowed; "c4s" a 4x4, any digit a KxK), anything else a depthwise
    convolution (its OC unused): "dw" 3x3 SAME, with options "dw_k5x3_s2_d2_m2_v" (kernel,
    stride, dilation, multiplier, VALID: _dw_options). `quant(oc)` gives the input/filter/output
    Quant keywords of a node with oc output channels ({} for float32)."""
    specs, cin, srcs = [], c, []
    for i, node in enumerate(nodes):
        kind, oc = node[:2]
        srcs.append(node[2] if len(node) > 2 else i - 1)
        if len(node) > 2:
            cin = c if node[2] < 0 else specs[node[2]].out_channels
        if kind == "pw":
            specs.append(ConvSpec(OpKind.CONV_2D, mode, (1, hw, hw, cin),
                                  (oc, 1, 1, cin), name=f"pw{i}", **quant(oc)))
            cin = oc
        elif kind[:1] == "c" and kind[1:2].isdigit():
            k = int(kind[1])
            specs.append(ConvSpec(OpKind.CONV_2D, mode, (1, hw, hw, cin),
                                  (oc, k, k, cin),
                                  padding=Padding.VALID if "v" in kind else Padding.SAME,
                                  stride=(2, 2) if "s" in kind else (1, 1), name=f"c3{i}",
                                  **quant(oc)))
            cin = oc
            hw = specs[-1].output_shape[1]
        else:
            k, st, dl, m, pad = _dw_options(kind)
            specs.append(ConvSpec(OpKind.DEPTHWISE_CONV_2D, mode, (1, hw, hw, cin),
                                  (1, k[0], k[1], cin * m), stride=st, dilation=dl,
                                  depth_multiplier=m, padding=pad, name=f"dw{i}",
                                  **quant(cin * m)))
            cin *= m
            hw = specs[-1].output_shape[1]
    return specs, srcs


def _dw_options(kind: str) -> tuple:
    """A depthwise node's options from its kind, "dw" followed by any of "_k<KH>x<KW>",
    "_s<S>" (both axes), "_d<D>", "_m<multiplier>", "_v" (VALID): ((KH, KW), stride, dilation,
    multiplier, padding); plain "dw" is 3x3 SAME, stride 1, multiplier 1."""
    k, st, dl, m, pad = (3, 3), (1, 1), (1, 1), 1, Padding.SAME
    for opt in kind.split("_")[1:]:
        if opt.startswith("k"):
            k = tuple(int(v) for v in opt[1:].split("x"))
        elif opt.startswith("s"):
            st = (int(opt[1:]),) * 2
        elif opt.startswith("d"):
            dl = (int(opt[1:]),) * 2
        elif opt.startswith("m"):
            m = int(opt[1:])
        elif opt == "v":
            pad = Padding.VALID
    return k, st, dl, m, pad
