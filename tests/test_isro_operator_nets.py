"""Issue 28.2's networks on the ISRO-ASIC: a UNet (resize and transposed convolution up,
concatenated skips), a YOLO-style detection head (branches concatenated, sigmoid), a
squeeze-excite block (mean, 1x1 convolutions, sigmoid, channel-wise MUL) and a 1-D time-series
net (Conv1D and 1-D pooling as TFLite writes them), each compiled from .tflite, run on the
machine model and compared layer by layer with the interpreter: bit-exact in I8, within float
tolerance in F32. The graphs are written without TensorFlow (tests/isro_nets.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import cli, compile_tflite, run, verify
from dtpu.isro.check import check_bundle

sys.path.insert(0, str(Path(__file__).resolve().parent))
import isro_nets  # noqa: E402
from tests import isro_fuzz

# what each network must exercise: instructions by opcode (lower case), at least this many. A
# trailing LOGISTIC stays a host head (as before issue 28.2); inside the network it is a LUT.
HEADS = {"unet": ["sigmoid"], "detection_head": ["sigmoid"], "squeeze_excite": [], "time_series": []}
EXPECT = {
    "unet": {"cat": 5, "resize": 2, "tconv": 1, "avgpool": 1, "maxpool": 1},
    "detection_head": {"cat": 5, "resize": 1, "lut": 1},
    "squeeze_excite": {"emul": 2, "lut": 2, "avgpool": 2},
    "time_series": {"conv": 2, "maxpool": 1, "avgpool": 2, "dense": 1},
}


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    d = tmp_path_factory.mktemp("nets")
    return {(name, fmt): isro_nets.write(name, d, fmt) for name in isro_nets.NETS for fmt in ("int8", "float32")}


@pytest.mark.parametrize("name", sorted(isro_nets.NETS))
def test_network_is_bit_exact_in_i8_layer_by_layer(nets, name):
    path, x = nets[(name, "int8")]
    bundle = compile_tflite(path)
    assert bundle.fmt.name == "I8" and check_bundle(bundle) == []
    assert [h["kind"] for h in bundle.meta["heads"]] == HEADS[name]
    by_op = bundle.meta["stats"]["by_op"]
    assert all(by_op.get(op, 0) >= n for op, n in EXPECT[name].items()), by_op
    compared = 0
    for k in range(4):
        result = run(bundle, x[k])
        checks = [ck for ck in verify.against_tflite(bundle, result, path, x[k]) if not ck.note]
        assert checks and all(ck.exact for ck in checks), "\n".join(map(str, checks))
        compared += len(checks)
    assert compared >= 4 * len(EXPECT[name])


@pytest.mark.parametrize("name", sorted(isro_nets.NETS))
def test_network_in_f32_is_within_tolerance(nets, name):
    path, x = nets[(name, "float32")]
    bundle = compile_tflite(path)
    assert bundle.fmt.name == "F32" and check_bundle(bundle) == []
    result = run(bundle, x[0])
    checks = [ck for ck in verify.against_tflite(bundle, result, path, x[0]) if not ck.note]
    assert checks and all(ck.ok for ck in checks), "\n".join(map(str, checks))


def test_cli_compiles_runs_and_verifies_the_unet(nets, tmp_path, capsys):
    path, x = nets[("unet", "int8")]
    np.save(tmp_path / "x.npy", x[0])
    out = tmp_path / "unet"
    assert cli.main(["compile", str(path), "-o", str(out)]) == 0
    assert cli.main(["run", str(out), "--input", str(tmp_path / "x.npy"), "--verify", str(path), "--no-dump"]) == 0
    text = capsys.readouterr().out
    assert "MISMATCH" not in text and "tconv" in (out / "program.lst").read_text()


def test_random_damage_to_the_new_networks_fails_cleanly_or_runs(nets, tmp_path, capsys):
    """Seeded fuzzing of the new operators' input paths: bytes, cuts and words anywhere."""
    rng = np.random.default_rng(28)
    names = sorted(isro_nets.NETS)
    for trial in range(24):
        src, _ = nets[(names[trial % len(names)], "int8" if trial % 3 else "float32")]
        p = tmp_path / f"{trial}.tflite"
        p.write_bytes(isro_fuzz.damage(src.read_bytes(), rng))
        rc, err = isro_fuzz.compile_and_run(p, tmp_path / f"o{trial}", capsys)
        assert isro_fuzz.one_clean_line(rc, err), (trial, err)


def _refused(tmp_path, capsys, net, out, *mentions, fmt="int8"):
    rng = np.random.default_rng(0)
    calib = rng.standard_normal((2,) + net.shapes[net.input][1:]).astype(np.float32)
    path = tmp_path / f"bad_{fmt}.tflite"
    path.write_bytes(net.int8(out, calib) if fmt == "int8" else net.float32(out))
    rc = cli.main(["compile", str(path), "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1, err
    for m in mentions:
        assert m in err, (m, err)


def test_operators_the_chip_cannot_express_are_refused_in_one_line(tmp_path, capsys):
    n = isro_nets.Net((1, 6, 6, 3))
    a = n.conv(n.input, 4)
    y = n.node("CONCATENATION", [a, a], (1, 12, 6, 4), axis=1)
    _refused(tmp_path, capsys, n, y, "concatenation along axis 1", "accepted: the channel (last) axis")
    n = isro_nets.Net((1, 6, 6, 3))
    a = n.conv(n.input, 4)
    k = n.tensor((1, 6, 6, 4), np.ones((1, 6, 6, 4), np.float32), "weights_const")
    y = n.mul(a, k)
    _refused(tmp_path, capsys, n, y, "MUL", fmt="float32")
    n = isro_nets.Net((1, 6, 6, 3))
    a = n.conv(n.input, 4)
    y = n.tconv(a, 2, k=3, stride=1, padding="SAME")
    n.consts[n.nodes[-1].inputs[0]][:] = [1, 2, 2, 2]      # an output smaller than the input: cropped
    n.shapes[y] = (1, 2, 2, 2)
    _refused(tmp_path, capsys, n, y, "transposed convolution", "the chip does not crop", fmt="float32")
