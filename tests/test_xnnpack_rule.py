"""LiteRT's default interpreter and XNNPACK: which quantized nodes it takes, and how it rounds them.

LiteRT 2.3's default interpreter (ai-edge-litert, DTPU_TFLITE_RUNTIME=ai_edge_litert in
.venv-litert) hands int8/uint8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED nodes to XNNPACK,
which requantizes in float32 (dtpu.reference's Variant.FP32). Two things are established here
and kept established:

* the rule, :func:`dtpu.reference.xnnpack_decline_reason`, agrees with what LiteRT does on every
  zoo node and on models rewritten to reach each branch of the rule: a taken node shows up as a
  DELEGATE node and matches Variant.FP32 exactly, a declined one computes what the builtin
  kernels compute, an unallocatable one fails allocation;
* the evidence for Variant.FP32: zoo models rewritten (scales, filters, bias, fused activation)
  so that outputs land on exact ties, scales where the computation orders of the float32 scale
  disagree, totals beyond 2^24 (where int32 -> float32 rounds) and activation bounds ending in
  .5. Variant.FP32 must match every element of every experiment, and each experiment must rule
  out the alternatives it targets (every alternative is targeted by at least one).

Under tflite-runtime 2.14 XNNPACK takes no quantized node, so this module is skipped there.
"""
from __future__ import annotations

import collections
import functools
import logging
import struct

import numpy as np
import pytest

from dtpu import reference, tflite_model
from tests.flatbuf_fields import FieldReader
from dtpu.reference import LITERT
from dtpu.spec import Activation
from dtpu.tflite import RUNTIME, runtime_version

if RUNTIME != LITERT:
    pytest.skip(f"XNNPACK takes quantized nodes only in LiteRT's default interpreter; this run uses "
                f"{runtime_version()} (run under DTPU_TFLITE_RUNTIME=ai_edge_litert)",
                allow_module_level=True)

from tests.delegate_util import DATA  # noqa: E402
from tests.models.zoo import model_path  # noqa: E402
from tests.test_reference import (ENTRIES, NODE_OPS, UNCOVERED_MODES, _interpreter,  # noqa: E402
                                  _single_op, _with_scales)

log = logging.getLogger(__name__)
pytestmark = pytest.mark.filterwarnings("ignore:.*experimental_preserve_all_tensors.*:UserWarning")

F32 = np.float32
F64 = np.float64
CANNOT_ALLOCATE = "cannot allocate"


# --- running one node ---------------------------------------------------------------------------

def _allocate(content: bytes, rounding: str):
    """(interpreter, None) or (None, the allocation error)."""
    interp = _interpreter(content, rounding)
    try:
        interp.allocate_tensors()
    except RuntimeError as exc:
        return None, exc
    return interp, None


def _delegated(interp) -> bool:
    return any(o["op_name"] == "DELEGATE" for o in interp._get_ops_details())


def _invoke(interp, x: np.ndarray) -> np.ndarray:
    d = interp.get_input_details()[0]
    interp.set_tensor(d["index"], x.reshape(d["shape"]))
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def _node(content: bytes):
    """(subgraph, op, spec, filters, bias or None) of a single-op model's node."""
    sg = tflite_model.parse(content).main
    (op,) = [o for o in sg.operators if o.opcode in NODE_OPS]
    spec, w, b = tflite_model.conv_spec(sg, op)
    return sg, op, spec, w, (b if spec.has_bias else None)


def _full_range(spec, rng, n: int) -> list[np.ndarray]:
    dt = reference.io_dtypes(spec)[0]
    ii = np.iinfo(dt)
    return [rng.integers(ii.min, ii.max, spec.input_shape, endpoint=True).astype(dt)
            for _ in range(n)]


# --- (a) the rule on every zoo node ---------------------------------------------------------------

RULE_MODES = sorted({e["mode"] for e in ENTRIES} - set(UNCOVERED_MODES))


