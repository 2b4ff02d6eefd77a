"""dtpu.reference against tflite-runtime 2.14's CPU kernels, layer by layer, on every zoo model.

Quantized layers must match bit for bit; float32 layers within 1e-5 of the magnitude of the terms
summed (sum |x*w| + |bias|), the only scale on which float32 summation-order differences are
bounded. Each CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED is checked on its own input, taken from
the interpreter's preserved intermediate tensors, with its parameters read from the flatbuffer by
dtpu.tflite_model.

Two op resolvers are checked: the default one (with preserved tensors tflite-runtime runs it
without default delegates, i.e. the optimized builtin kernels) against rounding="default", and
BUILTIN_REF against rounding="reference". Separate tests run whole single-op models through the
plain default interpreter (XNNPACK included) and force rounding ties by re-scaling models, so the
rounding table in docs/quantization.md is established here rather than assumed.
"""
from __future__ import annotations

import collections
import logging
import struct

import numpy as np
import pytest

from dtpu import reference, tflite_model
from dtpu.reference import quantize as q
from dtpu.spec import DataMode, OpKind
from dtpu.tflite import Interpreter, OpResolverType
from tests.models.zoo import load_index, model_path, make_inputs

log = logging.getLogger(__name__)

if OpResolverType is None:  # pragma: no cover - ai-edge-litert without op resolver selection
    pytest.skip("this TFLite runtime cannot select op resolvers", allow_module_level=True)

# Zoo modes whose layers dtpu.reference reproduces, and those it does not (with the reason).
COVERED_MODES = ("int8", "int8_float_io", "int8_per_tensor", "int16x8", "float32",
                 "float16_weights", "uint8", "uint8_fakequant")
UNCOVERED_MODES = {
    "dynamic_range": "hybrid kernels (float32 activations quantized on the fly, int8 weights, float "
                     "rescale): not reproduced by dtpu.reference",
}

RESOLVERS = {
    "default": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    "reference": OpResolverType.BUILTIN_REF,
}
NODE_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
FLOAT_RTOL = 1e-5
ENTRIES = load_index()


def _interpreter(path, resolver: str, preserve: bool = True):
    interp = Interpreter(model_path=str(path), experimental_op_resolver_type=RESOLVERS[resolver],
                         experimental_preserve_all_tensors=preserve)
    interp.allocate_tensors()
    return interp


def _input_sets(entry: dict) -> list[list[np.ndarray]]:
    """The zoo's calibrated-range inputs plus full-range ones (saturation, large accumulators)."""
    sets = [make_inputs(entry, seed=0), make_inputs(entry, seed=1, low=-4.0, high=4.0)]
    rng = np.random.default_rng(7)
    full = []
    for info in entry["inputs"]:
        dt = np.dtype(info["dtype"])
        if dt.kind in "iu":
            ii = np.iinfo(dt)
            full.append(rng.integers(ii.min, ii.max, info["shape"], endpoint=True).astype(dt))
        else:
            full.append(rng.uniform(-3, 3, info["shape"]).astype(dt))
    sets.append(full)
    return sets


def _float_close(spec, x, w, b, got, want) -> tuple[bool, float]:
    mag = reference.accumulate(spec, np.abs(x), np.abs(w)).astype(np.float64)
    if b is not None:
        mag = mag + np.abs(np.asarray(b, np.float64))
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    worst = float(np.max(err / (mag + np.abs(want) + 1e-30))) if err.size else 0.0
    return worst <= FLOAT_RTOL, worst


def _truncated(content: bytes, op_index: int, output: int) -> bytes:
    """The model cut after operator `op_index`, with `output` as its only graph output.

    TFLite 2.14's arena planner lets some later ops (SOFTMAX, for one) write in place over their
    input even with experimental_preserve_all_tensors, so a preserved intermediate can hold a
    later op's result. Cutting the graph after the layer under test makes its output a graph
    output, which is never shared. Both edits shrink or overwrite vectors in place (a vector is a
    length word followed by its elements), so the flatbuffer stays valid.
    """
    buf = bytearray(content)
    r = tflite_model._Reader(content)
    sg = r.tables(r.root(), 2)[0]
    ops_start, n_ops = r._vector(sg, 3)
    out_start, n_out = r._vector(sg, 2)
    assert op_index < n_ops and n_out >= 1
    struct.pack_into("<I", buf, ops_start - 4, op_index + 1)
    struct.pack_into("<I", buf, out_start - 4, 1)
    struct.pack_into("<i", buf, out_start, output)
    return bytes(buf)


