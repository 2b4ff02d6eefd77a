"""Contract 1.2's concurrent weight loader (PF_ADDR / PF_COUNT on GEMM and DWCONV jobs) in the
golden model: the cycle count both ways (prefetch-bound and compute-bound), the memory written,
the CONFIG checks (range, overlap with the job's own weights: nothing consumed), the tlast
checks, WORDS_WGT, a runtime error that still writes the prefetch, the decoded-weight caches,
and the compiled fast path against the register/stream protocol."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.driver import DtpuJobError, ModelTransport, read_counters, run_job, run_jobs
from dtpu.driver.model_transport import run_jobs_compiled
from dtpu.hw import fast
from dtpu.hw.config import get_config
from dtpu.hw.contract_schedules import dw_schedule, gemm_cycles, load_cycles
from dtpu.hw.core import Core
from dtpu.hw.lower import Job, lower, with_prefetch
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from tests.test_hw_model import make_data

Q = dict(input_q=Quant((0.02,), (-3,)), filter_q=Quant((0.01,), (0,)), output_q=Quant((0.1,), (5,)))


def _gemm_node(m_hw=(4, 4), cin=16, cout=16, seed=1):
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, *m_hw, cin), (cout, 1, 1, cin), **Q)
    x, f, b = make_data(spec, np.random.default_rng(seed))
    return spec, x, f, b


def _dw_node(seed=2):
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, 6, 6, 16), (1, 3, 3, 16),
                    padding=Padding.SAME, **Q)
    x, f, b = make_data(spec, np.random.default_rng(seed))
    return spec, x, f, b


def _prepared(spec, x, f, b, cfg=None):
    """A transport with the node's weights loaded at 0, and its one compute job."""
    cfg = cfg or get_config()
    low = lower(spec, f, b, cfg)
    t = ModelTransport(Core(cfg))
    run_jobs(t, low.load_jobs)
    (job,) = low.jobs(x)
    return cfg, t, low, job


def _with_pf(job: Job, addr: int, words: np.ndarray) -> Job:
    return Job(job.label, list(with_prefetch(job.regs, None, addr, words.size)),
               {**job.send, "wgt": words}, job.recv, job.macs)


def _words(n, seed=9):
    return np.random.default_rng(seed).integers(0, 1 << 63, n, dtype=np.uint64)


def _compute_cycles(cfg, job):
    r = dict(job.regs)
    return gemm_cycles(cfg, r["GEMM_M"], r["GEMM_KW"], r["GEMM_NT"], 1)


@pytest.mark.parametrize("delta", [None, -1, 0, 1, 300, 2000])
def test_gemm_prefetch_cycles_both_ways_and_memory(delta):
    """delta: prefetch words beyond the most that hide behind the compute (None: one word)."""
    cfg, t, low, job = _prepared(*_gemm_node())
    compute = _compute_cycles(cfg, job)
    hidden = compute - cfg.CFG_CYCLES - cfg.LOAD_LATENCY
    n = 1 if delta is None else hidden + delta
    y0 = low.assemble([run_job(t, job)])
    assert t.read_reg(cfg.REG_JOB_CYCLES) == compute
    addr = 5000 + n  # any word address
    words = _words(n)
    before = read_counters(t)
    y1 = low.assemble([run_job(t, _with_pf(job, addr, words))])
    after = read_counters(t)
    expected = max(compute, cfg.CFG_CYCLES + n + cfg.LOAD_LATENCY)
    assert expected == (compute if n <= hidden else compute + n - hidden)
    assert t.read_reg(cfg.REG_JOB_CYCLES) == expected == after[0] - before[0]
    assert after[2] - before[2] == n                    # WORDS_WGT counts the prefetch
    assert np.array_equal(y0, y1)                       # the computation is unchanged
    assert np.array_equal(t.core.wmem[addr:addr + n], words)
    assert t.core.wmem[addr - 1] == 0 and t.core.wmem[addr + n] == 0