@pytest.mark.parametrize("mode", RULE_MODES)
def test_rule_matches_litert_on_every_zoo_node(mode):
    """Every CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED of the zoo's models of `mode`, run alone
    (a single-op model) in LiteRT's default interpreter: quantized nodes are delegated exactly
    when xnnpack_decline_reason says XNNPACK takes them, fail allocation exactly when it says
    they cannot be allocated, and otherwise equal the BUILTIN_WITHOUT_DEFAULT_DELEGATES
    interpreter bit for bit (the same kernel ran). Taken nodes match Variant.FP32 on full-range
    inputs. Float nodes (not a quantized type for the rule) are always delegated."""
    rng = np.random.default_rng(11)
    seen = collections.Counter()
    for entry in (e for e in ENTRIES if e["mode"] == mode):
        content = model_path(entry).read_bytes()
        for op in tflite_model.parse(content).operators(*NODE_OPS):
            one = _single_op(content, op)
            label = f"{entry['name']} op {op.index} {op.opcode}"
            default, error = _allocate(one, "default")
            if mode in ("float32", "float16_weights"):
                assert error is None and _delegated(default), f"{label}: float node not delegated"
                seen["float, delegated"] += 1
                continue
            _, _, spec, w, b = _node(one)
            why = reference.xnnpack_decline_reason(spec)
            if why is not None and CANNOT_ALLOCATE in why:
                assert error is not None, f"{label}: the rule says {why!r} but LiteRT allocated it"
                seen["cannot allocate"] += 1
                continue
            assert error is None, f"{label}: allocation failed ({error}); the rule says {why!r}"
            assert _delegated(default) == (why is None), (
                f"{label}: delegated={_delegated(default)}, the rule says {why or 'taken'}")
            builtin, error = _allocate(one, "builtin")
            assert error is None, f"{label}: {error}"
            for x in _full_range(spec, rng, 2):
                got = _invoke(default, x)
                if why is None:
                    want = reference.run(spec, x.reshape(spec.input_shape), w, b, variant="fp32")
                    np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=label)
                else:
                    np.testing.assert_array_equal(got, _invoke(builtin, x), err_msg=label)
            seen["taken" if why is None else f"declined: {why}"] += 1
    log.info("%s (%s): %s", mode, runtime_version(), dict(seen))
    assert seen


# --- the rule's branches on rewritten models -------------------------------------------------------

def _tensors(content: bytes):
    sg, op, *_ = _node(content)
    x_t, w_t = sg.tensor(op.inputs[0]), sg.tensor(op.inputs[1])
    b_t = sg.tensor(op.inputs[2]) if len(op.inputs) > 2 else None
    return op, x_t, w_t, b_t, sg.tensor(op.outputs[0])


def _op_table(content: bytes) -> tuple[FieldReader, int]:
    r = FieldReader(content)
    sg = r.tables(r.root(), 2)[0]
    (op_table,) = r.tables(sg, 3)
    return r, op_table


def _without_bias(content: bytes) -> bytes:
    """The single-op model with its bias input replaced by -1 (omitted optional input)."""
    r, op_table = _op_table(content)
    start, n = r.vector(op_table, 1)  # Operator.inputs
    assert n == 3
    buf = bytearray(content)
    struct.pack_into("<i", buf, start + 8, -1)
    return bytes(buf)


def _scaled(content: bytes, *, x=None, w=None, b=None, y=None) -> bytes:
    """Scales replaced (lists, per tensor); the bias scale follows x*w unless given."""
    op, x_t, w_t, b_t, y_t = _tensors(content)
    s_in = float(x_t.quantization.scale[0]) if x is None else x
    s_w = list(map(float, w_t.quantization.scale)) if w is None else w
    scales = {x_t.index: [s_in], w_t.index: s_w}
    if y is not None:
        scales[y_t.index] = [y]
    if b_t is not None:
        nb = b_t.quantization.scale.size
        bias = [float(F32(s_in) * F32(s)) for s in s_w] if nb == len(s_w) else \
            [float(F32(s_in) * F32(s_w[0]))] * nb
        scales[b_t.index] = [b] * nb if b is not None else bias
    return _with_scales(content, scales)


def _max_scale_to(content: bytes, target: float) -> bytes:
    """Output scale chosen so that the largest requantization scale is `target` in float32."""
    op, x_t, w_t, b_t, y_t = _tensors(content)
    prod = F32(x_t.quantization.scale[0]) * F32(np.max(w_t.quantization.scale))
    s_out = F32(prod / F32(target))
    while prod / s_out < F32(target):  # land on target or just above
        s_out = np.nextafter(s_out, F32(0))
    return _scaled(content, y=float(s_out))


