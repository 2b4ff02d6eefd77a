"""``dtpu isro compile | run | check | compare | inject | bench | keygen | sign | partial | disasm | asm``: the ISRO toolchain.

Exit status: 0 success; 1 a check failed (verification mismatch, static check findings);
2 bad input (a missing, truncated, corrupt or foreign file, a wrong input shape, an unsupported
layer, a model that does not fit the chip profile, a bundle unsigned or wrongly signed for the
public key given), reported as one ``error:`` line naming the
file or layer and what would be accepted; 3 an internal error (a bug: one line, ``-v`` for the
traceback; accepted before or after the command: ``dtpu -v isro run``, ``dtpu isro -v run``,
``dtpu isro run -v``).

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

from dtpu.isro.npy import one_line, read_npy

log = logging.getLogger(__name__)


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return v


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (like every other error here), exit status 2."""

    def error(self, message: str):
        sys.stderr.write(f"error: {self.prog}: {message} (see {self.prog} --help)\n")
        sys.exit(2)


SUMMARY = __doc__.splitlines()[0].replace("``", "")   # --help prints plain text, not RST


def _verbose(p: argparse.ArgumentParser, *, default=False) -> None:
    p.add_argument("-v", "--verbose", action="store_true", default=default,
                   help="log at INFO level (and an internal error's traceback)")


