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
    assert d.precision is None and d.ops == (OpKind.CONV_2D, OpKind.DEPTHWISE_CONV_2D)
    assert d.report == "none" and d.report_path is None
    assert parse({"report": "SUMMARY"}).report == "summary"


def test_default_backend_is_model_once_registered(monkeypatch):
    from dtpu import backends
    from dtpu.delegate.options import default_backend, parse

    assert default_backend() == ("model" if "model" in backends.names() else "reference")
    monkeypatch.setitem(backends._REGISTRY, "model", "dtpu.backends.reference:ReferenceBackend")
    assert parse({}).backend == "model"


def test_values_of_any_type_are_passed_as_strings(dtpu_so):
    import dtpu

    delegate = dtpu.load_delegate({"clock_mhz": 125, "mxu": "8x16"})
    assert delegate is not None


def test_option_table_documents_every_key():
    from dtpu.delegate.options import _PARSERS, TABLE

    assert list(TABLE) == list(_PARSERS)
