"""The table a board user reads first: the DTPU's estimated whole invoke on the PYNQ-Z2 (the C
invoke path, the current MXU) for the MLPerf Tiny tasks and MobileNet v1/v2 224, beside what
others published on the same chip (the XC7Z020, or its Cortex-A9 alone).

The DTPU side is :func:`dtpu.board.estimate.estimate` on the zoo model that stands for each task
(none of them is the benchmark's trained network: same shapes and operators, random weights, so
the figures are the network's cost, not its accuracy). The clock is the design's 100 MHz target,
which nothing here proves yet: the table also gives the device time at the slowest unit placed so
far on the timing proxy (hw/synth/results.json, docs/synthesis.md "Timing evidence"). Published
figures are :data:`PUBLISHED`, each with where it was read and whether it was re-checked here.
benchmarks/bench_board_estimate.py prints the table; docs/board_estimate.md carries it.
"""
from __future__ import annotations

import json
from pathlib import Path

from dtpu.board.costs import fold_ms

ROOT = Path(__file__).resolve().parents[3]

#: the tasks of the table: (task, model file relative to the checkout or None, what stands for what)
TASKS = [
    ("MLPerf Tiny VWW", "tests/models/zoo/mobilenet_v1_025_96__int8.tflite",
     "mobilenet_v1_025_96: MobileNet v1 0.25 at 96x96x3, the VWW reference network's shape"),
    ("MLPerf Tiny KWS", "tests/models/zoo/dscnn_like__int8.tflite",
     "dscnn_like: a DS-CNN on the 49x10x1 MFCC input, narrower than the reference DS-CNN"),
    ("MLPerf Tiny IC", "tests/isro/resnet8_int8.tflite",
     "resnet8_int8: the ResNet-8 of MLPerf Tiny image classification (32x32x3)"),
    ("MLPerf Tiny AD", "tests/models/zoo/autoencoder_toyadmos__int8.tflite",
     "autoencoder_toyadmos: the reference autoencoder's ten FULLY_CONNECTED layers "
     "(640-128x4-8-128x4-640), seeded weights"),
    ("MobileNet v1 1.0 224", "tests/models/zoo/mobilenet_v1_224__int8.tflite",
     "mobilenet_v1_224: MobileNet v1 1.0 at 224x224x3"),
    ("MobileNet v2 1.0 224", "tests/models/zoo/mobilenet_v2_224__int8.tflite",
     "mobilenet_v2_224: MobileNet v2 1.0 at 224x224x3"),
    ("ResNet-18 224", None,
     "no zoo model: resnet18_half_224 has half ResNet-18's channels (about a quarter of its "
     "MACs), not comparable"),
]

#: published figures on the XC7Z020 or a Zynq-7000 Cortex-A9: task, system, where it ran, ms per
#: inference, the figure as published, source, year, and whether it was re-read here
PUBLISHED = [
    dict(task="MLPerf Tiny VWW", system="fpgaConvNet (dataflow FPGA design)",
         where="ZedBoard XC7Z020, MLPerf Tiny v1.1 closed", ms=1e3 / 105.412,
         figure="105.4 inferences/s",
         source="https://github.com/mlcommons/tiny_results_v1.1 closed/fpgaconvnet/results/"
                "zedboard/vww/performance/results.txt", year=2023, checked=True),
    dict(task="MLPerf Tiny VWW", system="TinyMaix (CPU library, NEON)",
         where="Zynq-7010 Cortex-A9 667 MHz", ms=44.0, figure="44 ms (vww96 int8)",
         source="https://github.com/sipeed/TinyMaix benchmark.md; doc/porting/port_ZYNQ-7010.md "
                "(43.7-50.2 ms)", year=2022, checked=True),
    dict(task="MLPerf Tiny KWS", system="fpgaConvNet (dataflow FPGA design)",
         where="ZedBoard XC7Z020, MLPerf Tiny v1.1 closed", ms=1e3 / 3087.887,
         figure="3,087.9 inferences/s",
         source="https://github.com/mlcommons/tiny_results_v1.1 closed/fpgaconvnet/results/"
                "zedboard/kws/performance/results.txt", year=2023, checked=True),
    dict(task="MLPerf Tiny IC", system="fpgaConvNet (dataflow FPGA design)",
         where="ZedBoard XC7Z020, MLPerf Tiny v1.1 closed", ms=1e3 / 2431.435,
         figure="2,431.4 inferences/s",
         source="https://github.com/mlcommons/tiny_results_v1.1 closed/fpgaconvnet/results/"
                "zedboard/ic/performance/results.txt", year=2023, checked=True),
    dict(task="MLPerf Tiny IC", system="hls4ml (dataflow FPGA design, ResNet RN08)",
         where="PYNQ-Z2 XC7Z020, MLPerf Tiny v1.0 open", ms=1e3 / 130.834,
         figure="130.8 inferences/s",
         source="https://github.com/mlcommons/tiny_results_v1.0 open/hls4ml/results/pynq-z2/ic/"
                "RN08/performance/results.txt; Borras et al., arXiv 2206.11791", year=2022,
         checked=True),
    dict(task="MLPerf Tiny AD", system="hls4ml (dataflow FPGA design, AD08: 64 inputs, 72 wide, "
         "12-bit; a far smaller net than the reference)",
         where="PYNQ-Z2 XC7Z020, MLPerf Tiny v0.7 open", ms=1e3 / 53365.414,
         figure="53,365.4 inferences/s",
         source="https://github.com/mlcommons/tiny_results_v0.7 open/hls4ml-finn/results/pynq-z2/ad/"
                "AD08/performance/results.txt (median); the net: open/hls4ml-finn/code/ad/AD08/"
                "training/ad08.yml", year=2022, checked=True),
    dict(task="MobileNet v1 1.0 224", system="ncnn int8 (CPU library, 2 threads)",
         where="Zynq-7000 Cortex-A9 766 MHz", ms=241.0, figure="241 ms",
         source="as given in issue 27; not found in the sources searched here (not re-checked)",
         year=None, checked=False),
    dict(task="ResNet-18 224", system="VTA (TVM's accelerator)",
         where="PYNQ-Z1/Z2 XC7Z020", ms=419.0, figure="419 ms",
         source="as given in issue 27 (Moreau et al., VTA, IEEE Micro 2019); not re-checked here",
         year=2019, checked=False),
]