def _build(p: argparse.ArgumentParser) -> None:
    _verbose(p)
    # each command takes -v too; SUPPRESS keeps a command's unset -v from clearing the one before it
    common = argparse.ArgumentParser(add_help=False)
    _verbose(common, default=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="isro_command", metavar="COMMAND", required=True,
                           parser_class=_OneLineParser)

    c = sub.add_parser("compile", parents=[common], help="compile a Keras (.h5, .keras) or TFLite model to a bundle directory",
                       description="Writes frame.bin, filter.bin, program.bin, program.lst, meta.json and "
                                   "SHA256SUMS.")
    c.add_argument("model", type=Path, help="model file (.h5, .keras or .tflite)")
    c.add_argument("--input", type=Path, action="append", help="input data (.npy, HWC or NHWC); default: zeros; "
                                                               "once per model input, in the model's order")
    c.add_argument("-o", "--output", type=Path, required=True, help="bundle directory to write")
    c.add_argument("--model-output", metavar="NAME", action="append",
                   help="the model output to compile: a tensor name (TFLite) or layer name (Keras), or its "
                        "index; repeated, several outputs at once; default: a Keras model's outputs, a TFLite "
                        "model's only one, else the one no operator reads (models that also output a "
                        "feature map for debugging)")
    c.add_argument("--chip", type=Path, metavar="PROFILE",
                   help="chip profile (.json or .toml; default: the shipped isro-asic-default)")
    c.add_argument("--pe", type=_positive, help="lower the profile's processing elements (not above them); larger "
                                                "blocks are split")
    c.add_argument("--estimate", action="store_true",
                   help="also run the bundle on the machine model and print time, frames/s, GOP/s, "
                        "utilization and energy from the chip profile's clock and power assumptions")
    reuse = c.add_mutually_exclusive_group()
    reuse.add_argument("--reuse", dest="reuse", action="store_const", const=True, default=None,
                       help="share frame memory between tensors not live at once (default: only "
                            "when keeping every layer's output would not fit the profile)")
    reuse.add_argument("--no-reuse", dest="reuse", action="store_const", const=False,
                       help="keep every layer's output (fail if that does not fit)")
    qz = c.add_argument_group("quantization on the ground (a float Keras model to an I8 bundle)")
    qz.add_argument("--quantize", choices=["int8"],
                    help="quantize: weights symmetric int8 per output channel, int32 biases, activations "
                         "asymmetric int8 calibrated on --calibration (as TFLite's converter does); writes "
                         "the int8 reference graph to the bundle directory as quantized.tflite")
    qz.add_argument("--calibration", type=Path, metavar="NPY",
                    help="calibration inputs (.npy, N x the model's input shape, real values); without "
                         "--holdout the last N // 5 are held out to measure accuracy")
    qz.add_argument("--holdout", type=Path, metavar="NPY", help="held-out inputs to measure accuracy on "
                                                                 "(then all of --calibration calibrates)")
    qz.add_argument("--calibration-method", choices=["minmax", "percentile"], default="minmax",
                    help="activation ranges: minmax, the smallest and largest value seen (the converter's "
                         "default), or percentile (the --percentile-th and its mirror; clips outliers)")
    qz.add_argument("--percentile", type=float, default=99.99, metavar="P",
                    help="for --calibration-method percentile (default 99.99)")
    c.set_defaults(handler=_compile)

    r = sub.add_parser("run", parents=[common], help="execute a bundle on the machine model and dump every layer",
                       description="Writes <bundle>/run/output.npy and <bundle>/run/layers/NN_<layer>.chw.npy "
                                   "(each layer's output as the chip wrote it, channel-major, unpadded).")
    r.add_argument("bundle", type=Path, help="bundle directory")
    r.add_argument("--input", type=Path, action="append",
                   help="input data (.npy; once per model input, in order); default: the input compiled into "
                        "frame.bin")
    r.add_argument("--pe", type=_positive, help="processing elements of the machine (default: as compiled)")
    r.add_argument("--verify", nargs="?", const="", metavar="MODEL",
                   help="compare every layer with the source model (default: the path in meta.json)")
    r.add_argument("--no-dump", action="store_true", help="do not write per-layer dumps")
    r.add_argument("--public-key", type=Path, metavar="FILE",
                   help="run only a bundle signed by this Ed25519 key (default: $DTPU_ISRO_PUBLIC_KEY "
                        "if set, else no signature check)")
    r.add_argument("--memory-dumps", type=Path, metavar="DIR",
                   help="also write DIR/layer_NNN.bin and DIR/frame.bin in the format 'compare' reads "
                        "(what the chip's memory holds; docs/isro_isa.md)")
    r.add_argument("--partial", type=Path, action="append", metavar="DIR",
                   help="apply a partial uplink (made by 'partial'; once per kind) after checking it and the "
                        "bundle against --public-key")
    r.set_defaults(handler=_run)

    m = sub.add_parser("compare", parents=[common], help="compare memory dumps read back from a chip or RTL simulation "
                                       "with the machine model, layer by layer",
                       description="DUMPS holds layer_NNN.bin (layer NNN's output region with its border, "
                                   "as stored) and/or frame.bin (frame memory after END). Exit status 1 "
                                   "when any layer differs.")
    m.add_argument("bundle", type=Path, help="bundle directory")
    m.add_argument("dumps", type=Path, help="dump directory")
    m.add_argument("--input", type=Path, action="append",
                   help="the input the chip ran (.npy; once per model input); default: the compiled one")
    m.set_defaults(handler=_compare)

    j = sub.add_parser("inject", parents=[common], help="flip bits in the program, filter and frame images and count "
                                      "masked / silent / stopped outcomes on the machine model")
    j.add_argument("bundle", type=Path, help="bundle directory")
    j.add_argument("--trials", type=_positive, default=200, help="trials per region (default 200)")
    j.add_argument("--seed", type=int, default=0, help="random seed (default 0; the same seed, the same table)")
    j.add_argument("--double", action="store_true", help="flip two bits per trial instead of one")
    j.add_argument("--adjacent", action="store_true", help="flip two neighbouring bits of one word "
                                                          "(a multi-bit upset)")
    j.add_argument("--secded", action="store_true", help="memories with per-64-bit-word SECDED (EDAC)")
    j.add_argument("--regions", default="program,filter,frame,activations",
                   help="comma-separated subset of program, filter, frame (the images before START), "
                        "activations (frame memory while the program runs)")
    j.set_defaults(handler=_inject)

    k = sub.add_parser("check", parents=[common], help="check a bundle statically: what the chip would reject, hazards, "
                                     "the profile's limits",
                       description="Exit status 0 when nothing is found, 1 otherwise.")
    k.add_argument("bundle", type=Path, help="bundle directory")
    k.add_argument("--chip", type=Path, metavar="PROFILE",
                   help="hold the bundle to another chip profile (default: the one it was compiled for)")
    k.add_argument("--public-key", type=Path, metavar="FILE",
                   help="also require a signature by this Ed25519 key (default: $DTPU_ISRO_PUBLIC_KEY if set)")
    k.add_argument("--partial", type=Path, action="append", metavar="DIR",
                   help="check the bundle with this partial uplink applied (needs --public-key)")
    k.set_defaults(handler=_check)

    e = sub.add_parser("bench", parents=[common], help="compile and run models, print frames/s, MAC rate, "
                                                       "utilization and frames/s/W beside RC64's VGG-19",
                       description="Each model is compiled for the profile and run once on a fixed random "
                                   "input (seed 0); the figures rest on the profile's clock and power "
                                   "assumptions (docs/isro_isa.md section 0).")
    e.add_argument("models", type=Path, nargs="+", help="model files (.h5, .keras, .tflite)")
    e.add_argument("--chip", type=Path, metavar="PROFILE", help="chip profile (default: the shipped one)")
    e.add_argument("--layers", action="store_true",
                   help="also print each model's cycles layer by layer (compute, adder, transfers, elapsed)")
    e.set_defaults(handler=_bench)

    g = sub.add_parser("keygen", parents=[common], help="make an Ed25519 key pair for signing bundles",
                       description="Writes KEY (private, PKCS#8 PEM, mode 0600) and KEY.pub; never overwrites.")
    g.add_argument("-o", "--output", type=Path, required=True, metavar="KEY", help="private key file to write")
    g.set_defaults(handler=_keygen)

    s = sub.add_parser("sign", parents=[common], help="sign a bundle's manifest (SHA256SUMS) with an Ed25519 key",
                       description="Writes BUNDLE/SIGNATURE. run and check with --public-key refuse a bundle "
                                   "that is unsigned, signed by another key, or changed after signing.")
    s.add_argument("bundle", type=Path, help="bundle directory")
    s.add_argument("--key", type=Path, required=True, help="private key (from keygen)")
    s.set_defaults(handler=_sign)

    u = sub.add_parser("partial", parents=[common], help="make a partial uplink for a full bundle: new weights "
                                                         "for its unchanged program, or a new input",
                       description="Writes DIR/PARTIAL.json, the one image (filter.bin or frame.bin) and "
                                   "SHA256SUMS, bound to the base's manifest and program digests. run and "
                                   "check apply it with --partial DIR and a public key.")
    u.add_argument("kind", choices=["weights", "input"], help="weights: the model retrained (same architecture); "
                                                              "input: a new input")
    u.add_argument("bundle", type=Path, help="the full bundle the spacecraft holds")
    u.add_argument("source", type=Path, help="weights: the model file (.h5, .keras, .tflite); input: the .npy")
    u.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="directory to write")
    u.add_argument("--key", type=Path, help="sign it with this private key (else: dtpu isro sign DIR --key KEY)")
    u.set_defaults(handler=_partial)

    d = sub.add_parser("disasm", parents=[common], help="print a bundle's program (or a program.bin) as assembly")
    d.add_argument("target", type=Path, help="bundle directory or program .bin file")
    d.set_defaults(handler=_disasm)

    a = sub.add_parser("asm", parents=[common], help="assemble a listing into a program .bin")
    a.add_argument("source", type=Path, help="assembly text (the disassembler's format)")
    a.add_argument("-o", "--output", type=Path, required=True, help="program .bin to write")
    a.set_defaults(handler=_asm)


