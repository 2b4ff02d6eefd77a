"""`dtpu isro check`: the static checker agrees with the machine on what the machine rejects.

Compiled programs are mutated one field at a time (random bits, off-by-one, extremes) and run
both through the checker and the machine model (a quarter of the I8 trials also put a random
value in a DSP shift word of the filter image): when the checker sees no hazard that makes the
outcome data-dependent, the machine must stop at exactly the instruction the checker names as the
first fault, and run to END when the checker finds none. Both outcomes must occur many times, or
the test proves nothing.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import cli, compile_h5, compile_tflite
from dtpu.isro.bundle import Bundle
from dtpu.isro.check import check_bundle, check_program, first_fault
from dtpu.isro.isa import ENUMS, FIELDS, USES, Instruction, Op
from dtpu.isro.machine import Machine, MachineError
from dtpu.isro.profile import unlimited

FIXTURES = Path(__file__).resolve().parent / "isro"


def _bundles():
    import sys
    import tempfile
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import isro_nets                              # issue 28.2's operators: CAT, RESIZE, TCONV, EMUL, LUT
    d = tempfile.mkdtemp(prefix="isro_check_")
    unet, ux = isro_nets.write("unet", d, "int8")
    se, sx = isro_nets.write("squeeze_excite", d, "float32")
    x = np.random.default_rng(0).random((1, 32, 32, 3)).astype(np.float32)
    return {
        "unet_i8_pe64": compile_tflite(unet, ux[0], pe=64),
        "se_f32": compile_tflite(se, sx[0]),
        "resnet_i8_pe32": compile_tflite(FIXTURES / "resnet_s_int8.tflite", x, pe=32),
        "vgg_f32_reuse": compile_h5(FIXTURES / "vgg_s.h5", x, reuse=True),
        "mix_f32_pe16": compile_h5(FIXTURES / "mix_s.h5", pe=16),
        "alexnet_i8": compile_tflite(FIXTURES / "alexnet_s_int8.tflite", chip=unlimited()),
    }


BUNDLES = _bundles()


@pytest.mark.parametrize("name", sorted(BUNDLES))
def test_compiled_bundles_are_clean(name):
    assert check_bundle(BUNDLES[name]) == []


def _mutate(ins: Instruction, rng) -> Instruction | None:
    names = list(USES[ins.op])
    if not names or rng.random() < 0.05:
        return Instruction(Op.END) if rng.random() < 0.5 else None      # None: drop END
    name = names[rng.integers(len(names))]
    f = FIELDS[name]
    v = int(ins.fields[name])
    if name in ENUMS:
        choices = [int(e) for e in ENUMS[name]]
        return ins.replace(**{name: choices[rng.integers(len(choices))]})
    kind = rng.integers(4)
    if kind == 0:
        v = v + int(rng.choice([-16, -4, -1, 1, 4, 16, 64]))
    elif kind == 1:
        v = int(rng.integers(f.lo, f.hi + 1, dtype=np.int64))
    elif kind == 2:
        v = int(rng.choice([f.lo, f.hi, 0, 1]))
    else:
        v = v ^ (1 << int(rng.integers(f.width)))
        if f.signed and v > f.hi:
            v -= 1 << f.width
    return ins.replace(**{name: int(np.clip(v, f.lo, f.hi))})


def _machine_stops_at(bundle, program, filter_image=None) -> int | None:
    frame, filt = bundle.memories()
    if filter_image is not None:
        filt[:len(filter_image)] = np.frombuffer(filter_image, np.uint8)
    try:
        Machine(bundle.meta["pe"]).execute(program, frame, filt)
    except MachineError as exc:
        return exc.index
    return None


def _static(bundle, program, filter_image=None):
    m = bundle.meta
    c, h, w = m["input"]["shape"]
    t, b, l, r = m["input"]["pad"]
    size = c * (h + t + b) * (w + l + r) * (1 if bundle.fmt.name == "I8" else 4)
    return check_program(program, frame_bytes=m["frame_bytes"], filter_bytes=m["filter_bytes"], pe=m["pe"],
                         filter_image=bundle.filter if filter_image is None else filter_image,
                         frame_defined=(0, size))


def _mutate_shift(bundle, rng) -> bytes:
    """The filter image with one I8 DSP shift word set to a random value in [-40, 40]."""
    image = bytearray(bundle.filter)
    blocks = [m["params"] for m in bundle.layers if m["params"] and m["params"]["dsp"] and m["kind"] != "eadd"]
    if bundle.fmt.name != "I8" or not blocks:
        return bytes(image)
    p = blocks[rng.integers(len(blocks))]
    chans = (p["bytes"] // 4 - 4) // 3
    at = p["addr"] + 4 * (4 + 2 * chans + int(rng.integers(chans)))
    image[at:at + 4] = int(rng.integers(-40, 41)).to_bytes(4, "little", signed=True)
    return bytes(image)


@pytest.mark.parametrize("name", sorted(BUNDLES))
def test_checker_and_machine_agree_on_mutated_programs(name):
    bundle = BUNDLES[name]
    rng = np.random.default_rng(sorted(BUNDLES).index(name))
    outcomes = {"stops": 0, "runs": 0, "undecided": 0, "shift": 0}
    for trial in range(150):
        program = list(bundle.program)
        for _ in range(1 + rng.integers(2)):
            i = int(rng.integers(len(program)))
            new = _mutate(program[i], rng)
            if new is None:
                del program[i]
            else:
                program[i] = new
        image = _mutate_shift(bundle, rng) if rng.random() < 0.25 else None
        findings = _static(bundle, program, image)
        ff = first_fault(findings)
        undecided = [f for f in findings if f.kind == "hazard" and "cannot be checked" in f.message
                     and (ff is None or f.index < ff)]
        if undecided:
            outcomes["undecided"] += 1
            continue
        got = _machine_stops_at(bundle, program, image)
        assert got == ff, (f"trial {trial}: machine stops at {got}, checker says {ff}:\n"
                           + "\n".join(map(str, findings)))
        outcomes["stops" if got is not None else "runs"] += 1
        outcomes["shift"] += any(f.kind == "fault" and "shift" in f.message and f.index == got for f in findings)
    assert outcomes["stops"] >= 30 and outcomes["runs"] >= 10, outcomes
    if bundle.fmt.name == "I8":
        assert outcomes["shift"] >= 3, outcomes          # the data-dependent fault is exercised


def test_hazards_the_machine_does_not_see():
    bundle = BUNDLES["resnet_i8_pe32"]
    layers = bundle.meta["layers"]
    prog = list(bundle.program)
    # write layer 2's output over layer 1's output, which layer 2 still reads
    k = layers[2]["instructions"][1]
    prog[k] = prog[k].replace(dst=layers[1]["output"]["addr"])
    hazards = [str(f) for f in check_bundle(Bundle(prog, bundle.frame, bundle.filter, bundle.meta))]
    assert any("overlaps" in h and "still live" in h and f"instruction {k}" in h for h in hazards), hazards
    assert any("writes" in h and "but layer" in h for h in hazards), hazards
    # code after END, and reading frame memory nothing wrote
    prog = list(bundle.program)
    prog.insert(3, Instruction(Op.END))
    assert any("after END never run" in str(f) for f in check_bundle(Bundle(prog, bundle.frame, bundle.filter, bundle.meta)))
    prog = list(bundle.program)
    prog[0] = prog[0].replace(src=bundle.meta["frame_bytes"] - 4096)
    found = [str(f) for f in _static(bundle, prog)]
    assert any("neither the image nor an earlier instruction wrote" in f for f in found), found


def test_profile_violations_are_reported():
    bundle = BUNDLES["alexnet_i8"]                # compiled for an unlimited chip
    from dtpu.isro.profile import load
    prof = load()
    meta = json.loads(json.dumps(bundle.meta))
    meta["profile"] = {**prof.to_dict(), "program_bytes": 256, "formats": ["f32"], "sha256": ""}
    meta["pe"] = None
    found = [str(f) for f in check_bundle(Bundle(bundle.program, bundle.frame, bundle.filter, meta))]
    assert any("instruction memory" in f for f in found)
    assert any("format i8" in f for f in found)
    assert any("compiled for pe=None" in f for f in found)


def test_cli_check(tmp_path, capsys):
    out = tmp_path / "b"
    BUNDLES["resnet_i8_pe32"].save(out)
    assert cli.main(["check", str(out)]) == 0
    assert "0 faults, 0 hazards, 0 profile violations -- ok" in capsys.readouterr().out
    from dtpu.isro.profile import DEFAULT_PATH
    small = {**json.loads(DEFAULT_PATH.read_text()), "name": "small", "pe": 16, "frame_bytes": 4096}
    (tmp_path / "small.json").write_text(json.dumps(small))
    assert cli.main(["check", str(out), "--chip", str(tmp_path / "small.json")]) == 1
    text = capsys.readouterr().out
    assert "frame memory needs" in text and "small has 4,096 B" in text and "compiled for pe=32, small has 16" in text
