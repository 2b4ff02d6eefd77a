"""setuptools hook (the metadata is in pyproject.toml): the installed package carries the
delegate's C sources, so that `dtpu build` and `dtpu install` work from a wheel or an sdist
installed with pip, on the board as anywhere (dtpu.so is built on the machine that loads it,
against that machine's Python)."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: delegate/ of the checkout -> dtpu/delegate/csrc/ of the package (dtpu.delegate.source_dir)
DELEGATE_SOURCES = ("build.py", "dtpu_abi.h", "dtpu_glue.h", "dtpu_delegate.c", "dtpu_cpath.h", "dtpu_cpath.c")


class BuildPyWithDelegateSources(build_py):
    def run(self):
        super().run()
        if self.editable_mode:   # an editable install builds from the checkout's delegate/
            return
        dst = Path(self.build_lib) / "dtpu" / "delegate" / "csrc"
        dst.mkdir(parents=True, exist_ok=True)
        for name in DELEGATE_SOURCES:
            shutil.copyfile(HERE / "delegate" / name, dst / name)


setup(cmdclass={"build_py": BuildPyWithDelegateSources})
