"""dtpu.so: building, locating, rebuilding when stale, and what it exports."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.delegate_util import dtpu_so  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]


def test_delegate_path_is_built_and_current(dtpu_so):
    import dtpu
    from dtpu.delegate import builder_module

    path = Path(dtpu_so)
    assert path.name == "dtpu.so" and path.is_file()
    assert dtpu.delegate_path() == str(path)
    builder = builder_module()
    assert builder.is_current(path.parent, ROOT / "pylib")
    stamp = json.loads((path.parent / "dtpu.so.json").read_text())
    assert stamp["python"] == sys.version.split()[0]


def test_exports_only_the_plugin_entry_points(dtpu_so):
    lib = ctypes.CDLL(dtpu_so)
    assert lib.tflite_plugin_create_delegate and lib.tflite_plugin_destroy_delegate
    for hidden in ("dtpu_now_ns", "dtpu_kernel_set_io", "dtpu_report_error"):
        with pytest.raises(AttributeError):
            getattr(lib, hidden)


def test_cli_build_into_a_fresh_directory_and_staleness(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "pylib"))
    out = subprocess.run([sys.executable, "-m", "dtpu.cli", "build", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    built = Path(out.stdout.strip())
    assert built == tmp_path / "dtpu.so" and built.is_file()

    from dtpu.delegate import builder_module

    builder = builder_module()
    assert builder.is_current(tmp_path, ROOT / "pylib")
    stamp = tmp_path / "dtpu.so.json"
    key = json.loads(stamp.read_text())
    key["sources_sha256"] = "0" * 64          # as if dtpu_delegate.c had changed
    stamp.write_text(json.dumps(key))
    assert not builder.is_current(tmp_path, ROOT / "pylib")
    again = builder.build(tmp_path, pylib=ROOT / "pylib")
    assert builder.is_current(tmp_path, ROOT / "pylib") and again == built


def test_cli_help_lists_build():
    from dtpu import cli

    text = cli.parser().format_help()
    assert "build" in text and "path" in text
    assert cli.main([]) == 2


def test_abi_cdef_has_no_preprocessor_lines():
    from dtpu.delegate import builder_module

    cdef = builder_module().abi_cdef()
    assert "#" not in cdef and "TfLiteRegistration" in cdef


def test_glue_declarations_are_written_once():
    """dtpu_delegate.c and cffi read the same dtpu_glue.h: no struct of the glue is declared in
    the C file or in build.py, and what cffi is given parses as plain declarations."""
    from dtpu.delegate import builder_module

    builder = builder_module()
    cdef = builder.glue_cdef()
    assert "#" not in cdef and "typedef struct dtpu_kernel" in cdef and 'extern "Python"' in cdef
    assert "static" not in cdef
    c_text = (ROOT / "delegate" / "dtpu_delegate.c").read_text()
    assert '#include "dtpu_glue.h"' in c_text
    for name in ("dtpu_kernel", "dtpu_abi_facts"):
        assert f"typedef struct {name}" not in c_text
        assert f"typedef struct {name}" not in (ROOT / "delegate" / "build.py").read_text()


def test_library_finds_the_python_package_it_was_built_from(dtpu_so, tmp_path):
    """A host that cannot import dtpu (no PYTHONPATH, not installed) still gets the Python side:
    the init code falls back to the pylib/ path recorded at build time."""
    script = (
        "import sys, numpy as np\n"
        "from dtpu_runtime_probe import Interpreter, load_delegate\n"
        f"d = load_delegate({dtpu_so!r}, {{'backend': 'reference'}})\n"
        f"it = Interpreter(model_path={str(ROOT / 'tests/data/delegate/split_int16x8.tflite')!r},"
        " experimental_delegates=[d])\n"
        "it.allocate_tensors(); it.invoke()\n"
        "print('ops', [o['op_name'] for o in it._get_ops_details()].count('DELEGATE'))\n"
        "print('dtpu from', sys.modules['dtpu'].__file__)\n"
    )
    from dtpu import tflite

    probe = tmp_path / "dtpu_runtime_probe.py"
    probe.write_text(f"from {tflite.MODULES[tflite.RUNTIME]} import Interpreter, load_delegate\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ops 2" in out.stdout
    assert str(ROOT / "pylib") in out.stdout or "site-packages" in out.stdout
