"""The facts about the TFLite C ABI that dtpu.so relies on, checked against the running runtime.

Run under tflite-runtime 2.14 (.venv) and LiteRT 2.3 (.venv-litert with
DTPU_TFLITE_RUNTIME=ai_edge_litert): the same assertions must hold for both.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tests.delegate_util import DATA, dtpu_so, run, tfl  # noqa: F401  (fixtures)

DTYPE_NAMES = {np.int8: "int8", np.uint8: "uint8", np.int16: "int16", np.int32: "int32",
               np.int64: "int64", np.float32: "float32", np.float16: "float16"}


@pytest.fixture()
def chain(dtpu_so, tfl):
    import dtpu

    it = dtpu.make_interpreter(DATA / "chain_int8.tflite", {"backend": "reference"})
    it.allocate_tensors()
    return it


def test_struct_sizes_and_create_call_convention(chain):
    from dtpu.delegate import facts

    f = facts()
    assert (f["sizeof_tensor"], f["sizeof_registration"], f["sizeof_delegate"]) == (112, 88, 56)
    # load_delegate goes through ctypes' PyDLL: the GIL is held during the create call ...
    assert f["create_gil_held"] == 1
    # ... and the option count arrives in the low 32 bits of the register (a C int).
    assert f["create_n_raw"] & 0xFFFFFFFF == 1
    assert f["get_tensor_is_null"] == 1  # so tensors are read by indexing context->tensors


def test_invoke_releases_the_gil_and_callbacks_take_it(chain):
    from dtpu.delegate import facts

    run(chain, [np.zeros(d["shape"], d["dtype"]) for d in chain.get_input_details()])
    assert facts()["invoke_gil_held"] == 0


def test_our_struct_layout_reads_what_the_runtime_reports(chain):
    """Node inputs/outputs, builtin codes, tensor names, shapes and types read through
    dtpu_abi.h agree with the interpreter's own Python view of the graph."""
    from dtpu.delegate.runtime import OBSERVED

    ops = {op["index"]: op for op in chain._get_ops_details()}
    codes = {"CONV_2D": 3, "DEPTHWISE_CONV_2D": 4}
    assert OBSERVED["nodes"], "delegate Prepare did not run"
    for index, (code, inputs, outputs) in OBSERVED["nodes"].items():
        assert codes[ops[index]["op_name"]] == code
        assert list(inputs) == list(ops[index]["inputs"])
        assert list(outputs) == list(ops[index]["outputs"])
    details = {t["index"]: t for t in chain.get_tensor_details()}
    assert len(OBSERVED["tensors"]) >= 9
    for index, (name, shape, dtype) in OBSERVED["tensors"].items():
        assert name == details[index]["name"]
        assert list(shape) == list(details[index]["shape"])
        assert dtype == DTYPE_NAMES[details[index]["dtype"]]


def test_arena_inputs_are_null_at_prepare_and_internal_tensors_never_allocated(chain):
    from dtpu.delegate.runtime import OBSERVED

    arena = 2  # kTfLiteArenaRw
    assert OBSERVED["input_data_at_prepare"], "kernel Prepare did not run"
    for _, allocation, has_data in OBSERVED["input_data_at_prepare"]:
        if allocation == arena:
            assert not has_data
    run(chain, [np.ones(d["shape"], d["dtype"]) for d in chain.get_input_details()])
    internal = OBSERVED["internal_data_at_invoke"]
    assert len(internal) == 2  # chain_int8: conv -> dwconv -> conv, two internal tensors
    assert not any(allocated for _, allocated in internal)


def _create(lib, pairs, n=None):
    keys = (ctypes.c_char_p * max(1, len(pairs)))(*[k for k, _ in pairs])
    values = (ctypes.c_char_p * max(1, len(pairs)))(*[v for _, v in pairs])
    messages = []
    callback = ctypes.CFUNCTYPE(None, ctypes.c_char_p)(lambda m: messages.append(m.decode()))
    lib.tflite_plugin_create_delegate.restype = ctypes.c_void_p
    lib.tflite_plugin_create_delegate.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                                  ctypes.c_void_p]
    count = len(pairs) if n is None else n
    ptr = lib.tflite_plugin_create_delegate(ctypes.cast(keys, ctypes.c_void_p),
                                            ctypes.cast(values, ctypes.c_void_p), count,
                                            ctypes.cast(callback, ctypes.c_void_p))
    return ptr, messages


def test_only_the_low_32_bits_of_the_count_are_read(dtpu_so):
    lib = ctypes.PyDLL(dtpu_so)
    lib.tflite_plugin_destroy_delegate.argtypes = [ctypes.c_void_p]
    ptr, messages = _create(lib, [(b"backend", b"reference")], n=(0xDEAD << 32) | 1)
    assert ptr and not messages
    lib.tflite_plugin_destroy_delegate(ptr)
    ptr, messages = _create(lib, [(b"mxu", b"9y9")], n=(0xBEEF << 32) | 1)
    assert not ptr and "'mxu'='9y9'" in messages[0]


def test_options_must_be_utf8(dtpu_so):
    lib = ctypes.PyDLL(dtpu_so)
    ptr, messages = _create(lib, [(b"report", b"\xff\xfe")])
    assert not ptr and "not UTF-8" in messages[0]


def test_non_ascii_values_arrive_as_utf8(dtpu_so, tfl, tmp_path):
    import dtpu

    target = tmp_path / "rapport-été.jsonl"
    it = dtpu.make_interpreter(DATA / "chain_int8.tflite", {"report": str(target)})
    it.allocate_tensors()
    run(it, [np.zeros(d["shape"], d["dtype"]) for d in it.get_input_details()])
    del it
    dtpu.reports()  # settles pending reports
    assert target.exists()


def test_kernel_errors_reach_the_runtime_as_a_separate_line(dtpu_so, tfl):
    import dtpu

    it = dtpu.make_interpreter(DATA / "split_int8.tflite", {"backend": "reference"})
    it.allocate_tensors()
    index = it.get_input_details()[0]["index"]
    it.resize_tensor_input(index, [1, 4, 4, 3])  # the VALID dilated 3x3 conv has no output left
    with pytest.raises(RuntimeError) as info:
        it.allocate_tensors()
    text = str(info.value)
    assert "dtpu: preparing delegated nodes" in text and "empty output" in text
    line = next(line for line in text.splitlines() if "dtpu: preparing" in line)
    assert line.rstrip().endswith(")")  # our message is not glued to the runtime's next one
