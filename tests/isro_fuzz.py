"""The seeded damage the ISRO fuzz tests apply to a model file, and the check they make of
`dtpu isro compile` / `run` on it: written once for the .h5 fixtures, the Keras files with the
newer layers and the .tflite operator nets (each test keeps its own seed and sources)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dtpu.isro import cli


def damage(src: bytes, rng: np.random.Generator) -> bytes:
    """Random bytes, a cut, or a 32-bit word written anywhere (one of the three, by `rng`)."""
    data = bytearray(src)
    kind = rng.integers(3)
    if kind == 0:
        for at in rng.integers(0, len(data), int(rng.integers(1, 20))):
            data[at] = int(rng.integers(256))
    elif kind == 1:
        data = data[:int(rng.integers(1, len(data)))]
    else:
        at = int(rng.integers(0, len(data) - 8))
        data[at:at + 4] = int(rng.integers(0, 2 ** 32)).to_bytes(4, "little")
    return bytes(data)


def compile_and_run(path: Path, out: Path, capsys) -> tuple[int, str]:
    """Exit status of compile (then run, if it compiled) and what they printed on stderr."""
    rc = cli.main(["compile", str(path), "-o", str(out)])
    if rc == 0:
        rc = cli.main(["run", str(out), "--no-dump"])
    return rc, capsys.readouterr().err


def one_clean_line(rc: int, err: str) -> bool:
    """A damaged file compiles and runs, or is refused with exit 2 and one line, never a crash."""
    return rc in (0, 2) and len(err.splitlines()) <= 1 and "internal error" not in err