def _one_channel_big(content: bytes) -> bytes:
    """Per-channel filters: channel 0's requantization scale 300, the others unchanged."""
    op, x_t, w_t, b_t, y_t = _tensors(content)
    s_w = list(map(float, w_t.quantization.scale))
    assert len(s_w) > 1
    s_w[0] = 300.0 * float(y_t.quantization.scale[0]) / float(x_t.quantization.scale[0])
    return _scaled(content, w=s_w)


def _zoo_single(name: str) -> bytes:
    return model_path(name).read_bytes()


def _net_fc(name: str) -> bytes:
    content = model_path(name).read_bytes()
    (op,) = tflite_model.parse(content).operators("FULLY_CONNECTED")
    return _single_op(content, op)


CONV = "conv_i8x8x3_o5_k3x3_s1x1_same_none__int8"
CONV_U8 = "conv_i8x8x3_o5_k3x3_s1x1_same_none__uint8"
DW = "dw_i8x8x3_m1_k3x3_s1x1_same_none__int8"
FC = "mobilenet_like__int8"
SUBNORMAL = 1e-39  # float32 subnormal (the smallest normal float32 is ~1.18e-38)

# name -> (build the model, what LiteRT's default interpreter does: "taken", "declined",
# "cannot allocate", or "refused" (the builtin kernels cannot allocate it either), and None or
# the known disagreement of dtpu.reference's rule, reported as an expected failure).
BRANCHES = {
    "conv scale 255.9 taken": (lambda: _max_scale_to(_zoo_single(CONV), 255.9), "taken", None),
    "dw scale 255.9 taken": (lambda: _max_scale_to(_zoo_single(DW), 255.9), "taken", None),
    "conv scale 256 cannot allocate": (lambda: _max_scale_to(_zoo_single(CONV), 256.0),
                                       "cannot allocate", None),
    "uint8 conv scale 256 cannot allocate": (lambda: _max_scale_to(_zoo_single(CONV_U8), 256.0),
                                             "cannot allocate", None),
    "conv one channel at 300 cannot allocate": (lambda: _one_channel_big(_zoo_single(CONV)),
                                                "cannot allocate", None),
    "fc scale 256 cannot allocate": (lambda: _max_scale_to(_net_fc(FC), 256.0),
                                     "cannot allocate", None),
    "conv subnormal filter scale declined": (
        lambda: _scaled(_zoo_single(CONV), w=[SUBNORMAL] * 5, b=1e-6), "declined", None),
    "dw subnormal filter scale declined": (
        lambda: _scaled(_zoo_single(DW), w=[SUBNORMAL] * 3, b=1e-6), "declined", None),
    "fc without bias taken": (lambda: _without_bias(_net_fc(FC)), "taken", None),
    # CONV_2D / DEPTHWISE_CONV_2D need a bias in LiteRT's builtin kernels too (as in
    # tflite-runtime 2.14): the rule's bias branch is never observable, the model never loads.
    "conv without bias refused": (lambda: _without_bias(_zoo_single(CONV)), "refused", None),
    "dw without bias refused": (lambda: _without_bias(_zoo_single(DW)), "refused", None),
    # Known disagreements of dtpu.reference's rule (xfail until it is fixed, then fail):
    "conv subnormal input scale cannot allocate": (
        lambda: _scaled(_zoo_single(CONV), x=SUBNORMAL, b=1e-6), "cannot allocate",
        "a subnormal input or output scale makes XNNPACK fail while defining the tensor, so "
        "LiteRT's default interpreter cannot allocate the model; the rule says XNNPACK declines "
        "the node"),
    "conv subnormal output scale cannot allocate": (
        lambda: _scaled(_zoo_single(CONV), y=SUBNORMAL), "cannot allocate",
        "a subnormal input or output scale makes XNNPACK fail while defining the tensor, so "
        "LiteRT's default interpreter cannot allocate the model; the rule says XNNPACK declines "
        "the node"),
    # (a non-normal bias scale takes precedence: with the bias scale following a subnormal
    # input scale, s_in * s_w underflows to 0 and the node is declined instead)
    "conv zero bias scale declined": (
        lambda: _scaled(_zoo_single(CONV), b=0.0), "declined",
        "XNNPACK declines a node whose bias scale is not a normal float32; the rule does not look "
        "at the bias scale (ConvSpec has none) and says XNNPACK takes it"),
}


def _rule_outcome(spec) -> str:
    why = reference.xnnpack_decline_reason(spec)
    if why is None:
        return "taken"
    return "cannot allocate" if CANNOT_ALLOCATE in why else "declined"