def add_subparser(subparsers) -> argparse.ArgumentParser:
    """Add ``isro`` to another CLI's subparsers; the parsed namespace gets ``func(args) -> int``."""
    p = subparsers.add_parser("isro", help="ISRO-ASIC compiler, machine model and (dis)assembler",
                              description=SUMMARY)
    _build(p)
    p.set_defaults(func=dispatch)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _OneLineParser(prog="python -m dtpu.isro", description=SUMMARY)
    _build(parser)
    return dispatch(parser.parse_args(argv))


def dispatch(args: argparse.Namespace) -> int:
    """Run the command; every error becomes one line on stderr (see the module docstring)."""
    from dtpu.isro.machine import MachineError
    if getattr(args, "verbose", False):
        logging.basicConfig(format="%(name)s: %(message)s")      # a stderr handler unless one exists
        logging.getLogger("dtpu").setLevel(logging.INFO)
    try:
        return args.handler(args)
    except (ValueError, MachineError, OSError) as exc:
        # CompileError, BundleError, ProfileError are ValueErrors; OSError: unreadable files
        if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in str(exc):
            print(f"error: {exc.filename}: {one_line(exc)}", file=sys.stderr)
        else:
            print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:    # noqa: BLE001 -- a bug: still one line, the traceback only with -v
        log.info("internal error", exc_info=True)
        again = "" if log.isEnabledFor(logging.INFO) else "; rerun with -v for the traceback"
        print(f"internal error: {type(exc).__name__}: {one_line(exc)} (a bug in dtpu.isro{again}; "
              f"please report it)", file=sys.stderr)
        return 3


