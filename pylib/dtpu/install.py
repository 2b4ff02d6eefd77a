"""`dtpu install` / `dtpu uninstall`: put dtpu.so where `load_delegate("dtpu.so")` finds it.

Every TFLite delegate user writes ``load_delegate("dtpu.so")`` with a bare name, and the dynamic
loader resolves a bare name from ``LD_LIBRARY_PATH``, the ld.so cache and its default directories
(``/lib``, ``/usr/lib`` and their multiarch subdirectories). The cache is not an option here:
``ldconfig`` only records files named ``lib*.so*``, so a ``dtpu.so`` in ``/usr/local/lib`` stays
invisible even after ``ldconfig`` (checked: ``CDLL("dtpu.so")`` fails there). The default target is
therefore the loader's own default directory (``/usr/lib/<multiarch>`` when the platform has one,
else ``/usr/lib``): root on the PYNQ image, where Jupyter runs as root. Elsewhere ``--prefix DIR``
installs into any directory and prints the one ``LD_LIBRARY_PATH`` line to add.

dtpu.so embeds the Python that built it (it links that interpreter's libpython and imports
``dtpu`` from it), so an installed copy is only good for that Python. Each install writes a
record beside the library (``dtpu.so.json``: the build stamp plus the file's SHA-256); a second
install refuses to replace a dtpu.so recorded for another Python, or one it did not install,
unless ``--force``; ``uninstall`` removes only what a record says this tool installed.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sysconfig
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

LIBRARY = "dtpu.so"
RECORD = "dtpu.so.json"
#: the build stamp fields that tie a dtpu.so to one Python
PYTHON_KEYS = ("python", "soabi", "libpython")


class InstallError(Exception):
    """The install or uninstall cannot be done as asked; the message says why and what to do."""


@dataclass
class Installed:
    path: Path
    record: dict
    default_dir: bool     # found by the loader as is (no LD_LIBRARY_PATH needed)

    def env_line(self) -> str | None:
        if self.default_dir:
            return None
        return f'export LD_LIBRARY_PATH="{self.path.parent}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"'


def loader_default_dirs() -> list[Path]:
    """Directories the dynamic loader searches for a bare name without any configuration."""
    dirs = []
    multiarch = sysconfig.get_config_var("MULTIARCH")
    for base in ("/usr/lib", "/lib"):
        if multiarch:
            dirs.append(Path(base) / multiarch)
        dirs.append(Path(base))
    return dirs


def default_dir() -> Path:
    """Where `dtpu install` puts dtpu.so without --prefix: the first existing default directory."""
    for d in loader_default_dirs():
        if d.is_dir():
            return d
    return Path("/usr/lib")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_record(directory: Path) -> dict | None:
    try:
        return json.loads((directory / RECORD).read_text())
    except (OSError, ValueError):
        return None


def _describe(record: dict) -> str:
    return f"Python {record.get('python', '?')} ({record.get('soabi', '?')}, {record.get('libpython', '?')})"


def install(prefix: str | os.PathLike | None = None, force: bool = False) -> Installed:
    """Copy this Python's up-to-date dtpu.so (built if needed) into `prefix` (default:
    :func:`default_dir`) and record it. Raises InstallError when the target is not writable or
    holds a dtpu.so for another Python / not installed by this tool (unless `force`)."""
    from dtpu.delegate import library_path

    target_dir = Path(prefix).expanduser().resolve() if prefix is not None else default_dir()
    source = Path(library_path())
    stamp = _read_record(source.parent) or {}
    if prefix is not None:
        target_dir.mkdir(parents=True, exist_ok=True)
    if not target_dir.is_dir():
        raise InstallError(f"{target_dir} is not a directory")
    if not os.access(target_dir, os.W_OK):
        raise InstallError(f"{target_dir} is not writable (run as root, as on the PYNQ image, or "
                           f"install elsewhere with --prefix DIR, e.g. --prefix ~/.local/lib)")
    target = target_dir / LIBRARY
    if target.exists() and not force:
        old = _read_record(target_dir)
        if old is None or old.get("installed_by") != "dtpu install":
            raise InstallError(f"{target} exists and was not installed by `dtpu install` (no "
                               f"{RECORD} beside it); remove it, or pass --force to replace it")
        if any(old.get(k) != stamp.get(k) for k in PYTHON_KEYS):
            raise InstallError(f"{target} was built for {_describe(old)}, not for this "
                               f"{_describe(stamp)}; dtpu.so embeds the Python that built it. "
                               f"Uninstall it with that Python (`dtpu uninstall`), install this "
                               f"one with --prefix elsewhere, or pass --force to replace it")
    tmp = target_dir / f".{LIBRARY}.{os.getpid()}.tmp"
    shutil.copyfile(source, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)      # atomic: a process loading dtpu.so never sees half a file
    record = {**stamp, "installed_by": "dtpu install", "source": str(source),
              "sha256": _sha256(target)}
    (target_dir / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    log.info("installed %s from %s", target, source)
    default = any(target_dir == d.resolve() for d in loader_default_dirs() if d.exists())
    return Installed(target, record, default)


def uninstall(prefix: str | os.PathLike | None = None) -> Path:
    """Remove the dtpu.so `dtpu install` put in `prefix` (default: :func:`default_dir`) and its
    record; raises InstallError if there is none, or if the file there is not the one recorded."""
    target_dir = Path(prefix).expanduser().resolve() if prefix is not None else default_dir()
    target = target_dir / LIBRARY
    record = _read_record(target_dir)
    if not target.exists():
        raise InstallError(f"no {LIBRARY} in {target_dir}")
    if record is None or record.get("installed_by") != "dtpu install":
        raise InstallError(f"{target} was not installed by `dtpu install` (no {RECORD} beside it); "
                           f"left in place")
    if record.get("sha256") != _sha256(target):
        raise InstallError(f"{target} changed since `dtpu install` wrote it (SHA-256 differs from "
                           f"{RECORD}); left in place")
    target.unlink()
    (target_dir / RECORD).unlink()
    log.info("removed %s", target)
    return target
