"""`python -m dtpu.isro compile | run | disasm | asm`, in process and once as a real subprocess."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dtpu.isro import cli

FIXTURES = Path(__file__).resolve().parent / "isro"


def test_compile_run_verify_disasm_asm(tmp_path, capsys):
    x = np.random.default_rng(1).random((1, 32, 32, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    assert cli.main(["compile", str(FIXTURES / "resnet_s.h5"), "--input", str(tmp_path / "x.npy"),
                     "-o", str(out), "--pe", "64"]) == 0
    text = capsys.readouterr().out
    assert "instructions" in text and "MACs 453,888" in text and "filter memory" in text
    assert {p.name for p in out.iterdir()} == {"frame.bin", "filter.bin", "program.bin", "program.lst", "meta.json", "SHA256SUMS"}

    assert cli.main(["run", str(out), "--verify"]) == 0
    text = capsys.readouterr().out
    assert "verification passed: 9 layers" in text and "conv1_relu" in text
    dumps = sorted((out / "run" / "layers").iterdir())
    assert len(dumps) == 9 and dumps[0].name == "00_conv1_relu.chw.npy"
    assert np.load(dumps[0]).shape == (8, 16, 16)                       # channel-major, unpadded
    assert np.load(out / "run" / "output.npy").shape == (1, 10)

    assert cli.main(["disasm", str(out)]) == 0
    listing = capsys.readouterr().out
    assert listing == (out / "program.lst").read_text() and listing.rstrip().endswith("end")
    (tmp_path / "p.s").write_text(listing)
    assert cli.main(["asm", str(tmp_path / "p.s"), "-o", str(tmp_path / "p.bin")]) == 0
    assert capsys.readouterr().out.startswith("35 instructions -> ")   # split into tap tiles (§6)
    assert (tmp_path / "p.bin").read_bytes() == (out / "program.bin").read_bytes()
    assert cli.main(["disasm", str(tmp_path / "p.bin")]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("0000: conv.f32")


def test_run_with_other_input_and_machine_size(tmp_path, capsys):
    out = tmp_path / "q"
    assert cli.main(["compile", str(FIXTURES / "vgg_s_int8.tflite"), "-o", str(out)]) == 0
    np.save(tmp_path / "x.npy", np.random.default_rng(2).random((32, 32, 3)).astype(np.float32))
    assert cli.main(["run", str(out), "--input", str(tmp_path / "x.npy"), "--verify", "--no-dump"]) == 0
    text = capsys.readouterr().out
    assert "verification passed: 11 layers" in text and not (out / "run" / "layers").exists()
    assert cli.main(["run", str(out), "--pe", "16"]) == 2           # compiled without splitting
    assert ("instruction 0 (conv): a block of 27 inputs x 8 lanes needs 216 processing elements, the machine has 16; "
            "compile with pe <= 16") in capsys.readouterr().err


def test_errors_are_one_line_messages(tmp_path, capsys):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import isro_nets
    bad = isro_nets.unsupported(tmp_path / "exp.tflite")
    assert cli.main(["compile", str(bad), "-o", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.startswith("error: op 1 (EXP) -> tensor 't4': not supported by the ISRO-ASIC")
    assert cli.main(["run", str(tmp_path / "nothing")]) == 2
    assert "nothing: not a bundle directory" in capsys.readouterr().err
    assert cli.main(["compile", str(FIXTURES / "vgg_s.h5"), "--input", str(tmp_path / "no.npy"), "-o", str(tmp_path / "o")]) == 2
    assert "input" in capsys.readouterr().err


def test_hooks_into_another_cli():
    parser = argparse.ArgumentParser(prog="dtpu")
    cli.add_subparser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["isro", "disasm", str(FIXTURES)])
    assert args.func is cli.dispatch and args.isro_command == "disasm"


def test_python_dash_m(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "pylib"))
    r = subprocess.run([sys.executable, "-m", "dtpu.isro", "compile", str(FIXTURES / "alexnet_s_int8.tflite"),
                        "-o", str(tmp_path / "a")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "(i8, chip isro-asic-default, pe=256)" in r.stdout
