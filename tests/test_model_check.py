"""dtpu.model_check: damaged files are refused with a message; every valid model passes.

The checker runs before TFLite sees a file (``dtpu run``, ``dtpu.make_interpreter``), because
TFLite's Interpreter follows the flatbuffer's offsets unverified and faults on a truncated file.
"""
from __future__ import annotations

import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tests.flatbuf_fields import FieldReader

from dtpu import model_check
from dtpu.model_check import ModelFormatError, check_bytes

ROOT = Path(__file__).resolve().parents[1]
ZOO = sorted((ROOT / "tests" / "models" / "zoo").glob("*.tflite"))
OWN = sorted((ROOT / "tests" / "data").rglob("*.tflite")) + sorted((ROOT / "tests" / "isro").rglob("*.tflite"))
SMALL = ROOT / "tests" / "models" / "zoo" / "conv_i8x8x3_o5_k3x3_s1x1_same_none__int8.tflite"
NET = ROOT / "tests" / "models" / "zoo" / "mobilenet_v1_025_96__int8.tflite"


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"\x00\xff\x00\x00"  # one red pixel
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_every_model_of_the_repository_passes():
    """Not stricter than TFLite: every model the CPU interpreter runs in our tests passes."""
    assert len(ZOO) > 100
    for path in ZOO + OWN:
        model_check.check_file(path)


@pytest.mark.parametrize("path", [SMALL, NET], ids=["conv", "mobilenet"])
def test_every_truncation_is_refused(path):
    data = path.read_bytes()
    lengths = set(range(0, 64)) | set(range(0, len(data), max(1, len(data) // 1500)))
    lengths |= {len(data) - k for k in range(1, 64)}
    for n in sorted(lengths):
        with pytest.raises(ModelFormatError) as info:
            check_bytes(data[:n], "cut.tflite")
        assert str(info.value).startswith("cut.tflite: ")
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("content, words", [
    (b"", "too short"),
    (b"TFL3", "too short"),
    (_png(), "not a TFLite model"),
    (b"\x00" * 4096, "not a TFLite model"),
])
def test_not_a_model(content, words):
    with pytest.raises(ModelFormatError, match=words):
        check_bytes(content, "x")


def test_random_garbage_is_refused():
    rng = random.Random(12)
    for _ in range(200):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 600)))
        with pytest.raises(ModelFormatError):
            check_bytes(data, "garbage")
    for _ in range(200):  # garbage behind a valid identifier goes further into the walk
        data = bytearray(rng.randrange(256) for _ in range(rng.randrange(8, 600)))
        data[4:8] = b"TFL3"
        with pytest.raises(ModelFormatError):
            check_bytes(bytes(data), "garbage")


def _patched(path: Path, fmt: str, pos: int, value) -> bytes:
    data = bytearray(path.read_bytes())
    struct.pack_into("<" + fmt, data, pos, value)
    return bytes(data)


def _positions(data: bytes):
    """Positions of a few fields of the first subgraph (found with tests/flatbuf_fields.py's field reader)."""
    from dtpu import tflite_model as tm

    r = FieldReader(data)
    root = r.root()
    sg = r.tables(root, 2)[0]
    tensors = r.tables(sg, 0)
    ops = r.tables(sg, 3)
    return r, root, sg, tensors, ops


def test_index_rules():
    data = SMALL.read_bytes()
    r, root, sg, tensors, ops = _positions(data)
    op_inputs = r.deref(r.field_pos(ops[0], 1))
    cases = {
        "opcode index": (r.deref(r.field_pos(root, 1)), "I", 0),   # no operator codes left
        "input tensor 99": (op_inputs + 4, "i", 99),
        "input tensor -2": (op_inputs + 4, "i", -2),
        "buffer index": (r.field_pos(tensors[0], 2), "I", 1000),
        "inputs name tensor": (r.deref(r.field_pos(sg, 1)) + 4, "i", 50),
        "schema version": (r.field_pos(root, 0), "I", 2),
    }
    for words, (pos, fmt, value) in cases.items():
        with pytest.raises(ModelFormatError, match=words):
            check_bytes(_patched(SMALL, fmt, pos, value), "m")


