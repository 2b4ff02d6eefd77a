"""Issue #25 items 1-3: PADs folded into SAME convolutions, RESHAPE / SQUEEZE as views,
FULLY_CONNECTED claimed where it joins a partition; fewer partitions, outputs bit-exact with
TFLite's CPU kernels on backend=model (default), rtl (in process) and the emulated board."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.delegate import folding
from dtpu.delegate.graph import NodeInfo, TensorInfo
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from tests.delegate_util import DATA, dtpu_so, random_inputs, run, tfl  # noqa: F401

ZOO = DATA.parents[1] / "models" / "zoo"
VWW = ZOO / "mobilenet_v1_025_96__int8.tflite"
DSCNN = ZOO / "dscnn_like__int8.tflite"
PADS_SAME_S2 = np.array([[0, 0], [0, 1], [0, 1], [0, 0]], np.int32)   # MobileNet's ZeroPadding


# -- the fold rules, on hand-made graph records -------------------------------------------------

def _t(index, shape, type_="int8", zp=(-3,), constant=False, name=None):
    return TensorInfo(index=index, name=name or f"t{index}", type=type_, shape=tuple(shape),
                      allocation=1 if constant else 2, has_data=constant, nbytes=0,
                      scale=(0.05,) * len(zp) if zp else (), zero_point=tuple(zp))


def _graph(pads=PADS_SAME_S2, code=34, fill=None, conv_padding=2, stride=(2, 2), size=48,
           type_="int8"):
    """x(0) -PAD-> p(2) -CONV 3x3-> y(5); pads in 1, filter 3, bias 4, PADV2 fill in 6."""
    pads = np.asarray(pads)
    padded = [size + int(pads[1].sum()), size + int(pads[2].sum())]
    tensors = {0: _t(0, (1, size, size, 8), type_), 1: _t(1, pads.shape, "int32", (), True),
               2: _t(2, (1, *padded, 8), type_), 3: _t(3, (16, 3, 3, 8), "int8", (0,), True),
               4: _t(4, (16,), "int32", (), True), 5: _t(5, (1, 24, 24, 16), type_),
               6: _t(6, (), type_, (), True)}
    values = {1: pads, 6: np.array(-3 if fill is None else fill)}
    inputs = (0, 1, 6) if code == 60 else (0, 1)
    pad = NodeInfo(index=3, builtin_code=code, version=1, inputs=inputs, outputs=(2,), params=None)
    conv = NodeInfo(index=4, builtin_code=3, version=1, inputs=(2, 3, 4), outputs=(5,),
                    params={"padding": conv_padding, "stride": stride, "dilation": (1, 1),
                            "activation": 0})
    return pad, conv, tensors.__getitem__, lambda info: values[info.index]


def test_mobilenet_pad_folds_into_the_same_convolution():
    pad, conv, tensor, read = _graph()
    fold = folding.pad_fold(pad, conv, tensor, read, consumers=1)
    assert (fold.input_index, fold.output_index, fold.fill) == (0, 2, -3)
    assert fold.pads == ((0, 0), (0, 1), (0, 1), (0, 0))
    q = Quant((0.05,), (-3,))
    valid = ConvSpec(kind=OpKind.CONV_2D, mode=DataMode.INT8, input_shape=(1, 49, 49, 8),
                     filter_shape=(16, 3, 3, 8), stride=(2, 2), padding=Padding.VALID,
                     input_q=q, filter_q=Quant((0.01,), (0,)), output_q=q)
    folded = folding.folded_spec(valid, fold, (1, 48, 48, 8))
    assert folded.padding is Padding.SAME and folded.input_shape == (1, 48, 48, 8)
    assert folded.output_shape == valid.output_shape == (1, 24, 24, 16)
    # after a resize to an odd size SAME pads (1, 1): the fold no longer holds
    with pytest.raises(ValueError, match="not those a SAME convolution adds"):
        folding.folded_spec(valid, fold, (1, 47, 47, 8))


@pytest.mark.parametrize("change, reason", [
    (dict(pads=[[0, 0], [1, 1], [1, 1], [0, 0]]), "not those a SAME convolution adds"),
    (dict(pads=[[0, 0], [0, 3], [0, 1], [0, 0]]), "not those a SAME convolution adds"),
    (dict(pads=[[0, 0], [0, 1], [0, 1], [0, 1]]), "touch the batch or channel"),
    (dict(pads=[[1, 0], [0, 1], [0, 1], [0, 0]]), "touch the batch or channel"),
    (dict(code=60, fill=5), "fill value 5 is not the zero point -3"),
    (dict(conv_padding=1), "SAME already"),
    (dict(type_="float32"), "float32 data"),
])
def test_pads_that_do_not_fold_say_why(change, reason):
    pad, conv, tensor, read = _graph(**change)
    with pytest.raises(folding.NotFoldable, match=reason):
        folding.pad_fold(pad, conv, tensor, read, consumers=1)


def test_padv2_with_the_zero_point_folds_and_a_shared_pad_does_not():
    pad, conv, tensor, read = _graph(code=60, fill=-3)
    assert folding.pad_fold(pad, conv, tensor, read, consumers=1).fill == -3
    with pytest.raises(folding.NotFoldable, match="feeds 2 nodes"):
        folding.pad_fold(pad, conv, tensor, read, consumers=2)


def test_view_rules():
    def node(inputs):
        return NodeInfo(index=0, builtin_code=22, version=1, inputs=inputs, outputs=(1,),
                        params=None)

    tensors = {0: _t(0, (1, 1, 1, 10)), 1: _t(1, (1, 10)), 2: _t(2, (2,), "int32", (), True),
               3: _t(3, (2,), "int32", (), False, "computed_shape"), 4: _t(4, (1, 10), zp=(5,)),
               5: _t(5, (1, 11))}
    assert folding.view_reason(node((0, 2)), tensors.__getitem__) is None
    assert "computed at run time" in folding.view_reason(node((0, 3)), tensors.__getitem__)
    other = {**tensors, 1: tensors[4]}
    assert "quantization differ" in folding.view_reason(node((0, 2)), other.__getitem__)
    other = {**tensors, 1: tensors[5]}
    assert "element count" in folding.view_reason(node((0, 2)), other.__getitem__)


# -- whole models through the delegate -----------------------------------------------------------

def _delegated(path, tfl, options, seeds=(0, 1)):
    """The report of the last of `seeds` invokes, each output equal to the CPU interpreter's."""
    import dtpu

    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, options)
    ours.allocate_tensors()
    for seed in seeds:
        inputs = random_inputs(cpu, seed)
        for got, want in zip(run(ours, inputs), run(cpu, inputs)):
            np.testing.assert_array_equal(got, want, err_msg=f"{path.name} seed {seed} {options}")
    return dtpu.last_report()


