"""Signed uplink: an Ed25519 signature over a bundle's manifest, checked before anything runs.

A bundle's SHA256SUMS lists the digest of every file (meta.json included, which itself records
each image's size and digest), so one signature over SHA256SUMS covers the whole bundle: rewrite
an image and its digests together and the manifest changes, so the signature no longer verifies.
The digests alone (:meth:`dtpu.isro.bundle.Bundle.load`) only catch accidents; the signature
catches anyone without the private key.

Files: ``keygen`` writes ``KEY`` (the private key, PKCS#8 PEM, mode 0600) and ``KEY.pub``
(SubjectPublicKeyInfo PEM); ``sign`` writes ``SIGNATURE`` into the bundle: one line
``ed25519 <public key fingerprint> <signature hex>``, the fingerprint being the first 16 hex
digits of the SHA-256 of the raw public key, so a refusal can say which key signed it.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

SIGNATURE = "SIGNATURE"
MANIFEST = "SHA256SUMS"
ENV_PUBLIC_KEY = "DTPU_ISRO_PUBLIC_KEY"      # a configured key: run/check verify without --public-key


class SignatureError(ValueError):
    """A bundle that must not run: unsigned, signed by another key, or changed after signing."""


def _crypto():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:       # pragma: no cover - a declared dependency
        raise SignatureError("signing needs the 'cryptography' package (pip install cryptography)") from None
    return serialization, ed25519


def _raw_public(key) -> bytes:
    serialization, _ = _crypto()
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(public_key) -> str:
    return hashlib.sha256(_raw_public(public_key)).hexdigest()[:16]


def keygen(path: str | Path) -> tuple[Path, Path]:
    """A new Ed25519 key pair: `path` (private, 0600) and `path`.pub; refuses to overwrite."""
    serialization, ed25519 = _crypto()
    path = Path(path)
    pub = path.with_name(path.name + ".pub")
    for p in (path, pub):
        if p.exists():
            raise SignatureError(f"{p} exists; keygen does not overwrite keys (remove it or choose another name)")
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private)
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    log.info("Ed25519 key %s written to %s and %s", fingerprint(key.public_key()), path, pub)
    return path, pub


def load_key(path: str | Path, private: bool):
    """The Ed25519 key `dtpu isro keygen` wrote at `path` (its private or public half), or
    SignatureError naming the file and what is wrong with it."""
    serialization, ed25519 = _crypto()
    path = Path(path)
    kind = "private" if private else "public"
    if not path.is_file():
        raise SignatureError(f"{kind} key {path} does not exist")
    data = path.read_bytes()
    try:
        key = (serialization.load_pem_private_key(data, password=None) if private
               else serialization.load_pem_public_key(data))
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"{kind} key {path}: not a PEM {kind} key ({' '.join(str(exc).split())}); "
                             f"accepted: the files `dtpu isro keygen` writes") from None
    want = ed25519.Ed25519PrivateKey if private else ed25519.Ed25519PublicKey
    if not isinstance(key, want):
        raise SignatureError(f"{kind} key {path}: a {type(key).__name__}, not an Ed25519 key")
    return key


def sign(bundle_dir: str | Path, key_path: str | Path, load=None) -> Path:
    """Sign `bundle_dir`'s manifest; the bundle is loaded first (by `load`, default
    :meth:`Bundle.load`; a partial uplink passes its own), so a damaged one is never signed."""
    from dtpu.isro.bundle import Bundle
    d = Path(bundle_dir)
    (load or Bundle.load)(d)
    key = load_key(key_path, private=True)
    signature = key.sign((d / MANIFEST).read_bytes())
    out = d / SIGNATURE
    out.write_text(f"ed25519 {fingerprint(key.public_key())} {signature.hex()}\n")
    return out


def configured_key(explicit: str | Path | None) -> Path | None:
    """`explicit` or, without it, the key $DTPU_ISRO_PUBLIC_KEY names (None: no signature check)."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(ENV_PUBLIC_KEY)
    return Path(env) if env else None


def verify(bundle_dir: str | Path, public_key_path: str | Path) -> str:
    """Raise SignatureError unless `bundle_dir` is signed by that key over its current manifest;
    returns the signer's fingerprint. Run before :meth:`Bundle.load`, so nothing unsigned is read."""
    from cryptography.exceptions import InvalidSignature
    d = Path(bundle_dir)
    key = load_key(public_key_path, private=False)
    want = fingerprint(key)
    sig_file = d / SIGNATURE
    if not sig_file.is_file():
        raise SignatureError(f"{d}: unsigned bundle (no {SIGNATURE}); public key {want} requires one "
                             f"(dtpu isro sign {d} --key KEY)")
    parts = sig_file.read_text(errors="replace").split()
    if len(parts) != 3 or parts[0] != "ed25519":
        raise SignatureError(f"{sig_file}: not a signature line 'ed25519 <fingerprint> <hex>'")
    _, who, hex_sig = parts
    if who != want:
        raise SignatureError(f"{d}: signed by key {who}, not by {want} ({public_key_path}); refused")
    manifest = d / MANIFEST
    if not manifest.is_file():
        raise SignatureError(f"{d}: no {MANIFEST} to check the signature against")
    try:
        key.verify(bytes.fromhex(hex_sig), manifest.read_bytes())
    except (ValueError, InvalidSignature):
        raise SignatureError(f"{d}: the signature of key {want} does not match {MANIFEST}: the bundle was "
                             f"changed after signing; refused") from None
    return want
