"""Whole models through the delegate: what it claims, and that outputs equal the CPU's.

For every model of the zoo (tests/models/zoo) and of the delegate's own set (tests/data/delegate):
* claims: with the runtime's default delegate (XNNPACK) kept out, no CONV_2D / DEPTHWISE_CONV_2D
  is left on the CPU for the modes the DTPU reproduces (except nodes whose default-interpreter
  output stage dtpu.reference does not reproduce under this runtime), and all of them are for the
  others (float16 weights, dynamic-range/hybrid, non-constant filters);
* outputs: the delegated interpreter equals the default CPU interpreter bit for bit on integer
  models, within 1e-5 relative on float32 ones, with no expected failures.
Runs unchanged under LiteRT (DTPU_TFLITE_RUNTIME=ai_edge_litert in .venv-litert), whose default
interpreter runs int8/uint8 convolutions on XNNPACK (docs/quantization.md).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.delegate_util import (CLAIMED_MODES, DATA, DTPU_OPS, REFUSED_MODES, assert_matches,  # noqa: F401
                                 cpu_ops, dtpu_so, no_default_delegates, own_models, random_inputs,
                                 run, tfl, zoo_entries)

ZOO = zoo_entries()
OWN = own_models()
ALL_OPS = "conv2d,depthwise_conv2d,fully_connected"


def _conv_left(interpreter) -> dict[str, int]:
    left = cpu_ops(interpreter)
    return {op: left[op] for op in DTPU_OPS if left[op]}


def _outputs_equal(a, b) -> bool:
    try:
        for x, y in zip(a, b):
            assert_matches(x, y)
        return True
    except AssertionError:
        return False


def _compare(path, tfl, options, inputs_for=None, invokes=1):
    """Delegated vs the default CPU interpreter, bit for bit on integer models. Under LiteRT the
    default interpreter runs int8/uint8 convolutions on XNNPACK and the delegate reproduces that
    (dtpu.reference's Variant.FP32). Where the default interpreter cannot allocate the model at
    all (LiteRT: XNNPACK refuses a requantization scale >= 256), the delegate leaves that node to
    the CPU, so the delegated interpreter must fail the same way."""
    import dtpu

    cpu = tfl.Interpreter(model_path=str(path))
    try:
        cpu.allocate_tensors()
    except RuntimeError:
        ours = dtpu.make_interpreter(path, options)
        with pytest.raises(RuntimeError):
            ours.allocate_tensors()
        return None
    ours = dtpu.make_interpreter(path, options)
    ours.allocate_tensors()
    for seed in range(invokes):
        inputs = inputs_for(seed) if inputs_for else random_inputs(cpu, seed)
        got = run(ours, inputs)
        want = run(cpu, inputs)
        for g, w in zip(got, want):
            assert_matches(g, w, f"{path.name} seed {seed} ({tfl.runtime_version()})")
    return ours


def _expected_left(path) -> dict[str, int]:
    """CONV_2D / DEPTHWISE_CONV_2D nodes of a claimed mode that must stay on the CPU under this
    runtime: those whose default-interpreter output stage dtpu.reference does not reproduce."""
    from dtpu import reference, tflite_model
    from dtpu.tflite import RUNTIME

    model = tflite_model.load(path)
    left: dict[str, int] = {}
    for op in model.operators("CONV_2D", "DEPTHWISE_CONV_2D"):
        spec, _, b = tflite_model.conv_spec(model.main, op)
        if spec.mode.is_quantized and reference.find_rounding_variant(spec, b, "default", RUNTIME)[0] is None:
            left[op.opcode] = left.get(op.opcode, 0) + 1
    return left


@pytest.mark.parametrize("name", sorted(OWN))
def test_own_model_claims(name, dtpu_so, tfl):
    import dtpu

    entry = OWN[name]
    for ops, expected in (("conv2d,depthwise_conv2d", entry["cpu_ops"]), (ALL_OPS, entry["cpu_ops_fc"])):
        it = dtpu.make_interpreter(DATA / entry["file"], {"ops": ops}, **no_default_delegates(tfl))
        it.allocate_tensors()
        want = {k: v for k, v in expected.items() if v}
        assert _conv_left(it) == want, f"{name} with ops={ops}"


@pytest.mark.parametrize("name", sorted(OWN))
def test_own_model_outputs(name, dtpu_so, tfl):
    _compare(DATA / OWN[name]["file"], tfl, {"backend": "reference", "ops": ALL_OPS}, invokes=2)


@pytest.mark.skipif(not ZOO, reason="model zoo (tests/models/zoo) not present")
@pytest.mark.parametrize("entry", ZOO, ids=[e["name"] for e in ZOO])
def test_zoo_model(entry, dtpu_so, tfl):
    import dtpu
    from tests.models import zoo

    path = zoo.model_path(entry)
    claimer = dtpu.make_interpreter(path, {"backend": "reference"}, **no_default_delegates(tfl))
    claimer.allocate_tensors()
    left = _conv_left(claimer)
    convs = {k: v for k, v in entry["op_counts"].items() if v and k in ("CONV_2D", "DEPTHWISE_CONV_2D")}
    if entry["mode"] in REFUSED_MODES:
        assert {k: left.get(k, 0) for k in convs} == convs
    else:
        assert entry["mode"] in CLAIMED_MODES, f"unknown zoo mode {entry['mode']}"
        assert {k: v for k, v in left.items() if k != "FULLY_CONNECTED"} == _expected_left(path), left
    del claimer
    _compare(path, tfl, {"backend": "reference"},
             inputs_for=lambda seed: zoo.make_inputs(entry, seed=seed))


@pytest.mark.parametrize("name, reason", [
    ("wide_hybrid", "hybrid (dynamic-range) quantization"),
    ("chain_float16", "not a constant of the model"),
    ("dynamic_filter", "not a constant of the model"),
])
def test_rejected_nodes_fall_back_with_a_reason(name, reason, dtpu_so, tfl, caplog):
    import logging

    import dtpu

    with caplog.at_level(logging.INFO, logger="dtpu"):
        it = dtpu.make_interpreter(DATA / OWN[name]["file"], {"backend": "reference"})
    logged = [r.getMessage() for r in caplog.records if "stays on the CPU" in r.getMessage()]
    assert logged and all(reason in m for m in logged)
    it.allocate_tensors()
    from dtpu.delegate import runtime as rt

    graphs = [g for s in rt.DELEGATES.values() for g in s.graphs.values() if g.rejected]
    convs = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")   # the others: not DTPU operators
    from dtpu.delegate.support import NO_VECTOR_UNIT, VECTOR_CODES
    vector_ops = {v for v in VECTOR_CODES.values()}   # backend=reference has no vector unit
    assert any(all(reason in r["reason"] if r["op"] in convs
                   else r["reason"] == (NO_VECTOR_UNIT if r["op"] in vector_ops
                                        else "not an operator the DTPU runs")
                   for r in g.rejected)
               and any(r["op"] in convs for r in g.rejected) for g in graphs)
    cpu = tfl.Interpreter(model_path=str(DATA / OWN[name]["file"]))
    cpu.allocate_tensors()
    inputs = random_inputs(cpu)
    for got, want in zip(run(it, inputs), run(cpu, inputs)):
        assert_matches(got, want, name)


def test_forced_precision(dtpu_so, tfl):
    import dtpu

    it = _compare(DATA / "chain_int8.tflite", tfl, {"precision": "int16"})
    assert {n.precision for n in dtpu.last_report().nodes} == {"int16"}
    del it
    it = dtpu.make_interpreter(DATA / "chain_float32.tflite", {"precision": "int8"},
                               **no_default_delegates(tfl))
    it.allocate_tensors()
    assert _conv_left(it) == {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 1}


def test_ops_option_selects_op_kinds(dtpu_so, tfl):
    import dtpu

    it = dtpu.make_interpreter(DATA / "chain_int8.tflite", {"ops": "conv2d"}, **no_default_delegates(tfl))
    it.allocate_tensors()
    assert _conv_left(it) == {"DEPTHWISE_CONV_2D": 1}


def test_report_fields(dtpu_so, tfl):
    import dtpu
    from dtpu.report import HW_FIELDS, POWER_FIELDS, TIMING_FIELDS

    _compare(DATA / "split_int8.tflite", tfl, {"backend": "reference"}, invokes=2)
    report = dtpu.last_report()
    record = report.to_dict()
    for key in ("type", "seq", "delegate", "graph", "backend", "runtime", "started_unix", "complete",
                "kernels", "timing_us", "hw", "power", "nodes", "rejected"):
        assert key in record
    assert record["complete"] and record["kernels"] == 2 and record["backend"] == "reference"
    assert set(TIMING_FIELDS) <= set(record["timing_us"])
    assert set(HW_FIELDS) <= set(record["hw"]) and set(POWER_FIELDS) <= set(record["power"])
    t = record["timing_us"]
    assert t["total"] > 0 and t["crossing"] > 0 and t["compute"] > 0
    assert t["total"] >= t["python"] >= t["compute"]
    assert record["hw"]["macs"] == sum(n["hw"]["macs"] for n in record["nodes"]) > 0
    assert record["power"]["avg_w"] is None  # the reference backend measures no power
    assert [n["node"] for n in record["nodes"]] == [0, 2, 3]
    for node in record["nodes"]:
        assert set(TIMING_FIELDS) - {"total", "crossing", "python"} <= set(node["timing_us"])
        assert set(HW_FIELDS) <= set(node["hw"])
        assert node["mode"] == "int8" and node["precision"] == "int8"
    # issue 24.3: the node between the partitions is listed with its reason and what it causes
    # (a MAX_POOL_2D: the vector unit's, which backend=reference does not have)
    assert [(r["node"], r["reason"]) for r in record["rejected"]] == [
        (1, "target has no vector unit")], record["rejected"]
    assert record["partitions"] == 2
    table = report.table()
    assert "left on the CPU: 1 node (1 " in table and "run as 2 partitions between them" in table
    assert "  node 1 " in table and "compute" in table


def test_every_cpu_node_is_listed_with_its_reason(dtpu_so, tfl):
    """Issue 24.3 on a zoo model with residual ADDs: MobileNet v2's ADD, MEAN and
    FULLY_CONNECTED nodes are in the report with their reasons, and the partitions they cause."""
    import dtpu

    path = DATA.parents[1] / "models" / "zoo" / "mobilenet_v2_224__int8.tflite"
    it = dtpu.make_interpreter(path, {"backend": "reference"})
    it.allocate_tensors()
    run(it, random_inputs(it, 0))
    report = dtpu.last_report()
    kinds = {}
    for r in report.rejected:
        kinds.setdefault(r["op"], set()).add(r["reason"])
    # issue 25: the PADs fold into their SAME convolutions; the lone FULLY_CONNECTED stays
    # ADD and MEAN are the vector unit's (contract 2.1), which backend=reference does not have
    assert kinds == {"ADD": {"target has no vector unit"},
                     "MEAN": {"target has no vector unit"},
                     "FULLY_CONNECTED": {"FULLY_CONNECTED joins no other claimed node: alone it "
                                         "would be a partition of its own (ops=auto; "
                                         "ops=fully_connected claims it anyway)"}}, kinds
    assert len(report.rejected) == 12 and len(report.nodes) == 52 and report.partitions == 11
    table = report.table()
    assert ("left on the CPU: 12 nodes (10 ADD, 1 MEAN, 1 FULLY_CONNECTED); the delegated "
            "nodes run as 11 partitions between them:") in table
    assert "  node 10 ADD mobilenetv2_1.00_224/block_2_add/add: target has no vector unit" in table
