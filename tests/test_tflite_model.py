"""dtpu.tflite_model against what tflite-runtime itself reads from the same files.

The interpreter exposes tensors (name, shape, type, quantization, constant contents) and the
operator list, but not builtin options; those are checked against the zoo index, which
make_zoo.py filled from TensorFlow's own schema code at generation time.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtpu import tflite_model
from dtpu.spec import DataMode, OpKind, Padding
from dtpu.tflite import Interpreter, OpResolverType
from tests.models.zoo import get_entry, load_index, model_path

ENTRIES = load_index()


def _interpreter(path):
    kwargs = {}
    if OpResolverType is not None:
        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    interp = Interpreter(model_path=str(path), **kwargs)
    interp.allocate_tensors()
    return interp


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_graph_matches_the_interpreter(entry):
    path = model_path(entry)
    model = tflite_model.load(path)
    interp = _interpreter(path)
    sg = model.main
    ops = interp._get_ops_details()
    assert [o["op_name"] for o in ops] == [op.opcode for op in sg.operators]
    for o, op in zip(ops, sg.operators):
        assert tuple(o["inputs"]) == op.inputs and tuple(o["outputs"]) == op.outputs
    assert tuple(d["index"] for d in interp.get_input_details()) == sg.inputs
    assert tuple(d["index"] for d in interp.get_output_details()) == sg.outputs
    # the interpreter appends its own temporaries (im2col, ...) after the model's tensors
    details = [d for d in interp.get_tensor_details() if d["index"] < len(sg.tensors)]
    assert len(details) == len(sg.tensors)
    for d in details:
        t = sg.tensors[d["index"]]
        assert t.name == d["name"]
        assert t.dtype == np.dtype(d["dtype"])
        assert t.shape == tuple(d["shape"]) or not t.shape  # scalars are () in both
        qp = d["quantization_parameters"]
        if t.quantization is None:
            assert qp["scales"].size == 0
        else:
            np.testing.assert_array_equal(t.quantization.scale, qp["scales"])
            np.testing.assert_array_equal(t.quantization.zero_point, qp["zero_points"])
            assert t.quantization.quantized_dimension == qp["quantized_dimension"]
        if t.is_constant:
            np.testing.assert_array_equal(t.data, interp.get_tensor(d["index"]))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_conv_options_match_the_index(entry):
    model = tflite_model.load(model_path(entry))
    convs = model.operators("CONV_2D", "DEPTHWISE_CONV_2D")
    assert len(convs) == len(entry["conv_ops"])
    for op, info in zip(convs, entry["conv_ops"]):
        o = op.options
        assert op.opcode == info["op"] and op.version == info["version"]
        assert op.options_type == ("Conv2DOptions" if op.opcode == "CONV_2D" else "DepthwiseConv2DOptions")
        assert o["padding"] == info["padding"]
        assert [o["stride_h"], o["stride_w"]] == info["strides"]
        assert [o["dilation_h_factor"], o["dilation_w_factor"]] == info["dilation"]
        assert o["fused_activation_function"] == info["fused_activation"]
        if "depth_multiplier" in info:
            assert o["depth_multiplier"] == info["depth_multiplier"]
        w = model.main.tensor(op.inputs[1])
        assert list(w.shape) == info["weights_shape"]
        if info.get("weights_via") is None:
            assert w.type_name == info["weights_dtype"].upper()


SPEC_ENTRIES = [e for e in ENTRIES if e["mode"] not in ("dynamic_range", "float16_weights")]


@pytest.mark.parametrize("entry", SPEC_ENTRIES, ids=[e["name"] for e in SPEC_ENTRIES])
def test_conv_spec_describes_the_node(entry):
    model = tflite_model.load(model_path(entry))
    sg = model.main
    for op in model.operators(*tflite_model.CONV_OPCODES):
        spec, w, b = tflite_model.conv_spec(sg, op)
        out = sg.tensor(op.outputs[0])
        assert int(np.prod(spec.output_shape)) == int(np.prod(out.shape))
        assert w.shape == tuple(spec.filter_shape)
        assert spec.has_bias == (b is not None)
        if spec.kind is not OpKind.FULLY_CONNECTED:
            assert spec.output_shape == out.shape
        if spec.mode is not DataMode.FLOAT32:
            assert len(spec.filter_q.scale) in (1, spec.out_channels)
        if entry["kind"] != "net":
            p = entry["params"]
            assert spec.kernel == tuple(p["kernel"]) and spec.stride == tuple(p["strides"])
            assert spec.dilation == tuple(p["dilation"])
            assert spec.padding is Padding(p["padding"].lower())
            (top, et), (left, el) = spec.pads
            assert [top, top + et, left, left + el] == p["pads_tblr"]
            if spec.kind is OpKind.DEPTHWISE_CONV_2D:
                assert spec.depth_multiplier == p["depth_multiplier"]


def test_net_options_of_other_ops():
    model = tflite_model.load(model_path("mobilenet_like__int8"))
    (fc,) = model.operators("FULLY_CONNECTED")
    assert fc.options == {"fused_activation_function": "NONE", "weights_format": "DEFAULT",
                          "keep_num_dims": False, "asymmetric_quantize_inputs": False}
    (softmax,) = model.operators("SOFTMAX")
    assert softmax.options_type == "SoftmaxOptions" and softmax.options["beta"] == 1.0
    (mean,) = model.operators("MEAN")
    assert mean.options_type == "ReducerOptions" and "keep_dims" in mean.options
    assert model.version == 3
    assert all(name in tflite_model.BUILTIN_OPERATORS for name, _ in model.operator_codes)


def test_hybrid_and_float16_weights_are_reported_not_guessed():
    dyn = tflite_model.load(model_path(load_index(mode="dynamic_range")[0]))
    (op,) = dyn.operators("CONV_2D", "DEPTHWISE_CONV_2D")
    with pytest.raises(ValueError, match="hybrid"):
        tflite_model.conv_spec(dyn.main, op)
    f16 = tflite_model.load(model_path(load_index(mode="float16_weights")[0]))
    (op,) = f16.operators("CONV_2D", "DEPTHWISE_CONV_2D")
    assert not f16.main.tensor(op.inputs[1]).is_constant  # weights come out of a DEQUANTIZE
    with pytest.raises(ValueError, match="not constant"):
        tflite_model.conv_spec(f16.main, op)


def test_rejects_files_that_are_not_tflite():
    with pytest.raises(tflite_model.FlatbufferError, match="TFL3"):
        tflite_model.parse(b"\x10\x00\x00\x00ABCD" + bytes(32))
    with pytest.raises(tflite_model.FlatbufferError, match="too short"):
        tflite_model.parse(b"TFL3")
    good = model_path(get_entry("conv_i8x8x3_o5_k3x3_s1x1_same_none__int8")).read_bytes()
    with pytest.raises(tflite_model.FlatbufferError):
        tflite_model.parse(good[: len(good) // 3])


_SMALL = model_path(get_entry("conv_i8x8x3_o5_k3x3_s1x1_same_none__int8")).read_bytes()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(8, len(_SMALL) - 1), st.integers(0, 255)), min_size=1, max_size=4))
def test_corrupted_bytes_fail_cleanly(edits):
    """Corruption yields a FlatbufferError (or a parse), never an IndexError or a hang."""
    buf = bytearray(_SMALL)
    for pos, value in edits:
        buf[pos] = value
    try:
        tflite_model.parse(bytes(buf))
    except tflite_model.FlatbufferError:
        pass


class _Writer:
    """A minimal forward-writing flatbuffer builder for hand-made test files.

    Children are appended after the field that references them (uoffsets are unsigned), each
    table right after its vtable. Enough to exercise the reader on layouts the TFLite converter
    does not produce (absent fields, external buffers).
    """

    def __init__(self) -> None:
        self.buf = bytearray(8)
        self.buf[4:8] = b"TFL3"

    def _ref(self, field_pos: int, child) -> None:
        target = child(self)
        struct.pack_into("<I", self.buf, field_pos, target - field_pos)

    def table(self, fields: dict):
        """fields: index -> (struct format, value) or ("ref", child builder)."""
        def build(w: "_Writer") -> int:
            n = max(fields, default=-1) + 1
            vt = len(w.buf)
            w.buf += struct.pack("<HH", 4 + 2 * n, 4 + 8 * n)
            w.buf += b"".join(struct.pack("<H", 4 + 8 * i if i in fields else 0) for i in range(n))
            pos = len(w.buf)
            w.buf += struct.pack("<i", pos - vt) + bytes(8 * n)
            for i, (fmt, value) in fields.items():
                if fmt != "ref":
                    struct.pack_into("<" + fmt, w.buf, pos + 4 + 8 * i, value)
            for i, (fmt, value) in fields.items():
                if fmt == "ref":
                    w._ref(pos + 4 + 8 * i, value)
            return pos
        return build

    @staticmethod
    def tables(children):
        def build(w: "_Writer") -> int:
            pos = len(w.buf)
            w.buf += struct.pack("<I", len(children)) + bytes(4 * len(children))
            for k, child in enumerate(children):
                w._ref(pos + 4 + 4 * k, child)
            return pos
        return build

    @staticmethod
    def array(values, dtype):
        def build(w: "_Writer") -> int:
            pos = len(w.buf)
            data = np.asarray(values, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
            w.buf += struct.pack("<I", len(values)) + data
            return pos
        return build

    def finish(self, root) -> bytes:
        self._ref(0, root)
        return bytes(self.buf)


def _hand_made_model(buffer_fields: dict, tail: bytes = b"") -> bytes:
    w = _Writer()
    tensor = w.table({0: ("ref", w.array([2, 3], np.int32)), 1: ("b", 9), 2: ("I", 1),
                      3: ("ref", w.array(list(b"weights"), np.uint8))})
    out = w.table({0: ("ref", w.array([1], np.int32)), 1: ("b", 0), 2: ("I", 0)})
    op = w.table({0: ("I", 0), 1: ("ref", w.array([1, 0], np.int32)),
                  2: ("ref", w.array([1], np.int32)), 3: ("B", 1), 4: ("ref", w.table({}))})
    subgraph = w.table({0: ("ref", w.tables([tensor, out])), 1: ("ref", w.array([], np.int32)),
                        2: ("ref", w.array([1], np.int32)), 3: ("ref", w.tables([op]))})
    code = w.table({0: ("b", 3)})  # CONV_2D through the deprecated byte, version absent (1)
    model = w.table({0: ("I", 3), 1: ("ref", w.tables([code])), 2: ("ref", w.tables([subgraph])),
                     4: ("ref", w.tables([w.table({}), w.table(buffer_fields)]))})
    content = bytearray(w.finish(model))
    return bytes(content) + tail


def test_hand_made_model_defaults_and_external_buffer():
    """Absent fields take the schema defaults; buffers stored after the flatbuffer (offset/size,
    for models over 2 GiB) are read from the file."""
    data = np.arange(-3, 3, dtype=np.int8)
    base = len(_hand_made_model({1: ("Q", 0), 2: ("Q", 0)}))
    content = _hand_made_model({1: ("Q", base), 2: ("Q", data.nbytes)}, tail=data.tobytes())
    model = tflite_model.parse(content)
    t = model.main.tensors[0]
    assert t.name == "weights" and t.shape == (2, 3) and t.type_name == "INT8"
    np.testing.assert_array_equal(t.data, data.reshape(2, 3))
    assert t.quantization is None and model.main.tensors[1].data is None
    (op,) = model.main.operators
    assert op.opcode == "CONV_2D" and op.version == 1 and op.inputs == (1, 0)
    assert op.options == {"padding": "SAME", "stride_w": 0, "stride_h": 0,
                          "fused_activation_function": "NONE", "dilation_w_factor": 1,
                          "dilation_h_factor": 1}
    assert model.description is None and model.main.name == ""


def test_hand_made_model_inline_buffer_and_size_mismatch():
    inline = _hand_made_model({0: ("ref", _Writer.array(list(range(6)), np.uint8))})
    np.testing.assert_array_equal(tflite_model.parse(inline).main.tensors[0].data.ravel(), np.arange(6))
    short = _hand_made_model({0: ("ref", _Writer.array(list(range(5)), np.uint8))})
    with pytest.raises(tflite_model.FlatbufferError, match="needs 6"):
        tflite_model.parse(short)
    beyond = _hand_made_model({1: ("Q", 10 ** 6), 2: ("Q", 6)})
    with pytest.raises(tflite_model.FlatbufferError, match="past the end"):
        tflite_model.parse(beyond)
