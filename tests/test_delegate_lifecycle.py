"""Delegates and interpreters in numbers, batches, resizes, threads, reports, and no leaks."""
from __future__ import annotations

import gc
import json
import os
import threading

import numpy as np
import pytest

from dtpu.backends.base import Backend
from tests.delegate_util import DATA, assert_matches, dtpu_so, random_inputs, run, tfl  # noqa: F401

EXACT = DATA / "split_int16x8.tflite"   # integer, two partitions split by a CPU op
FLOAT = DATA / "split_float32.tflite"


def _cpu(tfl, path, shape=None):
    it = tfl.Interpreter(model_path=str(path))
    if shape is not None:
        it.resize_tensor_input(it.get_input_details()[0]["index"], shape)
    it.allocate_tensors()
    return it


def test_many_interpreters_and_delegates(dtpu_so, tfl):
    import dtpu

    shared = dtpu.load_delegate({"backend": "reference"})
    interpreters = [tfl.Interpreter(model_path=str(p), experimental_delegates=[shared])
                    for p in (EXACT, FLOAT)]
    interpreters += [dtpu.make_interpreter(p, {"backend": "reference"}) for p in (EXACT, FLOAT)]
    for it in interpreters:
        it.allocate_tensors()
    cpus = {p: _cpu(tfl, p) for p in (EXACT, FLOAT)}
    paths = [EXACT, FLOAT, EXACT, FLOAT]
    for seed in range(3):
        for it, path in zip(interpreters, paths):
            inputs = random_inputs(cpus[path], seed)
            for got, want in zip(run(it, inputs), run(cpus[path], inputs)):
                assert_matches(got, want, f"{path.name} seed {seed}")
    reports = dtpu.reports()
    assert len({(r.delegate, r.graph) for r in reports[-12:]}) == 4


@pytest.mark.parametrize("path", [EXACT, FLOAT, DATA / "chain_float32.tflite"])
def test_batch_and_input_resizing(path, dtpu_so, tfl):
    import dtpu

    it = dtpu.make_interpreter(path, {"backend": "reference"})
    index = it.get_input_details()[0]["index"]
    for shape in ([3, 12, 12, 3], [2, 16, 9, 3], [1, 12, 12, 3]):
        it.resize_tensor_input(index, shape)
        it.allocate_tensors()
        cpu = _cpu(tfl, path, shape)
        inputs = random_inputs(cpu, seed=sum(shape))
        for got, want in zip(run(it, inputs), run(cpu, inputs)):
            assert_matches(got, want, f"{path.name} {shape}")
        assert dtpu.last_report().nodes[0].input_shape[:1] == (shape[0],)


def test_invoke_from_worker_threads(dtpu_so, tfl):
    import dtpu

    errors: list[BaseException] = []

    def work(path, seed):
        try:
            it = dtpu.make_interpreter(path, {"backend": "reference"})
            it.allocate_tensors()
            cpu = _cpu(tfl, path)
            for s in range(5):
                inputs = random_inputs(cpu, seed + s)
                for got, want in zip(run(it, inputs), run(cpu, inputs)):
                    assert_matches(got, want, path.name)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(p, 10 * i)) for i, p in enumerate([EXACT, FLOAT, EXACT])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