def _load_input(path: Path | None):
    if path is None:
        return None
    return read_npy(path, "input", "a .npy array, HWC or NHWC")


def _load_inputs(paths: list[Path] | None):
    """--input once (an array) or once per model input (a list of arrays, in order)."""
    if not paths:
        return None
    xs = [_load_input(p) for p in paths]
    return xs[0] if len(xs) == 1 else xs


def _check_input(bundle, x, paths) -> None:
    """A wrong input (count, shape, values) names the input file, not just the shapes."""
    from dtpu.isro.bundle import input_metas, write_input
    if x is None:
        return
    metas = input_metas(bundle.meta)
    xs = x if isinstance(x, list) else [x]
    if len(xs) != len(metas):
        raise ValueError(f"input {', '.join(map(str, paths))}: {len(xs)} arrays for a bundle with {len(metas)} "
                         f"inputs ({', '.join(m['name'] for m in metas)}); pass --input once per input, in order")
    scratch = np.zeros(bundle.meta["frame_bytes"], np.uint8)
    for m_in, xi, path in zip(metas, xs, paths):
        try:
            write_input(m_in, scratch, xi, bundle.fmt)
        except ValueError as exc:
            msg = str(exc)
            raise ValueError(f"input {path}: {msg[len('input: '):] if msg.startswith('input: ') else msg}") from None


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


def _compile(args) -> int:
    from dtpu.isro import profile
    from dtpu.isro.compiler import compile_model
    chip = profile.load(args.chip)
    x = _load_inputs(args.input)
    if args.quantize is None and (args.calibration or args.holdout):
        raise ValueError(f"{'--calibration' if args.calibration else '--holdout'} without --quantize int8; "
                         f"a float model compiles to F32 unless quantized")
    if args.quantize is not None and args.calibration is None:
        raise ValueError("--quantize int8 needs --calibration NPY: representative inputs to set the "
                         "activation ranges")
    report = None
    outs = args.model_output or []
    output = None if not outs else (outs[0] if len(outs) == 1 else outs)
    try:
        if args.quantize is not None:
            from dtpu.isro.ground import compile_quantized
            bundle, report = compile_quantized(args.model, args.calibration, args.output, holdout=args.holdout,
                                               method=args.calibration_method, percentile=args.percentile, x=x,
                                               chip=chip, pe=args.pe, reuse=args.reuse, output=output)
        else:
            bundle = compile_model(args.model, x, chip=chip, pe=args.pe, reuse=args.reuse, output=output)
    except ValueError as exc:
        if x is not None and str(exc).startswith("input:"):
            raise ValueError(f"input {', '.join(map(str, args.input))}: {str(exc)[len('input: '):]}") from None
        raise
    bundle.save(args.output)
    s = bundle.meta["stats"]
    print(f"{args.model} -> {args.output}/  ({bundle.meta['fmt']}, chip {chip.name}, "
          f"pe={bundle.meta['pe'] or 'unlimited'})")
    print(f"  layers {len(bundle.layers)}, instructions {s['instructions']} "
          f"({', '.join(f'{k} {v}' for k, v in s['by_op'].items())}), MACs {s['macs']:,}")
    if bundle.meta.get("staged"):
        bands = sum(layer["staging"]["bands"] for layer in bundle.layers)
        print(f"  staged through external memory: {_kib(bundle.meta['external_bytes'])} there (tensors "
              f"{_kib(s['tensors_bytes'])}, weights {_kib(s['weights_bytes'])}, params {_kib(s['params_bytes'])}); "
              f"{bands} bands over {len(bundle.layers)} layers; staging in frame memory "
              f"{_kib(bundle.meta['frame_bytes'])}, filter memory {_kib(bundle.meta['filter_bytes'])}; "
              f"program {_kib(s['program_bytes'])}")
    else:
        print(f"  frame memory {_kib(bundle.meta['frame_bytes'])} (input image {_kib(s['input_bytes'])}); "
              f"filter memory {_kib(bundle.meta['filter_bytes'])} (weights {_kib(s['weights_bytes'])}, "
              f"params {_kib(s['params_bytes'])}, split scratch {_kib(s['scratch_bytes'])}); "
              f"program {_kib(s['program_bytes'])}")
    tfl = bundle.meta.get("tflite", {})
    if bundle.meta.get("outputs"):
        print(f"  model outputs: {', '.join(repr(o['name']) for o in bundle.meta['outputs'])} (the first the "
              f"program's final layer, the others kept in frame memory to the end)")
    if tfl.get("outputs_left_out"):
        print(f"  model output {tfl['output_name']!r}; left out: "
              f"{', '.join(repr(n) for n in tfl['outputs_left_out'])} (--model-output chooses)")
    if bundle.meta.get("heads"):
        from dtpu.isro.heads import describe
        print(f"  host after the chip: {describe(bundle.meta['heads'])}")
    if args.estimate:
        for line in _estimate(bundle, x)[1]:
            print("  " + line)
    print(f"  profile {chip.name}: frame {_pct(bundle.meta['frame_bytes'], chip.frame_bytes)}, filter "
          f"{_pct(bundle.meta['filter_bytes'], chip.filter_bytes)}, program "
          f"{_pct(s['program_bytes'], chip.program_bytes)} used"
          + ("; frame memory shared between tensors not live at once" if bundle.meta["reuse"] else ""))
    if report is not None:
        for line in report.lines():
            print("  " + line)
        if not report.ok:
            for chk in report.checks:
                if not chk.ok:
                    print("  " + str(chk), file=sys.stderr)
            print("quantized bundle verification FAILED", file=sys.stderr)
            return 1
    return 0


