"""``dtpu isro compile | run | disasm | asm``: the ISRO toolchain from a shell.

Hooked into the project-wide ``dtpu`` command through :func:`add_subparser` (which sets
``func`` on the parsed namespace, so the caller runs ``args.func(args)``), and runnable on its
own as ``python -m dtpu.isro ...`` through :func:`main`.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return v


def _build(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="isro_command", metavar="COMMAND", required=True)

    c = sub.add_parser("compile", help="compile a Keras .h5 or TFLite model to a bundle directory",
                       description="Writes frame.bin, filter.bin, program.bin, program.lst and meta.json.")
    c.add_argument("model", type=Path, help="model file (.h5 or .tflite)")
    c.add_argument("--input", type=Path, help="input data (.npy, HWC or NHWC); default: zeros")
    c.add_argument("-o", "--output", type=Path, required=True, help="bundle directory to write")
    c.add_argument("--pe", type=_positive, help="processing elements; larger blocks are split (default: no limit)")
    c.add_argument("--reuse", action="store_true", help="ping-pong two frame memory regions instead of "
                                                        "keeping every layer's output")
    c.set_defaults(handler=_compile)

    r = sub.add_parser("run", help="execute a bundle on the machine model and dump every layer",
                       description="Writes <bundle>/run/output.npy and <bundle>/run/layers/NN_<layer>.chw.npy "
                                   "(each layer's output as the chip wrote it, channel-major, unpadded).")
    r.add_argument("bundle", type=Path, help="bundle directory")
    r.add_argument("--input", type=Path, help="input data (.npy); default: the input compiled into frame.bin")
    r.add_argument("--pe", type=_positive, help="processing elements of the machine (default: as compiled)")
    r.add_argument("--verify", nargs="?", const="", metavar="MODEL",
                   help="compare every layer with the source model (default: the path in meta.json)")
    r.add_argument("--no-dump", action="store_true", help="do not write per-layer dumps")
    r.set_defaults(handler=_run)

    d = sub.add_parser("disasm", help="print a bundle's program (or a program.bin) as assembly")
    d.add_argument("target", type=Path, help="bundle directory or program .bin file")
    d.set_defaults(handler=_disasm)

    a = sub.add_parser("asm", help="assemble a listing into a program .bin")
    a.add_argument("source", type=Path, help="assembly text (the disassembler's format)")
    a.add_argument("-o", "--output", type=Path, required=True, help="program .bin to write")
    a.set_defaults(handler=_asm)


def add_subparser(subparsers) -> argparse.ArgumentParser:
    """Add ``isro`` to another CLI's subparsers; the parsed namespace gets ``func(args) -> int``."""
    p = subparsers.add_parser("isro", help="ISRO-ASIC compiler, machine model and (dis)assembler",
                              description=__doc__.splitlines()[0])
    _build(p)
    p.set_defaults(func=dispatch)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dtpu.isro", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    _build(parser)
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    return dispatch(args)


def dispatch(args: argparse.Namespace) -> int:
    from dtpu.isro.compiler import CompileError
    from dtpu.isro.machine import MachineError
    try:
        return args.handler(args)
    except (CompileError, MachineError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _load_input(path: Path | None):
    if path is None:
        return None
    if not path.is_file():
        raise FileNotFoundError(f"input {path} does not exist")
    return np.load(path)


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def _compile(args) -> int:
    from dtpu.isro.compiler import compile_model
    bundle = compile_model(args.model, _load_input(args.input), pe=args.pe, reuse=args.reuse)
    bundle.save(args.output)
    s = bundle.meta["stats"]
    print(f"{args.model} -> {args.output}/  ({bundle.meta['fmt']}, pe={bundle.meta['pe'] or 'unlimited'})")
    print(f"  layers {len(bundle.layers)}, instructions {s['instructions']} "
          f"({', '.join(f'{k} {v}' for k, v in s['by_op'].items())}), MACs {s['macs']:,}")
    print(f"  frame memory {_kib(bundle.meta['frame_bytes'])} (input image {_kib(s['input_bytes'])}); "
          f"filter memory {_kib(bundle.meta['filter_bytes'])} (weights {_kib(s['weights_bytes'])}, "
          f"params {_kib(s['params_bytes'])}, split scratch {_kib(s['scratch_bytes'])}); "
          f"program {_kib(s['program_bytes'])}")
    return 0


def _run(args) -> int:
    from dtpu.isro import verify
    from dtpu.isro.bundle import Bundle
    from dtpu.isro.machine import Counters, run
    bundle = Bundle.load(args.bundle)
    x = _load_input(args.input)
    result = run(bundle, x, pe=args.pe)
    out = args.bundle / "run"
    out.mkdir(parents=True, exist_ok=True)
    if not args.no_dump:
        (out / "layers").mkdir(exist_ok=True)
    np.save(out / "output.npy", result.output)
    print(f"{'layer':<28} {'kind':<8} {'instr':>5} {'MACs':>12} {'cycles':>9} {'frame r/w B':>15} {'filter r/w B':>15}")
    for i, layer in enumerate(bundle.layers):
        first, last = layer["instructions"]
        c = Counters()
        for t in result.trace[first:last + 1]:
            c.add(t)
        print(f"{layer['name'][:28]:<28} {layer['kind']:<8} {c.instructions:>5} {c.macs:>12,} {c.cycles:>9,} "
              f"{f'{c.frame_read}/{c.frame_write}':>15} {f'{c.filter_read}/{c.filter_write}':>15}")
        if not args.no_dump:
            safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in layer["name"])
            np.save(out / "layers" / f"{i:02d}_{safe}.chw.npy", result.layers[layer["name"]])
    c = result.counters
    print(f"total: {c.instructions} instructions, {c.macs:,} MACs, {c.cycles:,} cycles, frame "
          f"{c.frame_read:,}/{c.frame_write:,} B, filter {c.filter_read:,}/{c.filter_write:,} B (read/written)")
    print(f"output {result.output.shape} {result.output.dtype} -> {out / 'output.npy'}")
    if args.verify is not None:
        if x is None:
            x = _input_from_image(bundle)
        checks = verify.verify(bundle, result, x, args.verify or None)
        for chk in checks:
            print("  " + str(chk))
        bad = [chk.layer for chk in checks if not chk.ok]
        if bad:
            print(f"verification FAILED for {', '.join(bad)}", file=sys.stderr)
            return 1
        print(f"verification passed: {len(checks)} layers")
    return 0


def _input_from_image(bundle):
    """The input the bundle was compiled with, recovered from frame.bin, in framework layout."""
    from dtpu.isro.bundle import read_tensor, to_framework
    frame, _ = bundle.memories()
    chw = read_tensor(frame, bundle.meta["input"], bundle.fmt)
    return to_framework(chw, False) if chw.shape[1] * chw.shape[2] > 1 else chw.reshape(1, -1)


def _disasm(args) -> int:
    from dtpu.isro import isa
    from dtpu.isro.bundle import Bundle
    if args.target.is_dir():
        sys.stdout.write(Bundle.load(args.target).listing())
    elif args.target.is_file():
        sys.stdout.write(isa.disassemble(args.target.read_bytes()))
    else:
        raise FileNotFoundError(f"{args.target} is neither a bundle directory nor a program file")
    return 0


def _asm(args) -> int:
    from dtpu.isro import isa
    if not args.source.is_file():
        raise FileNotFoundError(f"assembly source {args.source} does not exist")
    program = isa.assemble(args.source.read_text())
    args.output.write_bytes(isa.encode_program(program))
    print(f"{len(program)} instructions -> {args.output}")
    return 0
