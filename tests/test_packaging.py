"""The board set-up path (docs/board.md): the package builds as an sdist and a wheel, installs
with pip into a fresh environment, and from there the `dtpu` entry point builds dtpu.so (from
the C sources the package carries), installs it with `dtpu install --prefix`, and runs a model
through it. The third-party packages the fresh environment needs (numpy, cffi, tflite-runtime,
...) are taken from this interpreter's environment by a .pth line, so the test needs no download
but the build backend's (setuptools, as pip would fetch it)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


#: no PYTHONPATH (a checkout's pylib, where a build leaves dtpu.egg-info, would make pip take
#: the package for installed), no DTPU_ settings, no active virtual environment
ENV = {k: v for k, v in os.environ.items()
       if not k.startswith(("DTPU_", "PYTHONPATH", "VIRTUAL_ENV"))}


def _run(cmd, cwd, env=ENV, timeout=600):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_sdist_and_wheel_install_and_run_from_a_fresh_environment(tmp_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", dist, ROOT], cwd=tmp_path)
    wheel = next(dist.glob("dtpu-*.whl"))
    assert next(dist.glob("dtpu-*.tar.gz"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("dtpu/delegate/csrc/dtpu_delegate.c", "dtpu/delegate/csrc/build.py",
                   "dtpu/hw/kernels.c", "dtpu/hw/contract.json"):
        assert needed in names, needed
    assert not [n for n in names if "/_build/" in n or n.endswith(".so")], "build products packed"

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    py = venv / "bin" / "python"
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path).stdout.strip())
    _run([py, "-m", "pip", "install", "--no-deps", "--no-index", wheel], cwd=tmp_path)
    # then the dependencies from this environment (after the install: pip would take this
    # environment's dtpu for the one to install); its dtpu, an editable install, is not seen,
    # as a .pth line adds a directory without processing that directory's .pth files
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    env = ENV
    work = tmp_path / "elsewhere"      # no checkout in sight: everything comes from the package
    work.mkdir()
    dtpu = venv / "bin" / "dtpu"
    where = _run([py, "-c", "import dtpu, dtpu.delegate as d; print(dtpu.__file__); "
                  "print(d.source_dir())"], cwd=work, env=env).stdout.split()
    assert where[0].startswith(str(site)) and where[1] == str(site / "dtpu/delegate/csrc")
    assert "estimate" in _run([dtpu, "--help"], cwd=work, env=env).stdout
    built = Path(_run([dtpu, "build"], cwd=work, env=env).stdout.strip().splitlines()[-1])
    assert built.is_file() and built.name == "dtpu.so"
    prefix = tmp_path / "lib"
    _run([dtpu, "install", "--prefix", prefix], cwd=work, env=env)
    assert (prefix / "dtpu.so").is_file() and (prefix / "dtpu.so.json").is_file()
    model = ROOT / "tests/models/zoo/mobilenet_like__int8.tflite"
    out = _run([dtpu, "run", model, "--backend", "model", "--invokes", "2"], cwd=work, env=env).stdout
    assert "estimated whole invoke on the PYNQ-Z2" in out


def test_readme_and_pyproject_name_the_same_python_versions():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["requires-python"] == ">=3.10"
    readme = (ROOT / "README.md").read_text()
    assert "Python 3.10 or newer" in readme and "only Python 3.11" not in readme
    board = (ROOT / "docs" / "board.md").read_text()
    assert "Python 3.10" in board      # the PYNQ-Z2 image's (PYNQ v3.0 / v3.1, Ubuntu 22.04)


def test_the_package_carries_every_source_dtpu_so_is_built_from():
    """An installed package builds dtpu.so from dtpu/delegate/csrc/ (setup.py copies it there,
    MANIFEST.in puts it in the sdist): every file build.py compiles or reads must be in both, or
    `dtpu build` on the board fails where a checkout works (dtpu_glue.h was missing from both)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("dtpu_delegate_build", ROOT / "delegate" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    setup = (ROOT / "setup.py").read_text()
    shipped = set(re.search(r"DELEGATE_SOURCES = \(([^)]*)\)", setup).group(1).replace('"', "")
                  .replace(" ", "").split(","))
    manifest = (ROOT / "MANIFEST.in").read_text()
    needed = set(build.SOURCES) | {"dtpu_delegate.c"}
    assert needed <= shipped, needed - shipped
    assert all(f"delegate/{name}" in manifest for name in needed)