def _estimate(bundle, x=None):
    """The performance lines of one run of `bundle` (on `x`, or the compiled input)."""
    from dtpu.isro.bundle import bundle_profile
    from dtpu.isro.machine import run
    from dtpu.isro.performance import figures
    result = run(bundle, x)
    fig = figures(result.counters, bundle_profile(bundle.meta), bundle.fmt.name.lower(), bundle.meta["pe"],
                  result.schedule)
    return fig, fig.lines()


def _bench(args) -> int:
    from dtpu.isro import profile
    from dtpu.isro.bundle import bundle_profile
    from dtpu.isro.compiler import compile_model
    from dtpu.isro.machine import run
    from dtpu.isro.performance import comparison, figures, layer_table
    chip = profile.load(args.chip)
    rows = []
    for path in args.models:
        bundle = compile_model(path, chip=chip)
        c, h, w = bundle.meta["input"]["shape"]
        rng = np.random.default_rng(0)
        x = (rng.integers(-128, 128, (1, h, w, c)).astype(np.int8) if bundle.fmt.name == "I8"
             else rng.random((1, h, w, c)).astype(np.float32))
        result = run(bundle, x)
        fig = figures(result.counters, bundle_profile(bundle.meta), bundle.fmt.name.lower(), bundle.meta["pe"],
                      result.schedule)
        rows.append((path.stem, "staged" if bundle.meta.get("staged") else "on-chip", fig))
        if args.layers:
            print(f"{path.stem}:\n{layer_table(bundle, result)}\n")
    print(f"chip profile {chip.name}: pe {chip.pe}, clock {chip.clock_mhz} MHz (assumptions)")
    print(comparison(rows))
    return 0


def _pct(n: int, of: int) -> str:
    return f"{100 * n / of:.1f} %"


def _signed(args) -> None:
    """Verify the bundle's signature first when a public key is given or configured."""
    from dtpu.isro import signing
    key = signing.configured_key(getattr(args, "public_key", None))
    if key is not None:
        who = signing.verify(args.bundle, key)
        print(f"signature: key {who} ok")