def _rejected(report) -> dict[str, set]:
    kinds: dict[str, set] = {}
    for r in report.rejected:
        kinds.setdefault(r["op"], set()).add(r["reason"])
    return kinds


def test_vww_pads_fold_six_partitions_become_one(dtpu_so, tfl):
    from dtpu.delegate.vector_claim import PROVEN_RUNTIMES
    from dtpu.tflite import RUNTIME

    report = _delegated(VWW, tfl, {})
    kinds = _rejected(report)
    # the head's SHAPE -> STRIDED_SLICE -> PACK is evaluated at Prepare, its RESHAPE a view
    # (tests/test_shape_fold.py); the MEAN (keep_dims) joins on the vector unit, except where
    # XNNPACK computes it (LiteRT)
    if RUNTIME in PROVEN_RUNTIMES:
        assert report.partitions == 1 and set(kinds) == {"SOFTMAX"}, kinds
    else:
        assert report.partitions == 2 and set(kinds) == {"MEAN", "SOFTMAX"}, kinds
    assert report.path == "lists" and "PAD" not in kinds
    # the folded convolutions run SAME over the unpadded input
    folded = [n for n in report.nodes if n.node in (4, 9, 14, 27)]
    assert [n.input_shape[1] for n in folded] == [48, 24, 12, 6]
    before = _delegated(VWW, tfl, {"fold": "off", "ops": "conv2d,depthwise_conv2d"}, seeds=(0,))
    assert before.partitions == 6
    assert _rejected(before)["PAD"] == {"not an operator the DTPU runs"}


