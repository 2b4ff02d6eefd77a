"""Issue 27.4: dtpu.so's C sources and the golden model's C kernels cross-compile for the PYNQ-Z2's
CPU (armv7l hard-float, NEON, Cortex-A9) against CPython 3.10's headers, warnings as errors
(delegate/cross.py, ziglang from PyPI). What was built is read back with Python's own ELF parsing."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cross():
    spec = importlib.util.spec_from_file_location("dtpu_delegate_cross", ROOT / "delegate" / "cross.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    pytest.importorskip("ziglang", reason="the cross-build's toolchain: pip install ziglang (the dev "
                                          "extra installs it)")
    cross = _cross()
    return cross, cross.cross_build(tmp_path_factory.mktemp("armv7l"))


@pytest.mark.parametrize("name", ["dtpu.so", "kernels.so"])
def test_the_board_libraries_are_armv7l_eabi5_hard_float_with_neon(built, name):
    cross, out = built
    s = cross.elf_summary(out[name])
    assert (s["class"], s["little_endian"], s["type"], s["machine"]) == (32, True, 3, cross.EM_ARM)
    assert s["eabi_version"] == 5 and s["hard_float"]        # e_flags: EABI5, hard-float
    assert s["vfp_args"] == 1                                # arguments in VFP registers
    assert s["cpu_name"].lower() == "cortex-a9" and s["cpu_arch"] == cross.CPU_ARCH_V7
    assert s["neon"] >= 1                                    # Advanced SIMD (NEON) allowed


def test_dtpu_so_exports_the_tflite_plugin_entry_points(built):
    cross, out = built
    exports = cross.elf_summary(out["dtpu.so"])["exports"]
    assert {"tflite_plugin_create_delegate", "tflite_plugin_destroy_delegate"} <= set(exports)
    header = (ROOT / "pylib" / "dtpu" / "hw" / "kernels.h").read_text()
    entries = set(re.findall(r"\b(dtpu_\w+)\s*\(", header))
    assert entries and entries <= set(cross.elf_summary(out["kernels.so"])["exports"])


def test_python_3_10_headers_with_the_targets_type_sizes(built):
    """pyconfig.h is the host 3.10's with the armv7l answers: 32-bit pointers, long, size_t and
    time_t (glibc 2.35 on armhf), no x86 assembly, no 128-bit integers."""
    cross, out = built
    assert (Path(out["python_include"]) / "Python.h").is_file()
    assert "python3.10" in str(out["python_include"])
    changed = out["pyconfig"]
    for name in ("SIZEOF_VOID_P", "SIZEOF_LONG", "SIZEOF_SIZE_T", "SIZEOF_TIME_T", "ALIGNOF_LONG"):
        assert changed[name][1] == 4, (name, changed.get(name))
    for name in ("HAVE_GCC_ASM_FOR_X87", "HAVE_GCC_UINT128_T"):
        assert changed[name][1] is None
    assert changed["HAVE_LARGEFILE_SUPPORT"][1] == 1          # 64-bit off_t over a 32-bit long


def test_the_probes_tell_the_targets_apart(tmp_path):
    """The feature probes answer per target (x86-64's va_list is an array, its compiler has
    __uint128_t; armv7l's has neither), and the ELF reader refuses what is not ARM."""
    pytest.importorskip("ziglang", reason="pip install ziglang")
    cross = _cross()
    arm = {k: cross.probe_feature(tmp_path, v) for k, v in cross.FEATURE_PROBES.items()}
    cross.TARGET, cross.CPU = "x86_64-linux-gnu.2.35", "x86_64"
    x86 = {k: cross.probe_feature(tmp_path, v) for k, v in cross.FEATURE_PROBES.items()}
    assert arm == {"HAVE_GCC_UINT128_T": False, "VA_LIST_IS_ARRAY": False}
    assert x86 == {"HAVE_GCC_UINT128_T": True, "VA_LIST_IS_ARRAY": True}
    native = Path("/proc/self/exe").resolve()
    assert cross.elf_summary(native)["class"] == 64 and "machine" not in cross.elf_summary(native)