def _keygen(args) -> int:
    from dtpu.isro import signing
    private, public = signing.keygen(args.output)
    print(f"Ed25519 key pair -> {private} (private, keep it off the spacecraft), {public}")
    return 0


def _sign(args) -> int:
    from dtpu.isro import partial, signing
    out = (partial.sign(args.bundle, args.key) if (args.bundle / partial.META).is_file()
           else signing.sign(args.bundle, args.key))
    print(f"signed {args.bundle} -> {out}")
    return 0


def _loaded(args):
    """The bundle, signature-checked, with any partial uplinks applied."""
    from dtpu.isro.bundle import Bundle
    if getattr(args, "partial", None):
        from dtpu.isro.partial import apply
        bundle, lines = apply(args.bundle, args.partial, args.public_key)
        for line in lines:
            print(line)
        return bundle
    _signed(args)
    return Bundle.load(args.bundle)


def _partial(args) -> int:
    from dtpu.isro import partial
    if args.kind == "weights":
        out = partial.make_weights(args.bundle, args.source, args.output)
    else:
        x = _load_input(args.source)
        try:
            out = partial.make_input(args.bundle, x, args.output, source=str(args.source))
        except ValueError as exc:
            msg = str(exc)
            if msg.startswith("input: "):
                raise ValueError(f"input {args.source}: {msg[len('input: '):]}") from None
            raise
    print(f"{args.kind} partial uplink for {args.bundle} -> {out}/ ({partial.IMAGE[args.kind]}, "
          f"{(out / partial.IMAGE[args.kind]).stat().st_size:,} B)")
    if args.key is not None:
        print(f"signed -> {partial.sign(out, args.key)}")
    return 0


def _check(args) -> int:
    from dtpu.isro.check import check_bundle
    from dtpu.isro import profile
    bundle = _loaded(args)
    chip = profile.load(args.chip) if args.chip is not None else None
    findings = check_bundle(bundle, chip)
    for f in findings:
        print(f)
    by = {k: sum(f.kind == k for f in findings) for k in ("fault", "hazard", "profile")}
    verdict = "ok" if not findings else "FAILED"
    name = chip.name if chip is not None else bundle.meta["profile"]["name"]
    print(f"{args.bundle}: {len(bundle.program)} instructions, profile {name}: "
          f"{by['fault']} faults, {by['hazard']} hazards, {by['profile']} profile violations -- {verdict}")
    return 0 if not findings else 1


def _run(args) -> int:
    from dtpu.isro import verify
    from dtpu.isro.machine import Counters, run
    bundle = _loaded(args)
    x = _load_inputs(args.input)
    _check_input(bundle, x, args.input)
    source = verify.source_path(bundle, args.verify or None) if args.verify is not None else None
    if args.memory_dumps is not None:
        from dtpu.isro.compare import on_chip_only
        on_chip_only(bundle, "--memory-dumps")
    result = run(bundle, x, pe=args.pe)
    out = args.bundle / "run"
    out.mkdir(parents=True, exist_ok=True)
    if not args.no_dump:
        (out / "layers").mkdir(exist_ok=True)
    np.save(out / "output.npy", result.output)
    print(f"{'layer':<28} {'kind':<8} {'instr':>5} {'MACs':>12} {'cycles':>9} {'frame r/w B':>15} {'filter r/w B':>15}")
    for i, layer in enumerate(bundle.layers):
        if layer["kind"] == "input":          # written by the host with the frame image
            continue
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
          f"{c.frame_read:,}/{c.frame_write:,} B, filter {c.filter_read:,}/{c.filter_write:,} B (read/written)"
          + (f", external {c.external_read:,}/{c.external_write:,} B; {c.transfer_cycles:,} of the cycles "
             f"in transfers" if c.transfer_cycles else ""))
    from dtpu.isro.bundle import bundle_profile
    from dtpu.isro.performance import figures
    fig = figures(c, bundle_profile(bundle.meta), bundle.fmt.name.lower(), args.pe or bundle.meta["pe"],
                  result.schedule)
    for line in fig.lines():
        print("  " + line)
    heads = bundle.meta.get("heads") or []
    if heads:
        from dtpu.isro.heads import describe
        src = bundle.meta.get("source", {}).get("kind", "the source framework")
        print(f"host: {describe(heads)} computed on the host after the chip (the chip has no exp), "
              f"as {src} computes it")
    if args.memory_dumps is not None:
        from dtpu.isro.compare import write_dumps
        write_dumps(bundle, args.memory_dumps, x)
        print(f"memory dumps -> {args.memory_dumps}/ (layer_NNN.bin, frame.bin)")
    print(f"output {result.output.shape} {result.output.dtype} -> {out / 'output.npy'}")
    for k, (name, y) in enumerate((result.more_outputs or {}).items(), 1):
        np.save(out / f"output_{k}.npy", y)
        print(f"output {k} {name!r} {y.shape} {y.dtype} -> {out / f'output_{k}.npy'}")
    if args.verify is not None:
        if x is None:
            x = _input_from_image(bundle)
        checks = verify.verify(bundle, result, x, source)
        for chk in checks:
            print("  " + str(chk))
        bad = [chk.layer for chk in checks if not chk.ok]
        if bad:
            print(f"verification FAILED for {', '.join(bad)}", file=sys.stderr)
            return 1
        print(f"verification passed: {len(checks)} layers")
    return 0


