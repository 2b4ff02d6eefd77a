"""Delegate options: every bad key or value is refused by load_delegate with a ValueError naming
the key, the value and what is accepted (through report_error when loaded by TFLite itself)."""
from __future__ import annotations

import pytest

from tests.delegate_util import dtpu_so, tfl  # noqa: F401  (fixtures)

BAD = [
    ("backend", "gpu", "one of"),
    ("precision", "int7", "auto or one of"),
    ("mxu", "9y9", "ROWSxCOLS with ROWS, COLS in 1..64"),
    ("mxu", "0x8", "ROWSxCOLS"),
    ("mxu", "65x1", "ROWSxCOLS"),
    ("ops", "conv3d", "comma-separated list of: conv2d, depthwise_conv2d, fully_connected"),
    ("ops", "", "comma-separated list"),
    ("report", "/nonexistent-dir/x.jsonl", "JSON-lines file"),
    ("clock_mhz", "fast", "number of MHz"),
    ("clock_mhz", "-5", "number of MHz"),
    ("log_level", "loud", "one of debug, info"),
    ("prefetch", "maybe", "on or off"),
]


@pytest.mark.parametrize("key, value, expected", BAD)
def test_bad_value_names_key_value_and_accepted(key, value, expected, dtpu_so, tfl):
    import dtpu

    with pytest.raises(ValueError) as info:
        dtpu.load_delegate({key: value})
    message = str(info.value)
    assert f"option {key!r}={value!r} is invalid" in message and expected in message
    # the same message when TFLite loads the library itself (C -> Python -> report_error)
    with pytest.raises(ValueError) as info:
        tfl.load_delegate(dtpu_so, {key: value})
    assert f"option {key!r}={value!r} is invalid" in str(info.value)


def test_unknown_key(dtpu_so, tfl):
    import dtpu

    for load in (lambda o: dtpu.load_delegate(o), lambda o: tfl.load_delegate(dtpu_so, o)):
        with pytest.raises(ValueError) as info:
            load({"bakend": "reference"})
        assert "unknown option 'bakend'='reference'" in str(info.value)
        assert "accepted keys: backend, precision, mxu, ops, report, clock_mhz, log_level" in str(info.value)


def test_good_values(dtpu_so, tmp_path):
    from dtpu.delegate.options import parse
    from dtpu.precision import Precision
    from dtpu.spec import OpKind

    o = parse({"backend": "Reference", "precision": "INT16", "mxu": "16x4", "ops": "depthwise_conv2d, conv2d",
               "report": str(tmp_path / "r.jsonl"), "clock_mhz": "250", "log_level": "INFO"})
    assert o.backend == "reference" and o.precision is Precision.INT16 and o.mxu == (16, 4)
    assert o.ops == (OpKind.DEPTHWISE_CONV_2D, OpKind.CONV_2D) and o.clock_mhz == 250.0
    assert o.report_path == str(tmp_path / "r.jsonl") and o.log_level == "info"
    assert o.backend_options() == {"precision": "int16", "mxu": (16, 4), "clock_mhz": 250.0}
    d = parse({})
    assert d.precision is None and d.ops_auto and d.ops == (OpKind.CONV_2D, OpKind.DEPTHWISE_CONV_2D,
                                                         OpKind.FULLY_CONNECTED)
    assert d.report == "none" and d.report_path is None
    assert parse({"report": "SUMMARY"}).report == "summary"
    assert d.prefetch and "prefetch" not in d.backend_options() and d.to_dict()["prefetch"] == "on"
    off = parse({"prefetch": "OFF"})
    assert not off.prefetch and off.backend_options()["prefetch"] is False


def test_default_backend_is_model_once_registered():
    from dtpu import backends
    from dtpu.delegate.options import default_backend, parse

    assert default_backend() == ("model" if "model" in backends.names() else "reference")
    with backends.registered("model", "dtpu.backends.reference:ReferenceBackend"):
        assert parse({}).backend == "model"
        assert backends.get("model").__name__ == "ReferenceBackend"
    assert backends.get("model").__name__ == "ModelBackend"


def test_values_of_any_type_are_passed_as_strings(dtpu_so):
    import dtpu

    delegate = dtpu.load_delegate({"clock_mhz": 125, "mxu": "8x16"})
    assert delegate is not None


def test_option_table_documents_every_key():
    from dtpu.delegate.options import PARSERS, TABLE

    assert list(TABLE) == list(PARSERS)


# ---- properties: nothing a user or a model can pass makes the delegate's Python side raise
# anything but ValueError (options) or crash the support check (nodes) --------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dtpu.delegate.options import PARSERS  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(PARSERS)), value=st.text(max_size=20))
def test_any_option_value_parses_or_names_the_key(key, value):
    from dtpu.delegate.options import parse

    try:
        parse({key: value})
    except ValueError as exc:
        assert f"option {key!r}=" in str(exc)


_TYPES = ["float32", "int8", "uint8", "int16", "int32", "int64", "float16", "int4", "bool"]


@st.composite
def tensors(draw, index):
    from dtpu.delegate.graph import TensorInfo

    rank = draw(st.integers(0, 5))
    n = draw(st.integers(0, 3))
    return TensorInfo(index=index, name=f"t{index}", type=draw(st.sampled_from(_TYPES)),
                      shape=tuple(draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank))),
                      allocation=draw(st.sampled_from([1, 2, 4, 5])), has_data=draw(st.booleans()),
                      nbytes=draw(st.integers(0, 4096)),
                      scale=tuple(draw(st.lists(st.floats(-1, 1), min_size=n, max_size=n))),
                      zero_point=tuple(draw(st.lists(st.integers(-200, 300), min_size=n, max_size=n))),
                      quantized_dimension=draw(st.integers(0, 3)), sparse=draw(st.booleans()))


@settings(max_examples=300, deadline=None)
@given(code=st.sampled_from([3, 4, 9]), ts=st.tuples(tensors(0), tensors(1), tensors(2), tensors(3)),
       has_bias=st.booleans(), padding=st.integers(0, 3), stride=st.tuples(st.integers(0, 3), st.integers(0, 3)),
       dilation=st.tuples(st.integers(0, 3), st.integers(0, 3)), act=st.integers(0, 7),
       multiplier=st.integers(0, 3), flags=st.tuples(st.integers(0, 1), st.booleans(), st.booleans()),
       ops=st.sampled_from(["conv2d,depthwise_conv2d", "conv2d,depthwise_conv2d,fully_connected"]),
       precision=st.sampled_from(["auto", "int8", "int16", "fp32", "bf16", "uint8"]))
def test_support_check_never_raises(code, ts, has_bias, padding, stride, dilation, act, multiplier,
                                    flags, ops, precision):
    from dtpu.delegate.graph import NodeInfo
    from dtpu.delegate.options import parse
    from dtpu.delegate.support import analyze

    params = {"activation": act}
    if code in (3, 4):
        params.update(padding=padding, stride=stride, dilation=dilation)
    if code == 4:
        params["depth_multiplier"] = multiplier
    if code == 9:
        params.update(weights_format=flags[0], keep_num_dims=flags[1], asymmetric_quantize_inputs=flags[2])
    node = NodeInfo(index=0, builtin_code=code, version=1,
                    inputs=(0, 1, 2) if has_bias else (0, 1), outputs=(3,), params=params)
    decision = analyze(node, lambda i: ts[i], parse({"ops": ops, "precision": precision}))
    assert decision.claimed != (decision.reason is not None)
    if decision.claimed:
        assert min(decision.spec.output_shape) > 0