@pytest.mark.parametrize("name", list(BRANCHES), ids=[n.replace(" ", "_") for n in BRANCHES])
def test_rule_branches_on_rewritten_models(name):
    """Each branch of xnnpack_decline_reason on a model rewritten to reach it: LiteRT's default
    interpreter does what the rule says (taken nodes also match Variant.FP32, declined ones the
    builtin kernels). LiteRT's behaviour is asserted in every case; where the rule is known to
    disagree the test then xfails with the disagreement, and fails once the rule agrees (so that
    the note and docs/quantization.md get updated)."""
    make, litert, bug = BRANCHES[name]
    content = make()
    _, _, spec, w, b = _node(content)
    default, error = _allocate(content, "default")
    builtin, builtin_error = _allocate(content, "builtin")
    if litert == "refused":
        assert error is not None and builtin_error is not None, "LiteRT now accepts the node"
        assert "bias" in reference.xnnpack_decline_reason(spec)
        return
    if error is not None:
        seen = "cannot allocate"
    else:
        seen = "taken" if _delegated(default) else "declined"
    assert seen == litert, f"LiteRT: {seen} ({error}), expected {litert}"
    if seen != "cannot allocate":
        assert builtin_error is None, builtin_error
        for x in _full_range(spec, np.random.default_rng(3), 2):
            got = _invoke(default, x)
            if seen == "taken":
                want = reference.run(spec, x.reshape(spec.input_shape), w, b, variant="fp32")
                np.testing.assert_array_equal(got.reshape(want.shape), want)
            else:
                np.testing.assert_array_equal(got, _invoke(builtin, x))
    rule = _rule_outcome(spec)
    if bug:
        assert rule != seen, f"the rule now agrees ({rule}): drop the known-disagreement note"
        pytest.xfail(f"dtpu.reference rule: {bug} (rule: {rule}; LiteRT: {seen})")
    assert rule == seen, f"rule: {reference.xnnpack_decline_reason(spec)!r}; LiteRT: {seen}"


# --- (b) evidence for Variant.FP32 ---------------------------------------------------------------

def _data_span(content: bytes, tensor_index: int) -> tuple[int, int]:
    r = FieldReader(content)
    root = r.root()
    sg = r.tables(root, 2)[0]
    t = r.tables(sg, 0)[tensor_index]
    buf_table = r.tables(root, 4)[r.scalar(t, 2, "I", 0)]
    return r.vector(buf_table, 0)


def _with_data(content: bytes, data: dict[int, np.ndarray]) -> bytes:
    """Constant tensors' contents replaced in place (same dtype and size)."""
    buf = bytearray(content)
    for index, arr in data.items():
        start, n = _data_span(content, index)
        raw = np.ascontiguousarray(arr).tobytes()
        assert len(raw) == n, f"tensor {index}: {len(raw)} bytes for {n}"
        buf[start:start + n] = raw
    return bytes(buf)


def _with_zero_point(content: bytes, tensor_index: int, zp: int) -> bytes:
    """A per-tensor zero point rewritten in place (QuantizationParameters.zero_point, int64)."""
    r = FieldReader(content)
    tensor = r.tables(r.tables(r.root(), 2)[0], 0)[tensor_index]
    start, n = r.vector(r.table(tensor, 4), 3)
    assert n == 1
    buf = bytearray(content)
    struct.pack_into("<q", buf, start, zp)
    return bytes(buf)


_ACT_FIELD = {"Conv2DOptions": 3, "DepthwiseConv2DOptions": 4, "FullyConnectedOptions": 0}
_ACT_CODE = {Activation.RELU6: 3, Activation.RELU_N1_TO_1: 2}


def _with_activation(content: bytes, act: Activation) -> bytes | None:
    """The fused activation rewritten in place; None if the field is absent (stored default)."""
    _, op, *_ = _node(content)
    r, op_table = _op_table(content)
    pos = r.field_pos(r.table(op_table, 4), _ACT_FIELD[op.options_type])
    if pos is None:
        return None
    buf = bytearray(content)
    struct.pack_into("<b", buf, pos, _ACT_CODE[act])
    return bytes(buf)


