"""What both placements of a network share (on chip, :func:`dtpu.isro.compiler.emit`, and staged
through external memory, :mod:`dtpu.isro.staging`): the split of a layer's block into what the
processing elements take, the parameter block's words, which tensors each layer reads and how
long each lives, the one border each tensor is stored with, and the processing elements in force.
A module of its own so the two placements import it, not each other.
"""
from __future__ import annotations

import logging

import numpy as np

from dtpu.isro.ir import NO_POST, CompileError, Layer
from dtpu.isro.isa import PARAM_DTYPE, Fill, Fmt
from dtpu.isro.profile import Profile

log = logging.getLogger(__name__)


# -- splitting -------------------------------------------------------------------------------------

def split_blocks(layer: Layer, pe: int | None, *, fewest_partials: bool = False) -> list[dict[str, int]]:
    """Sub-blocks whose size fits `pe`, each a channel range times a rectangle of kernel taps.

    Channel-major memory makes a channel range of input and weights a simple slice, and a tap
    rectangle is the ``r0 rn s0 sn`` window, so every partial stays a plain convolution. A
    convolution's block also says how many output channels it computes per cycle (``lanes``,
    docs/isro_isa.md §3): the array's PEs split into `lanes` groups of one block each, fed the
    same input window. That is what makes a small block cheap (the 27-MAC block of a 3-channel
    first layer computes 9 channels at once) and lets a split choose tiles that fill the array
    (64 channels of a 3x3 kernel: a 2x2-tap block of 256 MACs, two of 128 at 2 lanes, one of 64
    at 4: 2.25 cycles per output where channel ranges alone need 3). :func:`_conv_tiling` picks
    the tiling with the fewest cycles, or with `fewest_partials` the fewest blocks (each partial
    is a ``cout x hout x wout`` accumulator set in filter memory: a network that only just fits on
    chip keeps the split it always had, with lanes where a block leaves room).
    """
    kh, kw = layer.kernel
    if layer.kind == "dense":
        n = int(np.prod(layer.in_shape))
        if pe is None or n <= pe:
            return [{"n0": 0, "nn": n}]
        return [{"n0": s, "nn": min(pe, n - s)} for s in range(0, n, pe)]
    if layer.kind not in ("conv", "tconv", "dwconv"):
        return [{}]
    if layer.kind in ("conv", "tconv"):
        return _conv_tiling(layer.in_shape[0], kh, kw, layer.out_shape[0], pe, fewest_partials)
    full = {"r0": 0, "rn": kh, "s0": 0, "sn": kw}
    if pe is None or layer.block <= pe:
        return [full]
    rows = max(1, pe // kw)
    cols = kw if kw <= pe else pe
    return [{"r0": r0, "rn": min(rows, kh - r0), "s0": s0, "sn": min(cols, kw - s0)}
            for r0 in range(0, kh, rows) for s0 in range(0, kw, cols)]


def lanes_for(block: int, cout: int, pe: int | None) -> int:
    """Output channels a block of `block` MACs computes per cycle: as many copies as fit `pe`,
    never more than there are channels."""
    if pe is None:
        return 1
    return max(1, min(cout, pe // block))


def conv_cycles_per_output(blocks: list[dict[str, int]], cout: int) -> int:
    """Cycles per output position of a convolution split into `blocks` (ADD not counted)."""
    return sum(-(-cout // b.get("lanes", 1)) for b in blocks)


def _conv_tiling(cin: int, kh: int, kw: int, cout: int, pe: int | None,
                 fewest_partials: bool = False) -> list[dict[str, int]]:
    """The blocks of a convolution: the whole block if it fits (with its lanes), else, over every
    tiling of the kernel into rectangles of at most ``a x b`` taps and of the channels into
    ranges that fill `pe`, the one with the fewest cycles per output position, then the fewest
    partials (ties keep the larger tiles: the whole kernel first, as the split has always been)."""
    full = {"c0": 0, "cn": cin, "r0": 0, "rn": kh, "s0": 0, "sn": kw}
    if pe is None or cin * kh * kw <= pe:
        return [{**full, "lanes": lanes_for(cin * kh * kw, cout, pe)}]
    best = None
    for a in range(kh, 0, -1):
        for b in range(kw, 0, -1):
            if a * b > pe:
                continue
            blocks = []
            for r0 in range(0, kh, a):
                for s0 in range(0, kw, b):
                    rn, sn = min(a, kh - r0), min(b, kw - s0)
                    per = pe // (rn * sn)
                    for c0 in range(0, cin, per):
                        cn = min(per, cin - c0)
                        blocks.append({"c0": c0, "cn": cn, "r0": r0, "rn": rn, "s0": s0, "sn": sn,
                                       "lanes": lanes_for(cn * rn * sn, cout, pe)})
            key = (conv_cycles_per_output(blocks, cout), len(blocks))
            if fewest_partials:
                key = key[::-1]
            if best is None or key < best[0]:
                best = (key, blocks)
    return best[1]


# -- memory allocation and instruction generation --------------------------------------------------

def param_words(layer: Layer, fmt: Fmt) -> np.ndarray | None:
    """The parameter block: activation header, then the DSP arrays (docs/isro_isa.md)."""
    has_dsp = layer.dsp is not None
    eadd_i8 = layer.kind == "eadd" and fmt is Fmt.I8
    emul_i8 = layer.kind == "emul" and fmt is Fmt.I8
    if layer.kind in NO_POST:
        return None
    if not (has_dsp or eadd_i8 or emul_i8 or layer.leaky is not None or layer.clamp is not None):
        return None
    pdt = PARAM_DTYPE[fmt]
    if fmt is Fmt.F32:
        a1, a2 = layer.leaky if layer.leaky is not None else (0.0, 1.0)
        lo, hi = layer.clamp if layer.clamp is not None else (-np.inf, np.inf)
        head = np.array([a1, a2, lo, hi], dtype=pdt)
    else:
        lo, hi = layer.clamp if layer.clamp is not None else (-128, 127)
        # I8 leaky: the (multiplier, shift) negative values take instead of the DSP arrays' own
        m_neg, s_neg = layer.leaky if layer.leaky is not None else (0, 0)
        head = np.array([lo, hi, m_neg, s_neg], dtype=pdt)
    if eadd_i8:
        q = layer.eadd_q
        return np.concatenate([head, np.array([q[k] for k in EADD_KEYS], dtype=pdt)])
    if emul_i8:
        q = layer.emul_q
        return np.concatenate([head, np.array([q[k] for k in EMUL_KEYS], dtype=pdt)])
    parts = [head] + ([np.asarray(a).astype(pdt) for a in layer.dsp] if has_dsp else [])
    return np.concatenate(parts)


# the I8 EADD parameter words, in the order docs/isro_isa.md gives them
EADD_KEYS = ("zp_a", "zp_b", "left_shift", "m_a", "s_a", "m_b", "s_b", "m_out", "s_out")
# the I8 EMUL parameter words
EMUL_KEYS = ("zp_a", "zp_b", "m_out", "s_out")
# layers that read each operand with its own border (fields at..ar, bt..br): never force a copy
ANY_BORDER = ("eadd", "emul", "concat")


def live_ranges(layers: list[Layer]) -> list[tuple[int, int]]:
    """(first, last) layer index during which each frame tensor must hold its value.

    Tensor 0 is the model input (live from before layer 0, index -1), tensor i+1 the output of
    layer i (of a further model input, kind ``input``, likewise live from -1); a tensor lives
    until its last consumer runs, the model output until the end.
    """
    n = len(layers)
    ranges = [[-1, -1]] + [[-1 if layer.kind == "input" else i, i] for i, layer in enumerate(layers)]
    for i, layer in enumerate(layers):
        for t in layer_inputs(layers, i):
            ranges[t][1] = max(ranges[t][1], i)
        if layer.model_output:               # read by the host after END
            ranges[i + 1][1] = n
    ranges[-1][1] = n
    return [tuple(r) for r in ranges]


def layer_inputs(layers: list[Layer], i: int) -> list[int]:
    """Frame tensor indices layer `i` reads (tensor 0 the model input, t+1 the output of layer t)."""
    ins = layers[i].inputs
    return [i] if ins is None else list(ins)


def resolve_borders(layers: list[Layer], input_name: str = "input") -> list[Layer]:
    """Give every frame tensor one border: copy a tensor that consumers read with different ones.

    A tensor is stored with the border (pre-applied padding) its consumer reads; when consumers
    disagree (a ResNet block input read by a 3x3 SAME convolution and by a 1x1 projection), the
    tensor is stored without a border and each consumer needing one reads a copy written by a
    1x1 MAXPOOL, which stores its input unchanged with the border and fill that consumer needs.
    EADD reads any border (it has one per operand), so it never forces a copy.
    """
    n = len(layers)
    wants: dict[int, list[tuple[int, tuple, Fill]]] = {}
    for i, layer in enumerate(layers):
        if layer.kind in ANY_BORDER:
            continue
        for t in layer_inputs(layers, i):
            wants.setdefault(t, []).append((i, tuple(layer.pad), layer.fill))
    copies: dict[int, list[tuple[tuple, Fill, list[int]]]] = {}
    for t, ws in wants.items():
        kinds = sorted({(p, f) for _, p, f in ws}, key=lambda pf: (any(pf[0]), pf[0], pf[1]))
        if len(kinds) > 1:
            groups = [(p, f, [i for i, q, g in ws if (q, g) == (p, f)]) for p, f in kinds if any(p)]
            copies[t] = groups
    if not copies:
        return layers
    out: list[Layer] = []
    remap = {0: 0}                       # old tensor -> new tensor
    via: dict[tuple[int, int], int] = {}  # (old tensor, consumer) -> new tensor of its copy
    for i, layer in enumerate(layers):
        pending = [(t, g) for t, gs in copies.items() for g in gs if g[2][0] == i]
        for t, (pad, fill, consumers) in pending:
            src = layers[t - 1] if t else None
            c, h, w = layers[t - 1].out_shape if t else layers[0].in_shape
            copy = Layer(kind="maxpool", name=f"{src.name if src else input_name}.border{'_'.join(map(str, pad))}",
                         in_shape=(c, h, w), out_shape=(c, h, w), sources=[],
                         inputs=[remap[t]], kernel=(1, 1), stride=(1, 1),
                         out_zp=src.out_zp if src else layers[0].in_zp, out_scale=src.out_scale if src else None,
                         flat_out=src.flat_out if src else False, tensor=src.tensor if src else None)
            out.append(copy)
            for j in consumers:
                via[(t, j)] = len(out)
        new = Layer(**{**layer.__dict__})
        new.inputs = [via.get((t, i), remap[t]) for t in layer_inputs(layers, i)]
        out.append(new)
        remap[i + 1] = len(out)
    log.info("stored %d tensors without a border and copied them for %d consumers", len(copies),
             len(via))
    return out


def require_format(layers: list[Layer], fmt: Fmt, prof: Profile) -> None:
    """The chip profile must support the number format the model compiles to (on chip and
    staged alike)."""
    if fmt.name.lower() not in prof.formats:
        raise CompileError(f"{layers[0].name}: the model compiles to {fmt.name.lower()}, but chip profile "
                           f"{prof.name} supports {', '.join(prof.formats)}")


def resolve_pe(prof: Profile, pe: int | None) -> int | None:
    """`pe` (which may only lower the profile's) or the profile's own."""
    if pe is None:
        return prof.pe
    if isinstance(pe, bool) or not isinstance(pe, (int, np.integer)) or pe < 1:
        raise ValueError(f"pe must be a positive integer or None (the profile's), got {pe!r}")
    if prof.pe is not None and pe > prof.pe:
        raise CompileError(f"pe={pe} exceeds chip profile {prof.name}'s {prof.pe} processing "
                           f"elements; --pe may only lower it (or pass a profile with more)")
    return int(pe)


def borders(layers: list[Layer]) -> tuple[list[tuple], list[Fill]]:
    """Per frame tensor (0 the input, i+1 layer i's output) the border it is stored with and its
    fill: what its consumers read (they must agree: one border, one fill)."""
    n = len(layers)
    pads: list[tuple | None] = [None] * (n + 1)
    fills: list[Fill | None] = [None] * (n + 1)
    for i, layer in enumerate(layers):
        for t in layer_inputs(layers, i):
            want = tuple(layer.pad) if layer.kind not in ANY_BORDER else None
            if want is None:
                continue
            if pads[t] is not None and (pads[t] != want or fills[t] != layer.fill):
                src = "the model input" if t == 0 else layers[t - 1].name
                raise CompileError(f"{layer.name}: needs {src} stored with border {want} ({layer.fill.name.lower()}), "
                                   f"another consumer needs {pads[t]} ({fills[t].name.lower()}); one tensor "
                                   f"has one border")
            pads[t], fills[t] = want, layer.fill
    return [p or (0, 0, 0, 0) for p in pads], [f or Fill.ZERO for f in fills]
