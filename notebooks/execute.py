#!/usr/bin/env python3
"""Execute the notebooks and commit them with their outputs: each with the environment of
:data:`COMMITTED` (the emulated board where a notebook talks to one), recorded in the notebook's
metadata (``dtpu.run_env``) so that tests/test_notebooks.py can check the outputs are those of
that run. The checkout's absolute path in outputs is written as ``<repo>``.

    PYTHONPATH=pylib python notebooks/execute.py [NAME ...]      # all of them by default
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: notebook -> the environment of its committed run: the emulated PYNQ-Z2 (the real pynq
#: package over the golden model) for the board notebooks, simulation for the others
COMMITTED = {
    "01_quickstart.ipynb": {"DTPU_BACKEND": "pynq", "DTPU_PYNQ_EMULATE": "1"},
    "02_board.ipynb": {"DTPU_BACKEND": "pynq", "DTPU_PYNQ_EMULATE": "2", "DTPU_INVOKES": "3"},
    "03_inside.ipynb": {"DTPU_BACKEND": "pynq", "DTPU_PYNQ_EMULATE": "1.2", "DTPU_MAX_LAYERS": "6"},
    "04_rtl.ipynb": {},
    "05_isro.ipynb": {},
}
#: what a run's environment may set (everything else of these is cleared first)
ENV_KEYS = ("DTPU_BACKEND", "DTPU_PYNQ_EMULATE", "DTPU_BITSTREAM", "DTPU_INVOKES", "DTPU_MAX_LAYERS",
            "DTPU_MODEL", "DTPU_ISRO_TRIALS")


def scrub(nb) -> None:
    """Outputs name the checkout as <repo>, not the path of the machine that ran them."""
    root = str(ROOT)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                out["text"] = out["text"].replace(root, "<repo>")
            for key, value in out.get("data", {}).items():
                if key.startswith("text/") and isinstance(value, str):
                    out["data"][key] = value.replace(root, "<repo>")


def execute(name: str, env: dict[str, str], timeout: int = 1200):
    """The notebook `name` executed with `env` (the process environment is changed for it)."""
    import nbformat
    from nbclient import NotebookClient

    for key in ENV_KEYS:
        os.environ.pop(key, None)
    os.environ.update(env)
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    nb = nbformat.read(HERE / name, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    return nb


def main(argv: list[str] | None = None) -> int:
    import nbformat

    names = (argv if argv is not None else sys.argv[1:]) or list(COMMITTED)
    for name in names:
        if name not in COMMITTED:
            print(f"unknown notebook {name!r}; expected one of {', '.join(COMMITTED)}", file=sys.stderr)
            return 2
        nb = execute(name, COMMITTED[name])
        scrub(nb)
        nb.metadata = {k: v for k, v in nb.metadata.items() if k in ("kernelspec", "language_info")}
        nb.metadata["dtpu"] = {"run_env": dict(COMMITTED[name])}
        nbformat.write(nb, HERE / name)
        print(f"{name}: executed with {COMMITTED[name] or 'the defaults'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