def test_dwconv_prefetch_cycles_both_ways():
    cfg, t, low, job = _prepared(*_dw_node())
    y0 = low.assemble([run_job(t, job)])
    compute = t.read_reg(cfg.REG_JOB_CYCLES)
    for n in (3, compute, compute + 50):
        words = _words(n, n)
        y1 = low.assemble([run_job(t, _with_pf(job, 9000, words))])
        assert t.read_reg(cfg.REG_JOB_CYCLES) == max(compute, load_cycles(cfg, n))
        assert np.array_equal(y0, y1) and np.array_equal(t.core.wmem[9000:9000 + n], words)


@pytest.mark.parametrize("case", ["overlap-start", "overlap-end", "inside", "beyond", "huge"])
def test_bad_prefetch_range_is_a_config_error_consuming_nothing(case):
    cfg, t, low, job = _prepared(*_gemm_node())
    own = dict(job.regs)
    lo = own["WGT_BASE"]
    hi = lo + own["GEMM_NT"] * own["GEMM_KW"] * cfg.COLS
    addr, n = {"overlap-start": (hi - 1, 4), "overlap-end": (lo + 300 - 300, 1),
               "inside": (lo + 1, 2), "beyond": (cfg.WEIGHT_WORDS - 3, 4),
               "huge": (hi, cfg.WEIGHT_WORDS)}[case]
    core = t.core
    before = read_counters(t)
    for name, value in with_prefetch(job.regs, None, addr, n):
        core.write_reg(name, value)
    core.write_reg("CTRL", cfg.encode("CTRL", START=1))
    assert core.read_reg("ERR") == cfg.ERR_WGT_RANGE
    assert core.read_reg("JOB_CYCLES") == cfg.CFG_CYCLES
    core.push("wgt", _words(n))
    core.push("act", job.send["act"])
    assert t.backlog("wgt") == n and t.backlog("act") == job.send["act"].size  # nothing taken
    assert read_counters(t)[2:] == before[2:]
    # the same through the compiled path
    cj = fast.compile_job(Core(cfg), with_prefetch(job.regs, None, addr, n))
    assert cj.error == cfg.ERR_WGT_RANGE and cj.cycles == cfg.CFG_CYCLES


def test_prefetch_next_to_own_weights_and_at_the_top_is_accepted():
    cfg, t, low, job = _prepared(*_gemm_node())
    own = dict(job.regs)
    hi = own["WGT_BASE"] + own["GEMM_NT"] * own["GEMM_KW"] * cfg.COLS
    for addr, n in ((hi, 3), (cfg.WEIGHT_WORDS - 4, 4)):
        run_job(t, _with_pf(job, addr, _words(n)))
    # a depthwise job's own range is KH*KW*GP words
    cfg, t, low, job = _prepared(*_dw_node())
    own = dict(job.regs)
    gp = 8  # 16 int8 channels: 2 groups, padded to COLS
    end = own["WGT_BASE"] + 9 * gp
    run_job(t, _with_pf(job, end, _words(2)))
    with pytest.raises(DtpuJobError, match="WGT_RANGE"):
        run_job(t, _with_pf(job, end - 1, _words(2)))