def check_layers(path, resolver: str, input_sets) -> dict:
    """Compare every node layer with dtpu.reference on its own input; return per-layer stats."""
    content = path.read_bytes()
    model = tflite_model.parse(content)
    sg = model.main
    stats = collections.Counter()
    for op in model.operators(*NODE_OPS):
        interp = Interpreter(model_content=_truncated(content, op.index, op.outputs[0]),
                             experimental_op_resolver_type=RESOLVERS[resolver],
                             experimental_preserve_all_tensors=True)
        interp.allocate_tensors()
        for xs in input_sets:
            for d, x in zip(interp.get_input_details(), xs):
                interp.set_tensor(d["index"], x)
            interp.invoke()
            # float16 weights and bias reach the op through DEQUANTIZE: take what it computed
            runtime = {}
            for key, i in (("filters", 1), ("bias", 2)):
                t = sg.tensor(op.inputs[i]) if len(op.inputs) > i else None
                if t is not None and not t.is_constant:
                    runtime[key] = interp.get_tensor(t.index)
            spec, w, b = tflite_model.conv_spec(sg, op, **runtime)
            x = interp.get_tensor(op.inputs[0]).reshape(spec.input_shape)
            want = interp.get_tensor(op.outputs[0])
            got = reference.run(spec, x, w, b, rounding=resolver).reshape(want.shape)
            label = f"{path.name} op {op.index} {op.opcode} ({spec.mode.value}, {resolver})"
            assert got.dtype == want.dtype, f"{label}: dtype {got.dtype} vs TFLite {want.dtype}"
            if spec.mode is DataMode.FLOAT32:
                ok, worst = _float_close(spec, x, w, b, got, want)
                assert ok, f"{label}: float error {worst:.3g} of the summed magnitude > {FLOAT_RTOL}"
            else:
                bad = np.argwhere(got != want)
                assert bad.size == 0, (
                    f"{label}: {len(bad)}/{want.size} elements differ, first at {bad[0].tolist()}: "
                    f"reference {got[tuple(bad[0])]} vs TFLite {want[tuple(bad[0])]}")
            stats[(op.opcode, spec.mode.value)] += want.size
    return stats


def _covered(entry) -> None:
    if entry["mode"] in UNCOVERED_MODES:
        pytest.skip(f"NOT COVERED {entry['name']}: mode {entry['mode']}, "
                    f"{UNCOVERED_MODES[entry['mode']]}")


@pytest.mark.parametrize("resolver", list(RESOLVERS))
@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_zoo_layers_match_tflite(entry, resolver):
    _covered(entry)
    stats = check_layers(model_path(entry), resolver, _input_sets(entry))
    compared = {k[0] for k in stats}
    assert compared >= {op for op, n in entry["op_counts"].items() if n}, f"compared only {compared}"


def test_uncovered_modes_are_the_documented_list():
    """Every zoo mode is either checked above or named here; nothing disappears quietly."""
    modes = {e["mode"] for e in ENTRIES}
    assert modes - set(COVERED_MODES) == set(UNCOVERED_MODES), (
        f"zoo modes not covered by dtpu.reference: {sorted(modes - set(COVERED_MODES))}; "
        f"documented as uncovered: {sorted(UNCOVERED_MODES)}")
    for mode, why in UNCOVERED_MODES.items():
        names = [e["name"] for e in ENTRIES if e["mode"] == mode]
        log.warning("not covered by dtpu.reference: mode %s (%d zoo models: %s): %s",
                    mode, len(names), ", ".join(names), why)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["mode"] in UNCOVERED_MODES],
                         ids=lambda e: e["name"])
