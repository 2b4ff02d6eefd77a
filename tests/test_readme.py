"""README.md: the set-up block it opens with, its Python example (run as written), the option table
(equal to dtpu.delegate.options.markdown_table(), as is docs/delegate.md's), and the names it
promises (notebooks, subcommands, documents) exist."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dtpu.delegate.options import TABLE, markdown_table
from tests.delegate_util import dtpu_so  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

SETUP_BLOCK = """# DTPU

```sh
make demo   # creates .venv, builds dtpu.so, runs a zoo model through the delegate and prints its report
make test   # creates .venv, runs the test suite (the default subset; `make test-all` adds the slow RTL sweeps)
```
"""


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_readme_starts_with_the_two_setup_commands():
    assert _text().startswith(SETUP_BLOCK)
    commands = [line.split("#")[0].strip() for line in _blocks(_text(), "sh")[0].splitlines()]
    assert commands == ["make demo", "make test"]


def test_readme_mentions_the_other_runs():
    text = _text()
    for needle in ("make test-litert", "make test-all", "hw/overlays", "Vivado", "libpython",
                   "DTPU_PYNQ_EMULATE=1"):
        assert needle in text, needle


@pytest.mark.parametrize("doc", ["README.md", "docs/delegate.md"])
def test_option_table_is_generated_from_options_py(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    table = markdown_table()
    assert table in text, (f"{doc}'s option table differs from dtpu.delegate.options.TABLE; paste "
                           f"the output of `python -c 'from dtpu.delegate.options import "
                           f"markdown_table as t; print(t())'`")
    assert text.count("| option | accepted values | default | meaning |") == 1


def test_markdown_table_has_one_row_per_option():
    rows = markdown_table().splitlines()[2:]
    assert [row.split("|")[1].strip().strip("`") for row in rows] == list(TABLE)
    assert all(row.count("|") == 5 for row in rows)  # no '|' inside a cell


def test_python_example_runs_as_written(dtpu_so, tmp_path):
    blocks = _blocks(_section(_text(), "Python"), "python")
    assert len(blocks) == 1
    code = blocks[0]
    assert "load_delegate" in code and len(code.strip().splitlines()) <= 12
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "pylib"))
    env.pop("DTPU_PYNQ_EMULATE", None)
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "dtpu report: backend=model" in proc.stdout
    assert re.search(r"^\s*0\s+conv2d", proc.stdout, flags=re.M), proc.stdout


def test_backends_table_names_every_registered_backend():
    from dtpu import backends

    section = _section(_text(), "What DTPU is")
    listed = re.findall(r"^\| `(\w+)`", section, flags=re.M)
    assert set(backends.names()) - {"null"} <= set(listed)


def test_notebooks_listed_exist():
    section = _section(_text(), "On the board")
    listed = re.findall(r"`(\d\d_\w+\.ipynb)`", section)
    assert listed and sorted(listed) == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_commands_listed_are_subcommands():
    from dtpu.cli import parser

    section = _section(_text(), "Command line")
    commands = set()
    for line in _blocks(section, "sh")[0].splitlines():
        words = line.split("#")[0].split()
        if words and words[0] == "dtpu":
            commands.update(w for w in words[1].split("|"))
    sub = next(a for a in parser()._actions if a.dest == "command")
    assert commands and commands <= set(sub.choices), commands - set(sub.choices)


def test_linked_files_exist():
    for link in re.findall(r"\]\(([^)#]+)\)", _text()):
        if "://" not in link:
            assert (ROOT / link).exists(), link