def test_pf_count_zero_ignores_pf_addr_and_loads_ignore_pf():
    cfg, t, low, job = _prepared(*_gemm_node())
    core = t.core
    core.write_reg("PF_ADDR", 0xFFFFFFFF)   # stale address, no count: no prefetch, no check
    y = run_job(t, job)
    assert y is not None and core.read_reg("ERR") == 0
    core.write_reg("PF_COUNT", 5)           # LOAD_* ignore the prefetch registers
    words = _words(4)
    run_job(t, Job("load", [("LOAD_ADDR", 100), ("LOAD_COUNT", 4),
                            ("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_LOAD_WGT))], {"wgt": words}))
    assert np.array_equal(core.wmem[100:104], words)
    assert core.read_reg("JOB_CYCLES") == load_cycles(cfg, 4)


def test_stale_pf_count_persists_between_jobs():
    """PF_COUNT is an ordinary register: a compute job that does not write it inherits the last
    value, which is why every lowered compute job writes it."""
    cfg, t, low, job = _prepared(*_gemm_node())
    assert ("PF_COUNT", 0) in list(job.regs)
    core = t.core
    core.write_reg("PF_ADDR", 20000)
    core.write_reg("PF_COUNT", 3)
    for name, value in job.regs:
        if name != "PF_COUNT":
            core.write_reg(name, value)
    core.write_reg("CTRL", 1)
    core.push("act", job.send["act"])
    assert t.busy  # waits for the 3 prefetch words
    core.push("wgt", _words(3))
    assert not t.busy and core.read_reg("ERR") == 0 and core.wmem[20002] == _words(3)[2]


@pytest.mark.parametrize("kind", ["early", "missing"])
def test_prefetch_tlast_errors(kind):
    cfg, t, low, job = _prepared(*_gemm_node())
    core = t.core
    for name, value in with_prefetch(job.regs, None, 20000, 6):
        core.write_reg(name, value)
    core.write_reg("CTRL", 1)
    core.push("act", job.send["act"])
    words = _words(6)
    if kind == "early":
        core.push("wgt", words[:3], last=True)
        core.push("wgt", words[3:], last=True)
        flag = cfg.ERR_TLAST_EARLY
    else:
        core.push("wgt", words, last=False)
        flag = cfg.ERR_TLAST_MISSING
    assert core.read_reg("ERR") & flag
    assert cfg.decode("STATUS", core.read_reg("STATUS"))["DONE"] == 1


def test_runtime_error_still_writes_the_prefetch():
    from dtpu.precision import Precision
    cfg = get_config()
    t = ModelTransport(Core(cfg))
    core = t.core
    # INT64 RAW GEMM whose product leaves int64: ERR.OVERFLOW at run time
    big = np.full(1, 2 ** 40, np.int64).view(np.uint64)
    core.wmem[:cfg.COLS] = big[0]
    regs = [("GEMM_M", 1), ("GEMM_KW", 1), ("GEMM_NT", 1), ("WGT_BASE", 0), ("PARAM_BASE", 0),
            ("IN_OFFSET", 0), ("WGT_OFFSET", 0), ("PF_ADDR", 64), ("PF_COUNT", 5),
            ("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_GEMM, PREC=cfg.prec_code(Precision.INT64),
                               OUT_MODE=cfg.OUT_MODE_RAW))]
    words = _words(5)
    for runner, tt in ((run_jobs, t), (run_jobs_compiled, ModelTransport(Core(cfg)))):
        tt.core.wmem[:cfg.COLS] = big[0]
        with pytest.raises(DtpuJobError, match="OVERFLOW"):
            runner(tt, [Job("ovf", regs, {"act": big.copy(), "wgt": words}, cfg.COLS)])
        assert np.array_equal(tt.core.wmem[64:69], words)


def test_fast_path_equals_protocol_with_prefetch():
    """Twin cores: the compiled path (fast.execute with the prefetch words) and the protocol give
    the same result words, counters, registers and weight memory; the job whose weights the
    prefetch replaced is recompiled, the one it did not touch keeps its compiled form."""
    cfg = get_config()
    spec, x, f, b = _gemm_node(cin=32, cout=24)
    _, f2, _ = make_data(spec, np.random.default_rng(7))
    low_a = lower(spec, f, b, cfg, wgt_base=0, param_base=0)
    low_b = lower(spec, f2, b, cfg, wgt_base=1024, param_base=64)
    low_c = lower(spec, f, b, cfg, wgt_base=2048, param_base=128)   # rewritten by prefetches
    proto, quick = ModelTransport(Core(cfg)), ModelTransport(Core(cfg))
    cache: dict = {}
    loads = low_a.load_jobs + low_b.load_jobs + low_c.load_jobs
    run_jobs(proto, loads), run_jobs_compiled(quick, loads, cache)
    (ja,), (jb,), (jc,) = low_a.jobs(x), low_b.jobs(x), low_c.jobs(x)
    wc = low_c.load_jobs[0].send["wgt"]
    wb2 = lower(spec, f2, b, cfg).load_jobs[0].send["wgt"]
    carrier = Job("a+pf", list(with_prefetch(ja.regs, None, 2048, wb2.size)),
                  {"act": ja.send["act"], "wgt": wb2}, ja.recv)
    carrier_back = Job("b+pf", list(with_prefetch(jb.regs, None, 2048, wc.size)),
                       {"act": jb.send["act"], "wgt": wc}, jb.recv)
    for jobs in ([ja, jc, jb], [carrier, jc, carrier_back, jc, jb], [carrier, jc, jb]):
        r0, c0 = run_jobs(proto, jobs)
        r1, c1 = run_jobs_compiled(quick, jobs, cache)
        assert c0 == c1
        assert all(np.array_equal(u, v) for u, v in zip(r0, r1))
        assert read_counters(proto) == read_counters(quick)
        assert proto.core.regs == quick.core.regs
        assert np.array_equal(proto.core.wmem, quick.core.wmem)
    # after the last round jc ran with f2's weights: the same as a node lowered with f2
    ref = lower(spec, f2, b, cfg, wgt_base=2048, param_base=128)
    assert np.array_equal(low_c.assemble([r1[1]]), ref.assemble(run_jobs(ModelTransport(Core(cfg)),
                                                                          ref.load_jobs + ref.jobs(x))[0]))
    assert not np.array_equal(low_c.assemble([r1[1]]), low_a.assemble([r1[0]]))


def test_prefetch_drops_only_overlapping_decoded_weights():
    cfg = get_config()
    core = Core(cfg)
    t = ModelTransport(core)
    spec, x, f, b = _gemm_node(cin=8, cout=8)
    low0 = lower(spec, f, b, cfg, wgt_base=0, param_base=0)
    low1 = lower(spec, f, b, cfg, wgt_base=512, param_base=64)
    run_jobs(t, low0.load_jobs + low1.load_jobs)
    # generic (unfused) decoding goes through Core.gemm_weights and its cache
    from dtpu.precision import Precision
    core.gemm_weights(Precision.INT8, 0, 1, 1, np.float64, 0)
    core.gemm_weights(Precision.INT8, 512, 1, 1, np.float64, 0)
    assert len(core.decoded_weights) == 2
    core.write_weights(600, _words(4))          # touches neither
    assert len(core.decoded_weights) == 2
    core.write_weights(510, _words(4))          # overlaps the node at 512
    assert [k[2] for k in core.decoded_weights] == [0]


def test_compiled_job_survives_its_own_words_written_again():
    """A streamed page written back into the same place with the same words (every invoke)
    keeps its compiled form; other words there make it recompile."""
    from dtpu.driver.model_transport import compiled
    cfg = get_config()
    spec, x, f, b = _gemm_node(cin=16, cout=16)
    _, f2, _ = make_data(spec, np.random.default_rng(8))
    low = lower(spec, f, b, cfg, wgt_base=4096, param_base=64)
    other = lower(spec, f2, b, cfg, wgt_base=4096, param_base=64).load_jobs[0]
    t = ModelTransport(Core(cfg))
    cache: dict = {}
    run_jobs_compiled(t, low.load_jobs, cache)
    (job,) = low.jobs(x)
    first = compiled(t, job, cache)
    y0 = run_jobs_compiled(t, [job], cache)[0]
    run_jobs_compiled(t, [low.load_jobs[0]], cache)          # the same words again
    assert compiled(t, job, cache) is first
    run_jobs_compiled(t, [other], cache)                      # different words
    again = compiled(t, job, cache)
    assert again is not first
    y1 = run_jobs_compiled(t, [job], cache)[0]
    assert not np.array_equal(y0[0], y1[0])
    run_jobs_compiled(t, [low.load_jobs[0]], cache)
    assert np.array_equal(run_jobs_compiled(t, [job], cache)[0][0], y0[0])
