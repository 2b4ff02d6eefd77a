"""Cross-build dtpu.so's C sources and the golden model's C kernels for the PYNQ-Z2's CPU.

The board builds ``dtpu.so`` itself (``dtpu build`` with the board's gcc and Python, docs/board.md),
so nothing built here is shipped. What this proves, on any x86 machine and in the test suite, is
that the code the board will compile compiles there: for armv7l hard-float with NEON (the
Cortex-A9 of the Zynq-7020), 32-bit pointers and ``long``, against CPython 3.10 (the PYNQ v3.x
image's Python) and Ubuntu 22.04's glibc 2.35, with warnings as errors.

The toolchain is ``ziglang`` from PyPI (clang plus the glibc headers of every target, one pip
install): ``python -m ziglang cc -target arm-linux-gnueabihf.2.35 -mcpu=cortex_a9``.

Python's headers. ``dtpu.so`` is cffi's embedding mode, which uses the full (not the limited)
C API, so it needs the headers of the exact Python version. The CPython 3.10 headers (``Include/``
is the same on every architecture) come from a Python 3.10 installed on this machine (pyenv's on
the project's machines; ``--python-include`` or ``$DTPU_CROSS_PYTHON_INCLUDE`` names another).
The one architecture-dependent header, ``pyconfig.h`` (what ``configure`` found on the build
machine), is derived from that installation's for the target: every ``SIZEOF_*``/``ALIGNOF_*``
value is replaced by what the cross compiler says for armv7l (probed, not typed in), the
features that follow from them (``HAVE_LARGEFILE_SUPPORT``, ``HAVE_GCC_UINT128_T``,
``VA_LIST_IS_ARRAY``) are probed too, and the x86-only inline-assembly features
(``HAVE_GCC_ASM_FOR_X87``, ``HAVE_GCC_ASM_FOR_X64``) are removed. Which libc functions exist is
left as configure found it: glibc's on both sides. Ubuntu's own armhf ``pyconfig.h`` is not
available here (Debian 12 packages no Python 3.10).

The result is a shared object with Python's symbols left undefined (on the board they come from
``libpython3.10.so``, which is not here to link against). :func:`elf_summary` reads what was
built with Python's own parsing: ELF class and machine, the EABI version and hard-float flag of
``e_flags``, the ARM build attributes (CPU, NEON, VFP argument passing) and the exported symbols.

Usage::

    python delegate/cross.py [--out DIR] [--python-include DIR]
"""
from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYLIB = ROOT / "pylib"

#: the PYNQ-Z2 image: Ubuntu 22.04 (glibc 2.35) for armhf; the Zynq-7020's Cortex-A9 (NEON, VFPv3)
TARGET = "arm-linux-gnueabihf.2.35"
CPU = "cortex_a9"
PYTHON_VERSION = "3.10"
INCLUDE_ENV = "DTPU_CROSS_PYTHON_INCLUDE"

#: pyconfig.h's size and alignment macros -> the C type each measures
SIZED_TYPES = {
    "DOUBLE": "double", "FLOAT": "float", "FPOS_T": "fpos_t", "INT": "int", "LONG": "long",
    "LONG_DOUBLE": "long double", "LONG_LONG": "long long", "OFF_T": "off_t", "PID_T": "pid_t",
    "PTHREAD_KEY_T": "pthread_key_t", "PTHREAD_T": "pthread_t", "SHORT": "short",
    "SIZE_T": "size_t", "TIME_T": "time_t", "UINTPTR_T": "uintptr_t", "VOID_P": "void *",
    "WCHAR_T": "wchar_t", "_BOOL": "_Bool",
}
#: features probed by whether a snippet compiles for the target
FEATURE_PROBES = {
    "HAVE_GCC_UINT128_T": "typedef __uint128_t probe_t;",
    # an array type can be subscripted; ARM's va_list is a struct, x86-64's an array
    "VA_LIST_IS_ARRAY": "typedef char probe_t[sizeof((*(va_list *)0)[0])];",
}
#: x86 inline assembly: never on ARM
X86_ONLY = ("HAVE_GCC_ASM_FOR_X87", "HAVE_GCC_ASM_FOR_X64")
PROBE_HEADERS = ("stdio.h", "stdint.h", "stddef.h", "stdarg.h", "time.h", "wchar.h", "pthread.h",
                 "sys/types.h")

