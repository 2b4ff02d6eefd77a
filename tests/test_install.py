"""`dtpu install` / `dtpu uninstall`: after an install, a new process loads the delegate by its bare
name, the line every TFLite delegate user types, with nothing more than the environment line the
command prints (a scratch --prefix here: the default directory is the system's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.delegate_util import dtpu_so  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "zoo" / "mobilenet_like__int8.tflite"


def _dtpu(*args, env=None):
    return subprocess.run([sys.executable, "-m", "dtpu.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_bare_name_loads_after_install(tmp_path, dtpu_so):
    prefix = tmp_path / "lib"
    proc = _dtpu("install", "--prefix", str(prefix))
    assert proc.returncode == 0, proc.stderr
    assert (prefix / "dtpu.so").is_file() and (prefix / "dtpu.so.json").is_file()
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("export LD_LIBRARY_PATH=") and str(prefix) in line
    record = json.loads((prefix / "dtpu.so.json").read_text())
    assert record["installed_by"] == "dtpu install" and record["python"] == sys.version.split()[0]
    # a new process, in another directory, with only the printed line applied
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(prefix) + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.pop("DTPU_DELEGATE_LIB", None)
    code = textwrap.dedent(f"""
        import numpy as np
        from dtpu.tflite import Interpreter, load_delegate
        interpreter = Interpreter({str(MODEL)!r}, experimental_delegates=[load_delegate("dtpu.so")])
        interpreter.allocate_tensors()
        x = interpreter.get_input_details()[0]
        interpreter.set_tensor(x["index"], np.zeros(x["shape"], x["dtype"]))
        interpreter.invoke()
        import dtpu
        report = dtpu.last_report()
        print("nodes", len(report.nodes), "backend", report.backend)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "nodes 15 backend model" in run.stdout   # 13 convolutions, MEAN (vector unit), FC
    # and without the line the loader does not find it there (the test is not vacuous)
    env.pop("LD_LIBRARY_PATH")
    miss = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('dtpu.so')"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert miss.returncode != 0 or any((d / "dtpu.so").exists() for d in _default_dirs())


def _default_dirs():
    from dtpu.install import loader_default_dirs

    return loader_default_dirs()


def test_refuses_a_library_for_another_python_and_foreign_files(tmp_path, dtpu_so):
    prefix = tmp_path / "lib"
    assert _dtpu("install", "--prefix", str(prefix)).returncode == 0
    rec = prefix / "dtpu.so.json"
    record = json.loads(rec.read_text())
    rec.write_text(json.dumps({**record, "python": "3.9.18", "soabi": "cpython-39-x86_64-linux-gnu"}))
    proc = _dtpu("install", "--prefix", str(prefix))
    assert proc.returncode == 2 and "built for Python 3.9.18" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _dtpu("install", "--prefix", str(prefix), "--force").returncode == 0
    assert json.loads(rec.read_text())["python"] == sys.version.split()[0]
    # uninstall removes exactly what it installed
    proc = _dtpu("uninstall", "--prefix", str(prefix))
    assert proc.returncode == 0 and not (prefix / "dtpu.so").exists() and not rec.exists()
    assert _dtpu("uninstall", "--prefix", str(prefix)).returncode == 2
    # a dtpu.so nobody recorded is neither overwritten nor removed
    (prefix / "dtpu.so").write_bytes(b"someone else's library")
    proc = _dtpu("install", "--prefix", str(prefix))
    assert proc.returncode == 2 and "not installed by `dtpu install`" in proc.stderr
    assert _dtpu("uninstall", "--prefix", str(prefix)).returncode == 2
    assert (prefix / "dtpu.so").read_bytes() == b"someone else's library"


def test_default_directory_is_searched_by_the_loader():
    from dtpu.install import default_dir, loader_default_dirs

    d = default_dir()
    assert d in loader_default_dirs() and d.is_dir()
    assert str(d) != "/usr/local/lib"   # ldconfig caches only lib*.so*: a bare dtpu.so there is not found


def test_unwritable_target_is_an_error_naming_the_way_out(tmp_path, dtpu_so, monkeypatch):
    """As root (CI) nothing is unwritable: the check is exercised through os.access."""
    from dtpu import install as inst

    real = os.access
    monkeypatch.setattr(inst.os, "access", lambda p, mode: False if Path(p) == tmp_path else real(p, mode))
    with pytest.raises(inst.InstallError, match="not writable .*--prefix"):
        inst.install(tmp_path)
    assert not (tmp_path / "dtpu.so").exists()
