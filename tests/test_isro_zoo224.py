"""The seven ImageNet-scale zoo models on the default chip profile (issue 28.1), and the program
that streams from external memory through instruction memory when it is longer (docs/isro_isa.md
§1a, "Programs longer than instruction memory").

The oracle is TFLite's CPU kernels, layer by layer; for streaming, the same bundle with the whole
program in instruction memory (a profile that holds it): the same instructions, so the same
values bit for bit, only the fetch traffic and its cycles added.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import compile_model, run, verify
from dtpu.isro.bundle import Bundle
from dtpu.isro.check import check_bundle
from dtpu.isro.ir import CompileError
from dtpu.isro.profile import Profile, load
from dtpu.tflite import Interpreter

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "isro"
ZOO = HERE / "models" / "zoo"
SEVEN = ("mobilenet_v1_224__int8", "mobilenet_v1_050_224__int8_per_tensor", "mobilenet_v1_050_224__uint8",
         "mobilenet_v2_224__int8", "efficientnet_b0_224__int8", "inception_like_224__int8",
         "resnet18_half_224__int8")
needs_zoo = pytest.mark.skipif(not (ZOO / f"{SEVEN[4]}.tflite").is_file(), reason="model zoo not present")


def _profile(**changes) -> Profile:
    return Profile(**{**load().__dict__, **changes})


@needs_zoo
def test_all_seven_compile_on_the_default_profile():
    default = load()
    streamed = []
    for name in SEVEN:
        bundle = compile_model(ZOO / f"{name}.tflite")
        assert check_bundle(bundle) == [], name
        assert bundle.meta["frame_bytes"] <= default.frame_bytes and bundle.meta["filter_bytes"] <= default.filter_bytes
        if len(bundle.program) > default.max_instructions:
            assert bundle.meta["staged"] and bundle.meta["program"]["buffer_instructions"] == default.max_instructions
            streamed.append(name)
        else:
            assert "program" not in bundle.meta
    assert streamed == ["efficientnet_b0_224__int8"]            # 1,359 instructions through 1,024


@pytest.mark.slow
@needs_zoo
@pytest.mark.parametrize("name", SEVEN)
def test_zoo_224_bit_exact_layer_by_layer_on_the_default_profile(name):
    path = ZOO / f"{name}.tflite"
    bundle = compile_model(path)
    it = Interpreter(str(path))
    dtype = it.get_input_details()[0]["dtype"]
    info = np.iinfo(dtype)
    x = np.random.default_rng(11).integers(info.min, info.max + 1, (1, 224, 224, 3)).astype(dtype)
    result = run(bundle, x)
    checks = verify.against_tflite(bundle, result, path, x)
    compared = [c for c in checks if not c.note]
    # left out: tensors TFLite overwrote in place (a LOGISTIC's output under its swish MUL), border copies
    assert all("in place" in c.note or "border copy" in c.note for c in checks if c.note)
    assert len(compared) >= 0.75 * len(bundle.layers) and all(c.exact for c in compared), \
        "\n".join(str(c) for c in compared if not c.exact)
    ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
    np.testing.assert_array_equal(result.output, ref)


def _staged_pair(buffer: int):
    """resnet_s staged on a shrunk chip, with a program memory of `buffer` instructions and with one
    that holds the whole program."""
    on_chip = compile_model(FIXTURES / "resnet_s_int8.tflite")
    small = dict(frame_bytes=on_chip.meta["frame_bytes"] // 4, filter_bytes=on_chip.meta["filter_bytes"] // 4)
    whole = compile_model(FIXTURES / "resnet_s_int8.tflite", chip=_profile(name="whole", **small))
    streams = compile_model(FIXTURES / "resnet_s_int8.tflite",
                            chip=_profile(name="tiny-program", program_bytes=64 * buffer, **small))
    return whole, streams


def test_a_program_longer_than_instruction_memory_streams_bit_for_bit(tmp_path):
    whole, streams = _staged_pair(8)
    n = len(streams.program)
    assert "program" not in whole.meta and n == len(whole.program) > 8
    p = streams.meta["program"]
    assert p == {"memory": "external", "addr": p["addr"], "bytes": 64 * n, "buffer_instructions": 8}
    assert p["addr"] >= len(streams.external) and streams.meta["external_bytes"] >= p["addr"] + 64 * n
    assert check_bundle(streams) == []
    loaded = Bundle.load(streams.save(tmp_path / "b"))
    x = np.random.default_rng(2).random((1,) + tuple(np.roll(whole.meta["input"]["shape"], -1))).astype(np.float32)
    want, got = run(whole, x), run(loaded, x)
    for layer, value in want.layers.items():
        np.testing.assert_array_equal(got.layers[layer], value, err_msg=layer)
    np.testing.assert_array_equal(got.output, want.output)
    # the fetch: 64 B per instruction past the buffer, 8 cycles a burst on the load unit
    assert got.counters.external_read - want.counters.external_read == 64 * (n - 8)
    assert got.schedule.compute_cycles == want.schedule.compute_cycles
    assert got.schedule.transfer_cycles - want.schedule.transfer_cycles == 8 * (n - 8)
    assert got.schedule.cycles >= want.schedule.cycles


def test_a_streamed_program_region_that_does_not_hold_it_is_found():
    _, streams = _staged_pair(8)
    for bad in ({"addr": 0}, {"bytes": 64}, {"buffer_instructions": 1024},
                {"addr": streams.meta["external_bytes"] - 64}):
        meta = {**streams.meta, "program": {**streams.meta["program"], **bad}}
        found = check_bundle(Bundle(streams.program, b"", b"", meta, streams.external))
        assert [f.kind for f in found] == ["profile"] and "streamed program's region" in found[0].message, bad


def test_an_on_chip_program_longer_than_instruction_memory_is_still_refused():
    """Streaming needs the external memory only a staged program uses; an on-chip one must fit."""
    with pytest.raises(CompileError, match="past chip profile tiny's 512 B of instruction memory"):
        compile_model(FIXTURES / "resnet_s_int8.tflite", chip=_profile(name="tiny", program_bytes=512))