# ELF and the ARM EABI (ELF for the Arm Architecture, "Build attributes")
EM_ARM = 40
EF_ARM_EABIMASK, EF_ARM_EABI_VER5, EF_ARM_ABI_FLOAT_HARD = 0xFF000000, 0x05000000, 0x400
SHT_DYNSYM, SHT_ARM_ATTRIBUTES = 11, 0x70000003
TAG_CPU_NAME, TAG_CPU_ARCH, TAG_FP_ARCH, TAG_ADVANCED_SIMD_ARCH, TAG_ABI_VFP_ARGS = 5, 6, 10, 12, 28
CPU_ARCH_V7 = 10


class CrossBuildError(RuntimeError):
    pass


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def zig_cc() -> list[str]:
    """The command of zig's C compiler (the ``ziglang`` package of this interpreter)."""
    if importlib.util.find_spec("ziglang") is None:
        raise CrossBuildError(f"the cross-build needs the ziglang package: {sys.executable} -m pip "
                              f"install ziglang")
    return [sys.executable, "-m", "ziglang", "cc"]


def target_flags() -> list[str]:
    return ["-target", TARGET, f"-mcpu={CPU}"]


def find_python_include(explicit: str | os.PathLike | None = None) -> Path:
    """The include directory of a CPython 3.10 on this machine (with Python.h and pyconfig.h)."""
    candidates = [explicit, os.environ.get(INCLUDE_ENV)]
    roots = [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]
    for root in filter(None, roots):
        candidates += sorted(glob.glob(f"{root}/versions/{PYTHON_VERSION}.*/include/python{PYTHON_VERSION}"),
                             reverse=True)
    candidates += [f"/usr/local/include/python{PYTHON_VERSION}", f"/usr/include/python{PYTHON_VERSION}"]
    tried = []
    for c in filter(None, candidates):
        p = Path(c)
        if (p / "Python.h").is_file() and (p / "pyconfig.h").is_file():
            return p
        tried.append(str(p))
    raise CrossBuildError(f"no CPython {PYTHON_VERSION} headers found (tried: {', '.join(tried)}); "
                          f"accepted: --python-include DIR or ${INCLUDE_ENV} naming a directory with "
                          f"Python.h and pyconfig.h of Python {PYTHON_VERSION} (e.g. pyenv install "
                          f"{PYTHON_VERSION})")


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        raise CrossBuildError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n"
                              f"{done.stderr[-6000:]}")
    return done


def probe_target(work: Path) -> dict[str, int]:
    """Sizes and alignments of :data:`SIZED_TYPES` on the target, from the symbol sizes the
    cross compiler gives one array per value (``.size probe_X, N`` in its assembly)."""
    work.mkdir(parents=True, exist_ok=True)
    lines = ["#define _FILE_OFFSET_BITS 64", "#define _GNU_SOURCE 1"]  # as pyconfig.h does
    lines += [f"#include <{h}>" for h in PROBE_HEADERS]
    for key, ctype in SIZED_TYPES.items():
        lines.append(f"const char probe_SIZEOF_{key}[sizeof({ctype})] = {{0}};")
        lines.append(f"const char probe_ALIGNOF_{key}[_Alignof({ctype})] = {{0}};")
    src = work / "probe.c"
    src.write_text("\n".join(lines) + "\n")
    _run(zig_cc() + target_flags() + ["-S", "-o", str(work / "probe.s"), str(src)], "size probe")
    sizes = {m.group(1): int(m.group(2)) for m in
             re.finditer(r"^\s*\.size\s+probe_(\w+),\s*(\d+)\s*$", (work / "probe.s").read_text(), re.M)}
    missing = [k for k in SIZED_TYPES if f"SIZEOF_{k}" not in sizes]
    if missing:
        raise CrossBuildError(f"size probe: no answer for {missing}")
    return sizes


def probe_feature(work: Path, snippet: str) -> bool:
    """Whether `snippet` compiles for the target. A control snippet that must compile is tried
    first, so that a compiler failing for another reason is an error, not a "no"."""
    work.mkdir(parents=True, exist_ok=True)
    prelude = "".join(f"#include <{h}>\n" for h in PROBE_HEADERS)

    def compiles(body: str) -> tuple[bool, str]:
        src = work / "feature.c"
        src.write_text(prelude + body + "\n")
        done = subprocess.run(zig_cc() + target_flags() + ["-S", "-o", str(work / "feature.s"),
                                                             str(src)], capture_output=True, text=True)
        return done.returncode == 0, done.stderr

    ok, err = compiles("typedef int probe_t;")
    if not ok:
        raise CrossBuildError(f"feature probe: the control snippet does not compile:\n{err[-3000:]}")
    return compiles(snippet)[0]


