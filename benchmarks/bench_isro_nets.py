#!/usr/bin/env python3
"""Per network on the ISRO-ASIC's default chip profile: instructions, memory, cycles, frames/s at
the profile's clock, and whether every layer is bit-exact against TFLite (issue 28, "Done when").

Each network is compiled for the default profile (docs/isro_isa.md §0: 256 PEs, 1 MiB frame and
4 MiB filter memory, 200 MHz, external memory at 8 B/cycle, all marked assumptions) and run once
on a seeded random input; cycles are the machine model's (dtpu.isro.timing: transfers on
load/store units beside the MAC array). Bit-exactness is `dtpu.isro.verify.against_tflite`: every
layer's output against the TFLite interpreter's tensor (TFLite's CPU kernels are the oracle),
plus the model's output; tensors TFLite computed in place are counted apart.

Networks: the seven ImageNet-scale zoo models (tests/models/zoo), UNet 224 (tests/isro_nets.py,
written on the fly), VGG-16 and VGG-19 at 224 (dtpu.isro.vgg_models, cached in
~/.cache/dtpu/isro, about 140 MB each on first use). The VGGs take a few minutes each (their
TFLite reference too); --quick leaves them out, --no-verify skips the TFLite comparison.

    python benchmarks/bench_isro_nets.py [--quick] [--no-verify] [--only NAME ...]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pylib"))
sys.path.insert(0, str(ROOT / "tests"))

from dtpu.isro import compile_model, profile, run, verify, vgg_models  # noqa: E402
from dtpu.isro.bundle import bundle_profile  # noqa: E402
from dtpu.isro.performance import figures  # noqa: E402
from dtpu.tflite import Interpreter  # noqa: E402

ZOO = ROOT / "tests" / "models" / "zoo"
SEVEN = ("mobilenet_v1_224__int8", "mobilenet_v1_050_224__int8_per_tensor", "mobilenet_v1_050_224__uint8",
         "mobilenet_v2_224__int8", "efficientnet_b0_224__int8", "inception_like_224__int8",
         "resnet18_half_224__int8")


def _networks(quick: bool, tmp: Path) -> list[tuple[str, Path]]:
    nets = [(name, ZOO / f"{name}.tflite") for name in SEVEN]
    import isro_nets                                   # tests/isro_nets.py: the UNet writer
    nets.append(("unet_224_int8", isro_nets.write("unet_224", tmp)[0]))
    if not quick:
        nets += [("vgg16_224_int8", vgg_models.cached(16)), ("vgg19_224_int8", vgg_models.cached(19))]
    return nets


def _measure(name: str, path: Path, check: bool) -> dict:
    t0 = time.time()
    bundle = compile_model(path)
    it = Interpreter(str(path))
    detail = it.get_input_details()[0]
    shape, dtype = tuple(detail["shape"]), detail["dtype"]
    rng = np.random.default_rng(11)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
    result = run(bundle, x)
    meta = bundle.meta
    fig = figures(result.counters, bundle_profile(meta), "i8" if bundle.fmt.name == "I8" else "f32",
                  meta["pe"], result.schedule)
    exact = "not checked"
    if check:
        checks = verify.against_tflite(bundle, result, path, x)
        compared = [c for c in checks if not c.note]
        ref = verify.tflite_reference(path, x)[meta["tflite"]["output_tensor"]]
        same_out = np.array_equal(result.output, ref)
        good = sum(c.exact for c in compared)
        exact = (f"{'yes' if good == len(compared) and same_out else 'NO'}: {good}/{len(compared)} layers"
                 + (f" (+{len(checks) - len(compared)} in place)" if len(checks) > len(compared) else ""))
    program = meta.get("program")
    ops = Counter(ins.op.name.lower() for ins in bundle.program)
    return dict(name=name, placement="staged" if meta.get("staged") else "on-chip",
                instructions=len(bundle.program), streamed=bool(program),
                ops=", ".join(f"{op} {n}" for op, n in ops.most_common()),
                frame=meta["frame_bytes"], filter=meta["filter_bytes"], external=meta.get("external_bytes", 0),
                macs=fig.macs, cycles=fig.cycles, fps=fig.frames_per_s, util=fig.utilization, exact=exact,
                seconds=time.time() - t0)


def _table(rows: list[dict], clock: float) -> str:
    head = (f"| network | placement | instructions | frame / filter / external memory (B) | G MACs | cycles "
            f"| frames/s at {clock:g} MHz | of peak | bit-exact vs TFLite |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        instr = f"{r['instructions']:,}" + (" (streamed)" if r["streamed"] else "") + f" ({r['ops']})"
        mem = f"{r['frame']:,} / {r['filter']:,} / {r['external']:,}"
        lines.append(f"| {r['name']} | {r['placement']} | {instr} | {mem} | {r['macs'] / 1e9:.2f} | "
                     f"{r['cycles']:,} | {r['fps']:.2f} | {100 * r['util']:.1f} % | {r['exact']} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="leave out VGG-16 and VGG-19")
    ap.add_argument("--no-verify", action="store_true", help="skip the layer-by-layer TFLite comparison")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these networks (names as in the table)")
    args = ap.parse_args()
    chip = profile.load()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in _networks(args.quick, Path(tmp)):
            if args.only and name not in args.only:
                continue
            if not path.is_file():
                print(f"{name}: {path} not present, skipped", file=sys.stderr)
                continue
            row = _measure(name, path, not args.no_verify)
            print(f"{name}: {row['cycles']:,} cycles, {row['exact']} ({row['seconds']:.0f} s)", file=sys.stderr)
            rows.append(row)
    print(f"chip profile {chip.name}: pe {chip.pe}, clock {chip.clock_mhz:g} MHz, frame {chip.frame_bytes:,} B, "
          f"filter {chip.filter_bytes:,} B, external {chip.external.bytes_per_cycle:g} B/cycle "
          f"(all assumptions, docs/isro_isa.md §0)")
    print(_table(rows, chip.clock_mhz))
    return 0 if all(not r["exact"].startswith("NO") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
