"""The arrays users hand the ISRO toolchain (inputs to run, calibration and held-out samples) as
.npy files: read without pickles, and refused with the file's name and what would be accepted
when missing, unreadable or not numbers, so a CLI error points at the file, not at numpy."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (its type's name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def read_npy(path: str | Path, what: str, expected: str,
             accepted: str = "float or integer arrays") -> np.ndarray:
    """The integer or float array in the .npy file `path`. `what` names the file in errors
    ("input", "calibration data"), `expected` describes the array wanted (when the file is
    missing), `accepted` the dtypes (when it holds something else)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist (expected {expected})")
    try:
        x = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{what} {path}: not a readable .npy array ({one_line(exc)}); write it "
                         f"with numpy.save") from None
    if not isinstance(x, np.ndarray) or x.dtype.kind not in "fiu":
        raise ValueError(f"{what} {path}: dtype {getattr(x, 'dtype', type(x).__name__)}; accepted: "
                         f"{accepted}")
    return x