def target_pyconfig(host_include: Path, out_dir: Path) -> tuple[Path, dict]:
    """Write ``out_dir/pyconfig.h``: the host installation's, its architecture-dependent values
    made the target's (module docstring); return it with the values changed (name -> (host,
    target), None for undefined)."""
    text = (host_include / "pyconfig.h").read_text()
    sizes = probe_target(out_dir.parent / "probe")
    changed: dict[str, tuple] = {}

    def define(name: str, value) -> None:
        nonlocal text
        pattern = re.compile(rf"^(#define {name}\b.*|/\* #undef {name} \*/)$", re.M)
        found = pattern.search(text)
        if found is None:
            if value is None:
                return
            text += f"\n#define {name} {value}\n"
            changed[name] = (None, value)
            return
        old = found.group(1)
        host = old.split(None, 2)[2].strip() if old.startswith("#define") and len(old.split()) > 2 \
            else (1 if old.startswith("#define") else None)
        line = f"#define {name} {value}" if value is not None else f"/* #undef {name} */"
        if str(host) != str(value):
            changed[name] = (host, value)
        text = text[:found.start()] + line + text[found.end():]

    for m in list(re.finditer(r"^#define ((?:SIZEOF|ALIGNOF)_(\w+)) (\d+)$", text, re.M)):
        name, key = m.group(1), m.group(2)
        if key not in SIZED_TYPES:
            raise CrossBuildError(f"{host_include}/pyconfig.h defines {name}, whose type this "
                                  f"cross-build does not know; accepted: {', '.join(SIZED_TYPES)}")
        define(name, sizes[name])
    define("HAVE_LARGEFILE_SUPPORT", 1 if sizes["SIZEOF_OFF_T"] > sizes["SIZEOF_LONG"] else None)
    for name, snippet in FEATURE_PROBES.items():
        define(name, 1 if probe_feature(out_dir.parent / "probe", snippet) else None)
    for name in X86_ONLY:
        define(name, None)
    header = ("/* pyconfig.h for armv7l hard-float, derived by delegate/cross.py from "
              f"{host_include}/pyconfig.h: sizes and alignments probed with zig cc -target "
              f"{TARGET} -mcpu={CPU}; changed: {json.dumps(changed)} */\n")
    out = out_dir / "pyconfig.h"
    out.write_text(header + text)
    return out, changed


