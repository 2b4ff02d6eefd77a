"""Chip profiles: the default's assumptions, --chip, splitting and frame reuse driven by the
profile, and the instruction encoding read from one replaceable file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import cli, compile_h5, compile_tflite, isa, run
from dtpu.isro.ir import CompileError
from dtpu.isro.isa import Op, block_size
from dtpu.isro.profile import DEFAULT_PATH, KEYS, Profile, load

FIXTURES = Path(__file__).resolve().parent / "isro"
ROOT = Path(__file__).resolve().parents[1]


def test_default_profile_says_where_every_number_comes_from():
    prof = load()
    raw = json.loads(DEFAULT_PATH.read_text())
    for key in KEYS:
        if key != "name":
            assert key in raw["source"], f"default profile: no source for {key}"
    assumed = [k for k, v in raw["source"].items() if v.startswith("assumption")]
    assert {"pe", "frame_bytes", "filter_bytes", "program_bytes"} <= set(assumed)
    assert prof.pe == 256 and prof.encoding == isa.ENCODING["name"]


def test_splitting_follows_the_profile(tmp_path):
    bundle = compile_tflite(FIXTURES / "alexnet_s_int8.tflite")
    assert bundle.meta["pe"] == 256 and bundle.meta["profile"]["name"] == "isro-asic-default"
    assert max(block_size(i) for i in bundle.program) <= 256
    assert any(i.op is Op.ADD for i in bundle.program)           # fc6 reads 256+ inputs
    big = tmp_path / "big.toml"
    big.write_text('name = "wide"\nencoding = "dtpu-isro-512"\npe = 4096\nframe_bytes = 1048576\n'
                   'filter_bytes = 4194304\nprogram_bytes = 65536\nformats = ["i8"]\nalign = 16\n')
    wide = compile_tflite(FIXTURES / "alexnet_s_int8.tflite", chip=big)
    assert wide.meta["pe"] == 4096 and not any(i.op is Op.ADD for i in wide.program)
    assert wide.meta["profile"]["name"] == "wide"
    np.testing.assert_array_equal(run(bundle).output, run(wide).output)


def test_frame_reuse_is_used_only_when_needed():
    path = FIXTURES / "vgg_s.h5"
    full = compile_h5(path, reuse=False)
    shared = compile_h5(path, reuse=True)
    assert shared.meta["frame_bytes"] < full.meta["frame_bytes"]
    base = load()
    roomy = Profile(**{**base.__dict__, "frame_bytes": full.meta["frame_bytes"]})
    tight = Profile(**{**base.__dict__, "frame_bytes": shared.meta["frame_bytes"]})
    assert compile_h5(path, chip=roomy).meta["reuse"] is False
    auto = compile_h5(path, chip=tight)
    assert auto.meta["reuse"] is True and auto.meta["frame_bytes"] <= tight.frame_bytes
    np.testing.assert_array_equal(run(auto).output, run(full).output)
    with pytest.raises(CompileError, match=r"frame memory needs [\d,]+ B but chip profile .* reuse was disabled"):
        compile_h5(path, chip=tight, reuse=False)


def test_cli_chip_option(tmp_path, capsys):
    p = tmp_path / "chip.json"
    p.write_text(json.dumps({**json.loads(DEFAULT_PATH.read_text()), "name": "chip-b", "pe": 32}))
    assert cli.main(["compile", str(FIXTURES / "resnet_s_int8.tflite"), "--chip", str(p), "-o", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "chip chip-b, pe=32" in out and "profile chip-b:" in out
    meta = json.loads((tmp_path / "b" / "meta.json").read_text())
    assert meta["profile"]["pe"] == 32 and len(meta["profile"]["sha256"]) == 64


def test_encoding_is_read_from_one_file(tmp_path):
    """A permuted encoding (opcodes swapped, fields moved) changes program.bin and nothing else."""
    enc = json.loads(isa.ENCODING_PATH.read_text())
    enc["name"] = "permuted"
    enc["opcodes"]["CONV"], enc["opcodes"]["DENSE"] = enc["opcodes"]["DENSE"], enc["opcodes"]["CONV"]
    fields = {f[0]: f for f in enc["fields"]}
    fields["src"][1], fields["dst"][1] = fields["dst"][1], fields["src"][1]
    (tmp_path / "enc.json").write_text(json.dumps(enc))
    prof = json.loads(DEFAULT_PATH.read_text())
    (tmp_path / "chip.json").write_text(json.dumps({**prof, "encoding": "permuted"}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "pylib"), DTPU_ISRO_ENCODING=str(tmp_path / "enc.json"))
    model = str(FIXTURES / "alexnet_s_int8.tflite")
    r = subprocess.run([sys.executable, "-m", "dtpu.isro", "compile", model, "--chip", str(tmp_path / "chip.json"),
                        "-o", str(tmp_path / "p")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "dtpu.isro", "run", str(tmp_path / "p"), "--no-dump"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    ours = compile_tflite(FIXTURES / "alexnet_s_int8.tflite")
    theirs = (tmp_path / "p" / "program.bin").read_bytes()
    assert theirs != isa.encode_program(ours.program) and len(theirs) == len(ours.program) * 64
    np.testing.assert_array_equal(np.load(tmp_path / "p" / "run" / "output.npy"), run(ours).output)
    # our toolchain refuses a bundle built for another encoding instead of misreading it
    assert cli.main(["run", str(tmp_path / "p")]) == 2


def test_pe_may_lower_the_profile_but_not_exceed_it(tmp_path):
    b = compile_tflite(FIXTURES / "alexnet_s_int8.tflite", pe=64)
    assert b.meta["pe"] == 64 and b.meta["profile"]["pe"] == 256      # the chip stays what it is
    with pytest.raises(CompileError, match=r"pe=512 exceeds chip profile isro-asic-default's 256 processing elements"):
        compile_tflite(FIXTURES / "alexnet_s_int8.tflite", pe=512)


def test_compiling_twice_gives_identical_bundles(tmp_path):
    for k in (1, 2):
        compile_tflite(FIXTURES / "resnet8_int8.tflite").save(tmp_path / f"b{k}")
    assert (tmp_path / "b1" / "SHA256SUMS").read_text() == (tmp_path / "b2" / "SHA256SUMS").read_text()