def _delta_filters(spec, w: np.ndarray) -> np.ndarray:
    """Filters equal to the zero point but one tap (zp + 1) per output channel, so that the
    accumulator is one input difference and the bias alone sets the total on a zero-point input."""
    w = np.array(w)
    zp = spec.filter_q.zero_points(spec.out_channels).astype(w.dtype)
    if spec.kind.value == "depthwise_conv2d":  # (1, kh, kw, C)
        w[...] = zp.reshape(1, 1, 1, -1)
        w[0, spec.kernel[0] // 2, spec.kernel[1] // 2, :] = zp + 1
    else:  # (O, kh, kw, I)
        w[...] = zp.reshape(-1, 1, 1, 1)
        w[:, spec.kernel[0] // 2, spec.kernel[1] // 2, 0] = zp + 1
    return w


def _log_uniform(rng, lo: float, hi: float, n: int | None = None):
    v = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    return np.asarray(v, dtype=F32).astype(F64)


def _orders(spec) -> dict[str, np.ndarray]:
    """The requantization scale per channel computed in the candidate orders (float32 unless
    said): A, XNNPACK's fl(fl(s_in*s_w)/s_out); B, s_in*(s_w/s_out); C, in float64 then rounded
    once to float32; D, (s_in/s_out)*s_w."""
    oc = spec.out_channels
    i, o = F32(spec.input_q.scale[0]), F32(spec.output_q.scale[0])
    w = spec.filter_q.scales(oc).astype(F32)
    return {"A": (i * w) / o, "B": i * (w / o),
            "C": (F64(i) * w.astype(F64) / F64(o)).astype(F32), "D": (i / o) * w}


def _fp32_like(spec, total: np.ndarray, *, order="A", ties="even", bounds="xnnpack",
               convert="float32") -> np.ndarray:
    """Variant.FP32 (the defaults) or one alternative: another scale order, ties up or away from
    zero, TFLite's activation bounds, or total*scale in float64 rounded once to float32."""
    s = _orders(spec)[order]
    if convert == "float32":
        y = total.astype(F64).astype(F32) * s
    else:
        y = (total.astype(F64) * s.astype(F64)).astype(F32)
    lo, hi = reference.activation_range(spec, "fp32" if bounds == "xnnpack" else None)
    zp = int(spec.output_q.zero_point[0])
    y = np.clip(y, F32(lo - zp), F32(hi - zp)).astype(F64)
    if ties == "even":
        r = np.rint(y)
    elif ties == "up":
        r = np.floor(y + 0.5)
    else:
        r = np.sign(y) * np.floor(np.abs(y) + 0.5)
    return r.astype(np.int64) + zp


FLOAT_ALTERNATIVES = {
    "scale s_in*(s_w/s_out)": dict(order="B"),
    "scale in float64": dict(order="C"),
    "scale (s_in/s_out)*s_w": dict(order="D"),
    "ties up": dict(ties="up"),
    "ties away from zero": dict(ties="away"),
    "TFLite's activation bounds": dict(bounds="tflite"),
    "total*scale in float64": dict(convert="float64"),
}
INTEGER_ALTERNATIVES = ("double", "double_up", "single", "int64")  # (multiplier, shift) variants
# What each experiment must produce (a count > 0) and rule out (each must fail somewhere);
# together they rule out every alternative.
PRODUCES = {"ties": "exact ties", "scale order": "channels probing order",
            "total beyond 2^24": "|total| > 2^24",
            "activation bound on .5": "at a fused-activation bound"}
TARGETS = {
    "ties": ("ties up", "ties away from zero", *INTEGER_ALTERNATIVES),
    "scale order": ("scale s_in*(s_w/s_out)", "scale in float64", "scale (s_in/s_out)*s_w"),
    "total beyond 2^24": ("total*scale in float64",),
    "activation bound on .5": ("TFLite's activation bounds",),
}


def _tally(content: bytes, xs: list[np.ndarray], totals: collections.Counter) -> None:
    """Run the node on LiteRT's default interpreter; count mismatches of FP32 and each
    alternative. The node must be delegated."""
    _, _, spec, w, b = _node(content)
    assert reference.xnnpack_decline_reason(spec) is None, reference.xnnpack_decline_reason(spec)
    interp, error = _allocate(content, "default")
    assert error is None and _delegated(interp), f"XNNPACK did not take the node ({error})"
    for x in xs:
        x = x.reshape(spec.input_shape)
        want = _invoke(interp, x).reshape(spec.output_shape).astype(np.int64)
        acc = reference.accumulate(spec, x, w)
        total = acc.astype(np.int64) + (0 if b is None else np.asarray(b, np.int64))
        fp32 = reference.requantize(spec, acc, b, variant="fp32").astype(np.int64)
        assert np.array_equal(fp32, _fp32_like(spec, total)), "the test's FP32 model drifted"
        totals["FP32"] += int(np.sum(fp32 != want))
        y = total.astype(F64).astype(F32) * reference.fp32_scales(spec)
        totals["exact ties"] += int(np.sum(np.abs(y - np.trunc(y)) == 0.5))
        totals["|total| > 2^24"] += int(np.sum(np.abs(total) > 1 << 24))
        lo, hi = reference.activation_range(spec, "fp32")
        totals["at a fused-activation bound"] += int(np.sum((want == lo) | (want == hi))) \
            if spec.activation is not Activation.NONE else 0
        for alt, kw in FLOAT_ALTERNATIVES.items():
            totals[alt] += int(np.sum(_fp32_like(spec, total, **kw) != want))
        for v in INTEGER_ALTERNATIVES:
            got = reference.requantize(spec, acc, b, variant=v).astype(np.int64)
            totals[v] += int(np.sum(got != want))
        totals["elements"] += want.size


def _rescale(content: bytes, s_in: float, s_w, s_out: float) -> bytes:
    return _scaled(content, x=float(s_in), w=[float(s) for s in s_w], y=float(s_out))


def _exp_ties(content: bytes, rng, totals) -> bool:
    """Scales s_in = 2^-4, s_w[c] = (1 or 3) 2^-(4+j), s_out = 2^-8 (requantization scale
    (1 or 3) 2^-j, j in 1..3, all exact), small filters, inputs and bias: many totals*scale are
    exactly k + 0.5 and unclamped."""
    _, _, spec, w, _ = _node(content)
    _, x_t, w_t, b_t, _ = _tensors(content)
    nw = w_t.quantization.scale.size
    s_w = rng.choice([1.0, 3.0], nw) * 2.0 ** -(4 + rng.integers(1, 4, nw))
    content = _rescale(content, 2.0 ** -4, s_w, 2.0 ** -8)
    zp_w = spec.filter_q.zero_points(spec.out_channels)
    zp_w = zp_w.reshape((-1,) + (1,) * (w.ndim - 1)) if spec.kind.value != "depthwise_conv2d" \
        else zp_w.reshape((1,) * (w.ndim - 1) + (-1,))
    ii = np.iinfo(w.dtype)
    small_w = np.clip(zp_w + rng.integers(-3, 4, w.shape), ii.min, ii.max).astype(w.dtype)
    data = {w_t.index: small_w.reshape(w_t.shape)}
    if b_t is not None:
        data[b_t.index] = rng.integers(-64, 65, spec.out_channels).astype(np.int32)
    content = _with_data(content, data)
    zp = int(x_t.quantization.zero_point[0])
    xi = np.iinfo(x_t.dtype)
    xs = [np.clip(zp + rng.integers(-6, 7, x_t.shape), xi.min, xi.max).astype(x_t.dtype)
          for _ in range(3)]
    _tally(content, xs, totals)
    return True


def _exp_order(content: bytes, rng, totals) -> bool:
    """Random scales with requantization scales around 1e-5 (retried until order A differs from
    B, C or D on some channel), delta filters, and per channel a bias on which A and one of the
    differing orders round to different integers (unclamped); inputs: the zero point (totals =
    bias exactly) and full-range ones."""
    _, _, _, w0, _ = _node(content)
    _, x_t, w_t, b_t, _ = _tensors(content)
    if b_t is None:
        return False  # the bias sets the total
    nw = w_t.quantization.scale.size
    for _ in range(100):
        s_in = _log_uniform(rng, 1e-3, 1e-1)
        s_w = _log_uniform(rng, 1e-4, 1e-3, nw)
        s_out = float(F32(s_in * np.median(s_w) / _log_uniform(rng, 3e-6, 3e-5)))
        trial = _rescale(content, s_in, s_w, s_out)
        _, _, spec, _, _ = _node(trial)
        orders = _orders(spec)
        differ = {k: orders[k] != orders["A"] for k in "BCD"}
        if any(d.any() for d in differ.values()):
            break
    lo, hi = reference.activation_range(spec, "fp32")
    zp = int(spec.output_q.zero_point[0])
    n = np.arange(max(lo - zp, 0) + 1, hi - zp - 1)  # y = n + 0.5: unclamped, non-negative
    bias = np.zeros(spec.out_channels, np.int64)
    for c in range(spec.out_channels):
        alts = [k for k in "BCD" if differ[k][c]]
        if not alts or not n.size:
            continue
        k = alts[c % len(alts)]
        sa, sk = orders["A"][c], orders[k][c]
        t = (np.floor((n + 0.5) / F64(sa))[:, None] + np.arange(-2, 3)).ravel().astype(np.int64)
        t = t[(t > 0) & (t < 1 << 24)]
        tf = t.astype(F32)
        hit = t[np.rint(tf * sa) != np.rint(tf * sk)]
        if hit.size:
            bias[c] = hit[rng.integers(hit.size)]
            totals[f"channels probing order {k}"] += 1
    delta = _delta_filters(spec, w0).reshape(w_t.shape)
    trial = _with_data(trial, {w_t.index: delta, b_t.index: bias.astype(np.int32)})
    zp_in = int(x_t.quantization.zero_point[0])
    xs = [np.full(x_t.shape, zp_in, x_t.dtype)] + _full_range(spec, rng, 2)
    _tally(trial, xs, totals)
    return True


def _exp_big(content: bytes, rng, totals) -> bool:
    """s_in = 2^-4, s_out = 1, requantization scales around 3e-7 and per channel a bias in
    (2^24, 2^30) that float32 cannot hold, chosen so that converting the total to float32 first
    (XNNPACK) and multiplying in float64 round to different integers; delta filters."""
    _, _, _, w0, _ = _node(content)
    _, x_t, w_t, b_t, _ = _tensors(content)
    if b_t is None:
        return False  # the bias sets the total
    nw = w_t.quantization.scale.size
    s_w = _log_uniform(rng, 2.0 ** 4 * 2e-7, 2.0 ** 4 * 5e-7, nw)
    trial = _rescale(content, 2.0 ** -4, s_w, 1.0)
    _, _, spec, _, _ = _node(trial)
    s = reference.fp32_scales(spec)
    lo, hi = reference.activation_range(spec, "fp32")
    zp = int(spec.output_q.zero_point[0])
    bias = np.zeros(spec.out_channels, np.int64)
    for c in range(spec.out_channels):
        n = np.arange(max(lo - zp, 0) + 1, hi - zp - 1)
        t = (np.floor((n + 0.5) / F64(s[c]))[:, None] + np.arange(-3, 4)).ravel().astype(np.int64)
        t = t[(t > 1 << 24) & (t < 1 << 30)]
        a = np.rint(t.astype(F32) * s[c])
        d = np.rint((t.astype(F64) * F64(s[c])).astype(F32))
        hit = t[a != d]
        if hit.size:
            bias[c] = hit[rng.integers(hit.size)]
    delta = _delta_filters(spec, w0).reshape(w_t.shape)
    trial = _with_data(trial, {w_t.index: delta, b_t.index: bias.astype(np.int32)})
    zp_in = int(x_t.quantization.zero_point[0])
    xs = [np.full(x_t.shape, zp_in, x_t.dtype)] + _full_range(spec, rng, 1)
    _tally(trial, xs, totals)
    return True


def _half_scale(value: float, n: int) -> float | None:
    """A float32 s with fl(value / s) == n + 0.5 exactly (searched outwards from value/(n+.5))."""
    up = down = F32(value / (n + 0.5))
    for _ in range(64):
        for s in (up, down):
            if F32(value) / s == F32(n + 0.5):
                return float(s)
        up, down = np.nextafter(up, F32(np.inf)), np.nextafter(down, F32(0))
    return None


def _exp_act(content: bytes, rng, totals) -> bool:
    """RELU6 and RELU_N1_TO_1 with an output scale putting 6/s_out (or -1/s_out) on n + 0.5, n
    chosen so that XNNPACK's lrintf(bound/s + zp) (ties to even) and TFLite's zp + round half
    away differ; large scales and full-range inputs so that many outputs reach the bound."""
    ran = False
    for act, bound in ((Activation.RELU6, 6.0), (Activation.RELU_N1_TO_1, -1.0)):
        patched = _with_activation(content, act)
        if patched is None:
            continue
        _, _, spec, _, _ = _node(patched)
        _, x_t, w_t, _, y_t = _tensors(patched)
        qi = np.iinfo(reference.io_dtypes(spec)[0])
        zp = (int(qi.min) + int(qi.max) + 1) // 2  # mid-range: both bounds inside the type
        patched = _with_zero_point(patched, y_t.index, zp)
        # XNNPACK: rint(zp + n + .5) = zp + n when zp + n is even (TFLite: zp + n + 1);
        # rint(zp - n - .5) = zp - n when zp - n is even (TFLite: zp - n - 1)
        if bound > 0:
            ns = [n for n in range(20, 60) if (zp + n) % 2 == 0 and zp + n + 1 <= qi.max]
        else:
            ns = [n for n in range(20, 60) if (zp - n) % 2 == 0 and zp - n - 1 >= qi.min]
        scales = (_half_scale(abs(bound), int(n)) for n in rng.permutation(ns))
        s_out = next((s for s in scales if s is not None), None)  # not every n has one
        assert s_out is not None, f"no float32 scale puts {bound}/s on a .5 for n in {ns}"
        nw = w_t.quantization.scale.size
        trial = _rescale(patched, 0.05, _log_uniform(rng, 1e-3, 1e-2, nw), s_out)
        _, _, spec, _, _ = _node(trial)
        assert reference.activation_range(spec, "fp32") != reference.activation_range(spec)
        _tally(trial, _full_range(spec, rng, 3), totals)
        ran = True
    return ran


EXPERIMENTS = {"ties": _exp_ties, "scale order": _exp_order, "total beyond 2^24": _exp_big,
               "activation bound on .5": _exp_act}
assert set(EXPERIMENTS) == set(TARGETS)
EVIDENCE_MODES = ("int8", "int8_per_tensor", "uint8", "uint8_fakequant")


@functools.lru_cache(maxsize=None)
def _subjects(kind: str) -> tuple[tuple[str, bytes], ...]:
    """Single-op models of a kind: every zoo conv2d / depthwise model of the int8 and uint8
    modes, or the nets' FULLY_CONNECTED layers plus tests/data/delegate/fc_int8.tflite (no bias,
    but its activation field is stored). The activation experiment uses the models whose fused
    activation field is stored in the file (those converted with one)."""
    out = []
    if kind == "fully_connected":
        for entry in ENTRIES:
            if entry["kind"] == "net" and entry["mode"] in EVIDENCE_MODES:
                content = model_path(entry).read_bytes()
                for op in tflite_model.parse(content).operators("FULLY_CONNECTED"):
                    out.append((entry["name"], _single_op(content, op)))
        content = (DATA / "fc_int8.tflite").read_bytes()
        for op in tflite_model.parse(content).operators("FULLY_CONNECTED"):
            out.append(("fc_int8.tflite", _single_op(content, op)))
        return tuple(out)
    return tuple((e["name"], model_path(e).read_bytes()) for e in ENTRIES
                 if e["kind"] == kind and e["mode"] in EVIDENCE_MODES)


@pytest.mark.parametrize("kind", ["conv2d", "depthwise_conv2d", "fully_connected"])
@pytest.mark.parametrize("experiment", list(EXPERIMENTS))
def test_fp32_variant_evidence(experiment, kind):
    """Variant.FP32 matches every element of LiteRT's default interpreter on the experiment's
    rewritten models, and each alternative the experiment targets fails somewhere."""
    rng = np.random.default_rng([list(EXPERIMENTS).index(experiment), len(kind)])
    totals = collections.Counter()
    used = []
    for name, content in _subjects(kind):
        if EXPERIMENTS[experiment](content, rng, totals):
            used.append(name)
    log.info("%s %s (%s): mismatches %s", experiment, kind, runtime_version(), dict(totals))
    assert totals["elements"], f"no {kind} model could run {experiment}"
    assert sum(v for k, v in totals.items() if k.startswith(PRODUCES[experiment])), (
        f"{experiment} produced no {PRODUCES[experiment]!r}: {dict(totals)}")
    assert totals["FP32"] == 0, f"Variant.FP32 should be exact: {dict(totals)}"
    missed = [alt for alt in TARGETS[experiment] if not totals[alt]]
    assert not missed, f"{experiment} did not rule out {missed}: {dict(totals)} (models {used})"


def test_every_alternative_is_targeted():
    assert {a for t in TARGETS.values() for a in t} == set(FLOAT_ALTERNATIVES) | set(INTEGER_ALTERNATIVES)