def _compare(args) -> int:
    from dtpu.isro.bundle import Bundle
    from dtpu.isro.compare import compare
    bundle = Bundle.load(args.bundle)
    x = _load_inputs(args.input)
    _check_input(bundle, x, args.input)
    diffs = compare(bundle, args.dumps, x)
    for d in diffs:
        print(d)
    compared = [d for d in diffs if d.source]
    bad = [d for d in compared if not d.ok]
    print(f"{len(compared)} of {len(diffs)} layers compared: {len(compared) - len(bad)} match, "
          f"{len(bad)} differ")
    if not compared:
        raise ValueError(f"{args.dumps}: no dump covers any layer (expected layer_NNN.bin or frame.bin)")
    return 1 if bad else 0


def _inject(args) -> int:
    from dtpu.isro.bundle import Bundle
    from dtpu.isro.inject import inject
    bundle = Bundle.load(args.bundle)
    regions = [r.strip() for r in args.regions.split(",") if r.strip()]
    table = inject(bundle, args.trials, seed=args.seed, double=args.double, secded=args.secded,
                   adjacent=args.adjacent, regions=regions)
    print(table)
    return 0


def _input_from_image(bundle):
    """The input the bundle was compiled with, recovered from frame.bin, in framework layout
    (a list for a model with several inputs)."""
    from dtpu.isro.bundle import input_metas, read_tensor, to_framework
    xs = []
    for meta_in in input_metas(bundle.meta):
        memory = bundle.external_memory() if meta_in.get("memory") == "external" else bundle.memories()[0]
        chw = read_tensor(memory, meta_in, bundle.fmt)
        offset = meta_in.get("offset", 0)           # a uint8 model's input, stored 128 lower
        xs.append(to_framework(chw, chw.shape[1] * chw.shape[2] == 1, offset))
    return xs[0] if len(xs) == 1 else xs


def _disasm(args) -> int:
    from dtpu.isro import isa
    from dtpu.isro.bundle import Bundle
    if args.target.is_dir():
        sys.stdout.write(Bundle.load(args.target).listing())
    elif args.target.is_file():
        try:
            text = isa.disassemble(args.target.read_bytes())
        except ValueError as exc:
            raise ValueError(f"{args.target}: not an ISRO program ({one_line(exc)})") from None
        sys.stdout.write(text)
    else:
        raise FileNotFoundError(f"{args.target} is neither a bundle directory nor a program file")
    return 0


def _asm(args) -> int:
    from dtpu.isro import isa
    if not args.source.is_file():
        raise FileNotFoundError(f"assembly source {args.source} does not exist")
    try:
        program = isa.assemble(args.source.read_text())
    except UnicodeDecodeError:
        raise ValueError(f"{args.source}: not a text file; expected assembly in the disassembler's "
                         f"format") from None
    except ValueError as exc:
        raise ValueError(f"{args.source}: {exc}") from None
    args.output.write_bytes(isa.encode_program(program))
    print(f"{len(program)} instructions -> {args.output}")
    return 0