def proven_clock(results: Path | None = None) -> dict:
    """What docs/synthesis.md's timing section shows about the clock: the slowest unit placed so
    far on the proxy and its fmax, how many placed units miss 100 MHz, how many were not run."""
    path = results or ROOT / "hw" / "synth" / "results.json"
    timing = json.loads(Path(path).read_text())["timing"]
    # the table times the overlay's default build (hw/synth/timing.py --build); the units only
    # the other builds have are its optional rows: the slowest placed unit of the timed build is
    # the proven clock, and a unit of it with no entry yet counts as not run
    optional = timing.get("optional_units", {})
    mods = [m for label, m in timing["modules"].items() if label not in optional]
    missing = [label for label in timing.get("units", {}) if label not in optional
               and label not in timing["modules"]]
    placed = [m for m in mods if m.get("placed") and m.get("fmax_mhz")]
    if not placed:
        raise ValueError(f"{path}: no placed unit with an fmax in its timing section")
    slow = min(placed, key=lambda m: m["fmax_mhz"])
    return dict(module=slow["module"], fmax_mhz=float(slow["fmax_mhz"]),
                below=sum(m["fmax_mhz"] < 100.0 for m in placed), placed=len(placed),
                not_run=sum(1 for m in mods if not m.get("placed")) + len(missing),
                build=timing.get("build", "int16"),
                target_mhz=float(timing.get("target_mhz", 100.0)))


def default_build_summary() -> str:
    """The default board build as the comparison names it."""
    from dtpu.board.design import BOARD_BUILDS, DEFAULT_BOARD_BUILD

    return f"{DEFAULT_BOARD_BUILD}: {BOARD_BUILDS[DEFAULT_BOARD_BUILD].summary}"


def dtpu_row(result: dict, clock: dict, c: dict) -> dict | None:
    """The DTPU's figures of one estimate (its C-path row): whole invoke at the fabric clock,
    at the proxy's slowest fmax, and with every run's report read (the Python that folds a C
    run into its report, which report=none leaves until a report is read)."""
    rows = {r["path"]: r for r in result["rows"]}
    r = rows.get("c")
    if r is None:
        return None
    slow_device = r["device_ms"] * c["fabric_mhz"] / clock["fmax_mhz"]
    return dict(whole_ms=r["whole_ms"], slow_ms=r["whole_ms"] - r["device_ms"] + slow_device,
                read_ms=r["whole_ms"] - r["host"]["python"] + fold_ms(result["nodes"], c),
                device_ms=r["device_ms"],
                tflite_ms=r["tflite_ms"], macs=result["cpu_side"]["model_macs"],
                partitions=result["partitions"])


def table(results: dict[str, dict], c: dict, clock: dict) -> str:
    """The markdown table: one line per published figure (or per task without one), the
    DTPU's estimate beside it. `results`: task -> estimate (those with a model)."""
    head = (f"| task | stands for it here | M MACs | DTPU ms, C path, {c['fabric_mhz']:.0f} MHz "
            f"| at {clock['fmax_mhz']:g} MHz | each report read | TFLite A9 ms (est.) "
            "| published system | where | published ms | DTPU / published time |")
    out = [head, "|" + " --- |" * (head.count(" | ") + 1)]
    for task, _file, stands in TASKS:
        d = dtpu_row(results[task], clock, c) if task in results else None
        if d is None:
            dtpu = "| - | - | - | - | - "
        else:
            dtpu = (f"| {d['macs'] / 1e6:.1f} | {d['whole_ms']:.2f} | {d['slow_ms']:.2f} "
                    f"| {d['read_ms']:.2f} | {d['tflite_ms']:.1f} ")
        pubs = [p for p in PUBLISHED if p["task"] == task] or [None]
        for p in pubs:
            if p is None:
                theirs = "| - | - | - | - |"
            else:
                ratio = f"{d['whole_ms'] / p['ms']:.2f}x" if d else "-"
                mark = "" if p["checked"] else " (not re-checked)"
                theirs = (f"| {p['system']} | {p['where']} | {p['ms']:.2f} ({p['figure']}{mark}) "
                          f"| {ratio} |")
            out.append(f"| {task} | {stands.split(':')[0]} {dtpu}{theirs}")
    return "\n".join(out)


def sources() -> list[str]:
    """One line per published figure: where it was read, the year, whether re-checked."""
    return [f"  {p['task']}, {p['system']}: {p['figure']} [{p['year'] or 'year not known'}; "
            f"{'re-read here' if p['checked'] else 'not re-checked'}] {p['source']}"
            for p in PUBLISHED]


__all__ = ["PUBLISHED", "TASKS", "proven_clock", "default_build_summary", "dtpu_row", "table",
           "sources"]
