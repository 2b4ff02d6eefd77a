"""Depthwise on a PE-pair build (HwConfig PE_PAIR=1, docs/architecture.md "PE pairs in
depthwise"): columns j and j + COLS/2 share one multiplier, so they must never issue in one
cycle. The rule (dw_pair_conflict) against a cycle-by-cycle enumeration of the columns, the golden
model refusing by it in CONFIG, and the lowering choosing TAP_CYCLES so that it never produces a
job the build refuses. The RTL side is sim/test_top.py::test_top_pe_pair_dw."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtpu.driver import DtpuJobError, ModelTransport, run_job, run_jobs
from dtpu.hw.config import HwConfig, ceil_div
from dtpu.hw.contract_schedules import dw_pair_conflict
from dtpu.hw.core import Core
from dtpu.hw.dw_format import dw_conflict
from dtpu.hw.lower import Job, dw_geometry, lower
from dtpu.precision import Precision
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from tests.test_hw_model import assert_matches_reference, make_data, nodes, run_model


def _pairs(cols=8, rotate=1, **kw):
    return HwConfig(COLS=cols, DW_ROTATE=rotate, PE_PAIR=1, **kw)


def _pair_issues_together(cols: int, ow: int, gc: int, tap_cycles: int) -> bool:
    """Every cycle of every step of a row, column by column: does some cycle serve both columns
    of a pair (j, j + COLS/2) with valid items (q < OW*GC)? Cycle t of a tap serves the columns
    t*COLS/TAP_CYCLES .. (t+1)*COLS/TAP_CYCLES - 1."""
    n = ow * gc
    per = cols // tap_cycles
    for s in range(ceil_div(n, cols)):
        for t in range(tap_cycles):
            served = {j for j in range(t * per, (t + 1) * per) if s * cols + j < n}
            if any(j + cols // 2 in served for j in served):
                return True
    return False


@settings(max_examples=400, deadline=None)
@given(cols=st.sampled_from([2, 4, 8, 16, 32]), ow=st.integers(1, 80), gc=st.integers(1, 32),
       log_tc=st.integers(0, 5))
def test_pair_rule_is_the_enumeration(cols, ow, gc, log_tc):
    gc, tc = min(gc, cols), min(1 << log_tc, cols)
    assert dw_pair_conflict(cols, ow, gc, tc) == _pair_issues_together(cols, ow, gc, tc)


def test_conflict_per_build():
    """Banked builds refuse bank conflicts, pair builds pair conflicts, rotated ones without
    pairs nothing."""
    for rotate in (0, 1):
        plain = HwConfig(DW_ROTATE=rotate)
        pairs = _pairs(rotate=rotate)
        # 5 items on 8 columns at stride 1: no bank conflict; the pair (0, 4) issues together
        assert not dw_conflict(plain, 5, 1, 1, 1) and dw_conflict(pairs, 5, 1, 1, 1)
        assert not dw_conflict(pairs, 5, 1, 1, 2) and not dw_conflict(pairs, 4, 1, 1, 1)
    # GC 4 at stride 2 on 8 columns: a bank conflict in the banked layout only
    assert dw_conflict(HwConfig(DW_ROTATE=0), 4, 4, 2, 1) and not dw_conflict(HwConfig(), 4, 4, 2, 1)


def _dw_job(cfg, ow, gc, tc, sx=1, kw=3):
    iw = (ow - 1) * sx + kw
    regs = [("DW_IN", cfg.encode("DW_IN", H=1, W=iw)), ("DW_OUT", cfg.encode("DW_OUT", H=1, W=ow)),
            ("DW_KERNEL", cfg.encode("DW_KERNEL", KH=1, KW=kw, PT=0, PL=0)),
            ("DW_STRIDE", cfg.encode("DW_STRIDE", SY=1, SX=sx, DY=1, DX=1)),
            ("DW_GROUPS", cfg.encode("DW_GROUPS", GC=gc, NCHUNK=1)),
            ("DW_RING", cfg.encode("DW_RING", LB_ROWS=1, TAP_CYCLES=tc)),
            ("WGT_BASE", 0), ("PARAM_BASE", 0), ("IN_OFFSET", 0), ("WGT_OFFSET", 0),
            ("ACT_MIN", 0x80000000), ("ACT_MAX", 0x7FFFFFFF), ("PF_COUNT", 0),
            ("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_DWCONV, PREC=cfg.prec_code(Precision.INT8),
                               OUT_MODE=cfg.OUT_MODE_RAW))]
    act = np.random.default_rng(ow * 37 + gc).integers(0, 1 << 63, iw * gc, dtype=np.uint64)
    return Job(f"dw ow{ow} gc{gc} tc{tc}", regs, {"act": act}, ow * gc * 4)


@pytest.mark.parametrize("rotate", [0, 1])
def test_model_refuses_pairs_issuing_together_in_config(rotate):
    """ERR.BANK_CONFLICT from CONFIG (CFG_CYCLES, no activation word taken) exactly on the rule's
    side of OW*GC = COLS/2; the same rows run on the build without pairs, and with TAP_CYCLES 2."""
    cfg = _pairs(rotate=rotate)
    wgt = np.random.default_rng(1).integers(0, 1 << 63, 3 * cfg.COLS * cfg.COLS, dtype=np.uint64)
    load = Job("w", [("LOAD_ADDR", 0), ("LOAD_COUNT", wgt.size),
                     ("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_LOAD_WGT))], {"wgt": wgt}, 0)
    for ow, gc in ((1, 4), (2, 2), (4, 1), (5, 1), (1, 5), (3, 2), (8, 1), (2, 8)):
        refused = ow * gc > cfg.COLS // 2
        for c, tc, want_refused in ((cfg, 1, refused), (cfg, 2, False),
                                    (HwConfig(DW_ROTATE=rotate), 1, None)):
            core = Core(c)
            t = ModelTransport(core)
            run_jobs(t, [load])
            job = _dw_job(c, ow, gc, tc)
            if want_refused is None:   # no pairs: only the banked layout's bank rule refuses
                want_refused = dw_conflict(c, ow, gc, 1, tc)
            if want_refused:
                with pytest.raises(DtpuJobError, match="BANK_CONFLICT"):
                    run_job(t, job)
                # refused in CONFIG: its cycles, no activation word taken
                rec = core.jobs[-1]
                assert (rec.opcode, rec.error, rec.cycles) == ("DWCONV", c.ERR_BANK_CONFLICT, c.CFG_CYCLES)
                assert not any(rec.words_in.values()), job.label
            else:
                run_job(t, job)


PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(nodes(modes=(DataMode.INT8, DataMode.UINT8, DataMode.INT16X8), kinds=(OpKind.DEPTHWISE_CONV_2D,),
             max_c=40), st.sampled_from([(8, 1), (4, 1), (16, 1), (8, 0)]))
def test_lowering_never_produces_a_refused_job(node, build):
    """Every lowered depthwise job runs on the pair build (a refusal would raise) and equals
    TFLite's reference; TAP_CYCLES is the least the build accepts: in the rotated layout 2 exactly
    when a row has more than COLS/2 items."""
    cols, rotate = build
    spec, x, f, b = node
    cfg = _pairs(cols, rotate)
    y, _, low = run_model(spec, x, f, b, cfg)
    assert_matches_reference(spec, x, f, b, y)
    for job in low.jobs(x):
        if not job.label.startswith("dw"):
            continue
        r = {n: cfg.decode(n, v) for n, v in job.regs if n in ("DW_OUT", "DW_GROUPS", "DW_RING", "DW_STRIDE")}
        ow, gc, sx = r["DW_OUT"]["W"], r["DW_GROUPS"]["GC"], r["DW_STRIDE"]["SX"]
        tc = r["DW_RING"]["TAP_CYCLES"]
        assert not dw_conflict(cfg, ow, gc, sx, tc)
        assert tc == 1 or dw_conflict(cfg, ow, gc, sx, tc // 2)
        if rotate:
            assert tc == (2 if ow * gc > cols // 2 else 1)


def _dw_spec(h, w, c, k=3, s=1):
    return ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, h, w, c), (1, k, k, c), stride=(s, s),
                    padding=Padding.SAME, input_q=Quant((0.02,), (3,)), filter_q=Quant((0.01,), (0,)),
                    output_q=Quant((0.1,), (-2,)))


def test_pairs_cost_issue_cycles_only_where_the_rule_bites():
    """A wide row takes TAP_CYCLES 2 (twice the issue cycles of a 3x3 step at 8 columns); a row
    of at most COLS/2 items (one 4-channel group, 4 pixels) keeps TAP_CYCLES 1."""
    wide, narrow = _dw_spec(8, 16, 32), _dw_spec(4, 4, 4)
    for spec, tc in ((wide, 2), (narrow, 1)):
        assert dw_geometry(spec, _pairs(), Precision.INT8).tap_cycles == tc
        assert dw_geometry(spec, HwConfig(), Precision.INT8).tap_cycles == 1


def test_backend_model_lists_path_on_a_pair_build():
    """backend=model with PE_PAIR in force: the command-list path (list compiler, memory-model
    Timeline) runs every depthwise job it compiles and gives the reference's output."""
    from dtpu.backends.base import Probes
    from dtpu.backends.model import ModelBackend
    from dtpu.backends.reference import ReferenceBackend
    from dtpu.hw.listcompiler import NodeIn

    spec = _dw_spec(10, 17, 96, s=2)
    x, f, b = make_data(spec, np.random.default_rng(5))
    ref = ReferenceBackend({})
    want, _ = ref.invoke(ref.prepare(spec, f, b), x, Probes())
    with _pairs():
        be = ModelBackend({})
        assert be.cfg.PE_PAIR == 1
        prog = be.prepare_partitions([[NodeIn(spec, f, b)]])
        out = np.zeros(spec.output_shape, np.int8)
        be.invoke_partition(prog, 0, [x], {0: out}, Probes())
        np.testing.assert_array_equal(out, want)
        be.release_partitions(prog)
        be.close()