def test_pads_that_are_not_same_stay_on_the_cpu_with_the_reason(dtpu_so, tfl, tmp_path):
    """VWW with its (shared) paddings constant changed to ((1, 1), (1, 1)): the same output
    shapes, but SAME would pad (0, 1): every PAD stays on the CPU, the outputs stay exact (the
    four PADs cut five partitions: the head joins the last on the vector unit, where it is)."""
    data = VWW.read_bytes()
    same = PADS_SAME_S2.astype("<i4").tobytes()
    assert data.count(same) == 1
    path = tmp_path / "vww_pads_1_1.tflite"
    path.write_bytes(data.replace(same, np.array([[0, 0], [1, 1], [1, 1], [0, 0]], "<i4").tobytes()))
    report = _delegated(path, tfl, {})
    reasons = _rejected(report)["PAD"]
    assert len([r for r in report.rejected if r["op"] == "PAD"]) == 4
    assert all(r.startswith("PAD not folded: pads ((1, 1), (1, 1)) are not those a SAME "
                            "convolution adds") for r in reasons), reasons
    from dtpu.delegate.vector_claim import PROVEN_RUNTIMES
    from dtpu.tflite import RUNTIME

    assert report.partitions == (5 if RUNTIME in PROVEN_RUNTIMES else 6)


def test_fully_connected_claimed_only_where_it_joins(dtpu_so, tfl):
    """DS-CNN ends AVERAGE_POOL_2D -> RESHAPE -> FULLY_CONNECTED -> SOFTMAX: on a target without
    the vector unit the pool stays on the CPU and the FC would be alone, adding a partition, so
    ops=auto leaves it (and its view) on the CPU; ops naming it claims it. With the unit (the
    golden model) the pool joins the convolutions, and the view and the FC with it."""
    joined = _delegated(DSCNN, tfl, {"backend": "model"})
    assert joined.partitions == 1 and set(_rejected(joined)) == {"SOFTMAX"}
    assert [n.op for n in joined.nodes][-2:] == ["average_pool_2d", "fully_connected"]
    report = _delegated(DSCNN, tfl, {"backend": "reference"})
    assert report.partitions == 1
    kinds = _rejected(report)
    assert kinds["FULLY_CONNECTED"] == {"FULLY_CONNECTED joins no other claimed node: alone it "
                                        "would be a partition of its own (ops=auto; "
                                        "ops=fully_connected claims it anyway)"}
    assert kinds["RESHAPE"] == {"a view joining no claimed node (a partition of its own)"}
    asked = _delegated(DSCNN, tfl, {"backend": "reference",
                                    "ops": "conv2d,depthwise_conv2d,fully_connected"})
    assert asked.partitions == 2 and "FULLY_CONNECTED" not in _rejected(asked)
    # the RESHAPE joins the FC's partition as a view: the FC reads the pooled tensor itself
    assert "RESHAPE" not in _rejected(asked)


def test_reshape_inside_a_partition_is_a_view(dtpu_so, tfl):
    """tests/data/delegate/fc_int8: CONV_2D -> RESHAPE -> FULLY_CONNECTED is one partition, the
    FC reading the convolution's output in DDR as its own shape; fold=off cuts it at the
    RESHAPE, and the FC, alone then, stays on the CPU."""
    path = DATA / "fc_int8.tflite"
    report = _delegated(path, tfl, {})
    assert report.partitions == 1 and report.rejected == [] and report.path == "lists"
    assert [n.op for n in report.nodes] == ["conv2d", "fully_connected"]
    off = _delegated(path, tfl, {"fold": "off"})
    assert off.partitions == 1 and set(_rejected(off)) == {"RESHAPE", "FULLY_CONNECTED"}


@pytest.mark.parametrize("backend, env, parts", [("rtl", {}, 1),
                                                  ("pynq", {"DTPU_PYNQ_EMULATE": "1"}, 1)])