def test_uncovered_models_are_refused_by_conv_spec(entry):
    """An uncovered mode must be refused loudly, never computed approximately."""
    model = tflite_model.load(model_path(entry))
    refused = 0
    for op in model.operators("CONV_2D", "DEPTHWISE_CONV_2D"):
        with pytest.raises(ValueError, match="hybrid"):
            tflite_model.conv_spec(model.main, op)
        refused += 1
    assert refused


# --- the plain default interpreter (XNNPACK for float) on whole single-op models ---------------

# The model's own input/output are the conv's only when no QUANTIZE/DEQUANTIZE surrounds it;
# int8_float_io and float16_weights convs are checked layer by layer above.
SINGLE_COVERED = [e for e in ENTRIES if e["kind"] != "net" and e["mode"] in COVERED_MODES
                  and e["mode"] not in ("float16_weights", "int8_float_io")]


@pytest.mark.parametrize("entry", SINGLE_COVERED, ids=[e["name"] for e in SINGLE_COVERED])
def test_single_op_models_match_plain_default_interpreter(entry):
    """Without preserved tensors the default interpreter applies XNNPACK to float models; the
    quantized ones stay on the builtin kernels (XNNPACK takes no quantized op in this build)."""
    path = model_path(entry)
    model = tflite_model.load(path)
    interp = Interpreter(model_path=str(path))
    interp.allocate_tensors()
    delegated = [o["op_name"] for o in interp._get_ops_details() if o["op_name"] == "DELEGATE"]
    is_float = entry["mode"] == "float32"
    assert bool(delegated) == is_float, f"XNNPACK delegation {delegated} for mode {entry['mode']}"
    (op,) = model.operators(*NODE_OPS)
    spec, w, b = tflite_model.conv_spec(model.main, op)
    for xs in _input_sets(entry):
        x = xs[0]
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        want = interp.get_tensor(interp.get_output_details()[0]["index"])
        got = reference.run(spec, x, w, b)
        if is_float:
            ok, worst = _float_close(spec, x, w, b, got, want)
            assert ok, f"float error {worst:.3g}"
        else:
            np.testing.assert_array_equal(got, want)


def _patch_scalar(buf: bytearray, table: int, index: int, fmt: str, value) -> None:
    r = tflite_model._Reader(bytes(buf))
    pos = r.field_pos(table, index)
    assert pos is not None, "field absent from the flatbuffer: cannot patch in place"
    struct.pack_into("<" + fmt, buf, pos, value)


def test_xnnpack_strided_unit_kernel_bug_is_known():
    """tflite-runtime 2.14's default interpreter (XNNPACK) miscomputes float convs whose kernel is 1
    along a dimension strided by 2 with SAME padding (cf. tensorflow/tensorflow#61815). The
    builtin kernels and dtpu.reference agree; this documents the divergence and will fail, asking
    for docs/quantization.md to be updated, once a runtime fixes it."""
    entry = next(e for e in ENTRIES if e["name"] == "conv_i10x10x3_o7_k3x1_s1x1_same_relu__float32")
    path = model_path(entry)
    buf = bytearray(path.read_bytes())
    r = tflite_model._Reader(bytes(buf))
    sg = r.tables(r.root(), 2)[0]
    (op_table,) = r.tables(sg, 3)
    _patch_scalar(buf, r.table(op_table, 4), 1, "i", 2)  # Conv2DOptions.stride_w = 2
    model = tflite_model.parse(bytes(buf))
    (op,) = model.operators("CONV_2D")
    assert (op.options["stride_h"], op.options["stride_w"]) == (1, 2)
    spec, w, b = tflite_model.conv_spec(model.main, op)
    x = make_inputs(entry, seed=0)[0]
    outs = {}
    for name, kwargs in (("xnnpack", {}), ("builtin", dict(
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))):
        interp = Interpreter(model_content=bytes(buf), **kwargs)
        interp.allocate_tensors()
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        outs[name] = interp.get_tensor(interp.get_output_details()[0]["index"])
    want = reference.run(spec, x, w, b)
    assert _float_close(spec, x, w, b, want, outs["builtin"].reshape(want.shape))[0]
    assert not _float_close(spec, x, w, b, want, outs["xnnpack"].reshape(want.shape))[0], (
        "XNNPACK now agrees: the strided unit-kernel bug is fixed in this runtime; update "
        "docs/quantization.md and drop this test")


