"""Regenerate docs/partitions.md: delegated partitions per canonical zoo model, before and after
PAD folding, views and FULLY_CONNECTED by default (issue #25), and what still runs on the CPU.

    PYTHONPATH=pylib python docs/partitions.py            # rewrite the table in docs/partitions.md
    PYTHONPATH=pylib python docs/partitions.py --check    # exit 1 when the file differs

Counted at the delegate's Prepare with the default backend (backend=model, the board build's
memories): what TFLite hands the delegate, no invoke. tests/test_partitions_doc.py keeps the
file equal to this script's output.
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "partitions.md"
ZOO = ROOT / "tests" / "models" / "zoo"
MODELS = ("mobilenet_v1_025_96__int8", "dscnn_like__int8", "mobilenet_v2_224__int8",
          "mobilenet_v1_224__int8", "resnet18_half_224__int8", "efficientnet_b0_224__int8",
          "inception_like_224__int8")
SMALL = MODELS[:2]          # the ones the default test suite regenerates
BEFORE = {"fold": "off", "ops": "conv2d,depthwise_conv2d"}
BEGIN, END = "<!-- partitions table: begin (docs/partitions.py) -->", "<!-- partitions table: end -->"


def count(name: str, options: dict) -> tuple[int, list[dict]]:
    """(partitions, rejected nodes) of a zoo model under `options`, read at Prepare."""
    import dtpu
    from dtpu.delegate import runtime as rt

    it = dtpu.make_interpreter(ZOO / f"{name}.tflite", dict(options))
    try:
        it.allocate_tensors()
        with rt.LOCK:
            graphs = [g for s in rt.DELEGATES.values() for g in s.graphs.values()]
            graph = max(graphs, key=lambda g: g.id)
            return len(graph.kernels), list(graph.rejected)
    finally:
        del it


def row(name: str) -> str:
    before, _ = count(name, BEFORE)
    after, rejected = count(name, {})
    ops = collections.Counter(r["op"] for r in rejected)
    reasons: dict[str, set] = {}
    for r in rejected:
        # one line per kind of reason: tensor names (quoted) vary from node to node
        reasons.setdefault(r["op"], set()).add(re.sub(r"'[^']*'", "(a tensor)", r["reason"]))
    left = ", ".join(f"{n} {op}" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))
    why = "; ".join(f"{op}: {' / '.join(sorted(rs))}" for op, rs in sorted(reasons.items()))
    return f"| `{name}` | {before} | {after} | {left or 'nothing'} | {why or '-'} |"


def table(names=MODELS) -> str:
    lines = ["| model | partitions before | after | operators left on the CPU | why |",
             "|---|---|---|---|---|"]
    lines += [row(n) for n in names]
    return "\n".join(lines) + "\n"


def render(text: str, names=MODELS) -> str:
    """`text` (docs/partitions.md) with its table regenerated."""
    start, stop = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + table(names) + text[stop:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs")
    args = parser.parse_args(argv)
    text = DOC.read_text()
    new = render(text)
    if args.check:
        return 0 if new == text else 1
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
