"""The one TFLite writer's refusals and the padding spelling both of its users rely on (the
quantizer writes Keras's lower case, the test networks TFLite's upper case)."""
import numpy as np
import pytest

from dtpu.tflite_writer import GraphWriter, Tensor


def _pool_graph(padding: str) -> bytes:
    g = GraphWriter()
    x = g.tensor(Tensor((1, 4, 4, 2), "int8", (0.1,), (0,), name="x"))
    y = g.tensor(Tensor((1, 2, 2, 2), "int8", (0.1,), (0,), name="y"))
    g.op("MAX_POOL_2D", [x], [y], padding=padding, stride=(2, 2), filter=(2, 2))
    return g.to_bytes([x], [y])


def test_padding_either_case_writes_the_same_graph():
    assert _pool_graph("same") == _pool_graph("SAME") != _pool_graph("valid")


def test_refusals_name_the_bad_value():
    with pytest.raises(ValueError, match="'full'.*SAME, VALID"):
        _pool_graph("full")
    g = GraphWriter()
    with pytest.raises(ValueError, match="'GATHER_ND'.*LEAKY_RELU"):
        g.op("GATHER_ND", [0], [1])
    with pytest.raises(ValueError, match="'float16'.*int8"):
        g.tensor(Tensor((1,), "float16", name="h"))
    with pytest.raises(ValueError, match="'bfloat16'"):
        g.const("c", np.zeros(2), "bfloat16")
    assert g.tensors == [] and g.nodes == []
