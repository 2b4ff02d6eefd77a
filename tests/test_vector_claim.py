"""The delegate's claim of the vector unit's operators is a declared target capability
(Transport.vector_unit -> Backend.vector_unit), not a probe: on a target without the unit the
report names "target has no vector unit"; on the golden model, which has it, the node is
claimed where it joins the convolutions (tests/test_vector_delegate.py), else the reason says
why not."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dtpu
from dtpu.backends.targets import open_target
from dtpu.delegate.support import NO_VECTOR_UNIT, VECTOR_CODES
from dtpu.driver import ModelTransport
from dtpu.driver.transport import Transport
from dtpu.hw.config import get_config

ZOO = Path(__file__).parent / "models" / "zoo"


def _rejected(backend: str, name: str) -> dict[str, str]:
    it = dtpu.make_interpreter(str(ZOO / f"{name}.tflite"), {"backend": backend})
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
    return {r["op"]: r["reason"] for r in dtpu.last_report().rejected}


def test_targets_declare_the_unit():
    assert Transport.vector_unit is False and ModelTransport().vector_unit is False
    assert open_target("model", get_config()).transport.vector_unit is True
    assert set(VECTOR_CODES.values()) == {"ADD", "SUB", "MUL", "AVERAGE_POOL_2D", "MAX_POOL_2D",
                                          "MEAN", "LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU",
                                          "RELU", "RELU6", "RELU_N1_TO_1", "QUANTIZE",
                                          "CONCATENATION", "RESIZE_NEAREST_NEIGHBOR"}


def test_the_report_says_why_mean_stays_on_the_cpu():
    reasons = _rejected("reference", "mobilenet_like__int8")
    assert NO_VECTOR_UNIT in reasons["MEAN"], reasons


def test_the_golden_model_claims_mean():
    assert "MEAN" not in _rejected("model", "mobilenet_like__int8")
    assert any(n.op == "mean" and n.hw["cycles"] for n in dtpu.last_report().nodes)