def test_buffer_too_short_for_its_shape():
    data = SMALL.read_bytes()
    r, root, sg, tensors, ops = _positions(data)
    from dtpu import tflite_model as tm

    for info, t in zip(tm.parse(data).main.tensors, tensors):
        if info.is_constant:   # make its first dimension one larger than its data
            shape = r.deref(r.field_pos(t, 0))
            with pytest.raises(ModelFormatError, match="needs"):
                check_bytes(_patched(SMALL, "i", shape + 4, info.shape[0] + 1), "m")
            return
    pytest.fail("no constant tensor in the model")


def test_vector_length_and_vtable_damage():
    data = SMALL.read_bytes()
    r, root, sg, tensors, ops = _positions(data)
    name = r.deref(r.field_pos(tensors[0], 3))
    with pytest.raises(ModelFormatError, match="runs past the end|NUL"):
        check_bytes(_patched(SMALL, "I", name, 1 << 30), "m")
    with pytest.raises(ModelFormatError, match="NUL-terminated"):
        n = r.unpack("I", name)
        check_bytes(_patched(SMALL, "B", name + 4 + n, ord("x")), "m")
    with pytest.raises(ModelFormatError, match="vtable"):
        check_bytes(_patched(SMALL, "i", tensors[0], -(1 << 20)), "m")
    with pytest.raises(ModelFormatError, match="zero points"):
        q = r.table(tensors[0], 4)
        zp = r.deref(r.field_pos(q, 3))
        check_bytes(_patched(SMALL, "I", zp, 0), "m")


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT / "pylib"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "dtpu.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("content", [
    NET.read_bytes()[:5000], b"", _png(), NET.read_bytes()[:len(NET.read_bytes()) // 2]],
    ids=["truncated", "empty", "png", "half"])
def test_cli_run_refuses_with_one_line_and_status_2(tmp_path, content):
    path = tmp_path / "bad.tflite"
    path.write_bytes(content)
    proc = _cli("run", str(path), "--backend", "reference", "--report", "none")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"dtpu run: {path}: ")
    assert "Traceback" not in proc.stderr + proc.stdout


def test_make_interpreter_refuses_bad_content_and_files(tmp_path):
    import dtpu

    cut = NET.read_bytes()[:7000]
    with pytest.raises(ValueError, match="model content: "):
        dtpu.make_interpreter(cut, {"backend": "reference"})
    path = tmp_path / "cut.tflite"
    path.write_bytes(cut)
    with pytest.raises(ValueError, match=f"{path}: "):
        dtpu.make_interpreter(path, {"backend": "reference"})
    with pytest.raises(ValueError, match="cannot read model"):
        dtpu.make_interpreter(tmp_path / "missing.tflite", {"backend": "reference"})
    dtpu.make_interpreter(SMALL, {"backend": "reference"}).allocate_tensors()


def test_the_checker_itself_only_ever_raises_model_format_error():
    """Mutants of the fuzz test's kinds, in this process: a verdict, never another exception."""
    from tests.test_model_fuzz import KINDS, mutate

    rng = random.Random(1012)
    verdicts = {"ok": 0, "refused": 0}
    for i in range(1500):
        path = rng.choice(ZOO)
        data = mutate(path.read_bytes(), KINDS[i % len(KINDS)], rng.randrange(1 << 30))
        try:
            check_bytes(data, "mutant")
            verdicts["ok"] += 1
        except ModelFormatError:
            verdicts["refused"] += 1
    assert verdicts["ok"] and verdicts["refused"], verdicts


@pytest.mark.parametrize("options", [3, 17, 30, 111, 115])
def test_options_tables_with_offsets_are_followed(options):
    """A Conv2DOptions table read as an options type that holds a vector or string: its 1-byte
    padding field cannot be the 4-byte offset TFLite would follow."""
    path = ROOT / "tests" / "models" / "zoo" / "conv_i10x10x13_o5_k1x1_s2x2_valid_none_nobias__int8.tflite"
    r, root, sg, tensors, ops = _positions(path.read_bytes())
    with pytest.raises(ModelFormatError, match=r"builtin_options \(\w+Options\): field 0"):
        check_bytes(_patched(path, "B", r.field_pos(ops[0], 3), options), "m")