def cross_build(out_dir: Path, python_include: str | os.PathLike | None = None) -> dict:
    """Compile dtpu.so (cffi's C source of the embedding, with dtpu_delegate.c) and the C kernels
    for the board; return what was built: {"dtpu.so": path, "kernels.so": path, "pyconfig":
    {changed values}, "python_include": dir}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    include = find_python_include(python_include)
    # Python.h includes "pyconfig.h" from its own directory first, whatever -I says: the target's
    # include directory is a copy of the host's with the derived pyconfig.h in it
    cfg_dir = out_dir / f"python{PYTHON_VERSION}-armv7l"
    shutil.rmtree(cfg_dir, ignore_errors=True)
    shutil.copytree(include, cfg_dir)
    _, changed = target_pyconfig(include, cfg_dir)

    native = _load("dtpu_delegate_build", HERE / "build.py")
    source = out_dir / f"{native.MODULE_NAME}.c"
    native.ffi_builder(PYLIB).emit_c_code(str(source))
    lib = out_dir / native.LIBRARY_NAME
    _run(zig_cc() + target_flags() + native.CFLAGS + [
        "-Werror", "-fPIC", "-shared", f"-I{cfg_dir}", f"-I{HERE}",
        "-o", str(lib), str(source)], "cross-compiling dtpu.so")

    kernels = _load("dtpu_hw_kernels_flags", PYLIB / "dtpu" / "hw" / "kernels.py")
    flags = [f for f in kernels.CFLAGS if f != "-march=native"]   # -mcpu names the board's CPU
    klib = out_dir / "kernels.so"
    _run(zig_cc() + target_flags() + flags + ["-Werror", "-o", str(klib), str(kernels.SOURCE)],
         "cross-compiling the C kernels")
    return {"dtpu.so": lib, "kernels.so": klib, "pyconfig": changed, "python_include": include}


# -- reading what was built --------------------------------------------------------------------


def _uleb(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _arm_attributes(data: bytes) -> dict[int, int | str]:
    """The "aeabi" file-scope build attributes of an .ARM.attributes section (tag -> value)."""
    if not data or data[0:1] != b"A":
        raise CrossBuildError("no ARM build attributes (format-version 'A')")
    out: dict[int, int | str] = {}
    i = 1
    while i < len(data):
        (length,) = struct.unpack_from("<I", data, i)
        end = i + length
        name_end = data.index(b"\0", i + 4)
        vendor = data[i + 4:name_end].decode()
        j = name_end + 1
        while vendor == "aeabi" and j < end:
            tag, j = _uleb(data, j)
            (size,) = struct.unpack_from("<I", data, j)
            sub_end = j - 1 + size
            j += 4
            if tag != 1:          # only Tag_File's attributes
                j = sub_end
                continue
            while j < sub_end:
                attr, j = _uleb(data, j)
                # string-valued: 4, 5, 67 and every odd tag above 32 but 65's pair; 32 is a pair
                if attr in (4, 5, 67) or (attr > 32 and attr % 2 == 1 and attr != 65):
                    stop = data.index(b"\0", j)
                    out[attr] = data[j:stop].decode()
                    j = stop + 1
                elif attr == 32:
                    _, j = _uleb(data, j)
                    j = data.index(b"\0", j) + 1
                else:
                    out[attr], j = _uleb(data, j)
        i = end
    return out


def elf_summary(path: str | os.PathLike) -> dict:
    """What an ELF file is, read with struct: class, byte order, type, machine, e_flags' EABI
    version and float ABI, the ARM build attributes and the defined dynamic symbols."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        raise CrossBuildError(f"{path}: not an ELF file")
    ei_class, ei_data = data[4], data[5]
    if ei_class != 1 or ei_data != 1:
        return {"class": 32 if ei_class == 1 else 64, "little_endian": ei_data == 1}
    (e_type, e_machine, _, _, _, e_shoff, e_flags, _, _, _, e_shentsize, e_shnum,
     e_shstrndx) = struct.unpack_from("<HHIIIIIHHHHHH", data, 16)
    sections = [struct.unpack_from("<IIIIIIIIII", data, e_shoff + k * e_shentsize)
                for k in range(e_shnum)]
    attrs: dict = {}
    exports: list[str] = []
    for sh in sections:
        sh_type, offset, size, link, entsize = sh[1], sh[4], sh[5], sh[6], sh[9]
        if sh_type == SHT_ARM_ATTRIBUTES:
            attrs = _arm_attributes(data[offset:offset + size])
        elif sh_type == SHT_DYNSYM:
            strtab = sections[link]
            for k in range(1, size // entsize):
                st_name, _, _, st_info, _, st_shndx = struct.unpack_from("<IIIBBH", data, offset + k * entsize)
                if st_shndx != 0 and st_info >> 4 in (1, 2):    # defined, GLOBAL or WEAK
                    start = strtab[4] + st_name
                    exports.append(data[start:data.index(b"\0", start)].decode())
    return {
        "class": 32, "little_endian": True, "type": e_type, "machine": e_machine,
        "eabi_version": (e_flags & EF_ARM_EABIMASK) >> 24,
        "hard_float": bool(e_flags & EF_ARM_ABI_FLOAT_HARD),
        "cpu_name": attrs.get(TAG_CPU_NAME), "cpu_arch": attrs.get(TAG_CPU_ARCH),
        "fp_arch": attrs.get(TAG_FP_ARCH), "neon": attrs.get(TAG_ADVANCED_SIMD_ARCH, 0),
        "vfp_args": attrs.get(TAG_ABI_VFP_ARGS, 0), "exports": sorted(exports),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: a "
                        "temporary one, removed afterwards)")
    parser.add_argument("--python-include", default=None, help=f"CPython {PYTHON_VERSION}'s include "
                        f"directory (default: ${INCLUDE_ENV}, else found on this machine)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="dtpu-cross-"))
    try:
        built = cross_build(out, args.python_include)
        for name in ("dtpu.so", "kernels.so"):
            s = elf_summary(built[name])
            print(f"{built[name]}: ELF{s['class']} ARM (e_machine {s['machine']}), EABI "
                  f"{s['eabi_version']}, {'hard' if s['hard_float'] else 'soft'}-float, CPU "
                  f"{s['cpu_name']}, NEON {s['neon']}, {len(s['exports'])} exported symbols")
        print(f"Python headers: {built['python_include']}; pyconfig.h for armv7l changed "
              f"{json.dumps(built['pyconfig'])}")
    except CrossBuildError as exc:
        print(f"cross-build: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
