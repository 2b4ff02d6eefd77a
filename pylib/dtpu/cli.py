"""The `dtpu` command. Subcommands register themselves in :data:`COMMANDS` (later: run, bench,
sim, isro, doctor).

    dtpu build [--force] [--verbose] [--out DIR]   build dtpu.so for this interpreter
    dtpu path                                     print the path of an up-to-date dtpu.so
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable


def _build(args: argparse.Namespace) -> int:
    from dtpu.delegate import build

    path = build(force=args.force, verbose=args.verbose, out_dir=args.out)
    print(path)
    return 0


def _path(args: argparse.Namespace) -> int:
    from dtpu.delegate import library_path

    print(library_path(build_if_needed=not args.no_build))
    return 0


def _add_build(sub) -> None:
    p = sub.add_parser("build", help="build dtpu.so (the TFLite delegate) with this Python",
                       description="Build dtpu.so with the running interpreter; the library links "
                       "this interpreter's libpython, so build it with the Python that will load it.")
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")
    p.add_argument("--verbose", action="store_true", help="show the compiler's output")
    p.add_argument("--out", default=None, help="output directory (default: pylib/dtpu/_build/<soabi>-cffi<version>/, "
                   "or ~/.cache/dtpu/<same>/ if the package is read-only)")
    p.set_defaults(func=_build)


def _add_path(sub) -> None:
    p = sub.add_parser("path", help="print the path of dtpu.so (building it if needed)")
    p.add_argument("--no-build", action="store_true", help="fail instead of building")
    p.set_defaults(func=_path)


COMMANDS: list[Callable] = [_add_build, _add_path]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dtpu", description="DTPU accelerator tools")
    from dtpu import __version__

    p.add_argument("--version", action="version", version=f"dtpu {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if not getattr(args, "func", None):
        p.print_help()
        return 2
    try:
        return args.func(args)
    except (RuntimeError, FileNotFoundError, ValueError) as exc:
        print(f"dtpu {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