# --- rounding ties: re-scaled single-op models ------------------------------------------------

TIE_MODES = ("int8", "int8_per_tensor", "uint8", "uint8_fakequant", "int16x8")


def _with_scales(content: bytes, scales: dict[int, list[float]]) -> bytes:
    """The model with the quantization scales of some tensors replaced (tensor index -> values).
    Scales are a float32 vector in the file, so they are rewritten in place."""
    r = tflite_model._Reader(content)
    tensors = r.tables(r.tables(r.root(), 2)[0], 0)
    buf = bytearray(content)
    for index, values in scales.items():
        start, n = r._vector(r.table(tensors[index], 4), 2)
        assert n == len(values), f"tensor {index} has {n} scales, not {len(values)}"
        struct.pack_into(f"<{n}f", buf, start, *values)
    return bytes(buf)


def _rescaled(path, rng) -> tuple[bytes, dict]:
    """The model with power-of-two-ish scales (effective scale (1 or 3) * 2^-k, k in 0..2), so
    that many accumulators land exactly on rounding ties. Bias scales stay equal to input *
    filter scale (TFLite checks it for uint8)."""
    content = path.read_bytes()
    model = tflite_model.parse(content)
    sg = model.main
    (op,) = model.operators("CONV_2D", "DEPTHWISE_CONV_2D")
    x_t, w_t, b_t, y_t = (sg.tensor(i) for i in (*op.inputs[:3], op.outputs[0]))
    s_in = 2.0 ** -4
    s_w = [float(rng.choice([1.0, 3.0]) * 2.0 ** -int(rng.integers(4, 7)))
           for _ in range(w_t.quantization.scale.size)]
    s_out = 2.0 ** -int(rng.integers(4, 7))
    content = _with_scales(content, {x_t.index: [s_in], w_t.index: s_w,
                                     b_t.index: [s_in * s for s in s_w], y_t.index: [s_out]})
    return content, dict(input=x_t, op=op)


def _variant_mismatches(spec, x, w, b, want) -> dict[str, int]:
    acc = reference.accumulate(spec, x, w)
    return {v.value: int(np.sum(reference.requantize(spec, acc, b, variant=v) != want.reshape(spec.output_shape)))
            for v in q.Variant}


TIE_GROUPS = sorted({(k, m, r) for k in ("conv2d", "depthwise_conv2d") for m in TIE_MODES
                     for r in RESOLVERS})


@pytest.mark.parametrize("kind,mode,resolver", TIE_GROUPS, ids=["-".join(g) for g in TIE_GROUPS])
def test_rounding_table_on_ties(kind, mode, resolver):
    """The variant dtpu.reference picks is exact and every alternative is not, on each zoo model
    of the group both re-scaled (ties) and as converted (real scales, where the 16x8 kernels'
    16-bit multiplier shows)."""
    entries = [e for e in ENTRIES if e["kind"] == kind and e["mode"] == mode]
    assert entries, f"zoo has no {kind} {mode} model"
    rng = np.random.default_rng(0)
    totals = collections.Counter()
    chosen = set()
    for entry in entries:
        original = model_path(entry).read_bytes()
        rescaled, _ = _rescaled(model_path(entry), rng)
        for content in (rescaled, original):
            model = tflite_model.parse(content)
            (op,) = model.operators("CONV_2D", "DEPTHWISE_CONV_2D")
            spec, w, b = tflite_model.conv_spec(model.main, op)
            interp = Interpreter(model_content=content,
                                 experimental_op_resolver_type=RESOLVERS[resolver])
            interp.allocate_tensors()
            x_t = model.main.tensor(op.inputs[0])
            zp = int(x_t.quantization.zero_point[0])
            ii = np.iinfo(x_t.dtype)
            spread = 200 if x_t.type_name == "INT16" else 6  # outputs of a few hundred at most
            if content is original:
                spread = ii.max
            for _ in range(3):
                x = np.clip(zp + rng.integers(-spread, spread + 1, x_t.shape), ii.min, ii.max)
                x = x.astype(x_t.dtype)
                interp.set_tensor(interp.get_input_details()[0]["index"], x)
                interp.invoke()
                want = interp.get_tensor(interp.get_output_details()[0]["index"])
                totals.update(_variant_mismatches(spec, x, w, b, want))
                totals["elements"] += want.size
            chosen.add(reference.rounding_variant(spec, b, resolver).value)
    log.info("%s %s %s: mismatches per variant %s", kind, mode, resolver, dict(totals))
    (variant,) = chosen
    assert totals[variant] == 0, f"{variant} should be exact: {dict(totals)}"
    others = {v.value for v in q.Variant} - {variant}
    assert all(totals[v] for v in others), f"data did not rule out every other variant: {dict(totals)}"