def test_vww_folded_on_the_hardware_backends(backend, env, parts, dtpu_so, tfl, monkeypatch):
    """The folded SAME convolutions through the Verilog (in process) and the emulated board.
    VWW is one partition on both: the in-process RTL's command-list top and the default board
    overlay (hw/overlays OVERLAY=int8) have the vector unit, so the MEAN joins (the int16
    overlay's cut at the MEAN is tests/test_one_kick.py's)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if backend == "rtl":
        from dtpu.backends import names

        if "rtl" not in names():
            pytest.skip("backend rtl not registered (Verilator missing)")
    report = _delegated(VWW, tfl, {"backend": backend}, seeds=(0,))
    assert report.partitions == parts and "PAD" not in _rejected(report)
    report = _delegated(DATA / "fc_int8.tflite", tfl, {"backend": backend}, seeds=(0,))
    assert report.partitions == 1 and report.rejected == []


def test_options_ops_auto_and_fold():
    from dtpu.delegate.options import parse

    default = parse({})
    assert default.ops_auto and default.fold and OpKind.FULLY_CONNECTED in default.ops
    assert default.to_dict()["ops"] == "auto" and default.to_dict()["fold"] == "on"
    named = parse({"ops": "conv2d", "fold": "off"})
    assert not named.ops_auto and named.ops == (OpKind.CONV_2D,) and not named.fold
    assert parse({"ops": "AUTO"}).ops_auto
    with pytest.raises(ValueError, match="fold.*on or off"):
        parse({"fold": "maybe"})


@pytest.mark.slow
@pytest.mark.parametrize("name, partitions", [("mobilenet_v2_224__int8", (11, 1)),
                                              ("mobilenet_v1_224__int8", (2, 1)),
                                              ("mobilenet_v1_050_224__uint8", (2, 1)),
                                              ("efficientnet_b0_224__int8", (74, 1))])
@pytest.mark.parametrize("backend", ["model", "rtl", "pynq"])
def test_imagenet_models_folded(name, partitions, backend, dtpu_so, tfl, monkeypatch):
    """The 224 models' folded PADs (3x3 stride 2 with pads (0, 1), int8 and uint8 (the fill its
    zero point); EfficientNet's 5x5 with (1, 2)) bit-exact on each backend (rtl: minutes per
    model). `partitions`: (without the vector unit: the Verilog, the board; with it: the golden
    model, where residual ADDs, swish tables and squeeze-excite gates join them)."""
    if backend == "pynq":
        monkeypatch.setenv("DTPU_PYNQ_EMULATE", "1")
    report = _delegated(ZOO / f"{name}.tflite", tfl, {"backend": backend}, seeds=(0,))
    from dtpu.delegate.vector_claim import PROVEN_RUNTIMES
    from dtpu.tflite import RUNTIME

    assert report.partitions == partitions[backend == "model" and RUNTIME in PROVEN_RUNTIMES]
    assert "PAD" not in _rejected(report)


@pytest.mark.parametrize("options", [{}, {"path": "jobs"}, {"backend": "reference"}])
def test_a_view_leaving_its_partition_is_written_by_the_host(options, dtpu_so, tfl):
    """fc_int8 with ops=conv2d: CONV_2D -> RESHAPE is the partition, the RESHAPE's output (read
    by the FC on the CPU) a partition output the host writes from the convolution's; on the
    command-list path, job by job and on the reference backend."""
    report = _delegated(DATA / "fc_int8.tflite", tfl, dict(options, ops="conv2d"))
    assert report.partitions == 1 and set(_rejected(report)) == {"FULLY_CONNECTED"}
    assert [n.op for n in report.nodes] == ["conv2d"]


@pytest.mark.parametrize("options", [{"path": "jobs"}, {"backend": "reference"}])
def test_folded_pads_job_by_job_and_on_the_reference_backend(options, dtpu_so, tfl):
    report = _delegated(VWW, tfl, options, seeds=(0,))
    assert report.partitions == 2 and "PAD" not in _rejected(report)
