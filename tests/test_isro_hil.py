"""`dtpu isro compare` (memory dumps from a chip or RTL simulation) and `dtpu isro inject`
(bit flips, with and without SECDED)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import cli, compile_h5, compile_tflite
from dtpu.isro.compare import DumpError, compare, write_dumps
from dtpu.isro.inject import inject, secded_decode, secded_encode

FIXTURES = Path(__file__).resolve().parent / "isro"


@pytest.fixture(scope="module")
def resnet8():
    return compile_tflite(FIXTURES / "resnet8_int8.tflite")


def test_dumps_of_the_machine_match_and_a_flip_is_located(tmp_path, resnet8):
    d = write_dumps(resnet8, tmp_path / "d")
    diffs = compare(resnet8, d)
    assert len(diffs) == len(resnet8.layers) and all(x.ok for x in diffs)
    k = 5
    name = resnet8.layers[k]["name"]
    c, h, w = resnet8.layers[k]["output"]["shape"]
    t, b, l, r = resnet8.layers[k]["output"]["pad"]
    data = bytearray((d / f"layer_{k:03d}.bin").read_bytes())
    at = (2 * (h + t + b) + (3 + t)) * (w + l + r) + (4 + l)          # element (2, 3, 4), int8
    data[at] = (data[at] + 7) % 256
    (d / f"layer_{k:03d}.bin").write_bytes(bytes(data))
    bad = [x for x in compare(resnet8, d) if not x.ok]
    assert [x.name for x in bad] == [name]
    assert bad[0].first[:3] == (2, 3, 4) and bad[0].differ == 1 and bad[0].max_abs > 0
    assert "first at c=2 h=3 w=4" in str(bad[0])


def test_frame_dump_covers_layers_not_overwritten(tmp_path):
    x = np.random.default_rng(0).random((1, 32, 32, 3)).astype(np.float32)
    shared = compile_h5(FIXTURES / "vgg_s.h5", x, reuse=True)
    d = write_dumps(shared, tmp_path / "d")
    for p in d.glob("layer_*.bin"):
        p.unlink()
    diffs = compare(shared, d)
    compared = [x for x in diffs if x.source == "frame.bin"]
    assert compared and all(x.ok for x in compared)
    assert any(not x.source for x in diffs)            # reused regions cannot come from frame.bin


def test_compare_cli_and_bad_dumps(tmp_path, capsys, resnet8):
    resnet8.save(tmp_path / "b")
    assert cli.main(["run", str(tmp_path / "b"), "--no-dump", "--memory-dumps", str(tmp_path / "d")]) == 0
    assert "host: softmax" in capsys.readouterr().out
    assert cli.main(["compare", str(tmp_path / "b"), str(tmp_path / "d")]) == 0
    assert "16 of 16 layers compared: 16 match, 0 differ" in capsys.readouterr().out
    p = tmp_path / "d" / "layer_002.bin"
    p.write_bytes(p.read_bytes()[:100])
    assert cli.main(["compare", str(tmp_path / "b"), str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "layer_002.bin: 100 bytes" in err and len(err.splitlines()) == 1
    p.write_bytes(b"\0" * 16384)                           # right size, wrong values
    assert cli.main(["compare", str(tmp_path / "b"), str(tmp_path / "d")]) == 1
    assert "DIFFER" in capsys.readouterr().out
    (tmp_path / "d" / "layer_099.bin").write_bytes(b"")
    assert cli.main(["compare", str(tmp_path / "b"), str(tmp_path / "d")]) == 2
    assert "layer_099.bin name no layer" in capsys.readouterr().err
    with pytest.raises(DumpError, match="not a dump directory"):
        compare(resnet8, tmp_path / "nothing")


def test_secded_corrects_one_and_detects_two_flips():
    rng = np.random.default_rng(1)
    for _ in range(200):
        word = int(rng.integers(0, 1 << 63)) * 2 + int(rng.integers(2))
        code = secded_encode(word)
        assert secded_decode(code) == (word, "ok")
        i, j = rng.choice(72, 2, replace=False)
        assert secded_decode(code ^ (1 << int(i))) == (word, "corrected")
        assert secded_decode(code ^ (1 << int(i)) ^ (1 << int(j)))[1] == "detected"


def test_injection_is_reproducible_and_secded_masks_single_flips(resnet8):
    a = inject(resnet8, 40, seed=3)
    b = inject(resnet8, 40, seed=3)
    assert a.counts == b.counts
    assert a.counts["program"]["stopped"] > 0 and sum(a.counts["filter"].values()) == 40
    assert any(a.counts[r]["silent"] for r in a.counts)           # unprotected flips do corrupt
    protected = inject(resnet8, 40, seed=3, secded=True)
    assert all(protected.counts[r] == {"masked": 40, "silent": 0, "stopped": 0} for r in protected.counts)
    double = inject(resnet8, 30, seed=4, double=True, regions=("program",))
    assert sum(double.counts["program"].values()) == 30


def test_inject_cli(tmp_path, capsys, resnet8):
    resnet8.save(tmp_path / "b")
    argv = ["inject", str(tmp_path / "b"), "--trials", "10", "--seed", "5", "--regions", "filter,frame"]
    assert cli.main(argv) == 0
    first = capsys.readouterr().out
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == first and "SECDED off" in first and "filter" in first
    assert cli.main(["inject", str(tmp_path / "b"), "--regions", "cache"]) == 2
    assert "region(s) cache; accepted: program, filter, frame" in capsys.readouterr().err


def test_multi_bit_upsets_defeat_correction_but_are_detected(resnet8):
    """Two neighbouring bits of one word: SECDED detects every one (the machine stops); without
    it some corrupt silently. Activations are flipped while the program runs."""
    protected = inject(resnet8, 25, seed=6, adjacent=True, secded=True)
    assert all(c == {"masked": 0, "silent": 0, "stopped": 25} for c in protected.counts.values())
    assert set(protected.counts) == {"program", "filter", "frame", "activations"}
    bare = inject(resnet8, 60, seed=6, adjacent=True, regions=("frame", "activations"))
    assert bare.counts["frame"]["silent"] > 0
    assert "adjacent double-bit flips" in str(bare)