@pytest.mark.parametrize("backend", ["reference", "model"])
def test_interpreters_created_concurrently_on_one_delegate(backend, dtpu_so, tfl):
    """Issue 24.8: four threads build, allocate and invoke interpreters on one shared delegate
    at the same moment (a barrier before the constructor); each delegate Prepare and the kernels
    it creates are serialized inside, and every output equals the CPU's bit for bit."""
    import dtpu

    shared = dtpu.load_delegate({"backend": backend})
    paths = [EXACT] * 4
    start = threading.Barrier(len(paths))
    errors: list[BaseException] = []
    claimed: list[int] = []

    def work(path, seed):
        try:
            start.wait(timeout=60)
            it = tfl.Interpreter(model_path=str(path), experimental_delegates=[shared])
            it.allocate_tensors()
            claimed.append(sum(op["op_name"] == "DELEGATE" for op in it._get_ops_details()))
            # (int16x8: XNNPACK, applied after the DTPU, claims none of it)
            cpu = _cpu(tfl, path)
            for s in range(3):
                inputs = random_inputs(cpu, seed + s)
                for got, want in zip(run(it, inputs), run(cpu, inputs)):
                    np.testing.assert_array_equal(got, want, err_msg=f"{path.name} seed {seed + s}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(p, 10 * i)) for i, p in enumerate(paths)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert claimed == [2] * len(paths), claimed     # two partitions delegated in every one


def test_report_summary_is_printed_when_the_delegate_goes(dtpu_so, tfl, capfd):
    import dtpu

    it = dtpu.make_interpreter(EXACT, {"backend": "reference", "report": "summary"})
    it.allocate_tensors()
    for seed in range(2):
        run(it, random_inputs(it, seed))
    del it
    gc.collect()
    err = capfd.readouterr().err
    assert "dtpu report: backend=reference" in err and "invokes=2" in err
    assert "depthwise_conv2d" in err and "per invoke (steady state): total mean" in err
    # the first invoke (and the prepare before it) are reported apart, not folded into the means
    assert "steady state: 1 invokes after the first" in err
    assert "first invoke after prepare (not in the means): total" in err and "; prepare " in err


def test_first_invoke_is_flagged_and_carries_the_prepare_time(dtpu_so, tfl):
    import dtpu

    it = dtpu.make_interpreter(EXACT, {"backend": "reference"})
    it.allocate_tensors()
    flags = []
    for seed in range(3):
        run(it, random_inputs(it, seed))
        r = dtpu.last_report()
        flags.append((r.first, r.prepare_us is not None and r.prepare_us > 0))
    assert flags == [(True, True), (False, False), (False, False)]
    assert r.to_dict()["first"] is False and "prepare_us" in r.to_dict()
    # a resize prepares the kernels again: the next invoke is a first invoke once more
    d = it.get_input_details()[0]
    it.resize_tensor_input(d["index"], [2, *d["shape"][1:]])
    it.allocate_tensors()
    run(it, random_inputs(it, 7))
    assert dtpu.last_report().first


def test_report_json_lines(dtpu_so, tfl, tmp_path):
    import dtpu
    from dtpu.report import HOST_FIELDS, HW_FIELDS, POWER_FIELDS, TIMING_FIELDS

    target = tmp_path / "runs.jsonl"
    it = dtpu.make_interpreter(DATA / "wide_hybrid.tflite", {"backend": "reference", "report": str(target)})
    it.allocate_tensors()
    for seed in range(3):
        run(it, random_inputs(it, seed))
    del it
    gc.collect()
    dtpu.reports()
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(records) == 3 and [r["type"] for r in records] == ["invoke"] * 3
    for r in records:
        assert set(TIMING_FIELDS) <= set(r["timing_us"]) and r["timing_us"]["total"] > 0
        assert set(HW_FIELDS) <= set(r["hw"]) and set(POWER_FIELDS) <= set(r["power"])
        assert [n["op"] for n in r["nodes"]] == ["depthwise_conv2d"]
        assert len(r["rejected"]) == 2 and all("hybrid" in x["reason"] for x in r["rejected"])
        # backend=reference has no device protocol: the host record's fields, all null
        assert r["host"] == {k: None for k in HOST_FIELDS}
        assert all(n["host"] == {k: None for k in HOST_FIELDS} for n in r["nodes"])


@pytest.mark.parametrize("path", ["jobs", "lists"])
def test_report_host_record_in_json_lines_and_the_summary_table(path, dtpu_so, tfl, tmp_path):
    """backend=model: every node's host record, their sums in the invoke's record, one line of
    steady-state means in the summary table. Job by job (1.2) the golden model never waits
    (idle 0); a command list (2.0) waits on memory (idle > 0) and costs one doorbell."""
    import dtpu
    from dtpu.report import HOST_FIELDS

    target = tmp_path / "runs.jsonl"
    it = dtpu.make_interpreter(DATA / "wide_hybrid.tflite", {"backend": "model", "report": str(target),
                                                              "path": path})
    it.allocate_tensors()
    for seed in range(3):
        run(it, random_inputs(it, seed))
    table = dtpu.last_report().table()
    del it
    gc.collect()
    dtpu.reports()
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(records) == 3
    for r in records:
        assert list(r["host"]) == list(HOST_FIELDS)
        assert (r["hw"]["idle_cycles"] == 0) if path == "jobs" else (r["hw"]["idle_cycles"] > 0)
        for k in HOST_FIELDS:
            assert r["host"][k] == pytest.approx(sum(n["host"][k] for n in r["nodes"]))
        assert r["host"]["doorbells"] >= len(r["nodes"]) == 1 and r["host"]["us"] > 0
        if path == "lists":
            assert r["host"]["doorbells"] == 1 and r["host"]["dma_starts"] == 0
    h = records[-1]["host"]
    assert (f"host per invoke (steady state): {h['mmio_reads']} register reads, "
            f"{h['mmio_writes']} writes, {h['doorbells']} doorbells, {h['dma_starts']} DMA starts, "
            f"{h['transforms']} transforms, ") in table


def _rss_kib() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_create_destroy_cycles_keep_memory_flat(dtpu_so, tfl):
    import dtpu
    from dtpu.delegate import runtime as rt

    content = EXACT.read_bytes()
    x = random_inputs(_cpu(tfl, EXACT))

    def cycle():
        delegate = dtpu.load_delegate({"backend": "reference"})
        it = tfl.Interpreter(model_content=content, experimental_delegates=[delegate])
        it.allocate_tensors()
        run(it, x)
        del it
        del delegate

    for _ in range(30):
        cycle()
    gc.collect()
    before, delegates, kernels = _rss_kib(), len(rt.DELEGATES), len(rt.KERNELS)
    for _ in range(300):
        cycle()
    gc.collect()
    growth = _rss_kib() - before
    assert len(rt.DELEGATES) == delegates and len(rt.KERNELS) == kernels
    assert growth < 4096, f"RSS grew by {growth} KiB over 300 create/destroy cycles"


class BrokenBackend(Backend):
    """A backend that fails where told to (registered under backend=broken-<where>)."""

    def __init__(self, options=None, where="invoke"):
        self.where = where

    def prepare(self, spec, filters, bias):
        if self.where == "prepare":
            raise RuntimeError("prepare exploded")
        return spec

    def invoke(self, handle, x, probes):
        if self.where == "invoke":
            raise RuntimeError("invoke exploded")
        return np.zeros((1, 1), np.float64), None  # wrong dtype and shape

    def release(self, handle):
        pass

    def close(self):
        pass


class BrokenPrepare(BrokenBackend):
    def __init__(self, options=None):
        super().__init__(options, "prepare")


class BrokenInvoke(BrokenBackend):
    def __init__(self, options=None):
        super().__init__(options, "invoke")


class BrokenOutput(BrokenBackend):
    def __init__(self, options=None):
        super().__init__(options, "output")


@pytest.mark.parametrize("name, stage, message", [
    ("broken-prepare", "allocate", "prepare exploded"),
    ("broken-invoke", "invoke", "invoke exploded"),
    ("broken-output", "invoke", "returned float64"),
])
def test_backend_failures_become_errors_not_crashes(name, stage, message, dtpu_so, tfl):
    import dtpu
    from dtpu import backends

    cls = {"broken-prepare": "BrokenPrepare", "broken-invoke": "BrokenInvoke",
           "broken-output": "BrokenOutput"}[name]
    with backends.registered(name, f"tests.test_delegate_lifecycle:{cls}"):
        it = dtpu.make_interpreter(EXACT, {"backend": name})
        with pytest.raises(RuntimeError) as info:
            it.allocate_tensors()
            run(it, random_inputs(it))
    assert message in str(info.value)
    assert name not in backends.names()
    # the process and the next delegate are fine
    good = dtpu.make_interpreter(EXACT, {"backend": "reference"})
    good.allocate_tensors()
    cpu = _cpu(tfl, EXACT)
    inputs = random_inputs(cpu)
    for got, want in zip(run(good, inputs), run(cpu, inputs)):
        assert_matches(got, want)


class SpyBackend(Backend):
    """Records the address of every activation it is handed (reference results otherwise)."""

    seen: list[int] = []

    def __init__(self, options=None):
        from dtpu.backends.reference import ReferenceBackend

        self.inner = ReferenceBackend(options)

    def prepare(self, spec, filters, bias):
        return self.inner.prepare(spec, filters, bias)

    def invoke(self, handle, x, probes):
        SpyBackend.seen.append(x.__array_interface__["data"][0])
        return self.inner.invoke(handle, x, probes)

    def power(self):
        return self.inner.power()

    def release(self, handle):
        pass

    def close(self):
        pass


def test_activations_are_read_in_place(dtpu_so, tfl):
    import dtpu
    from dtpu import backends

    with backends.registered("spy", "tests.test_delegate_lifecycle:SpyBackend"):
        it = dtpu.make_interpreter(EXACT, {"backend": "spy"})
        it.allocate_tensors()
    SpyBackend.seen.clear()
    run(it, random_inputs(it))
    model_input = it.tensor(it.get_input_details()[0]["index"])()
    assert SpyBackend.seen[0] == model_input.__array_interface__["data"][0]


def test_log_level_lasts_as_long_as_its_delegate(dtpu_so, tfl):
    """option log_level changes the `dtpu` logger only while its delegate lives: destroying the
    delegate gives the logger back its level and handlers, the newest live delegate's level
    holds while several live, and a delegate that fails to load leaves nothing behind."""
    import logging

    import dtpu

    logger = logging.getLogger("dtpu")
    before = (logger.level, list(logger.handlers))
    logger.setLevel(logging.ERROR)
    try:
        first = dtpu.load_delegate({"backend": "reference", "log_level": "debug"})
        assert logger.level == logging.DEBUG
        second = dtpu.load_delegate({"backend": "reference", "log_level": "warning"})
        assert logger.level == logging.WARNING
        del second
        gc.collect()
        assert logger.level == logging.DEBUG
        del first
        gc.collect()
        assert logger.level == logging.ERROR
        assert logger.handlers == before[1]      # a stderr handler it added is gone too
        with pytest.raises(ValueError):
            dtpu.load_delegate({"backend": "model", "log_level": "debug", "mxu": "4x8"})
        assert logger.level == logging.ERROR
    finally:
        logger.setLevel(before[0])
        for h in list(logger.handlers):
            if h not in before[1]:
                logger.removeHandler(h)
