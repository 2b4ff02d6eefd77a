"""Post lanes built with only some requantization variants (contract RQ_EN, the RTL's RQ_EN
parameter; docs/architecture.md, issue 26's budget): the golden model refuses a job or POST
naming a variant not built exactly as dtpu_control and dtpu_cl_post do (sim/test_cl_post.py,
sim/test_top.py check the RTL side), the lowering refuses such a node, and the delegate leaves
it on the CPU with the reason."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dtpu import reference
from dtpu.hw.config import HwConfig
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor, RunResult
from dtpu.hw.listformat import ListFault
from dtpu.hw.lower import LowerError, lower
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from tests.delegate_util import dtpu_so, hand_conv_node, tfl  # noqa: F401  (fixtures)

#: what an int8/uint8 board needs: DOUBLE and DOUBLE_UP (tflite-runtime 2.14's kernels) and
#: FP32 (LiteRT's XNNPACK)
INT8_BOARD = 25
MASKS = [INT8_BOARD, 9, 16, 31]


def test_mask_is_validated():
    for bad in (0, 32, 64, -1, "25"):
        with pytest.raises(ValueError, match="RQ_EN=.*a bit mask of RQ_VARIANT codes"):
            HwConfig(RQ_EN=bad)
    cfg = HwConfig(RQ_EN=INT8_BOARD)
    assert cfg.rq_variants == ("DOUBLE", "DOUBLE_UP", "FP32")
    assert cfg.rq_built("FP32") and cfg.rq_built(cfg.RQ_VARIANT_DOUBLE_UP)
    assert not cfg.rq_built("SINGLE") and not cfg.rq_built(cfg.RQ_VARIANT_INT64)
    assert not cfg.rq_built(5) and not cfg.rq_built(7)
    assert HwConfig().rq_variants == tuple(sorted(HwConfig().enums["RQ_VARIANT"],
                                                  key=HwConfig().enums["RQ_VARIANT"].get))


@pytest.mark.parametrize("rq_en", MASKS)
def test_core_refuses_a_variant_not_built(rq_en):
    """A REQUANT GEMM naming each variant: ERR.BAD_MODE in CONFIG (CFG_CYCLES, nothing taken)
    exactly when RQ_EN lacks it, on int8 and int16 alike; RAW jobs ignore the field."""
    cfg = HwConfig(RQ_EN=rq_en)
    for prec in (cfg.PREC_INT8, cfg.PREC_INT16):
        for name, code in cfg.enums["RQ_VARIANT"].items():
            for out_mode in (cfg.OUT_MODE_REQUANT, cfg.OUT_MODE_RAW):
                core = Core(cfg)
                for reg in ("GEMM_M", "GEMM_KW", "GEMM_NT"):
                    core.write_reg(reg, 1)
                core.write_reg("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_GEMM, PREC=prec,
                                                 OUT_MODE=out_mode, RQ_VARIANT=code))
                core.write_reg("CTRL", 1)
                refused = out_mode == cfg.OUT_MODE_REQUANT and not rq_en >> code & 1
                err = core.read_reg("ERR")
                assert bool(err & cfg.ERR_BAD_MODE) == refused, (name, prec, out_mode, hex(err))
                if refused:
                    assert err == cfg.ERR_BAD_MODE
                    assert core.read_reg("JOB_CYCLES") == cfg.CFG_CYCLES


@pytest.mark.parametrize("rq_en", MASKS)
def test_post_refuses_a_variant_not_built(rq_en):
    """A POST descriptor naming a variant not built is CL_ERR.BAD_FIELD before any read (as
    dtpu_cl_post's start checks); codes 5..7 (no variant) too."""
    cfg = HwConfig(RQ_EN=rq_en, ENABLED=["int8", "uint8"])
    ex = Executor(Core(cfg))
    d = {"POST1": dict(SRC=0, DST=0x400), "POST2": dict(PIX=1, CH0=0, CH=1), "POST3": dict(DSTC=1)}
    for code in range(8):
        regs = {cfg.REG_JOB: cfg.encode("JOB", PREC=cfg.PREC_INT8, OUT_MODE=cfg.OUT_MODE_REQUANT,
                                        RQ_VARIANT=code)}
        ddr = Ddr(0, 0x800)
        if rq_en >> code & 1 and code <= max(cfg.enums["RQ_VARIANT"].values()):
            ex.post(ddr, regs, d, RunResult())
        else:
            with pytest.raises(ListFault, match="RQ_VARIANT") as info:
                ex.post(ddr, regs, d, RunResult())
            assert info.value.kind == "BAD_FIELD"


def _conv(mode=DataMode.INT8):
    oc = 4
    return ConvSpec(OpKind.CONV_2D, mode, (1, 5, 5, 3), (oc, 3, 3, 3), padding=Padding.SAME,
                    name="conv", input_q=Quant((0.05,), (3,)), filter_q=Quant((0.01,) * oc, (0,) * oc),
                    output_q=Quant((0.1,), (-2,)), has_bias=True)


@pytest.mark.parametrize("runtime, rounding, rq_en, ok", [
    (reference.TFLITE_RUNTIME, "default", 9, True),       # DOUBLE_UP
    (reference.TFLITE_RUNTIME, "default", 16, False),     # FP32 only: no DOUBLE_UP
    (reference.TFLITE_RUNTIME, "reference", 1, True),     # BUILTIN_REF: DOUBLE
    (reference.LITERT, "default", INT8_BOARD, True),      # XNNPACK: FP32
    (reference.LITERT, "default", 9, False),
])
def test_lowering_needs_the_variant(runtime, rounding, rq_en, ok):
    spec = _conv()
    rng = np.random.default_rng(1)
    f = rng.integers(-9, 9, spec.filter_shape).astype(np.int8)
    b = rng.integers(-500, 500, spec.out_channels).astype(np.int32)
    cfg = HwConfig(RQ_EN=rq_en)
    if ok:
        lower(spec, f, b, cfg, rounding=rounding, runtime=runtime)
    else:
        with pytest.raises(LowerError, match=r"requantization variant \w+ is not built"):
            lower(spec, f, b, cfg, rounding=rounding, runtime=runtime)




@pytest.mark.parametrize("runtime, rq_en, claimed", [
    (reference.LITERT, INT8_BOARD, True), (reference.LITERT, 9, False),
    (reference.TFLITE_RUNTIME, INT8_BOARD, True), (reference.TFLITE_RUNTIME, 16, False),
])
def test_delegate_keeps_the_node_on_the_cpu(runtime, rq_en, claimed):
    """The claim asks the backend's variants (ModelBackend.rq_variants = its HwConfig's): a node
    whose interpreter requantizes with a variant the build lacks stays on the CPU, and says why."""
    from dtpu.backends.model import ModelBackend
    from dtpu.delegate.options import parse
    from dtpu.delegate.support import analyze

    node, tensors = hand_conv_node()
    options = parse({"backend": "model"})
    with HwConfig(RQ_EN=rq_en):
        be = ModelBackend({})
        try:
            variants = be.rq_variants
        finally:
            be.close()
    assert variants == HwConfig(RQ_EN=rq_en).rq_variants
    assert analyze(node, tensors.__getitem__, options, runtime).claimed   # any build
    d = analyze(node, tensors.__getitem__, options, runtime, None, variants)
    assert d.claimed == claimed, d.reason
    if not claimed:
        want = "FP32" if runtime == reference.LITERT else "DOUBLE_UP"
        assert f"requantized with {want}" in d.reason and "RQ_EN" in d.reason, d.reason


def test_uint8_board_variants_cover_both_runtimes():
    """INT8_BOARD holds every variant an int8/uint8 CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED
    node gets from either runtime's default interpreter (where dtpu.reference reproduces it)."""
    cfg = HwConfig(RQ_EN=INT8_BOARD)
    for mode in (DataMode.INT8, DataMode.UINT8):
        for kind in OpKind:
            spec = dataclasses.replace(_conv(mode), kind=kind) if kind is OpKind.CONV_2D else None
            for runtime in reference.RUNTIMES:
                for rounding in ("default", "builtin", "reference"):
                    key = (runtime, "builtin" if rounding == "default" else rounding, kind, mode, "int32")
                    v = reference.conv.variant_table().get(key)
                    if v is not None:
                        assert cfg.rq_built(v.name), (key, v)
            if spec is not None:
                v, _ = reference.find_rounding_variant(spec, None, "default", reference.LITERT)
                assert v is reference.Variant.FP32 and cfg.rq_built(v.name)


def test_hwcfg1_reports_the_variants_left_out():
    """HWCFG1.RQ_OFF: 0 in a build with all five (the register as before the field, so older
    bitstreams still match), the complement of RQ_EN otherwise; the board's config_from_hwcfg
    reads it back, and the driver's identity check tells a host with the wrong RQ_EN."""
    from dtpu.board.ip import config_from_hwcfg
    from dtpu.driver import ModelTransport, check_identity

    full = HwConfig()
    assert full.decode("HWCFG1", full.hwcfg1)["RQ_OFF"] == 0 and full.hwcfg1 >> 24 == 0
    lean = HwConfig(RQ_EN=INT8_BOARD, ENABLED=["int8", "uint8"])
    assert lean.decode("HWCFG1", lean.hwcfg1)["RQ_OFF"] == 0b00110      # SINGLE, INT64
    back = config_from_hwcfg(lean.hwcfg0, lean.hwcfg1, full)
    assert back.RQ_EN == INT8_BOARD and back.hwcfg1 == lean.hwcfg1
    t = ModelTransport(Core(lean))
    check_identity(t)
    t.cfg = HwConfig(ENABLED=["int8", "uint8"])     # a host assuming all five variants
    with pytest.raises(RuntimeError, match="does not match contract"):
        check_identity(t)


def test_delegate_leaves_the_convolutions_of_a_build_without_their_variant(dtpu_so, tfl):
    """backend=model on a build without the running interpreter's variants for CONV_2D and
    DEPTHWISE_CONV_2D (tflite-runtime 2.14: DOUBLE_UP / DOUBLE, so RQ_EN = 16, FP32 only;
    LiteRT: FP32, so RQ_EN = 9): those nodes stay with TFLite, the outputs equal the CPU's; on the
    int8 board's RQ_EN (25) they are the DTPU's as on a full build."""
    import dtpu
    from dtpu.tflite import RUNTIME
    from tests.delegate_util import CANONICAL_MODELS, cpu_ops, random_inputs, run

    path = CANONICAL_MODELS["dscnn"]
    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    convs = {k: v for k, v in cpu_ops(cpu).items() if "CONV" in k}
    assert convs
    lacking = 16 if RUNTIME == reference.TFLITE_RUNTIME else 9
    for rq_en, kept in ((lacking, convs), (INT8_BOARD, {})):
        with HwConfig(RQ_EN=rq_en):
            ours = dtpu.make_interpreter(path, {"backend": "model"})
            ours.allocate_tensors()
            left = {k: v for k, v in cpu_ops(ours).items() if "CONV" in k}
            assert left == kept, (rq_en, left)
            xs = random_inputs(cpu, 1)
            for got, want in zip(run(ours, xs), run(cpu, xs)):
                np.testing.assert_array_equal(got, want)
