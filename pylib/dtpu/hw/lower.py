"""Lowering: a :class:`~dtpu.spec.ConvSpec` plus its constants -> DTPU jobs, and results -> tensor.

A node becomes

* its *load jobs* (LOAD_WGT, LOAD_PARAM): the weights in the MXU's column-bank order and two
  parameter words per output channel. Built once; run once at prepare when the node's weights
  stay resident, or before every compute job when they are paged through a scratch region;
* its *compute jobs* (GEMM or DWCONV) per invoke: register values plus the activation words;
* an *assembly* step turning result words back into the NHWC output tensor (and, only in the
  K-split fallback, finishing raw accumulators with :func:`dtpu.reference.requantize`).

Everything that does not depend on the input (weight and parameter words, register values,
im2col index plans) is computed here once, so an invoke is an im2col/pack, the jobs and an unpack.
docs/architecture.md describes the formats produced here.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from dtpu import reference
from dtpu.hw.config import HwConfig, ceil_div, get_config, out_lanes
from dtpu.hw.contract_schedules import DwGeometry
from dtpu.hw.dw_format import dw_conflict, dw_rotated, dw_slot_words, dw_weight_layout, dw_weight_words
from dtpu.pack import pack, unpack
from dtpu.precision import Precision
from dtpu.spec import ConvSpec, DataMode, OpKind

log = logging.getLogger(__name__)

_U64 = np.dtype("<u8")
#: the activation words of a job in :meth:`Lowered.skeleton`
_NO_ACT = np.zeros(0, _U64)
_NO_ACT.flags.writeable = False


#: every compute job writes PF_COUNT (registers persist between jobs: a stale count would make
#: the job take words from s_axis_wgt); a planner that prefetches replaces it (see
#: :func:`with_prefetch`)
NO_PREFETCH = ("PF_COUNT", 0)


def with_prefetch(regs, wgt_base: int | None, pf_addr: int, pf_count: int) -> tuple:
    """A compute job's register list with WGT_BASE moved to `wgt_base` (None: kept) and the
    prefetch PF_ADDR/PF_COUNT set (PF_COUNT 0: none); JOB stays last."""
    out = []
    for name, value in regs:
        if name in ("PF_ADDR", "PF_COUNT") or name == "JOB":
            continue
        out.append((name, wgt_base) if name == "WGT_BASE" and wgt_base is not None else (name, value))
    if pf_count:
        out.append(("PF_ADDR", int(pf_addr)))
    out.append(("PF_COUNT", int(pf_count)))
    out.append(next(r for r in regs if r[0] == "JOB"))
    return tuple(out)


class LowerError(ValueError):
    """The node cannot run on this DTPU build (the delegate leaves it to the CPU)."""


@dataclass
class Job:
    """One START: register writes in order (JOB last), words per input stream, result words."""

    label: str
    regs: list[tuple[str, int]]
    send: dict[str, np.ndarray] = field(default_factory=dict)
    recv: int = 0
    macs: int = 0


@dataclass
class Lowered:
    spec: ConvSpec
    cfg: HwConfig
    precision: Precision
    dataflow: str                 # "gemm" or "dwconv"
    resident: bool                # weights loaded once (True) or paged at every invoke (False)
    load_jobs: list[Job]          # jobs run once (resident: all loads; paged: resident params)
    weight_words: int             # weight memory footprint (resident) or scratch use (paged)
    param_entries: int
    _plan: Callable[[np.ndarray], list[Job]] = field(repr=False, default=None)
    _assemble: Callable[[list[np.ndarray]], np.ndarray] = field(repr=False, default=None)
    #: when every invoke is exactly one compute job (weights resident): (its register tuple,
    #: x -> its activation words, its label, whether its result words are the output tensor's
    #: bytes); `assemble([result words])` gives the output. Lets a caller skip building Job
    #: objects (backend=model's compiled path) and have the results written in place.
    direct: tuple | None = field(repr=False, default=None)
    #: K chunks of a K-split lowering (raw accumulators summed on the host), else 1
    k_chunks: int = 1
    #: host transforms run so far (one cell, incremented where they run): layout or arithmetic
    #: steps between device jobs that are not a view of the tensor or the stream's word packing,
    #: one per step and job/node: a KxK (or padded-K) im2col gather, a depthwise channel repeat
    #: or pad, a chunk-major transpose or a channel-part slice per job, a K chunk's column slice,
    #: per result page an unpack/interleave or the stacked transpose, per K-split partial a sum
    #: and the final requantization. The report's ``host.transforms`` is its difference over an
    #: invoke; the goal (contract 2.0) is 0.
    transforms: list = field(repr=False, default_factory=lambda: [0])

    def jobs(self, x: np.ndarray) -> list[Job]:
        """The jobs of one invoke on input `x` (NHWC, the node's TFLite dtype)."""
        x = np.asarray(x)
        if tuple(x.shape) != tuple(self.spec.input_shape):
            raise ValueError(f"input shape {x.shape} does not match the node's {self.spec.input_shape}")
        return self._plan(x)

    def skeleton(self) -> list[Job]:
        """The jobs of an invoke without their activation words (``send["act"]`` empty): the
        registers, load words and result counts, which do not depend on the input. What a
        planner needs (a residency selection profiles a dozen lowerings per node: building an
        ImageNet image's im2col for each would cost tens of MB and most of its time)."""
        return self._plan(None)

    def assemble(self, results: list[np.ndarray]) -> np.ndarray:
        """Result words of the compute jobs (in job order, loads excluded) -> output tensor."""
        return self._assemble(results)

    def wrap(self, plan: Callable[[Callable], Callable], assemble: Callable[[Callable], Callable]
             ) -> None:
        """Put `plan(planner)` and `assemble(assembler)` in place of the lowering's own job
        planner and result assembler: an observer of every invoke's layout steps
        (:func:`dtpu.board.estimate.count_transforms`) without a second lowering."""
        self._plan, self._assemble = plan(self._plan), assemble(self._assemble)


# ------------------------------------------------------------------------------------------------
# node parameters shared by both dataflows


_NATURAL = {DataMode.INT8: Precision.INT8, DataMode.UINT8: Precision.UINT8,
            DataMode.INT16X8: Precision.INT16, DataMode.FLOAT32: Precision.FP32}
# Wider lanes that still carry a mode's operands exactly (the delegate's `precision` option);
# unsigned wide names map to the DTPU's signed codes, which hold every uint8 value.
_WIDER = {
    DataMode.INT8: {Precision.INT16, Precision.INT32, Precision.INT64},
    DataMode.UINT8: {Precision.INT16, Precision.INT32, Precision.INT64, Precision.UINT16,
                     Precision.UINT32, Precision.UINT64},
    DataMode.INT16X8: {Precision.INT32, Precision.INT64},
    DataMode.FLOAT32: {Precision.BF16},
}
_UNSIGNED_WIDE = {Precision.UINT16: Precision.INT16, Precision.UINT32: Precision.INT32,
                  Precision.UINT64: Precision.INT64}


def precision_of(spec: ConvSpec, precision: str | Precision | None = None) -> Precision:
    """The lane precision a node runs in: its natural one, or a forced one that holds it exactly
    (bf16 for float32 nodes is the one lossy choice, see docs/architecture.md)."""
    natural = _NATURAL[spec.mode]
    if precision is None or str(getattr(precision, "value", precision)).lower() == "auto":
        return natural
    p = Precision.parse(precision)
    if p is natural:
        return p
    if p not in _WIDER[spec.mode]:
        accepted = ", ".join(sorted(q.value for q in {natural} | _WIDER[spec.mode]))
        raise LowerError(f"precision {p.value} cannot carry {spec.mode.value} operands; accepted: {accepted}")
    return _UNSIGNED_WIDE.get(p, p)


def _zero_points(spec: ConvSpec) -> tuple[int, int]:
    """(input zero point, filter zero point) as the core's IN/WGT_OFFSET registers negate them."""
    if spec.mode in (DataMode.FLOAT32, DataMode.INT16X8):
        return 0, 0
    zx = int(spec.input_q.zero_point[0])
    zw = np.unique(spec.filter_q.zero_points(spec.out_channels))
    if zw.size != 1:
        raise LowerError(f"per-channel filter zero points {zw.tolist()} are not supported; the "
                         f"DTPU has one WGT_OFFSET per job")
    return zx, int(zw[0])


def _as_u32(v: int) -> int:
    return int(v) & 0xFFFFFFFF


def _f32_bits(v: float) -> int:
    return int(np.array(v, np.float32).view(np.uint32))


def param_words(spec: ConvSpec, bias: np.ndarray | None, channels: int, rq):
    """Two words per channel slot: bias (int64 / fp32 bits) and multiplier|shift<<32|zp<<48
    (RQ_VARIANT FP32: the float32 scale's bits in place of the multiplier, shift 0)."""
    oc = spec.out_channels
    words = np.zeros((channels, 2), _U64)
    if spec.mode is DataMode.FLOAT32:
        if bias is not None:
            b = np.asarray(bias, np.float32).reshape(-1)
            words[:oc, 0] = b.view(np.uint32).astype(_U64)
        return words
    b = np.zeros(oc, np.int64) if bias is None else np.asarray(bias).astype(np.int64).reshape(-1)
    words[:oc, 0] = b.view(_U64)
    if rq is reference.Variant.FP32:
        mult = reference.fp32_scales(spec).view(np.int32)
        shift = np.zeros(oc, np.int64)
    else:
        mult, shift = reference.output_multipliers(spec)
    zp = 0 if spec.mode is DataMode.INT16X8 else int(spec.output_q.zero_point[0])
    w1 = ((mult.astype(np.int64) & 0xFFFFFFFF).astype(_U64)
          | ((shift.astype(np.int64) & 0xFF).astype(_U64) << np.uint64(32))
          | np.uint64((zp & 0xFFFF) << 48))
    words[:oc, 1] = w1
    return words


def check_variant(cfg: HwConfig, spec: ConvSpec, rq) -> None:
    """Raise LowerError when the build's post lanes lack rounding variant `rq` (HwConfig RQ_EN):
    CONFIG would refuse the job with ERR.BAD_MODE (the delegate does not claim such a node)."""
    if spec.mode.is_quantized and not cfg.rq_built(rq.name):
        raise LowerError(f"{spec.name or 'node'}: requantization variant {rq.name} is not built in "
                         f"this DTPU (RQ_EN={cfg.RQ_EN}: {', '.join(cfg.rq_variants)})")


def variant_code(cfg: HwConfig, spec: ConvSpec, bias, rq) -> int:
    """JOB.RQ_VARIANT for rounding variant `rq` (0 for a float node, which has none); LowerError
    when the build does not have it."""
    if not spec.mode.is_quantized:
        return 0
    check_variant(cfg, spec, rq)
    return cfg.enums["RQ_VARIANT"][rq.name]


def clamp_regs(spec: ConvSpec, rq=None) -> list[tuple[str, int]]:
    """ACT_MIN / ACT_MAX of the node's fused activation, as the post unit compares them."""
    lo, hi = reference.activation_range(spec, rq)
    if spec.mode is DataMode.FLOAT32:
        return [("ACT_MIN", _f32_bits(lo)), ("ACT_MAX", _f32_bits(hi))]
    return [("ACT_MIN", _as_u32(lo)), ("ACT_MAX", _as_u32(hi))]


def job_reg(cfg: HwConfig, opcode: str, prec: Precision | None = None, out_mode: str = "REQUANT",
             variant: int = 0) -> tuple[str, int]:
    """The JOB register write (written last: it starts the job)."""
    fields = {"OPCODE": cfg.enums["OPCODE"][opcode]}
    if prec is not None:
        fields.update(PREC=cfg.prec_code(prec), OUT_MODE=cfg.enums["OUT_MODE"][out_mode],
                      RQ_VARIANT=variant)
    return ("JOB", cfg.encode("JOB", **fields))


def load_job(cfg: HwConfig, opcode: str, addr: int, words: np.ndarray, label: str) -> Job:
    """A LOAD_WGT / LOAD_PARAM job writing `words` to on-chip memory from `addr`."""
    return Job(label, [("LOAD_ADDR", addr), ("LOAD_COUNT", int(words.size)), job_reg(cfg, opcode)],
               {"wgt": np.ascontiguousarray(words, _U64)})


def _out_mode_name(spec: ConvSpec, prec: Precision, raw: bool) -> str:
    if raw:
        return "RAW"
    return "FLOAT" if prec.is_float else "REQUANT"


def _pack_act(values: np.ndarray, prec: Precision) -> np.ndarray:
    if not prec.is_float and values.dtype != prec.value_dtype:
        values = values.astype(prec.value_dtype)  # wider lanes: sign/zero extension, exact
    elif not prec.is_float and values.flags.c_contiguous and values.size % prec.lanes == 0:
        return values.reshape(-1).view(_U64)      # what pack() returns here: a view
    return pack(values, prec)


def _accumulator_bound_ok(spec: ConvSpec, wm: np.ndarray, zx: int, zw: int, bias, prec) -> None:
    """Prove that no 32-bit accumulator (8-bit precisions) can leave int32 for any input."""
    if prec.bits != 8:
        return
    info = np.iinfo(prec.value_dtype)
    amax = max(abs(int(info.min) - zx), abs(int(info.max) - zx))
    # |w - zw| <= 255 in int16 and the per-channel sums in int64: the int64 difference matrix
    # (8 bytes per weight, twice) was the largest allocation of a 224 net's prepare
    narrow = np.int16 if wm.dtype.itemsize == 1 and abs(int(zw)) < 1 << 14 else np.int64
    per_channel = np.abs(wm.astype(narrow) - narrow(zw)).sum(axis=1, dtype=np.int64) * amax
    if per_channel.max(initial=0) > (1 << 31) - 1:
        raise LowerError(f"{spec.name or spec.kind.value}: an int32 accumulator could overflow "
                         f"(bound {int(per_channel.max())}); not claimable")


# ------------------------------------------------------------------------------------------------


def lower(spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None, cfg: HwConfig | None = None,
          *, wgt_base: int = 0, param_base: int = 0, wgt_capacity: int | None = None,
          param_capacity: int | None = None, precision: str | Precision | None = None,
          rounding: str = "default", resident: bool = True, runtime: str | None = None,
          param_pages: bool = True, share: dict | None = None) -> Lowered:
    """Lower one node into the memory region [wgt_base, wgt_base+wgt_capacity) (and params).

    When the node's weights fit the region and `resident` is set, the load jobs run once; else the
    output-channel tiles are paged through the region, and when not even one tile (COLS filters of
    the whole K) fits, K is split into raw-accumulator jobs that the host sums and requantizes.
    `param_pages=False` keeps a paged node's parameters resident: the parameter region then holds
    all of them, `load_jobs` is their one LOAD_PARAM (run once) and only the weights are paged.
    The output stage (RQ_VARIANT, parameter words, clamp) is the one `runtime`'s default (or,
    with rounding="reference", BUILTIN_REF) interpreter applies, from dtpu.reference.
    `share`: a dict the caller keeps per node (same spec, filters, bias, precision, rounding and
    runtime) across its lowerings into different regions: they then share what does not depend
    on the region (the im2col index plan, the packed weight words: a page is a slice of the
    node's words), instead of holding a copy each. Lowerings sharing it must not run
    concurrently (the im2col plan's padded buffer is scratch).
    """
    cfg = cfg or get_config()
    prec = precision_of(spec, precision)
    if prec not in cfg.ENABLED:
        raise LowerError(f"precision {prec.value} is not enabled in {cfg.model_name}; enabled: "
                         f"{', '.join(p.value for p in cfg.ENABLED)}")
    if not spec.has_bias:
        bias = None
    rq = reference.rounding_variant(spec, bias, rounding, runtime) if spec.mode.is_quantized else None
    check_variant(cfg, spec, rq)
    wcap = cfg.WEIGHT_WORDS - wgt_base if wgt_capacity is None else wgt_capacity
    pcap = cfg.PARAM_ENTRIES - param_base if param_capacity is None else param_capacity
    if wgt_base % cfg.COLS or param_base % cfg.COLS or wcap < cfg.COLS or pcap < cfg.COLS:
        raise ValueError(f"regions must start at a multiple of COLS={cfg.COLS} and hold at least "
                         f"COLS words/entries (weights {wgt_base}+{wcap}, params {param_base}+{pcap})")
    check_placement(spec, cfg, prec, wcap, pcap, params_paged=param_pages)
    if spec.kind is OpKind.DEPTHWISE_CONV_2D:
        return _lower_dw(spec, filters, bias, cfg, prec, wgt_base, param_base, wcap, pcap,
                         rq, resident, param_pages)
    return _lower_gemm(spec, filters, bias, cfg, prec, wgt_base, param_base, wcap, pcap,
                       rq, resident, param_pages, {} if share is None else share)


def check_placement(spec: ConvSpec, cfg: HwConfig, prec: Precision, wcap: int, pcap: int,
                    params_paged: bool = True) -> None:
    """Raise LowerError when no lowering of the node fits the build, given `wcap` weight words
    and `pcap` parameter entries to page through (`params_paged`: its parameters go through
    that region too, a page's worth at a time).

    The one place the shape-only placement rules live: :func:`lower` applies them to the region
    it is given, and the delegate's claim (a backend's ``placement_error``, through
    :func:`placement_error`) to the smallest region a streamed node gets, so a node the delegate
    claims is never refused at prepare for lack of memory. What always fits: GEMM output
    channels in pages of whole tiles and, when not even one tile (COLS filters x K) fits or K
    exceeds the activation buffer, K in raw chunks (integer modes); depthwise channels in groups
    (:func:`dw_parts`). What cannot: a depthwise row that does not fit the activation buffer
    span rows at a time even one channel group wide, a float GEMM that needs a K split (no raw
    fp32 output)."""
    _zero_points(spec)
    if spec.kind is OpKind.DEPTHWISE_CONV_2D:
        dw_geometry(spec, cfg, prec)
        dw_parts(spec, cfg, prec, wcap, pcap,
                 params_paged and prec not in (Precision.INT32, Precision.INT64))
        return
    kh, kw = spec.kernel
    kwords = ceil_div(kh * kw * spec.input_shape[3], prec.lanes)
    if prec.is_float and (kwords > cfg.ACT_WORDS or kwords * cfg.COLS > wcap):
        raise LowerError(f"{spec.name or 'node'}: K={kh * kw * spec.input_shape[3]} ({kwords} words) "
                         f"needs a K split (one tile of {kwords * cfg.COLS} weight words, region "
                         f"{wcap}; activation buffer {cfg.ACT_WORDS} words), which float modes do "
                         f"not support (no raw fp32 output)")


def placement_error(spec: ConvSpec, cfg: HwConfig | None = None, precision=None, *,
                    wgt_capacity: int | None = None, param_capacity: int | None = None) -> str | None:
    """Why the node cannot run on this build, or None: :func:`check_placement` (and the lane
    precision) for a node streamed through `wgt_capacity` weight words and `param_capacity`
    parameter entries (default: the whole memories)."""
    cfg = cfg or get_config()
    try:
        prec = precision_of(spec, precision)
        if prec not in cfg.ENABLED:
            raise LowerError(f"precision {prec.value} is not enabled in {cfg.model_name}; enabled: "
                             f"{', '.join(p.value for p in cfg.ENABLED)}")
        check_placement(spec, cfg, prec,
                        cfg.WEIGHT_WORDS if wgt_capacity is None else wgt_capacity,
                        cfg.PARAM_ENTRIES if param_capacity is None else param_capacity)
    except LowerError as exc:
        return str(exc)
    return None


# ------------------------------------------------------------------------------------------------
# GEMM: CONV_2D (im2col) and FULLY_CONNECTED


def _im2col_plan(spec: ConvSpec, kp: int, pad_value: int | float):
    """A function x -> (M, Kp) activation matrix (K in (ky, kx, c) order, padded with pad_value)."""
    n, h, w, c = spec.input_shape
    _, oh, ow, _ = spec.output_shape
    if spec.kind is OpKind.FULLY_CONNECTED:
        kh = kw = 1
        sh = sw = dh = dw = 1
        top = left = extra_h = extra_w = 0
    else:
        (kh, kw), (sh, sw), (dh, dw) = spec.kernel, spec.stride, spec.dilation
        (top, extra_h), (left, extra_w) = spec.pads
    k = kh * kw * c
    if spec.kind is OpKind.FULLY_CONNECTED or ((kh, kw) == (1, 1) and (sh, sw) == (1, 1)
                                              and (oh, ow) == (h, w)):
        def plan(x):
            cols = x.reshape(-1, c)
            if kp != k:
                cols = np.concatenate([cols, np.full((cols.shape[0], kp - k), pad_value, cols.dtype)], 1)
            return cols
        return plan
    ph, pw = h + 2 * top + extra_h, w + 2 * left + extra_w
    # one gather from the padded input: the flat index of every (pixel, ky, kx, c) lane, padding
    # lanes of K pointing at a last cell that holds the pad value
    size = n * ph * pw * c
    b_, oy, ox, ky, kx, ci = np.meshgrid(np.arange(n), np.arange(oh), np.arange(ow), np.arange(kh),
                                         np.arange(kw), np.arange(c), indexing="ij", sparse=True)
    index = (((b_ * ph + oy * sh + ky * dh) * pw + ox * sw + kx * dw) * c + ci).reshape(n * oh * ow, k)
    if kp != k:
        index = np.concatenate([index, np.full((n * oh * ow, kp - k), size)], axis=1)
    index = np.ascontiguousarray(index, dtype=np.intp)
    padded: dict = {}   # dtype -> (flat buffer, its image window); the borders keep pad_value

    def plan(x):
        hit = padded.get(x.dtype)
        if hit is None:
            flat = np.full(size + 1, pad_value, x.dtype)
            hit = padded[x.dtype] = (flat, flat[:size].reshape(n, ph, pw, c)[:, top:top + h, left:left + w, :])
        flat, window = hit
        window[...] = x
        return flat.take(index)
    return plan


def _lower_gemm(spec, filters, bias, cfg, prec, wgt_base, param_base, wcap, pcap, rq, resident,
                param_pages=True, share=None):
    cols_n = cfg.COLS
    L = prec.lanes
    n, h, w, c = spec.input_shape
    _, oh, ow, oc = spec.output_shape
    kh, kw = spec.kernel
    k = kh * kw * c
    m = n * oh * ow
    kwords = ceil_div(k, L)
    kp = kwords * L
    nt = ceil_div(oc, cols_n)
    zx, zw = _zero_points(spec)
    wm = np.asarray(filters).reshape(oc, k)
    share = {} if share is None else share
    if ("bound", prec) not in share:   # raises when it does not hold: nothing is cached then
        _accumulator_bound_ok(spec, wm, zx, zw, bias, prec)
        share[("bound", prec)] = True
    # weights padded to (NT*COLS, Kp) with the filter zero point: padded lanes multiply to 0
    if prec.is_float:
        wpad = np.zeros((nt * cols_n, kp), np.float32)
        wpad[:oc, :k] = wm
    else:
        wpad = np.full((nt * cols_n, kp), zw, prec.value_dtype)
        wpad[:oc, :k] = wm
    params = param_words(spec, bias, nt * cols_n, rq)
    variant = variant_code(cfg, spec, bias, rq)
    pad_value = 0.0 if prec.is_float else zx
    im2col = share.get(("im2col", kp, pad_value))
    if im2col is None:
        im2col = share[("im2col", kp, pad_value)] = _im2col_plan(spec, kp, pad_value)
    # the node's weight words in (tile, k-word, column) order: a page of tiles [t0, t1) is the
    # slice [t0 * KW * COLS, t1 * KW * COLS), a K chunk of one tile a slice of that
    packed = share.get(("wgt", prec, cols_n))
    if packed is None:
        packed = share[("wgt", prec, cols_n)] = _pack_weights(wpad, prec, nt, kwords, cols_n)

    tile_words = kwords * cols_n
    tally = [0]   # Lowered.transforms
    # the im2col of a 1x1 stride-1 conv or an FC without K padding is a reshape (a view)
    im2col_view = kp == k and (spec.kind is OpKind.FULLY_CONNECTED or (
        (kh, kw) == (1, 1) and spec.stride == (1, 1) and (oh, ow) == (h, w)))
    wide = prec in (Precision.INT32, Precision.INT64)  # no REQUANT there: raw + host output stage
    split_k = wide or kwords > cfg.ACT_WORDS or tile_words > wcap
    if split_k and prec.is_float:
        raise LowerError(f"{spec.name or 'node'}: K={k} needs a K split, which float modes do not "
                         f"support (no raw fp32 output)")
    common = [("IN_OFFSET", _as_u32(-zx)), ("WGT_OFFSET", _as_u32(-zw))]
    lanes_res, res_dt = out_lanes(cfg, prec, cfg.enums["OUT_MODE"][_out_mode_name(spec, prec, split_k)])
    wps = ceil_div(cols_n, lanes_res)

    if not split_k:
        own_params = not param_pages and not resident
        if own_params and pcap < nt * cols_n:
            raise ValueError(f"param_pages=False: the parameter region ({pcap} entries) must hold "
                             f"all {nt * cols_n}")
        tiles_per_page = max(1, min(nt, wcap // tile_words,
                                    nt if own_params else pcap // cols_n))
        fits = tiles_per_page == nt
        pages = [(t0, min(nt, t0 + tiles_per_page)) for t0 in range(0, nt, tiles_per_page)]
        mode = "FLOAT" if prec.is_float else "REQUANT"
        clamp = clamp_regs(spec, rq)

        def page_loads(t0, t1):
            words = packed[t0 * tile_words:t1 * tile_words]
            wl = load_job(cfg, "LOAD_WGT", wgt_base, words, f"wgt[{t0}:{t1}]")
            if own_params:
                return [wl]
            return [wl, load_job(cfg, "LOAD_PARAM", param_base,
                                  params[t0 * cols_n:t1 * cols_n].reshape(-1), f"param[{t0}:{t1}]")]

        # register lists are built once: the same tuple object at every invoke (the model's
        # compiled fast path keys its decoded jobs by it)
        page_regs = {(t0, t1): (("GEMM_M", m), ("GEMM_KW", kwords), ("GEMM_NT", t1 - t0),
                                ("WGT_BASE", wgt_base),
                                ("PARAM_BASE", param_base + (t0 * cols_n if own_params else 0)),
                                *common, *clamp, NO_PREFETCH,
                                job_reg(cfg, "GEMM", prec, mode, variant))
                     for t0, t1 in pages}

        def gemm_job(t0, t1, act):
            macs = m * k * (min(oc, t1 * cols_n) - t0 * cols_n)
            return Job(f"gemm[{t0}:{t1}]", page_regs[t0, t1], {"act": act}, m * (t1 - t0) * wps,
                       macs)

        load_all = [j for p in pages for j in page_loads(*p)] if fits else []
        paged_loads = {p: page_loads(*p) for p in pages} if not (fits and resident) else {}

        def plan(x):
            if x is not None and not im2col_view:
                tally[0] += 1
            act = _NO_ACT if x is None else _pack_act(im2col(x), prec)
            if fits and resident:
                return [gemm_job(0, nt, act)]
            jobs = []
            for p in pages:
                jobs += paged_loads[p]
                jobs.append(gemm_job(*p, act))
            return jobs

        out_dt = reference.io_dtypes(spec)[0]
        out_shape = spec.output_shape
        # one page of whole result words: the output is a view of them (strided when the last
        # tile is partly padding)
        as_view = len(pages) == 1 and wps * lanes_res == cols_n and np.dtype(res_dt) == out_dt
        as_is = as_view and nt * cols_n == oc
        # pages of equal size with whole result words (a streamed node's one-tile pages): all
        # of them at once, (page, m, columns) -> (m, page, columns), instead of page by page
        stacked = (len(pages) > 1 and wps * lanes_res == cols_n and np.dtype(res_dt) == out_dt
                   and len({t1 - t0 for t0, t1 in pages}) == 1)

        def assemble(results):
            if as_is:  # the result words are the NHWC output
                return results[0].view(out_dt).reshape(out_shape)
            if as_view:
                return results[0].view(out_dt).reshape(m, nt * cols_n)[:, :oc].reshape(out_shape)
            if stacked:
                tally[0] += 1
                y = np.empty((m, nt * cols_n), out_dt)
                y.reshape(m, len(pages), -1)[...] = np.concatenate(results).view(out_dt).reshape(
                    len(pages), m, -1).transpose(1, 0, 2)
                return np.ascontiguousarray(y[:, :oc]).reshape(out_shape)
            parts = []
            tally[0] += len(results)
            for (t0, t1), words in zip(pages, results):
                vals = unpack(words, result_precision(res_dt), words.size * lanes_res)
                parts.append(vals.reshape(m, t1 - t0, wps * lanes_res)[:, :, :cols_n].reshape(m, -1))
            y = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
            return np.ascontiguousarray(y[:, :oc]).reshape(spec.output_shape).astype(
                reference.io_dtypes(spec)[0], copy=False)

        once = (load_all if (fits and resident) else
                [load_job(cfg, "LOAD_PARAM", param_base, params.reshape(-1), "params")]
                if own_params else [])
        low = Lowered(spec, cfg, prec, "gemm", fits and resident, once,
                      min(nt, tiles_per_page) * tile_words, min(nt, tiles_per_page) * cols_n,
                      plan, assemble, transforms=tally)
        if fits and resident:
            vdt = prec.value_dtype
            flat = (not prec.is_float and kp == k and (spec.kind is OpKind.FULLY_CONNECTED or (
                (kh, kw) == (1, 1) and spec.stride == (1, 1) and (oh, ow) == (h, w))))

            def act_of(x):
                if flat and x.dtype == vdt:  # the NHWC tensor is the stream
                    return x.reshape(-1).view(_U64)
                if not im2col_view:
                    tally[0] += 1
                return _pack_act(im2col(x), prec)
            low.direct = (page_regs[0, nt], act_of, f"gemm[0:{nt}]", as_is)
        return low

    # ---- K split: raw accumulators per (K chunk, tile page), summed and requantized on the host
    kc = max(1, min(cfg.ACT_WORDS, wcap // cols_n))            # words of K per chunk
    chunks = [(k0, min(kwords, k0 + kc)) for k0 in range(0, kwords, kc)]
    # DEBUG: a residency selection lowers a node for a dozen candidate regions; the backend
    # reports the split of the lowering it keeps (Lowered.k_chunks)
    log.debug("%s: K=%d split into %d raw chunks", spec.name or "node", k, len(chunks))
    lanes_raw = lanes_res

    def chunk_pages(k0, k1):
        tw = (k1 - k0) * cols_n
        tpp = max(1, min(nt, wcap // tw))
        return [(t0, min(nt, t0 + tpp)) for t0 in range(0, nt, tpp)]

    schedule = [(kr, p) for kr in chunks for p in chunk_pages(*kr)]
    loads = {}
    for (k0, k1), (t0, t1) in schedule:
        if t1 - t0 == 1 or (k0, k1) == (0, kwords):   # a slice of the node's words
            words = packed[t0 * tile_words:t1 * tile_words].reshape(t1 - t0, kwords, cols_n)[
                :, k0:k1].reshape(-1)
        else:
            sub = np.ascontiguousarray(wpad[t0 * cols_n:t1 * cols_n, k0 * L:k1 * L])
            words = _pack_weights(sub, prec, t1 - t0, k1 - k0, cols_n)
        loads[(k0, k1, t0, t1)] = load_job(cfg, "LOAD_WGT", wgt_base, words, f"wgt k[{k0}:{k1}] t[{t0}:{t1}]")

    split_regs = {(k0, k1, t0, t1): (("GEMM_M", m), ("GEMM_KW", k1 - k0), ("GEMM_NT", t1 - t0),
                                     ("WGT_BASE", wgt_base), ("PARAM_BASE", param_base), *common,
                                     NO_PREFETCH, job_reg(cfg, "GEMM", prec, "RAW", 0))
                  for (k0, k1), (t0, t1) in schedule}

    def plan_split(x):
        a = None if x is None else im2col(x)
        if a is not None:
            tally[0] += (0 if im2col_view else 1) + (len(schedule) if len(chunks) > 1 else 0)
        jobs = []
        for (k0, k1), (t0, t1) in schedule:
            act = _NO_ACT if a is None else _pack_act(np.ascontiguousarray(a[:, k0 * L:k1 * L]), prec)
            regs = split_regs[k0, k1, t0, t1]
            macs = m * (min(k, k1 * L) - k0 * L) * (min(oc, t1 * cols_n) - t0 * cols_n)
            jobs.append(loads[(k0, k1, t0, t1)])
            jobs.append(Job(f"gemm raw k[{k0}:{k1}] t[{t0}:{t1}]", regs, {"act": act},
                            m * (t1 - t0) * wps, macs))
        return jobs

    def assemble_split(results):
        acc = np.zeros((m, nt * cols_n), np.int64)
        tally[0] += len(results) + 1     # a sum per partial, then the requantization
        for ((k0, k1), (t0, t1)), words in zip(schedule, results):
            vals = unpack(words, result_precision(res_dt), words.size * lanes_raw).astype(np.int64)
            acc[:, t0 * cols_n:t1 * cols_n] += vals.reshape(m, t1 - t0, wps * lanes_raw)[:, :, :cols_n].reshape(m, -1)
        return reference.requantize(spec, acc[:, :oc].reshape(spec.output_shape), bias, variant=rq)

    if len(schedule) == 1 and resident:  # everything fits: the one load stays resident
        only = loads[(*schedule[0][0], *schedule[0][1])]
        jobs_once = [only]

        def plan_resident(x):
            return [j for j in plan_split(x) if j is not only]
        return Lowered(spec, cfg, prec, "gemm", True, jobs_once, int(only.send["wgt"].size), 0,
                       plan_resident, assemble_split, k_chunks=len(chunks), transforms=tally)
    return Lowered(spec, cfg, prec, "gemm", False, [], min(wcap, kwords * cols_n * nt), 0,
                   plan_split, assemble_split, k_chunks=len(chunks), transforms=tally)


def result_precision(dt: np.dtype) -> Precision:
    """The lane type of a result word array's numpy dtype: how the host (and a test reading a
    job's raw result words) unpacks what the core wrote."""
    return {np.dtype("<i1"): Precision.INT8, np.dtype("<u1"): Precision.UINT8,
            np.dtype("<i2"): Precision.INT16, np.dtype("<i4"): Precision.INT32,
            np.dtype("<i8"): Precision.INT64, np.dtype("<f4"): Precision.FP32}[np.dtype(dt)]


def _pack_weights(wpad: np.ndarray, prec: Precision, nt: int, kwords: int, cols_n: int) -> np.ndarray:
    """(NT*COLS, KW*L) -> words in (tile, k-word, column) order: address t*KW*COLS + w*COLS + j,
    i.e. bank j holds filter t*COLS+j's K-vector at row t*KW + w."""
    L = prec.lanes
    arr = wpad.reshape(nt, cols_n, kwords, L).transpose(0, 2, 1, 3)
    return pack(np.ascontiguousarray(arr), prec)


# ------------------------------------------------------------------------------------------------
# DWCONV


def _divisors_desc(n: int, limit: int) -> list[int]:
    return [d for d in range(min(n, limit), 0, -1) if n % d == 0]


def dw_geometry(spec: ConvSpec, cfg: HwConfig, prec: Precision, groups: int | None = None) -> DwGeometry:
    """Chunking, ring size and tap cycles the lowering picks for a depthwise job over `groups`
    channel groups (default: all of the node's; a node split by channel groups runs one job per
    part, see :func:`dw_parts`)."""
    n, ih, iw, c = spec.input_shape
    _, oh, ow, oc = spec.output_shape
    (kh, kw), (sy, sx), (dy, dx) = spec.kernel, spec.stride, spec.dilation
    (pt, _), (pl, _) = spec.pads
    if groups is None:
        groups = ceil_div(oc, prec.lanes)
    span = (kh - 1) * dy + 1
    tc_max = (1 << cfg.reg("DW_RING").field("TAP_CYCLES").width) - 1
    conflicts = False
    rotated = dw_rotated(cfg)
    fitting = []
    for gc in _divisors_desc(groups, cfg.COLS) if groups > cfg.COLS else [groups] + _divisors_desc(groups, groups - 1):
        nchunk = groups // gc
        stride = dw_slot_words(cfg, DwGeometry(ih, iw, oh, ow, kh, kw, pt, pl, sy, sx, dy, dx, gc,
                                               nchunk, 1, 1))
        slots = cfg.ACT_WORDS // stride
        if slots >= span:
            lb = min(slots, nchunk * ih, 0xFFFF)
            lb = max(lb, span)
            # the fewest cycles a tap that the build accepts (dw_conflict, what CONFIG refuses):
            # 1 in the rotated layout but with PE pairs and more than COLS/2 items a row (2)
            tc = 1
            while dw_conflict(cfg, ow, gc, sx, tc):
                tc *= 2
            if tc > tc_max:  # e.g. COLS = 16: TAP_CYCLES = 16 does not fit the 4-bit field;
                conflicts = True  # fewer groups per chunk map the columns to other banks
                continue
            g = DwGeometry(ih, iw, oh, ow, kh, kw, pt, pl, sy, sx, dy, dx, gc, nchunk, lb, tc)
            if not rotated:   # the largest GC that fits
                return g
            fitting.append(g)
    if fitting:
        # the rotated layout's weight words grow with GC's odd part (P phases of COLS words per
        # chunk and tap), and every weight word is a cycle on the weight stream whenever the
        # node is not resident: the fewest issue cycles (steps times a step period of at least
        # KH*KW and COLS cycles) plus weight words, then the largest GC. EfficientNet's 84
        # groups at 8 columns: GC 4 (147 steps a row, 25x21x8 words), not GC 7 (156 steps,
        # 25x12x7x8); 144 groups at 32 columns: GC 16 (25x9x32 words), not GC 18 (2 steps a
        # row fewer, 25x8x9x32 words)
        def cost(g: DwGeometry) -> tuple[int, int]:
            issue = (g.nchunk * g.oh * g.steps_per_row(cfg.COLS)
                     * max(g.kh * g.kw * g.tap_cycles, cfg.COLS))
            return issue + dw_weight_words(cfg, g), -g.gc
        return min(fitting, key=cost)
    if conflicts:
        raise LowerError(f"{spec.name or 'depthwise node'}: every channel chunking has stride-{sx} "
                         f"bank conflicts that need TAP_CYCLES > {tc_max} (DW_RING.TAP_CYCLES)")
    raise LowerError(f"{spec.name or 'depthwise node'}: rows of {iw} pixels do not fit the "
                     f"activation buffer ({cfg.ACT_WORDS} words) {span} at a time even one "
                     f"channel group (8-bit: 8 channels) at a time")


def dw_parts(spec: ConvSpec, cfg: HwConfig, prec: Precision, wcap: int, pcap: int,
             params_paged: bool = True) -> list[tuple[int, int]]:
    """A depthwise node's channel groups split into DWCONV jobs, [(g0, g1), ...].

    Each part is a job of its own with its own weights (KH*KW taps x its groups rounded up to
    COLS: the tap-major layout the core reads) within `wcap` words and, when its parameters are
    paged with it (`params_paged`), its L*(g1-g0) entries within `pcap`. One part when the node
    fits; otherwise as few equal parts as fit, since every part repeats the ring's start-up
    (the first KH-1 input rows load before it computes)."""
    L = prec.lanes
    groups = ceil_div(spec.out_channels, L)
    kh, kw = spec.kernel
    col_words = kh * kw * cfg.COLS           # the least a job's weights occupy: COLS groups
    if dw_rotated(cfg):
        return _dw_parts_rotated(spec, cfg, prec, wcap, pcap if params_paged else None)
    by_w = groups if kh * kw * ceil_div(groups, cfg.COLS) * cfg.COLS <= wcap else \
        (wcap // col_words) * cfg.COLS
    by_p = pcap // L if params_paged else groups
    most = min(groups, by_w, by_p)
    if most < 1:
        raise LowerError(f"{spec.name or 'depthwise node'}: not even one job of {min(groups, cfg.COLS)} "
                         f"channel groups fits the region: {kh * kw} taps x {cfg.COLS} = "
                         f"{col_words} weight words (region {wcap}), {L} parameter entries per "
                         f"group (region {pcap})")
    per = ceil_div(groups, ceil_div(groups, most))
    return [(g0, min(groups, g0 + per)) for g0 in range(0, groups, per)]


def _dw_parts_rotated(spec: ConvSpec, cfg: HwConfig, prec: Precision, wcap: int,
                      pcap: int | None) -> list[tuple[int, int]]:
    """dw_parts for the rotated layout, whose weight words depend on each part's geometry (GC's
    odd part, the chunks): the fewest equal parts whose every part fits."""
    L = prec.lanes
    groups = ceil_div(spec.out_channels, L)
    words = {}

    def fits(per: int) -> bool:
        if pcap is not None and per * L > pcap:
            return False
        if per not in words:
            words[per] = dw_weight_words(cfg, dw_geometry(spec, cfg, prec, per))
        return words[per] <= wcap

    n = 1 if pcap is None else max(1, ceil_div(groups * L, max(pcap, 1)))
    while n <= groups:
        per = ceil_div(groups, n)
        parts = [(g0, min(groups, g0 + per)) for g0 in range(0, groups, per)]
        if all(fits(g1 - g0) for g0, g1 in parts):
            return parts
        n += 1
    kh, kw = spec.kernel
    raise LowerError(f"{spec.name or 'depthwise node'}: not even one job of one channel group "
                     f"fits the region: {kh * kw} taps x {cfg.COLS} = {kh * kw * cfg.COLS} weight "
                     f"words (region {wcap}), {L} parameter entries per group (region {pcap})")


def _lower_dw(spec, filters, bias, cfg, prec, wgt_base, param_base, wcap, pcap, rq, resident,
              param_pages=True):
    cols_n = cfg.COLS
    L = prec.lanes
    n, ih, iw, c = spec.input_shape
    _, oh, ow, oc = spec.output_shape
    kh, kw = spec.kernel
    mult = spec.depth_multiplier
    zx, zw = _zero_points(spec)
    groups = ceil_div(oc, L)
    cp = groups * L
    taps = kh * kw
    raw = prec in (Precision.INT32, Precision.INT64)
    resident = resident and footprint(spec, cfg, prec)[0] <= wcap and cp <= pcap
    # param_pages=False: a paged node's parameters stay resident (all at param_base), only its
    # weights are paged
    own_params = not raw and not param_pages and not resident
    if own_params and pcap < cp:
        raise ValueError(f"param_pages=False: the parameter region ({pcap} entries) must hold "
                         f"all {cp}")
    parts = [(0, groups)] if resident else dw_parts(spec, cfg, prec, wcap, pcap,
                                                    params_paged=not (raw or own_params))
    if len(parts) > 1:
        log.debug("%s: %d channel groups in %d DWCONV jobs (weight region %d words, parameter "
                  "region %d entries)", spec.name or "depthwise node", groups, len(parts), wcap, pcap)
    wt = np.asarray(filters).reshape(taps, oc)
    if prec.bits == 8:
        info = np.iinfo(prec.value_dtype)
        amax = max(abs(int(info.min) - zx), abs(int(info.max) - zx))
        if int(np.abs(wt.astype(np.int64) - zw).sum(axis=0).max()) * amax > (1 << 31) - 1:
            raise LowerError(f"{spec.name or 'depthwise node'}: an int32 accumulator could overflow")
    params = param_words(spec, bias, cp, rq)
    variant = variant_code(cfg, spec, bias, rq)
    mode = "FLOAT" if prec.is_float else "RAW" if raw else "REQUANT"
    lanes_res, res_dt = out_lanes(cfg, prec, cfg.enums["OUT_MODE"][mode])
    wpi = ceil_div(L, lanes_res)
    pad_value = 0.0 if prec.is_float else zx
    xdt = reference.io_dtypes(spec)[0]

    def part(g0, g1):
        """(geometry, register tuple, its load jobs) of the job over channel groups g0..g1-1."""
        g = dw_geometry(spec, cfg, prec, g1 - g0)
        lo, hi = g0 * L, min(oc, g1 * L)
        # the part's channels padded to whole groups, then laid out as the core reads them
        wg = (np.zeros((taps, (g1 - g0 + 1) * L), np.float32) if prec.is_float
              else np.full((taps, (g1 - g0 + 1) * L), zw, prec.value_dtype))
        wg[:, :hi - lo] = wt[:, lo:hi]
        layout = dw_weight_layout(cfg, g)            # group per word; -1: padding (group g1-g0)
        grp = np.where(layout < 0, g1 - g0, layout)
        w = wg.reshape(taps, g1 - g0 + 1, L)[np.arange(taps)[:, None], grp].reshape(taps, -1)
        regs = (
            ("DW_IN", cfg.encode("DW_IN", H=ih, W=iw)), ("DW_OUT", cfg.encode("DW_OUT", H=oh, W=ow)),
            ("DW_KERNEL", cfg.encode("DW_KERNEL", KH=kh, KW=kw, PT=g.pt, PL=g.pl)),
            ("DW_STRIDE", cfg.encode("DW_STRIDE", SY=g.sy, SX=g.sx, DY=g.dy, DX=g.dx)),
            ("DW_GROUPS", cfg.encode("DW_GROUPS", GC=g.gc, NCHUNK=g.nchunk)),
            ("DW_RING", cfg.encode("DW_RING", LB_ROWS=g.lb_rows, TAP_CYCLES=g.tap_cycles)),
            ("WGT_BASE", wgt_base), ("PARAM_BASE", param_base + (lo if own_params else 0)),
            ("IN_OFFSET", _as_u32(-zx)), ("WGT_OFFSET", _as_u32(-zw)), *clamp_regs(spec, rq),
            NO_PREFETCH, job_reg(cfg, "DWCONV", prec, mode, 0 if raw else variant))
        tag = "" if len(parts) == 1 else f" g[{g0}:{g1}]"
        loads = [load_job(cfg, "LOAD_WGT", wgt_base, pack(w, prec), f"dw weights{tag}")]
        if not (raw or own_params):
            loads.append(load_job(cfg, "LOAD_PARAM", param_base, params[lo:g1 * L].reshape(-1),
                                   f"dw params{tag}"))
        labels = [f"dw{tag}[{b}]" for b in range(n)]
        return g, regs, loads, labels, oh * ow * (hi - lo) * taps

    jobs_of = [part(g0, g1) for g0, g1 in parts]
    if resident:
        once = jobs_of[0][2]
    elif own_params:
        once = [load_job(cfg, "LOAD_PARAM", param_base, params.reshape(-1), "dw params")]
    else:
        once = []

    tally = [0]   # Lowered.transforms

    def channels(x):
        tally[0] += (mult > 1) + (cp != oc)
        if mult > 1:  # input channel ci feeds output channels ci*M .. ci*M+M-1
            x = np.repeat(x, mult, axis=3)
        if cp != oc:
            x = np.concatenate([x, np.full(x.shape[:3] + (cp - oc,), pad_value, x.dtype)], axis=3)
        return x

    def stream(img, g, g0, g1):
        """One image's activation words of the job over groups g0..g1-1."""
        tally[0] += (len(parts) > 1) + (g.nchunk > 1)
        if len(parts) > 1:
            img = img[:, :, g0 * L:g1 * L]
        if g.nchunk > 1:  # chunk-major stream: (chunk, y, x, groups of the chunk)
            img = img.reshape(ih, iw, g.nchunk, g.gc * L).transpose(2, 0, 1, 3)
        return _pack_act(np.ascontiguousarray(img), prec)

    def plan(x):
        x = None if x is None else channels(x)
        jobs = []
        for (g0, g1), (g, regs, loads, labels, macs) in zip(parts, jobs_of):
            if not resident:
                jobs += loads
            for b in range(n):
                jobs.append(Job(labels[b], regs, {"act": _NO_ACT if x is None else stream(x[b], g, g0, g1)},
                                g.nchunk * oh * ow * g.gc * wpi, macs))
        return jobs

    g_one = jobs_of[0][0]
    # one job of one image of whole result words: NHWC once the chunks are interleaved again
    as_view = (len(parts) == 1 and n == 1 and cp == oc and wpi * lanes_res == L and not raw
               and np.dtype(res_dt) == xdt)

    def assemble(results):
        if as_view:
            if g_one.nchunk == 1:  # the result words are the NHWC output: a view
                return results[0].view(xdt).reshape(1, oh, ow, oc)
            tally[0] += 1
            y = np.empty((1, oh, ow, oc), xdt)
            np.copyto(y.reshape(oh, ow, g_one.nchunk, g_one.gc * L),
                      results[0].view(xdt).reshape(g_one.nchunk, oh, ow, g_one.gc * L).transpose(1, 2, 0, 3))
            return y
        out = np.empty((n, oh, ow, cp), np.int64 if raw else xdt)
        tally[0] += len(results) + raw
        words = iter(results)
        for (g0, g1), (g, *_rest) in zip(parts, jobs_of):
            for b in range(n):
                w = next(words)
                vals = unpack(w, result_precision(res_dt), w.size * lanes_res)
                vals = vals.reshape(g.nchunk, oh, ow, g.gc, wpi * lanes_res)[..., :L]
                out[b, :, :, g0 * L:g1 * L] = vals.transpose(1, 2, 0, 3, 4).reshape(oh, ow, (g1 - g0) * L)
        out = out[..., :oc]
        if raw:
            return reference.requantize(spec, out, bias, variant=rq)
        return np.ascontiguousarray(out)

    most = max(g1 - g0 for g0, g1 in parts)
    low = Lowered(spec, cfg, prec, "dwconv", resident, once,
                  max(dw_weight_words(cfg, j[0]) for j in jobs_of),
                  cp if resident or own_params else most * L,
                  plan, assemble, transforms=tally)
    if resident and n == 1:
        vdt = prec.value_dtype
        flat = not prec.is_float and mult == 1 and cp == oc and g_one.nchunk == 1
        regs, labels = jobs_of[0][1], jobs_of[0][3]

        def act_of(x):
            if flat and x.dtype == vdt:  # the NHWC tensor is the stream
                return x.reshape(-1).view(_U64)
            return stream(channels(x)[0], g_one, 0, groups)
        low.direct = (regs, act_of, labels[0], as_view and g_one.nchunk == 1)
    return low


def footprint(spec: ConvSpec, cfg: HwConfig | None = None, precision=None) -> tuple[int, int]:
    """(weight words, parameter entries) the node occupies when resident."""
    cfg = cfg or get_config()
    prec = precision_of(spec, precision)
    L = prec.lanes
    kh, kw = spec.kernel
    if spec.kind is OpKind.DEPTHWISE_CONV_2D:
        groups = ceil_div(spec.out_channels, L)
        if dw_rotated(cfg):  # the words depend on the chunking
            return dw_weight_words(cfg, dw_geometry(spec, cfg, prec)), groups * L
        gp = ceil_div(groups, cfg.COLS) * cfg.COLS
        return kh * kw * gp, groups * L
    nt = ceil_div(spec.out_channels, cfg.COLS)
    k = kh * kw * spec.input_shape[3]
    return nt * ceil_div(k, L) * cfg.COLS, nt * cfg.COLS
