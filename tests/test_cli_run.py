"""`dtpu run MODEL`: delegated vs CPU interpreter, per-invoke reports, exit status (subprocesses)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.delegate_util import dtpu_so  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "models" / "zoo"
MOBILENET = ZOO / "mobilenet_like__int8.tflite"


def _dtpu(*args, env=None, code=None):
    e = {k: v for k, v in os.environ.items() if k not in ("DTPU_PYNQ_EMULATE", "DTPU_BITSTREAM")}
    e["PYTHONPATH"] = str(ROOT / "pylib") + os.pathsep + str(ROOT)
    e.update(env or {})
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "dtpu.cli", *args]
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300, cwd=ROOT)


def _json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_help_lists_run_next_to_the_existing_commands():
    proc = _dtpu("--help")
    assert proc.returncode == 0
    for command in ("build", "path", "run"):
        assert command in proc.stdout


@pytest.fixture(scope="module")
def model_run(dtpu_so):
    proc = _dtpu("run", str(MOBILENET), "--backend", "model", "--report", "json", "--invokes", "2")
    assert proc.returncode == 0, proc.stderr
    return _json_lines(proc.stdout), proc.stderr


def test_json_reports_and_summary(model_run):
    lines, stderr = model_run
    *reports, summary = lines
    assert [r["type"] for r in reports] == ["invoke", "invoke"]
    assert summary == {"type": "summary", "model": str(MOBILENET), "backend": "model", "invokes": 2,
                       "agree": True, "max_difference": 0.0, "delegated_nodes": 15}
    for r in reports:   # 13 convolutions, the MEAN on the vector unit and the FC it joins
        assert r["backend"] == "model" and len(r["nodes"]) == 15 and r["hw"]["cycles"] > 0
        assert [n["op"] for n in r["nodes"]][-2:] == ["mean", "fully_connected"]
        assert r["power"]["method"] == "estimated" and r["power"]["energy_j"] > 0
    assert "invoke 1: outputs equal" in stderr and "(bit-exact)" in stderr


def test_board_emulation_agrees_with_the_same_cycles(dtpu_so):
    """DTPU_PYNQ_EMULATE=1.2: the emulated board's 1.2 design (make CONTRACT=1, job by job): the
    same cycles node by node as backend=model on the same path."""
    proc = _dtpu("run", str(MOBILENET), "--backend", "pynq", "--report", "json", "--invokes", "2",
                 env={"DTPU_PYNQ_EMULATE": "1.2"})
    assert proc.returncode == 0, proc.stderr
    *reports, summary = _json_lines(proc.stdout)
    assert summary["agree"] and summary["backend"] == "pynq"
    ref = _dtpu("run", str(MOBILENET), "--backend", "model", "--report", "json", "--invokes", "2",
                "--option", "path=jobs")
    assert ref.returncode == 0, ref.stderr
    model_reports = _json_lines(ref.stdout)[:-1]
    for board, model in zip(reports, model_reports):
        assert [n["hw"]["cycles"] for n in board["nodes"]] == [n["hw"]["cycles"] for n in model["nodes"]]
        assert board["power"]["temperature_c"]["avg"] > 0
    assert "XADC" in proc.stderr and "synthetic" in proc.stderr  # the emulation says so


def test_board_emulation_of_the_2_0_design_runs_command_lists(dtpu_so):
    """DTPU_PYNQ_EMULATE=1: the default design, contract 2.0's (no DMAs; =2 is the same); the
    same lists, so the same cycles node by node as backend=model's default path, and one
    doorbell per partition. The same nodes on both: both claim the convolutions only (ops
    listed), the lists of the 2.0 core without its vector unit's part."""
    ops = ("--option", "ops=conv2d,depthwise_conv2d")
    proc = _dtpu("run", str(MOBILENET), "--backend", "pynq", "--report", "json", "--invokes", "2",
                 *ops, env={"DTPU_PYNQ_EMULATE": "1"})
    assert proc.returncode == 0, proc.stderr
    *reports, summary = _json_lines(proc.stdout)
    assert summary["agree"] and summary["backend"] == "pynq"
    ref = _dtpu("run", str(MOBILENET), "--backend", "model", "--report", "json", "--invokes", "2",
                *ops)
    assert ref.returncode == 0, ref.stderr
    model_reports = _json_lines(ref.stdout)[:-1]
    assert len(model_reports[0]["nodes"]) == 13
    for board, model in zip(reports, model_reports):
        assert [n["hw"]["cycles"] for n in board["nodes"]] == [n["hw"]["cycles"] for n in model["nodes"]]
        assert board["host"]["doorbells"] == board["kernels"] and board["host"]["dma_starts"] == 0


def test_table_report(dtpu_so):
    proc = _dtpu("run", str(ZOO / "dscnn_like__float32.tflite"), "--report", "table")
    assert proc.returncode == 0, proc.stderr
    assert "dtpu report: backend=model" in proc.stdout
    # issue 24.6 and 24.3: three invokes by default, one table with a steady state; each node
    # its own device time, the host time on the partition; every CPU node listed with its reason
    assert "invokes=3 (per-node means over the steady state: 2 invokes after the first" in proc.stdout
    assert "device: the node's cycles at the build's clock" in proc.stdout
    assert "host time per command list" in proc.stdout and "  partition 1 (nodes 0-8): pack" in proc.stdout
    assert ("left on the CPU: 4 nodes (1 AVERAGE_POOL_2D, 1 RESHAPE, 1 FULLY_CONNECTED, 1 SOFTMAX); "
            "the delegated nodes run as 1 partition between them:") in proc.stdout
    assert ("node 9 AVERAGE_POOL_2D dscnn_like/avgpool/AvgPool: float32 -> float32 tensors (the "
            "vector unit takes int8 or uint8 in and out)") in proc.stdout
    assert "power: avg" in proc.stdout and "(estimated: the DTPU's own" in proc.stdout
    assert "outputs agree with the CPU interpreter (within 1e-05 relative)" in proc.stdout \
        or "(bit-exact)" in proc.stdout


def test_differing_outputs_exit_1_naming_the_output(dtpu_so):
    code = ("import sys; from dtpu.backends.null import register_null_backend; "
            "register_null_backend(); from dtpu.cli import main; sys.exit(main(['run'] + sys.argv[1:]))")
    proc = _dtpu(str(MOBILENET), "--backend", "null", "--report", "none", code=code)
    assert proc.returncode == 1
    assert "the delegated outputs (backend=null) differ from the CPU interpreter's" in proc.stderr
    assert "invoke 0 (seed 0), output 0" in proc.stderr and "values differ, first at" in proc.stderr


@pytest.mark.parametrize("args,message", [
    (["no/such/model.tflite"], "model 'no/such/model.tflite' does not exist"),
    ([str(MOBILENET), "--mxu", "9y9"], "option 'mxu'='9y9' is invalid"),
    ([str(MOBILENET), "--option", "novalue"], "--option 'novalue' is not KEY=VALUE"),
    ([str(MOBILENET), "--invokes", "0"], "--invokes 0 is invalid"),
    ([str(MOBILENET), "--backend", "pynq"], "backend=pynq needs the pynq package"),
])
def test_errors_exit_2_with_a_message(dtpu_so, args, message):
    proc = _dtpu("run", *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
