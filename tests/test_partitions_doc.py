"""docs/partitions.md's table is docs/partitions.py's output (issue #25 item 4): the small
models' rows by default, the whole table in the slow set (the 224 models take ~25 s more)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.delegate_util import dtpu_so  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("dtpu_partitions_doc", ROOT / "docs" / "partitions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_small_models_rows_are_the_scripts(dtpu_so):
    script = _script()
    doc = script.DOC.read_text()
    for name in script.SMALL:
        assert script.row(name) + "\n" in doc, name


@pytest.mark.slow
def test_whole_table_is_the_scripts(dtpu_so):
    script = _script()
    assert script.main(["--check"]) == 0, "docs/partitions.md is stale: run docs/partitions.py"
