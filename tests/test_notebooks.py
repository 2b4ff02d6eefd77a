"""The notebooks in notebooks/: committed with the outputs of a run (notebooks/execute.py: the
emulated PYNQ-Z2 for the board notebooks, simulation for the others; the run's environment is in
the notebook's metadata and the committed outputs must show what that run shows), and executed
again here (nbclient) from top to bottom with the environments a user would set, one of them the
user's own model (01_quickstart's MODEL). A notebook fails its test when any cell raises, and the
notebooks assert what they show (bit-exact outputs, verification passed).

04_rtl builds the Verilog core with tracing on first use (a few minutes; cached in sim_build/), so
its run is marked slow (`make test-all`)."""
from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from tests.delegate_util import dtpu_so  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ALL = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
_spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOKS / "execute.py")
EXECUTE = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(EXECUTE)
#: a model the zoo does not hold, given by path as a user gives theirs
OWN_MODEL = ROOT / "tests" / "isro" / "resnet8_int8.tflite"

ISRO_EXPECTED = ["verification passed: 17 layers", "frame memory (", "static check: 0 findings",
                 "resnet8_int8.tflite: 17 layers, exact: 14, not compared: 3, ok: 17", "SECDED on"]
# (notebook, environment, what the executed notebook must print)
RUNS = [
    ("01_quickstart.ipynb", {"DTPU_BACKEND": "model"}, ["delegated == CPU: True", "dtpu report: backend=model"]),
    ("01_quickstart.ipynb", {"DTPU_BACKEND": "pynq", "DTPU_PYNQ_EMULATE": "1"}, ["delegated == CPU: True",
                                                                               "dtpu report: backend=pynq",
                                                                               "on the PYNQ-Z2 (estimate"]),
    ("01_quickstart.ipynb", {"DTPU_BACKEND": "model", "DTPU_MODEL": str(OWN_MODEL)},
     ["model: resnet8_int8.tflite", "delegated == CPU: True", "on the PYNQ-Z2 (estimate"]),
    ("02_board.ipynb", {"DTPU_BACKEND": "pynq", "DTPU_PYNQ_EMULATE": "1.2", "DTPU_INVOKES": "12"},
     ["(EMULATED board)", "XADC: die temperature", "12 inferences, 12 bit-exact with the CPU\n", "power method(s) in this run: estimated",
      "path: jobs"]),
    ("02_board.ipynb", {"DTPU_BACKEND": "model", "DTPU_INVOKES": "3"},
     ["no board in this run", "3 inferences, 3 bit-exact with the CPU\n", "path: lists",
      "per partition: 5 reads, 3 writes, 1 doorbell"]),
    ("02_board.ipynb", {"DTPU_BACKEND": "pynq", "DTPU_PYNQ_EMULATE": "2", "DTPU_INVOKES": "3"},
     ["(EMULATED board)", "version 2.1", "3 inferences, 3 bit-exact with the CPU\n", "path: lists",
      "0 DMA starts, 0 host transforms", "per partition: 5 reads, 3 writes, 1 doorbell"]),
    ("03_inside.ipynb", {"DTPU_BACKEND": "model"}, ["MAC-weighted utilization", "latency (ms) of the layers",
                                                     # the board builds are read and plotted
                                                     "builds plotted: 8x4 int8/uint8/int16, 8x8 int8/uint8/int16, "
                                                     "8x16 int8/uint8/int16, 8x8 all precisions\n"]),
    ("03_inside.ipynb", {"DTPU_BACKEND": "pynq", "DTPU_PYNQ_EMULATE": "1.2", "DTPU_MAX_LAYERS": "6"},
     ["6 layers:"]),
    pytest.param("04_rtl.ipynb", {}, ["result words equal to the golden model's: True", "cycles in GEMM"],
                 marks=pytest.mark.slow),
    # the committed run (80 bit-flip trials a region) in the slow set; the default run takes 8:
    # the injection's statistics are tests/test_isro_hil.py's, here the cells have to run and print
    pytest.param("05_isro.ipynb", {}, ISRO_EXPECTED, marks=pytest.mark.slow),
    ("05_isro.ipynb", {"DTPU_ISRO_TRIALS": "8"}, ISRO_EXPECTED),
]
ENV_KEYS = EXECUTE.ENV_KEYS


def _load(name: str) -> dict:
    return json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))


def test_every_notebook_is_tested():
    assert ALL == sorted({run.values[0] if hasattr(run, "values") else run[0] for run in RUNS})
    assert [n[:2] for n in ALL] == ["01", "02", "03", "04", "05"]


def _text(nb: dict) -> tuple[str, int]:
    """The notebook's text outputs joined, and how many figures it has."""
    text, images = [], 0
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text.append("".join(out["text"]))
            elif "data" in out:
                text.append("".join(out["data"].get("text/plain", "")))
                images += "image/png" in out["data"]
    return "".join(text), images


@pytest.mark.parametrize("name", ALL)
def test_committed_with_the_outputs_of_its_run(name):
    nb = _load(name)
    assert nb["nbformat"] == 4
    env = nb["metadata"].get("dtpu", {}).get("run_env")
    assert env == EXECUTE.COMMITTED[name], (f"{name} was not run with notebooks/execute.py's "
                                            f"environment {EXECUTE.COMMITTED[name]}: {env}")
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert isinstance(cell.get("execution_count"), int), f"{name} cell {i} was not run"
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            assert not errors, f"{name} cell {i} raised: {errors[0].get('ename')}"
        assert "attachments" not in cell
    assert set(nb["metadata"]) <= {"kernelspec", "language_info", "dtpu"}, nb["metadata"].keys()
    # the outputs are what that run shows (the same checks as its execution below)
    expected = [run for run in RUNS
                if (run.values if hasattr(run, "values") else run)[:2] == (name, env)]
    assert expected, f"no run of {name} with {env} in RUNS to check its outputs against"
    text, images = _text(nb)
    for needle in (expected[0].values if hasattr(expected[0], "values") else expected[0])[2]:
        assert needle in text, f"{name}: committed outputs lack {needle!r}: run notebooks/execute.py"
    assert images >= 1, f"{name}: committed without its figure"
    leaked = re.findall(r"(/[\w.-]+)+/pylib/dtpu", text)
    assert not leaked, f"{name}: outputs name a checkout's path ({leaked[0]}), not <repo>"


@pytest.mark.parametrize("name", [n for n in ALL if n != "04_rtl.ipynb"])
def test_backend_is_one_variable(name):
    """One parameter cell, near the top, reads DTPU_BACKEND (or the notebook has no backend)."""
    sources = ["".join(c["source"]) for c in _load(name)["cells"] if c["cell_type"] == "code"]
    uses = [i for i, s in enumerate(sources) if "environ.get(\"DTPU_BACKEND\")" in s]
    assert uses in ([0], []), uses
    assert sources[0].startswith("# Parameters")


def _execute(name: str, env: dict[str, str], monkeypatch) -> str:
    import nbformat
    from nbclient import NotebookClient

    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    text, images = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text.append(out["text"])
            elif "data" in out:
                text.append(out["data"].get("text/plain", ""))
                images += "image/png" in out["data"]
    return "".join(text), images


@pytest.mark.parametrize("name,env,expected", RUNS)
def test_notebook_executes(name, env, expected, monkeypatch, dtpu_so):
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    text, images = _execute(name, env, monkeypatch)
    for needle in expected:
        assert needle in text, f"{name} {env}: {needle!r} not in its output:\n{text[-3000:]}"
    assert images >= 1, f"{name} drew no figure"
