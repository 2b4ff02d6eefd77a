"""Networks larger than the chip (issue 28): tensors and weights in external memory, layers staged
through frame and filter memory in row bands (with halos) and output-channel chunks by XFER.

The oracle for small models is the same model compiled on chip: every layer's output and the
model output must be equal, bit for bit in I8 (F32 within float32 summation order: the machine's
matrix products sum in an order that depends on the band's shape, as splitting's do).
The ImageNet-size zoo models, which do not fit the default profile, are checked against TFLite
layer by layer.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import cli, compile_model, run, verify
from dtpu.isro.bundle import Bundle, BundleError
from dtpu.isro.check import check_bundle
from dtpu.isro.ir import CompileError
from dtpu.isro.isa import Instruction, Mem, Op
from dtpu.isro.machine import Link, Machine, MachineError
from dtpu.isro.profile import DEFAULT_PATH, Profile, ProfileError, from_dict, load

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "isro"
ZOO = HERE / "models" / "zoo"


def _shrunk(bundle, divide: int) -> Profile:
    """The default profile with frame and filter memory `divide` times smaller than `bundle` needs."""
    base = load()
    return Profile(**{**base.__dict__, "name": f"small-{divide}",
                      "frame_bytes": bundle.meta["frame_bytes"] // divide,
                      "filter_bytes": bundle.meta["filter_bytes"] // divide})


@pytest.mark.parametrize("name, divide", [("resnet_s_int8.tflite", 4), ("mobilenet_s_int8.tflite", 4),
                                          ("vgg_s.h5", 4), ("alexnet_s_int8.tflite", 4),
                                          ("resnet8_int8.tflite", 8)])
def test_staged_equals_on_chip_bit_for_bit(name, divide):
    on_chip = compile_model(FIXTURES / name)
    assert not on_chip.meta.get("staged")
    staged = compile_model(FIXTURES / name, chip=_shrunk(on_chip, divide))
    assert staged.meta["staged"] and staged.frame == b"" and staged.filter == b""
    assert staged.meta["frame_bytes"] <= on_chip.meta["frame_bytes"] // divide
    assert staged.meta["filter_bytes"] <= on_chip.meta["filter_bytes"] // divide
    assert max(layer["staging"]["bands"] for layer in staged.layers) > 1          # halos in play
    assert check_bundle(staged) == []
    shape = tuple(on_chip.meta["input"]["shape"])
    x = np.random.default_rng(4).random((1, shape[1], shape[2], shape[0])).astype(np.float32)
    want, got = run(on_chip, x), run(staged, x)
    assert set(got.layers) == set(want.layers)
    for layer, value in list(want.layers.items()) + [("output", want.output)]:
        mine = got.output if layer == "output" else got.layers[layer]
        if staged.meta["fmt"] == "i8":
            np.testing.assert_array_equal(mine, value, err_msg=layer)
        else:     # F32 sums in float32; the machine's matrix products sum in an order that follows the shape
            np.testing.assert_allclose(mine, value, rtol=1e-5, atol=1e-5 * float(np.abs(value).max()), err_msg=layer)
    c = got.counters
    assert c.macs == want.counters.macs and c.transfer_cycles > 0 and c.external_read > 0


def test_output_channel_chunks_when_weights_exceed_filter_memory():
    on_chip = compile_model(FIXTURES / "resnet8_int8.tflite")
    staged = compile_model(FIXTURES / "resnet8_int8.tflite", chip=_shrunk(on_chip, 8))
    chunked = [layer for layer in staged.layers if layer["staging"]["chunks"] > 1]
    assert chunked and all(layer["staging"]["chunk"] < layer["output"]["shape"][0] for layer in chunked)


def test_staged_bundle_saves_loads_and_refuses_damage(tmp_path, capsys):
    on_chip = compile_model(FIXTURES / "resnet_s_int8.tflite")
    staged = compile_model(FIXTURES / "resnet_s_int8.tflite", chip=_shrunk(on_chip, 4))
    d = staged.save(tmp_path / "b")
    assert (d / "external.bin").stat().st_size == staged.meta["images"]["external.bin"]["bytes"]
    loaded = Bundle.load(d)
    np.testing.assert_array_equal(run(loaded).output, run(staged).output)
    assert cli.main(["run", str(d), "--no-dump", "--verify"]) == 0      # the compiled input, from external.bin
    out = capsys.readouterr().out
    assert "verification passed" in out
    assert "external" in out and "hidden behind compute" in out
    assert cli.main(["check", str(d)]) == 0
    capsys.readouterr()
    for command in (["inject", str(d), "--trials", "1"], ["compare", str(d), str(tmp_path)],
                    ["run", str(d), "--memory-dumps", str(tmp_path / "dumps")]):
        assert cli.main(command) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "staged through external memory" in err, err
    bad = tmp_path / "bad"
    shutil.copytree(d, bad)
    blob = bytearray((bad / "external.bin").read_bytes())
    blob[-1] ^= 1
    (bad / "external.bin").write_bytes(bytes(blob))
    with pytest.raises(BundleError, match="external.bin: SHA-256"):
        Bundle.load(bad)
    (bad / "external.bin").unlink()
    with pytest.raises(BundleError, match="missing external.bin"):
        Bundle.load(bad)


def test_check_finds_a_transfer_outside_the_layer_table():
    on_chip = compile_model(FIXTURES / "resnet_s_int8.tflite")
    staged = compile_model(FIXTURES / "resnet_s_int8.tflite", chip=_shrunk(on_chip, 4))
    layer = staged.layers[1]
    last = layer["instructions"][1]
    store = staged.program[last]
    assert store.op is Op.XFER and store.xdst is Mem.EXTERNAL
    moved = Bundle(list(staged.program), b"", b"", staged.meta, staged.external)
    moved.program[last] = store.replace(dst=staged.layers[0]["output"]["addr"])
    assert any(f.kind == "hazard" and f.index == last and "outside layer" in f.message for f in check_bundle(moved))
    moved.program[last] = store.replace(dst=staged.meta["external_bytes"])
    found = [f for f in check_bundle(moved) if f.kind == "fault"]
    assert found and found[0].index == last and "runs past the end of external memory" in found[0].message
    with pytest.raises(MachineError, match="runs past the end of external memory") as err:
        run(moved)
    assert err.value.index == last


def test_xfer_semantics_and_faults():
    frame, filt, ext = (np.zeros(64, np.uint8) for _ in range(3))
    ext[:] = np.arange(64)
    m = Machine(link=Link(bytes_per_cycle=4, latency_cycles=10))
    trace: list = []
    m.execute([Instruction(Op.XFER, xsrc=Mem.EXTERNAL, xdst=Mem.FRAME, src=8, dst=0, len=3, count=4,
                           sstride=10, dstride=3), Instruction(Op.END)], frame, filt, external=ext,
              trace=trace)
    np.testing.assert_array_equal(frame[:12], [8, 9, 10, 18, 19, 20, 28, 29, 30, 38, 39, 40])
    c = trace[0]
    assert c.external_read == 12 and c.frame_write == 12 and c.cycles == c.transfer_cycles == 10 + 3
    for fields, message in ((dict(xsrc=Mem.FRAME, xdst=Mem.FRAME, len=1, count=1), "both frame"),
                            (dict(xsrc=Mem.EXTERNAL, xdst=Mem.FRAME, len=0, count=1), "at least one byte"),
                            (dict(xsrc=Mem.EXTERNAL, xdst=Mem.FRAME, src=60, len=8, count=1), "past the end of external"),
                            (dict(xsrc=Mem.EXTERNAL, xdst=Mem.FRAME, len=8, count=2, sstride=4, dstride=8),
                             "stride 4 is shorter")):
        with pytest.raises(MachineError, match=message):
            m.execute([Instruction(Op.XFER, **fields), Instruction(Op.END)], frame, filt, external=ext)


def test_external_memory_in_the_profile():
    raw = json.loads(DEFAULT_PATH.read_text())
    assert raw["source"]["external"].startswith("assumption")
    ext = load().external
    assert ext.bytes == 256 << 20 and ext.bytes_per_cycle == 8 and ext.latency_cycles == 100
    d = {k: v for k, v in raw.items() if k not in ("about", "source")}
    for bad, key in (({"bytes": 0, "bytes_per_cycle": 8, "latency_cycles": 1}, "external.bytes"),
                     ({"bytes": 1024, "bytes_per_cycle": 0, "latency_cycles": 1}, "external.bytes_per_cycle"),
                     ({"bytes": 1024, "bytes_per_cycle": 8, "latency_cycles": -1}, "external.latency_cycles"),
                     ({"bytes": 1024}, "external")):
        with pytest.raises(ProfileError, match=key):
            from_dict({**d, "external": bad}, "p")


def test_too_little_external_memory_is_named():
    on_chip = compile_model(FIXTURES / "resnet_s_int8.tflite")
    small = _shrunk(on_chip, 4)
    tiny = Profile(**{**small.__dict__, "external": type(small.external)(4096, 8.0, 0)})
    with pytest.raises(CompileError, match=r"external memory needs [\d,]+ B .* has 4,096 B"):
        compile_model(FIXTURES / "resnet_s_int8.tflite", chip=tiny)


def test_no_reuse_still_refuses_rather_than_staging():
    on_chip = compile_model(FIXTURES / "vgg_s.h5")
    with pytest.raises(CompileError, match="reuse was disabled"):
        compile_model(FIXTURES / "vgg_s.h5", chip=_shrunk(on_chip, 4), reuse=False)


@pytest.mark.skipif(not (ZOO / "mobilenet_v2_224__int8.tflite").is_file(), reason="model zoo not present")
@pytest.mark.parametrize("name", ["mobilenet_v1_224__int8", "mobilenet_v2_224__int8"])
def test_zoo_mobilenets_224_staged_bit_exact_against_tflite(name):
    path = ZOO / f"{name}.tflite"
    with pytest.raises(CompileError, match="frame memory needs"):
        compile_model(path, chip=Profile(**{**load().__dict__, "external": None}))
    bundle = compile_model(path)
    assert bundle.meta["staged"] and check_bundle(bundle) == []
    x = np.random.default_rng(8).integers(-128, 128, (1, 224, 224, 3)).astype(np.int8)
    result = run(bundle, x)
    checks = verify.against_tflite(bundle, result, path, x)
    compared = [c for c in checks if not c.note]
    assert len(compared) >= len(bundle.layers) - 10 and all(c.exact for c in compared), \
        "\n".join(str(c) for c in compared if not c.exact)
    ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
    np.testing.assert_array_equal(result.output, ref)


@pytest.mark.parametrize("name, divide", [("squeeze_excite", 3), ("time_series", 2)])
def test_staged_new_operators_equal_on_chip(tmp_path, name, divide):
    """Issue 28.2's EMUL (with its broadcast gate), LUT and SAME average pooling (its left-out
    border cut per band) staged through external memory, bit for bit with the on-chip program."""
    import sys
    sys.path.insert(0, str(HERE))
    import isro_nets
    path, xs = isro_nets.write(name, tmp_path, "int8")
    on_chip = compile_model(path)
    staged = compile_model(path, chip=_shrunk(on_chip, divide))
    assert staged.meta["staged"] and check_bundle(staged) == []
    kinds = {layer["kind"] for layer in staged.layers if layer["staging"]["bands"] > 1}
    if name == "squeeze_excite":                  # (the 1-D net has one row: one band per layer)
        assert {"avgpool", "emul", "lut"} <= kinds, kinds
    for x in xs[:2]:
        want, got = run(on_chip, x), run(staged, x)
        for layer, value in want.layers.items():
            np.testing.assert_array_equal(got.layers[layer], value, err_msg=layer)
        np.testing.assert_array_equal(got.output, want.output)


@pytest.mark.parametrize("name, divide", [("unet", 8), ("detection_head", 8)])
def test_staged_resize_and_tconv_equal_on_chip(tmp_path, name, divide):
    """RESIZE (nearest and bilinear: each band's source rows, halo included, and the full size's
    arithmetic through fho/fhi/yo/yi) and TCONV (each band's real rows and its own fill rows
    qt/qb) staged in row bands, bit for bit with the on-chip program."""
    import sys
    sys.path.insert(0, str(HERE))
    import isro_nets
    path, xs = isro_nets.write(name, tmp_path, "int8")
    on_chip = compile_model(path)
    staged = compile_model(path, chip=_shrunk(on_chip, divide))
    assert staged.meta["staged"] and check_bundle(staged) == []
    banded = {layer["kind"] for layer in staged.layers if layer["staging"]["bands"] > 1}
    assert "resize" in banded and (name != "unet" or "tconv" in banded), banded
    assert any(i.op is Op.RESIZE and i.fho and i.yo for i in staged.program)
    for x in xs[:2]:
        want, got = run(on_chip, x[None]), run(staged, x[None])
        for layer, value in want.layers.items():
            np.testing.assert_array_equal(got.layers[layer], value, err_msg=layer)
        np.testing.assert_array_equal(got.output, want.output)


def test_resize_band_fields_the_chip_faults_on_are_found_by_both():
    """A band whose source rows are not all staged, past the full size, or band fields on a whole
    resize: the machine faults, the checker reports the same instruction."""
    from dtpu.isro.check import check_program
    x = np.arange(2 * 4 * 6, dtype=np.int8).reshape(2, 4, 6)
    frame = np.zeros(256, np.uint8)
    frame[:x.size] = x.reshape(-1).view(np.uint8)
    good = Instruction(Op.RESIZE, fmt=1, src=0, dst=128, cin=2, hin=4, win=6, hout=4, wout=12, mode=1,
                       half=1, fho=16, fhi=8, yo=8, yi=3)
    Machine().execute([good, Instruction(Op.END)], frame.copy(), np.zeros(16, np.uint8))
    for bad, message in ((dict(yi=4), r"read input rows 3\.\.6, outside the staged 4\.\.7"),
                         (dict(yo=14), "run past the full resize"),
                         (dict(fho=0), "without fho")):
        ins = good.replace(**bad)
        with pytest.raises(MachineError, match=message):
            Machine().execute([ins, Instruction(Op.END)], frame.copy(), np.zeros(16, np.uint8))
        found = check_program([ins, Instruction(Op.END)], frame_bytes=256, filter_bytes=16, pe=None)
        assert any(f.index == 0 and f.kind == "fault" and re.search(message, f.message) for f in found), found


def test_damaged_unet_staged_fails_cleanly_or_runs(tmp_path, capsys):
    """The staged RESIZE/TCONV path under the seeded damage of the other fuzz tests (--chip: a
    profile small enough to stage the UNet)."""
    import sys
    sys.path.insert(0, str(HERE))
    import isro_nets
    from tests import isro_fuzz
    path, _ = isro_nets.write("unet", tmp_path, "int8")
    on_chip = compile_model(path)
    small = _shrunk(on_chip, 4)
    chip = tmp_path / "chip.json"
    raw = json.loads(DEFAULT_PATH.read_text())
    chip.write_text(json.dumps({**raw, "name": small.name, "frame_bytes": small.frame_bytes,
                                "filter_bytes": small.filter_bytes}))
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "ok"), "--chip", str(chip)]) == 0
    assert json.loads((tmp_path / "ok" / "meta.json").read_text())["staged"]
    rng = np.random.default_rng(28)
    src = path.read_bytes()
    for trial in range(6):
        p = tmp_path / f"d{trial}.tflite"
        p.write_bytes(isro_fuzz.damage(src, rng))
        capsys.readouterr()
        rc = cli.main(["compile", str(p), "-o", str(tmp_path / f"o{trial}"), "--chip", str(chip)])
        if rc == 0:
            rc = cli.main(["run", str(tmp_path / f"o{trial}"), "--no-dump"])
        assert isro_fuzz.one_clean_line(rc, capsys.readouterr().err), trial


@pytest.mark.slow
def test_unet_224_staged_bit_exact_against_tflite(tmp_path):
    """A UNet at 224x224 (32-128 channels; about 50 s): every layer staged in row bands on the
    default profile, the bilinear and nearest resizes and the transposed convolution included."""
    import sys
    sys.path.insert(0, str(HERE))
    import isro_nets
    path, _ = isro_nets.write("unet_224", tmp_path, "int8")
    bundle = compile_model(path)
    assert bundle.meta["staged"] and check_bundle(bundle) == []
    bands = {layer["kind"]: layer["staging"]["bands"] for layer in bundle.layers}
    assert bands["resize"] > 1 and bands["tconv"] > 1
    x = np.random.default_rng(3).integers(-128, 128, (1, 224, 224, 3)).astype(np.int8)
    result = run(bundle, x)
    checks = verify.against_tflite(bundle, result, path, x)
    assert len(checks) == len(bundle.layers) + 1 and all(c.exact for c in checks), \
        "\n".join(str(c) for c in checks if not c.exact)
    ref = verify.tflite_reference(path, x)[bundle.meta["tflite"]["output_tensor"]]
    np.testing.assert_array_equal(result.output, ref)


def _zoo_staged_bit_exact(name: str, chip=None) -> None:
    path = ZOO / f"{name}.tflite"
    bundle = compile_model(path, chip=chip)
    assert bundle.meta["staged"] and check_bundle(bundle) == []
    x = np.random.default_rng(9).integers(-128, 128, (1, 224, 224, 3)).astype(np.int8)
    result = run(bundle, x)
    checks = verify.against_tflite(bundle, result, path, x)
    compared = [c for c in checks if not c.note]
    # the rest: tensors TFLite overwrote in place (a LOGISTIC's output under its swish MUL)
    assert all("in place" in c.note or "border copy" in c.note for c in checks if c.note)
    assert len(compared) >= 0.75 * len(bundle.layers) and all(c.exact for c in compared), \
        "\n".join(str(c) for c in compared if not c.exact)


@pytest.mark.skipif(not (ZOO / "inception_like_224__int8.tflite").is_file(), reason="model zoo not present")
def test_zoo_inception_224_staged_bit_exact_against_tflite():
    """Issue 28.2's staged CAT (operand by operand, in row bands) and SAME average pooling."""
    _zoo_staged_bit_exact("inception_like_224__int8")


@pytest.mark.slow
@pytest.mark.skipif(not (ZOO / "efficientnet_b0_224__int8.tflite").is_file(), reason="model zoo not present")
def test_zoo_efficientnet_b0_224_staged_bit_exact_against_tflite():
    """Swish (LOGISTIC table, EMUL), squeeze-excite (broadcast EMUL), the input rescaling (MUL and
    SUB by constants as tables). Its staged program has 1,359 instructions, past the default
    profile's 1,024: it streams from external memory through instruction memory."""
    _zoo_staged_bit_exact("efficientnet_b0_224__int8")
