"""Signed uplink (issue 28): Ed25519 over the bundle manifest; run and check with a public key
refuse, exit 2 and one line, a bundle that is unsigned, signed by another key, or whose images
and digests were rewritten together after signing."""
from __future__ import annotations

import hashlib
import json
import shutil
import stat
from pathlib import Path

import pytest

from dtpu.isro import cli, signing
from dtpu.isro.bundle import Bundle

FIXTURES = Path(__file__).resolve().parent / "isro"


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    d = tmp_path_factory.mktemp("sig")
    assert cli.main(["compile", str(FIXTURES / "vgg_s_int8.tflite"), "-o", str(d / "b")]) == 0
    assert cli.main(["keygen", "-o", str(d / "ground.key")]) == 0
    assert cli.main(["sign", str(d / "b"), "--key", str(d / "ground.key")]) == 0
    return d


def _one_error(capsys, rc, *mentions):
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), (rc, err)
    for m in mentions:
        assert m in err, (m, err)


def _copy(signed, tmp_path, name="b") -> Path:
    dst = tmp_path / name
    shutil.copytree(signed / "b", dst)
    shutil.rmtree(dst / "run", ignore_errors=True)
    return dst


def test_keygen_writes_a_private_and_a_public_key_and_never_overwrites(signed, capsys):
    key, pub = signed / "ground.key", signed / "ground.key.pub"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert pub.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    capsys.readouterr()
    _one_error(capsys, cli.main(["keygen", "-o", str(key)]), "exists", "does not overwrite")


def test_signed_bundle_runs_and_checks_with_its_key(signed, tmp_path, capsys):
    d = _copy(signed, tmp_path)
    pub = signed / "ground.key.pub"
    capsys.readouterr()
    assert cli.main(["run", str(d), "--public-key", str(pub), "--no-dump"]) == 0
    assert "signature: key " in capsys.readouterr().out
    assert cli.main(["check", str(d), "--public-key", str(pub)]) == 0


def test_unsigned_and_foreign_signatures_are_refused_before_anything_runs(signed, tmp_path, capsys):
    pub = signed / "ground.key.pub"
    d = _copy(signed, tmp_path)
    (d / "SIGNATURE").unlink()
    capsys.readouterr()
    _one_error(capsys, cli.main(["run", str(d), "--public-key", str(pub)]), "unsigned bundle")
    assert not (d / "run").exists()
    _one_error(capsys, cli.main(["check", str(d), "--public-key", str(pub)]), "unsigned bundle")
    assert cli.main(["keygen", "-o", str(tmp_path / "rogue.key")]) == 0
    assert cli.main(["sign", str(d), "--key", str(tmp_path / "rogue.key")]) == 0
    capsys.readouterr()
    _one_error(capsys, cli.main(["run", str(d), "--public-key", str(pub)]), "signed by key", "refused")


def test_images_and_digests_rewritten_together_are_refused(signed, tmp_path, capsys):
    d = _copy(signed, tmp_path)
    blob = bytearray((d / "filter.bin").read_bytes())
    blob[0] ^= 0x40                                     # a weight changed ...
    (d / "filter.bin").write_bytes(bytes(blob))
    meta = json.loads((d / "meta.json").read_text())  # ... and every digest made to agree with it
    meta["images"]["filter.bin"]["sha256"] = hashlib.sha256(blob).hexdigest()
    raw = (json.dumps(meta, indent=1) + "\n").encode()
    (d / "meta.json").write_bytes(raw)
    digests = {"filter.bin": hashlib.sha256(blob).hexdigest(), "meta.json": hashlib.sha256(raw).hexdigest()}
    lines = []
    for line in (d / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        lines.append(f"{digests.get(name, digest)}  {name}")
    (d / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    Bundle.load(d)                                      # the digests alone no longer notice
    capsys.readouterr()
    _one_error(capsys, cli.main(["run", str(d), "--public-key", str(signed / "ground.key.pub")]),
               "changed after signing")


def test_a_configured_key_applies_without_the_option(signed, tmp_path, capsys, monkeypatch):
    d = _copy(signed, tmp_path)
    monkeypatch.setenv(signing.ENV_PUBLIC_KEY, str(signed / "ground.key.pub"))
    assert cli.main(["run", str(d), "--no-dump"]) == 0
    (d / "SIGNATURE").unlink()
    capsys.readouterr()
    _one_error(capsys, cli.main(["run", str(d), "--no-dump"]), "unsigned bundle")


def test_bad_keys_and_bad_bundles(signed, tmp_path, capsys):
    (tmp_path / "junk.pub").write_text("not a key")
    d = _copy(signed, tmp_path)
    capsys.readouterr()
    _one_error(capsys, cli.main(["run", str(d), "--public-key", str(tmp_path / "junk.pub")]), "junk.pub", "not a PEM")
    _one_error(capsys, cli.main(["run", str(d), "--public-key", str(tmp_path / "none.pub")]), "does not exist")
    # the private key is not a public key, and signing a damaged bundle is refused
    _one_error(capsys, cli.main(["run", str(d), "--public-key", str(signed / "ground.key")]), "not a PEM public key")
    (d / "program.bin").write_bytes(b"\0" * 64)
    _one_error(capsys, cli.main(["sign", str(d), "--key", str(signed / "ground.key")]), "program.bin")