FC_TIE_GROUPS = [(m, r) for m in ("int8", "int8_per_tensor", "uint8", "int16x8") for r in RESOLVERS]


@pytest.mark.parametrize("mode,resolver", FC_TIE_GROUPS, ids=["-".join(g) for g in FC_TIE_GROUPS])
def test_fully_connected_rounding_on_ties(mode, resolver):
    """The nets' FULLY_CONNECTED layer with its weight and output scales set so that the effective
    scale is 2^-k exactly (the input scale is the preceding MEAN's, left alone)."""
    rng = np.random.default_rng(1)
    totals = collections.Counter()
    chosen = set()
    for entry in (e for e in ENTRIES if e["kind"] == "net" and e["mode"] == mode):
        content = model_path(entry).read_bytes()
        model = tflite_model.parse(content)
        sg = model.main
        fcs = model.operators("FULLY_CONNECTED")
        if not fcs:
            continue
        (op,) = fcs
        x_t, w_t, b_t, y_t = (sg.tensor(i) for i in (*op.inputs[:3], op.outputs[0]))
        s_in = float(x_t.quantization.scale[0])
        k, j = int(rng.integers(5, 8)), 6  # outputs mostly unclamped, ties 1 in 2^k
        patched = _with_scales(content, {
            w_t.index: [2.0 ** -j] * w_t.quantization.scale.size,
            b_t.index: [s_in * 2.0 ** -j] * b_t.quantization.scale.size,
            y_t.index: [s_in * 2.0 ** (k - j)]})
        patched = _truncated(patched, op.index, op.outputs[0])
        spec, w, b = tflite_model.conv_spec(tflite_model.parse(patched).main, op)
        chosen.add(reference.rounding_variant(spec, b, resolver).value)
        interp = Interpreter(model_content=patched, experimental_op_resolver_type=RESOLVERS[resolver],
                             experimental_preserve_all_tensors=True)
        interp.allocate_tensors()
        for seed in range(150):
            xs = make_inputs(entry, seed=seed, low=-4.0, high=4.0)
            for d, x in zip(interp.get_input_details(), xs):
                interp.set_tensor(d["index"], x)
            interp.invoke()
            x = interp.get_tensor(op.inputs[0]).reshape(spec.input_shape)
            want = interp.get_tensor(op.outputs[0])
            totals.update(_variant_mismatches(spec, x, w, b, want))
            totals["elements"] += want.size
    log.info("FULLY_CONNECTED %s %s: mismatches per variant %s", mode, resolver, dict(totals))
    assert totals["elements"], f"no zoo net of mode {mode} has a FULLY_CONNECTED layer"
    (variant,) = chosen
    assert totals[variant] == 0, f"{variant} should be exact: {dict(totals)}"
    assert any(totals[v.value] for v in q.Variant if v.value != variant), (
        f"data did not discriminate the variants: {dict(totals)}")
