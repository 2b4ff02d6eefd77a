"""The command line's rough edges (issue 28): `run --verify` with a model that is not there, `-v`
wherever the internal-error message says to rerun with it, help text without RST markup."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

import dtpu.cli
from dtpu.isro import cli, isa

FIXTURES = Path(__file__).resolve().parent / "isro"
COMMANDS = ("compile", "run", "check", "compare", "inject", "disasm", "asm")


@pytest.fixture
def dtpu_log_level():
    """-v raises the dtpu logger to INFO for the process; put it back for the other tests."""
    logger = logging.getLogger("dtpu")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("edges")
    model = d / "vgg_s_int8.tflite"
    shutil.copy(FIXTURES / "vgg_s_int8.tflite", model)
    assert cli.main(["compile", str(model), "-o", str(d / "b")]) == 0
    return d / "b", model


def _one_error(capsys, rc, *mentions):
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), (rc, err)
    for m in mentions:
        assert m in err, (m, err)


def test_verify_with_a_missing_model_names_it_and_writes_nothing(bundle, capsys, tmp_path):
    b, _ = bundle
    shutil.rmtree(b / "run", ignore_errors=True)
    rc = cli.main(["run", str(b), "--verify", str(tmp_path / "nonexistent.h5")])
    _one_error(capsys, rc, "nonexistent.h5", "given to --verify", "does not exist")
    assert not (b / "run").exists()


def test_verify_without_a_model_when_the_recorded_one_is_gone(bundle, capsys, tmp_path):
    b, model = bundle
    copy = tmp_path / "b"
    shutil.copytree(b, copy)
    hidden = model.with_suffix(".moved")
    model.rename(hidden)
    try:
        rc = cli.main(["run", str(copy), "--verify"])
    finally:
        hidden.rename(model)
    _one_error(capsys, rc, str(model), "recorded in meta.json", "--verify MODEL")
    assert not (copy / "run").exists()
    assert cli.main(["run", str(copy), "--verify", str(model), "--no-dump"]) == 0


@pytest.mark.parametrize("argv", [["-v", "isro", "disasm"], ["isro", "-v", "disasm"], ["isro", "disasm", "-v"]])
def test_v_is_accepted_where_the_internal_error_message_says(argv, bundle, capsys, caplog, monkeypatch,
                                                             dtpu_log_level):
    def broken(data):
        raise RuntimeError("a planted bug")
    monkeypatch.setattr(isa, "disassemble", broken)
    program = bundle[0] / "program.bin"
    logging.getLogger("dtpu").setLevel(logging.WARNING)     # -v itself must lower it to INFO
    rc = dtpu.cli.main(argv + [str(program)])
    err = capsys.readouterr().err
    assert rc == 3 and "internal error: RuntimeError: a planted bug" in err and "rerun with -v" not in err
    records = [r for r in caplog.records if r.exc_info and r.name == "dtpu.isro.cli"]
    assert records and "a planted bug" in str(records[0].exc_info[1])


def test_without_v_the_message_says_where_to_put_it(bundle, capsys, monkeypatch, dtpu_log_level):
    monkeypatch.setattr(isa, "disassemble", lambda data: 1 / 0)
    assert cli.main(["disasm", str(bundle[0] / "program.bin")]) == 3
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "rerun with -v" in err
    assert dtpu.cli.main(["isro", "disasm", str(bundle[0] / "program.bin"), "-v"]) == 3   # accepted there


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_is_plain_text(command, capsys):
    with pytest.raises(SystemExit) as done:
        dtpu.cli.main(["isro", "--help"] if command is None else ["isro", command, "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "usage: dtpu isro" in out
    assert "`" not in out, out
    if command is None:
        assert "dtpu isro compile | run | check" in out and "-v, --verbose" in out
