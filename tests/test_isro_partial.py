"""Partial uplinks (issue 28.5): new weights for an unchanged program, or a new input, each signed
and accepted only against the signed manifest and program of the full bundle on board."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import cli, partial, signing
from dtpu.isro.bundle import sha256
from tests.test_isro_compiler import conv, layer, write_h5


def _model(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    return write_h5(path, (10, 10, 3), [conv("c1", 6, 3, padding="same", activation="relu"),
                                        layer("MaxPooling2D", "p", pool_size=[2, 2], strides=[2, 2], padding="valid"),
                                        conv("c2", 4, 3), layer("Flatten", "f"),
                                        layer("Dense", "fc", units=5, activation="linear", use_bias=True)],
                    {"c1": {"kernel": rng.normal(size=(3, 3, 3, 6)), "bias": rng.normal(size=6)},
                     "c2": {"kernel": rng.normal(size=(3, 3, 6, 4)), "bias": rng.normal(size=4)},
                     "fc": {"kernel": rng.normal(size=(36, 5)), "bias": rng.normal(size=5)}})


def _cli(capsys, *args):
    rc = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def ground(tmp_path, capsys):
    """A signed full bundle of model 1, a retrained model 2 (same architecture), an input, keys."""
    d = tmp_path
    m1, m2 = _model(d / "m1.h5", 1), _model(d / "m2.h5", 2)
    signing.keygen(d / "key")
    signing.keygen(d / "other")
    assert _cli(capsys, "compile", m1, "-o", d / "base")[0] == 0
    assert _cli(capsys, "sign", d / "base", "--key", d / "key")[0] == 0
    np.save(d / "x.npy", np.random.default_rng(3).random((10, 10, 3)).astype(np.float32))
    return d


def test_weights_partial_runs_the_retrained_model(ground, capsys):
    d = ground
    rc, out, err = _cli(capsys, "partial", "weights", d / "base", d / "m2.h5", "-o", d / "pw", "--key", d / "key")
    assert rc == 0, err
    assert sorted(p.name for p in (d / "pw").iterdir()) == ["PARTIAL.json", "SHA256SUMS", "SIGNATURE", "filter.bin"]
    meta = json.loads((d / "pw" / "PARTIAL.json").read_text())
    assert meta["base"]["manifest_sha256"] == sha256((d / "base" / "SHA256SUMS").read_bytes())
    rc, out, err = _cli(capsys, "run", d / "base", "--partial", d / "pw", "--public-key", d / "key.pub",
                        "--input", d / "x.npy", "--verify", "--no-dump")
    assert rc == 0, err
    assert "(weights): key" in out and "verification passed" in out   # against m2.h5, the partial's source
    got = np.load(d / "base" / "run" / "output.npy")
    assert _cli(capsys, "compile", d / "m2.h5", "-o", d / "full2")[0] == 0
    assert _cli(capsys, "run", d / "full2", "--input", d / "x.npy", "--no-dump")[0] == 0
    want = np.load(d / "full2" / "run" / "output.npy")
    assert np.array_equal(got, want)
    # only the filter image travels: the program and frame images stay on board
    assert (d / "pw" / "filter.bin").read_bytes() == (d / "full2" / "filter.bin").read_bytes()
    assert (d / "pw" / "filter.bin").read_bytes() != (d / "base" / "filter.bin").read_bytes()
    rc, out, err = _cli(capsys, "check", d / "base", "--partial", d / "pw", "--public-key", d / "key.pub")
    assert rc == 0 and "-- ok" in out, out + err


def test_input_partial_runs_the_new_input(ground, capsys):
    d = ground
    assert _cli(capsys, "partial", "input", d / "base", d / "x.npy", "-o", d / "pi", "--key", d / "key")[0] == 0
    rc, out, err = _cli(capsys, "run", d / "base", "--partial", d / "pi", "--public-key", d / "key.pub", "--no-dump")
    assert rc == 0, err
    got = np.load(d / "base" / "run" / "output.npy")
    assert _cli(capsys, "run", d / "base", "--input", d / "x.npy", "--no-dump")[0] == 0
    assert np.array_equal(got, np.load(d / "base" / "run" / "output.npy"))
    assert not np.array_equal(got, np.zeros_like(got))
    # both kinds at once
    assert _cli(capsys, "partial", "weights", d / "base", d / "m2.h5", "-o", d / "pw", "--key", d / "key")[0] == 0
    rc, out, err = _cli(capsys, "run", d / "base", "--partial", d / "pw", "--partial", d / "pi",
                        "--public-key", d / "key.pub", "--no-dump")
    assert rc == 0 and out.count("key") >= 2, err


def _one_error(rc, err, *mentions):
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), (rc, err)
    for m in mentions:
        assert m in err, (m, err)


def test_refusals(ground, capsys, tmp_path):
    d = ground
    assert _cli(capsys, "partial", "weights", d / "base", d / "m2.h5", "-o", d / "pw")[0] == 0
    run = ["run", d / "base", "--no-dump", "--partial", d / "pw"]
    # unsigned partial; partial signed by another key; no key at all
    _one_error(*_cli(capsys, *run, "--public-key", d / "key.pub")[::2], "unsigned bundle", "pw")
    assert _cli(capsys, "sign", d / "pw", "--key", d / "other")[0] == 0
    _one_error(*_cli(capsys, *run, "--public-key", d / "key.pub")[::2], "signed by key", "refused")
    _one_error(*_cli(capsys, *run)[::2], "pass --public-key FILE")
    assert _cli(capsys, "sign", d / "pw", "--key", d / "key")[0] == 0
    assert _cli(capsys, *run, "--public-key", d / "key.pub")[0] == 0
    # a filter image changed after signing
    bad = tmp_path / "bad"
    shutil.copytree(d / "pw", bad)
    blob = bytearray((bad / "filter.bin").read_bytes())
    blob[5] ^= 1
    (bad / "filter.bin").write_bytes(bytes(blob))
    _one_error(*_cli(capsys, "run", d / "base", "--partial", bad, "--public-key", d / "key.pub")[::2],
               "filter.bin", "modified")
    # a program digest that is not the base's, signed by the right key: refused all the same
    meta = json.loads((d / "pw" / "PARTIAL.json").read_text())
    meta["base"]["program_sha256"] = "0" * 64
    shutil.rmtree(bad)
    shutil.copytree(d / "pw", bad)
    (bad / "PARTIAL.json").write_text(json.dumps(meta))
    (bad / "SHA256SUMS").write_text("".join(f"{sha256((bad / n).read_bytes())}  {n}\n"
                                            for n in ("filter.bin", "PARTIAL.json")))
    assert _cli(capsys, "sign", bad, "--key", d / "key")[0] == 0
    _one_error(*_cli(capsys, "run", d / "base", "--partial", bad, "--public-key", d / "key.pub")[::2],
               "program digest 0000000000000000", "does not match")
    # made for another bundle (the same model compiled for fewer processing elements)
    assert _cli(capsys, "compile", d / "m1.h5", "--pe", "16", "-o", d / "base16")[0] == 0
    assert _cli(capsys, "sign", d / "base16", "--key", d / "key")[0] == 0
    _one_error(*_cli(capsys, "run", d / "base16", "--partial", d / "pw", "--public-key", d / "key.pub")[::2],
               "made for the bundle with manifest", "refused")
    # an unsigned base
    shutil.rmtree(bad)
    shutil.copytree(d / "base", bad)
    (bad / "SIGNATURE").unlink()
    _one_error(*_cli(capsys, "run", bad, "--partial", d / "pw", "--public-key", d / "key.pub")[::2], "unsigned bundle")
    # two weights partials
    _one_error(*_cli(capsys, *run, "--partial", d / "pw", "--public-key", d / "key.pub")[::2],
               "a second weights partial uplink")


def test_making_refusals(ground, capsys, tmp_path):
    d = ground
    other = write_h5(tmp_path / "wide.h5", (10, 10, 3), [conv("c1", 8, 3, padding="same")],
                     {"c1": {"kernel": np.ones((3, 3, 3, 8)), "bias": np.zeros(8)}})
    _one_error(*_cli(capsys, "partial", "weights", d / "base", other, "-o", tmp_path / "p1")[::2],
               "compiles to a different program", "send a full bundle")
    np.save(tmp_path / "x5.npy", np.zeros((5, 5, 3), np.float32))
    _one_error(*_cli(capsys, "partial", "input", d / "base", tmp_path / "x5.npy", "-o", tmp_path / "p2")[::2],
               "x5.npy", "does not match the model's")
    (tmp_path / "junk.npy").write_bytes(b"junk")
    _one_error(*_cli(capsys, "partial", "input", d / "base", tmp_path / "junk.npy", "-o", tmp_path / "p3")[::2],
               "junk.npy", "not a readable .npy")
    _one_error(*_cli(capsys, "partial", "input", tmp_path / "nobase", d / "x.npy", "-o", tmp_path / "p4")[::2],
               "nobase", "not a bundle directory")
    assert _cli(capsys, "partial", "input", d / "base", d / "x.npy", "-o", tmp_path / "p5")[0] == 0
    _one_error(*_cli(capsys, "partial", "input", d / "base", d / "x.npy", "-o", tmp_path / "p5")[::2],
               "not an empty directory")


@pytest.mark.parametrize("damage", ["missing", "no meta", "bad json", "wrong kind", "no image"])
def test_damaged_partial_directories(ground, capsys, tmp_path, damage):
    d = ground
    p = tmp_path / "p"
    assert _cli(capsys, "partial", "input", d / "base", d / "x.npy", "-o", p)[0] == 0
    if damage == "missing":
        shutil.rmtree(p)
    elif damage == "no meta":
        (p / "PARTIAL.json").unlink()
    elif damage == "no image":
        (p / "frame.bin").unlink()
    else:
        text = "{not json" if damage == "bad json" else json.dumps({"format": partial.FORMAT, "kind": "program"})
        (p / "PARTIAL.json").write_text(text)
        (p / "SHA256SUMS").write_text("".join(f"{sha256((p / n).read_bytes())}  {n}\n"
                                              for n in ("frame.bin", "PARTIAL.json")))
    if p.is_dir():
        # re-signed by the right key: the signature is fine, the content is not
        key = signing.load_key(d / "key", private=True)
        (p / "SIGNATURE").write_text(f"ed25519 {signing.fingerprint(key.public_key())} "
                                     f"{key.sign((p / 'SHA256SUMS').read_bytes()).hex()}\n")
    rc, _, err = _cli(capsys, "run", d / "base", "--partial", p, "--public-key", d / "key.pub")
    _one_error(rc, err, str(p))
