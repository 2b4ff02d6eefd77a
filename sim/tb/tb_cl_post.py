"""cocotb: the contract 2.0 post unit (hw/rtl/dtpu_cl_post.v) reading its int64 sums through
dtpu_axi_rd from an AxiRam (random latency, stalls, error regions) and its parameter entries from
a dtpu_ls_param written as LOAD_PARAM writes it, with random backpressure on its result words.

Expected values: dtpu.hw.executor.Executor.post run on a Ddr holding the same bytes, with a Core
whose parameter memory got the same words (Core.write_memory "LOAD_PARAM"): its error kind
(BAD_FIELD, JOB, or the DdrFault kind) and the output tensor at DST. The unit's result words are
compared (a) word for word with the model's y packed per pixel (Core.pack_lanes: lanes past CH
zero) and (b) put into a zeroed DST by Executor.scatter with the RES fields the unit reports,
byte for byte against the model's DST. A JOB error (ERR.OVERFLOW) produces exactly the words before
the one holding the first overflowing sum; a read fault a prefix of them.

Environment: DTPU_SEED, DTPU_CASES (random descriptors), DTPU_BIG (longer/larger descriptors)."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from dtpu.hw.config import HwConfig, out_lanes
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr, DdrFault
from dtpu.hw.executor import Executor, RunResult
from dtpu.hw.listformat import ListFault
from dtpu_sim.axi_mem import DECERR, SLVERR, Mem, Monitor, Region, random_pauses

SEED = int(os.environ.get("DTPU_SEED", "1"))
CASES = int(os.environ.get("DTPU_CASES", "24"))
BIG = int(os.environ.get("DTPU_BIG", "0"))
PADDR_W = int(os.environ.get("PARAM_PADDR_W", "12"))
MAX_BURST = int(os.environ.get("PARAM_MAX_BURST", "16"))
MAX_OUT = int(os.environ.get("PARAM_MAX_OUTSTANDING", "8"))
SIZE = 1 << 17
SUMS_AT = 0x1000          # sums in [SUMS_AT, OUT_AT), outputs above
OUT_AT = 0x10000



def hw_config() -> HwConfig:
    """The golden model's configuration of the build: its precisions (PARAM_PREC_EN), parameter
    entries (PARAM_PADDR_W) and requantization variants (PARAM_RQ_EN)."""
    extra = {}
    if "PARAM_PREC_EN" in os.environ:
        mask = int(os.environ["PARAM_PREC_EN"], 0)
        names = {v: k.lower() for k, v in HwConfig().enums["PREC"].items()}
        extra["ENABLED"] = [names[b] for b in sorted(names) if mask >> b & 1]
    if "PARAM_RQ_EN" in os.environ:
        extra["RQ_EN"] = int(os.environ["PARAM_RQ_EN"], 0)
    return HwConfig(**extra, LOG_PARAM_ENTRIES=PADDR_W)


CORE = Core(hw_config())
C = CORE.cfg
EX = Executor(CORE)
FMT = EX.fmt
INT_PRECS = [p for p in C.ENABLED if not p.is_float]
# the variants the build has (RQ_EN): random cases draw from them, the others are BAD_FIELD
VARIANTS = {n: v for n, v in C.enums["RQ_VARIANT"].items() if C.rq_built(v)}
NOT_BUILT = [v for v in C.enums["RQ_VARIANT"].values() if not C.rq_built(v)]
U64 = np.dtype("<u8")


class TB:
    def __init__(self, dut, seed):
        self.dut = dut
        self.rng = random.Random(seed)
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        for s in ("rst_n", "start", "src", "dst", "pix", "ch0", "ch", "dstc", "job_prec",
                  "job_out_mode", "job_variant", "param_base", "act_min", "act_max", "out_ready",
                  "pw_en", "pw_entry", "pw_half", "pw_data", "timeout", "clear"):
            getattr(dut, s).value = 0
        self.mem = Mem(dut, "m_axi", dut.clk, dut.rst_n, SIZE, self.rng, lat=(1, 1), stall=0.0)
        self.mon = Monitor(dut, "m_axi", dut.clk, MAX_BURST, MAX_OUT)
        self.ready_p = 1.0
        self.got = []             # (data, last, cycle)
        self.res = None
        cocotb.start_soon(self._consume())

    def stalls(self, p):
        rif = self.mem.read_if
        for ch in (rif.ar_channel, rif.r_channel):
            ch.set_pause_generator(random_pauses(self.rng, p))

    async def reset(self):
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst_n.value = 1
        await ClockCycles(self.dut.clk, 2)

    async def _consume(self):
        d = self.dut
        while True:
            d.out_ready.value = int(self.rng.random() < self.ready_p)
            await RisingEdge(d.clk)
            if int(d.out_valid.value) and int(d.out_ready.value):
                self.got.append((int(d.out_data.value), int(d.out_last.value), self.mem.clock.now))

    async def load_params(self, entry, words):
        """LOAD_PARAM into the RTL's parameter memory (one word per cycle) and into the model's."""
        d = self.dut
        for k, w in enumerate(words):
            d.pw_en.value = 1
            d.pw_entry.value = entry + k // 2
            d.pw_half.value = k % 2
            d.pw_data.value = int(w)
            await RisingEdge(d.clk)
        d.pw_en.value = 0
        CORE.write_memory("LOAD_PARAM", entry, np.asarray(words, U64).copy())

    async def run(self, case, limit=None):
        """Start the unit on `case`; returns (cycles from the start edge to done, the RES fields)."""
        d = self.dut
        self.got = []
        for k in ("src", "dst", "pix", "ch0", "ch", "dstc", "param_base", "act_min", "act_max"):
            getattr(d, k).value = case[k]
        d.job_prec.value = case["prec"]
        d.job_out_mode.value = case["out_mode"]
        d.job_variant.value = case["variant"]
        d.start.value = 1
        await RisingEdge(d.clk)
        self.t0 = t0 = self.mem.clock.now
        d.start.value = 0
        limit = limit or 400 + 40 * case["pix"] * max(1, case["ch"])
        res = None
        for _ in range(limit):
            await RisingEdge(d.clk)
            if int(d.busy.value) and res is None:
                res = {k: int(getattr(d, f"res_{k}").value) for k in
                       ("mode", "lanes", "esize", "signed", "dst", "pix", "outer", "inner", "gw",
                        "ch0", "ch1", "dstc")}
            if int(d.done.value):
                return self.mem.clock.now - t0, res
        raise AssertionError(f"no done after {limit} cycles: {case}")

    def flags(self):
        d = self.dut
        return {k: int(getattr(d, k).value) for k in
                ("bad_field", "err_slverr", "err_decerr", "err_timeout", "err_ovf", "warn_wrap")}


# ------------------------------------------------------------------------------------------------
# random cases

def rand_params(rng, n, prec, variant, big_bias):
    """n parameter entries (bias; multiplier | shift << 32 | reserved << 40 | zero point << 48)."""
    words = []
    info = np.iinfo(prec.value_dtype)
    for _ in range(n):
        if big_bias:
            bias = rng.randint(-(1 << 46), 1 << 46)
        else:
            bias = rng.choice([0, rng.randint(-(1 << 20), 1 << 20), rng.randint(-(1 << 31), 1 << 31)])
        if variant == C.RQ_VARIANT_FP32:
            scale = rng.choice([2.0 ** rng.uniform(-20, 2), -(2.0 ** rng.uniform(-20, 0)),
                                rng.choice([0.0, float("inf"), float("nan"), 1e-40])]
                               if rng.random() < 0.1 else [2.0 ** rng.uniform(-20, 2)])
            mult = int(np.array(scale, np.float32).view(np.uint32))
        else:
            m = rng.choice([rng.randint(1 << 30, (1 << 31) - 1), rng.randint(-(1 << 31), (1 << 31) - 1),
                            rng.randint(0x7FFF0000, 0x7FFFFFFF), -(1 << 31)])
            mult = m & 0xFFFFFFFF
        shift = rng.choice([rng.randint(-31, 31), rng.randint(-12, 2)]) & 0xFF
        lo, hi = (int(info.min), int(info.max)) if info.bits <= 16 else (-32768, 32767)
        zp = rng.choice([0, rng.randint(max(lo, -32768), min(hi, 32767)),
                         rng.randint(-32768, 32767)]) & 0xFFFF
        reserved = rng.getrandbits(8)
        words += [bias & ((1 << 64) - 1), mult | shift << 32 | reserved << 40 | zp << 48]
    return np.array(words, U64)


def rand_sums(rng, case):
    pix, dstc, kind = case["pix"], case["dstc"], case["sums"]
    n = pix * dstc
    if kind == "small":
        v = [rng.randint(-(1 << 24), 1 << 24) for _ in range(n)]
    elif kind == "edge32":
        v = [rng.choice([rng.randint(-(1 << 20), 1 << 20),
                         rng.choice([-1, 1]) * ((1 << 31) + rng.randint(-2000, 2000))])
             for _ in range(n)]
    elif kind == "edge47":
        v = [rng.choice([rng.randint(-(1 << 30), 1 << 30),
                         rng.choice([-1, 1]) * ((1 << 47) - rng.randint(1 << 44, 1 << 46))])
             for _ in range(n)]
    elif kind == "over":    # somewhere past 2^47 (ERR.OVERFLOW with the INT64 variant)
        v = [rng.randint(-(1 << 30), 1 << 30) for _ in range(n)]
        for _ in range(rng.randint(1, 3)):   # in the channels the descriptor reads
            k = rng.randrange(pix) * dstc + case["ch0"] + rng.randrange(max(1, case["ch"]))
            v[k] = rng.choice([-1, 1]) * rng.randint(1 << 48, 1 << 61)
    else:                   # wide
        v = [rng.randint(-(1 << 40), 1 << 40) for _ in range(n)]
    return np.array(v, np.int64)


def rand_case(rng, kind=None, prec=None, variant=None):
    prec = prec or rng.choice(INT_PRECS[:3] * 3 + INT_PRECS[3:])
    variant = VARIANTS[variant] if variant else rng.choice(list(VARIANTS.values()))
    hi_pix, hi_ch = (120, 100) if BIG else (40, 40)
    pix, ch = rng.randint(1, hi_pix), rng.randint(1, hi_ch)
    if rng.random() < 0.3:
        pix = rng.randint(1, 4)
    ch0 = rng.choice([0, rng.randint(0, 12)])
    dstc = ch0 + ch + rng.choice([0, rng.randint(0, 12)])
    while pix * dstc * 8 > OUT_AT - SUMS_AT - 8:
        pix = max(1, pix // 2)
    entries = 1 << PADDR_W
    pb = rng.choice([0, rng.randint(0, entries - ch), entries - ch])
    if kind is None:
        kind = rng.choice(["small", "edge32", "wide"] +
                          (["edge47", "edge47", "over"] if variant == C.RQ_VARIANT_INT64 else []))
    info = np.iinfo(prec.value_dtype)
    tlo, thi = (int(info.min), int(info.max)) if info.bits <= 32 else (-(1 << 31), (1 << 31) - 1)
    amin, amax = rng.choice([(tlo, thi), (tlo, thi), sorted(rng.randint(tlo, thi) for _ in range(2)),
                             (rng.randint(-(1 << 31), (1 << 31) - 1), rng.randint(-(1 << 31), (1 << 31) - 1))])
    src = SUMS_AT + 8 * rng.randrange(0, (OUT_AT - SUMS_AT - pix * dstc * 8) // 8)
    esize = np.dtype(prec.value_dtype).itemsize
    dst = OUT_AT + esize * rng.randrange(0, (SIZE - OUT_AT - pix * dstc * esize) // esize)
    return dict(prec=C.prec_code(prec), out_mode=C.OUT_MODE_REQUANT, variant=variant, pix=pix,
                ch0=ch0, ch=ch, dstc=dstc, param_base=pb, act_min=amin & 0xFFFFFFFF,
                act_max=amax & 0xFFFFFFFF, src=src, dst=dst, sums=kind, p=prec)


def spoil(rng, case):
    """A BAD_FIELD case: one field the model's post refuses (kind, case)."""
    kind = rng.choice(["ch0", "dstc", "param", "prec", "out_mode"] + ["variant"] * bool(NOT_BUILT))
    case = dict(case)
    if kind == "ch0":
        case["ch"] = 0
    elif kind == "dstc":
        case["dstc"] = case["ch0"] + case["ch"] - rng.randint(1, min(case["ch"], 3))
    elif kind == "param":
        case["param_base"] = (1 << PADDR_W) - case["ch"] + rng.randint(1, 5)
    elif kind == "prec":
        ok = {C.prec_code(p) for p in INT_PRECS}
        case["prec"] = rng.choice([k for k in range(16) if k not in ok])   # float, not built, none
    elif kind == "variant":
        case["variant"] = rng.choice(NOT_BUILT)
    else:
        case["out_mode"] = rng.choice([1, 2, 3])
    return kind, case


# ------------------------------------------------------------------------------------------------
# the golden model

def model(tb, case, sums, faults=()):
    """Executor.post on the same bytes: (error kind or None, DST bytes, y, ERR bits, words)."""
    image = np.frombuffer(bytes(tb.mem.ram.read(0, SIZE)), np.uint8).copy()
    ddr = Ddr(0, SIZE, image)
    for lo, hi, kind in faults:
        (ddr.hang if kind == "TIMEOUT" else ddr.slverr).append((lo, hi))
    regs = {C.REG_JOB: C.encode("JOB", PREC=case["prec"], OUT_MODE=case["out_mode"],
                                RQ_VARIANT=case["variant"]),
            C.REG_PARAM_BASE: case["param_base"], C.REG_ACT_MIN: case["act_min"],
            C.REG_ACT_MAX: case["act_max"]}
    d = {"POST1": dict(SRC=case["src"], DST=case["dst"]),
         "POST2": dict(PIX=case["pix"], CH0=case["ch0"], CH=case["ch"]),
         "POST3": dict(DSTC=case["dstc"])}
    r = RunResult()
    err_kind = None
    try:
        EX.post(ddr, regs, d, r)
    except ListFault as e:
        err_kind = e.kind
    except DdrFault as e:
        err_kind = e.kind
    out = None
    if err_kind is None:
        esize = np.dtype(case["p"].value_dtype).itemsize
        out = ddr.host_view(case["dst"], case["pix"] * case["dstc"] * esize).copy()
    y = err = words = None
    if err_kind in (None, "JOB") or faults:
        prec = case["p"]
        s = sums.reshape(case["pix"], case["dstc"])[:, case["ch0"]:case["ch0"] + case["ch"]]
        params = CORE.post_params(case["param_base"], case["ch"], prec, C.OUT_MODE_REQUANT)
        y, err = CORE.post(s, prec, C.OUT_MODE_REQUANT, case["variant"], params, 0,
                            case["act_min"], case["act_max"])
        lanes, _ = out_lanes(C, prec, C.OUT_MODE_REQUANT)
        words = Core.pack_lanes(y, lanes)
    return err_kind, out, y, err, words


def first_ovf_word(case, sums):
    """The result word holding the first sum whose total overflows (stream order)."""
    prec = case["p"]
    s = sums.reshape(case["pix"], case["dstc"])[:, case["ch0"]:case["ch0"] + case["ch"]]
    bias = CORE.post_params(case["param_base"], case["ch"], prec, C.OUT_MODE_REQUANT)[0]
    total = s + bias
    bad = np.flatnonzero(np.abs(total.reshape(-1)) >= 1 << 47)
    lanes = prec.lanes
    k = int(bad[0])
    p, c = divmod(k, case["ch"])
    return p * -(-case["ch"] // lanes) + c // lanes


def scatter(case, res, words):
    """The unit's words put at DST by the store unit's ITEMS mode (Executor.scatter) with the RES
    fields the unit reports."""
    esize = res["esize"]
    nbytes = case["pix"] * case["dstc"] * esize
    ddr = Ddr(case["dst"], nbytes)
    r0 = dict(MODE=res["mode"], LANES=res["lanes"], ESIZE=esize, SIGNED=res["signed"], DST=res["dst"])
    r1 = dict(PIX=res["pix"], OUTER=res["outer"], INNER=res["inner"])
    r2 = dict(GW=res["gw"], CH0=res["ch0"], CH1=res["ch1"], DSTC=res["dstc"])
    EX.scatter(ddr, r0, r1, r2, np.array(words, U64), False)
    return ddr.host_view(case["dst"], nbytes)


async def one_case(tb, case, faults=(), what=""):
    """Write the sums, run the unit and the model, compare; returns the unit's cycles."""
    rng = tb.rng
    sums = rand_sums(rng, case) if case["ch"] else \
        np.zeros(case["pix"] * case["dstc"], np.int64)
    tb.mem.ram.write(case["src"], sums.tobytes())
    esize = np.dtype(case["p"].value_dtype).itemsize
    tb.mem.ram.write(case["dst"], bytes(case["pix"] * case["dstc"] * esize))
    tb.mem.regions = [Region(lo, hi, {"SLVERR": SLVERR, "DECERR": DECERR, "TIMEOUT": None}[k])
                      for lo, hi, k in faults]
    model_faults = [(lo, hi, "SLVERR" if k == "DECERR" else k) for lo, hi, k in faults]
    kind, out, y, err, words = model(tb, case, sums, model_faults)
    if faults and kind == "SLVERR" and faults[0][2] == "DECERR":
        kind = "DECERR"
    bursts = len(tb.mon.bursts)
    cycles, res = await tb.run(case)
    f = tb.flags()
    got = [g[0] for g in tb.got]
    desc = (f"{what} prec {case['p'].name} variant {case['variant']} pix {case['pix']} "
            f"ch0 {case['ch0']} ch {case['ch']} dstc {case['dstc']} pb {case['param_base']} "
            f"sums {case['sums']}")
    want_flags = dict(bad_field=int(kind == "BAD_FIELD"), err_slverr=int(kind == "SLVERR"),
                      err_decerr=int(kind == "DECERR"), err_timeout=int(kind == "TIMEOUT"),
                      err_ovf=int(kind == "JOB"))
    got_flags = {k: v for k, v in f.items() if k != "warn_wrap"}
    assert got_flags == want_flags, f"{desc}: flags {got_flags}, model {kind} -> {want_flags}"
    if kind == "BAD_FIELD":
        assert not got and len(tb.mon.bursts) == bursts, f"{desc}: BAD_FIELD but reads or words"
        assert cycles <= 2, f"{desc}: BAD_FIELD done after {cycles} cycles"
    elif kind is None:
        assert f["warn_wrap"] == int(bool(err & C.ERR_WARN_WRAP32)), f"{desc}: warn_wrap"
        assert len(got) == len(words), f"{desc}: {len(got)} words, want {len(words)}"
        for k, (g, w) in enumerate(zip(got, words)):
            assert g == int(w), f"{desc}: word {k}: {g:#018x} != model {int(w):#018x}"
        assert [g[1] for g in tb.got] == [0] * (len(got) - 1) + [1] * bool(got), f"{desc}: out_last"
        placed = scatter(case, res, got)
        assert np.array_equal(placed, out), f"{desc}: DST through RES ITEMS differs from the model's"
    elif kind == "JOB":
        n = first_ovf_word(case, sums)
        assert len(got) == n, f"{desc}: {len(got)} words before the overflow, want {n}"
        assert got == [int(w) for w in words[:n]], f"{desc}: words before the overflow"
    else:
        assert got == [int(w) for w in words[:len(got)]], f"{desc}: words before the fault"
        k = (faults[0][0] - case["src"]) // 8
        p, c = divmod(k, case["dstc"])
        lanes = case["p"].lanes
        n = p * -(-case["ch"] // lanes) + (c - case["ch0"]) // lanes
        assert len(got) <= n, f"{desc}: {len(got)} words, the fault is in word {n}"
    tb.mon.check()
    tb.dut._log.info("%s: %s, %d words, %d cycles", desc, kind or "ok", len(got), cycles)
    tb.mem.regions = []
    return cycles


async def setup(dut, seed):
    tb = TB(dut, seed)
    await tb.reset()
    return tb


async def with_params(tb, case, big_bias=None):
    if case["ch"] >= 1 and case["param_base"] + case["ch"] <= 1 << PADDR_W:
        big = case["sums"] in ("edge47", "over") if big_bias is None else big_bias
        await tb.load_params(case["param_base"],
                             rand_params(tb.rng, case["ch"], case["p"], case["variant"], big))


@cocotb.test()
async def test_random(dut):
    """Random POST descriptors, random memory latency and stalls, random result backpressure;
    one in six spoiled (BAD_FIELD)."""
    tb = await setup(dut, SEED)
    rng = tb.rng
    for i in range(CASES):
        tb.mem.lat = rng.choice([(1, 1), (1, 8), (4, 40)])
        tb.stalls(rng.choice([0.0, 0.2, 0.5]))
        tb.ready_p = rng.choice([1.0, 0.8, 0.4])
        case = rand_case(rng)
        await with_params(tb, case)
        what = f"case {i}"
        if i % 6 == 5:
            k, case = spoil(rng, case)
            what += f" (bad {k})"
        await one_case(tb, case, what=what)


@cocotb.test()
async def test_rtl_only_checks(dut):
    """Fields the unit refuses with BAD_FIELD without the model's comparison (docs/rtl.md): an
    RQ_VARIANT outside the five variants (the model refuses it too, as a variant not built), an
    unaligned SRC (the model takes it). And PIX 0 (nothing to do)."""
    tb = await setup(dut, SEED + 100)
    case = rand_case(tb.rng)
    await with_params(tb, case)
    for k, v in (("variant", 5), ("variant", 7), ("src", case["src"] + 4)):
        c2 = dict(case, **{k: v})
        bursts = len(tb.mon.bursts)
        cycles, _ = await tb.run(c2)
        assert cycles <= 2 and tb.flags()["bad_field"] == 1 and not tb.got and len(tb.mon.bursts) == bursts, k
    c2 = dict(case, pix=0)
    await one_case(tb, c2, what="PIX 0")


@cocotb.test()
async def test_variant_not_built(dut):
    """A build without some requantization variants (RQ_EN): a POST naming one is BAD_FIELD in the
    unit and in the model (no read, no word), and every variant the build has runs exactly."""
    tb = await setup(dut, SEED + 150)
    for v in NOT_BUILT:
        case = rand_case(tb.rng, kind="small")
        await with_params(tb, case)
        case["variant"] = v
        kind = model(tb, case, np.zeros(case["pix"] * case["dstc"], np.int64))[0]
        assert kind == "BAD_FIELD", f"variant {v} (RQ_EN={C.RQ_EN}): the model gives {kind}"
        await one_case(tb, case, what=f"variant {v} not built")
    for name in VARIANTS:
        case = rand_case(tb.rng, kind="small", variant=name)
        await with_params(tb, case)
        await one_case(tb, case, what=f"variant {name} built")


@cocotb.test()
async def test_overflow(dut):
    """ERR.OVERFLOW (INT64 variant, |sum + bias| >= 2^47): the JOB error, the words before the one
    holding the first overflowing sum, then done; under latency and backpressure; then a good
    descriptor runs."""
    tb = await setup(dut, SEED + 200)
    if "INT64" not in VARIANTS:
        tb.dut._log.info("INT64 not built (RQ_EN=%d): no overflow to test", C.RQ_EN)
        return
    rng = tb.rng
    for i in range(4):
        tb.mem.lat = (1, 12)
        tb.stalls(0.2 * (i % 2))
        tb.ready_p = [1.0, 0.5][i % 2]
        case = rand_case(rng, kind="over", variant="INT64")
        await with_params(tb, case, big_bias=False)
        await one_case(tb, case, what=f"overflow {i}")
    case = rand_case(rng, kind="small", variant="INT64")
    await with_params(tb, case, big_bias=False)
    await one_case(tb, case, what="after the overflows")


@cocotb.test()
async def test_read_faults(dut):
    """SLVERR / DECERR on a sum word: the error flag, a prefix of the words, the owed words
    drained, done; the next descriptor runs normally."""
    tb = await setup(dut, SEED + 300)
    rng = tb.rng
    for i, kind in enumerate(["SLVERR", "DECERR", "SLVERR", "DECERR"]):
        tb.mem.lat = (1, 20)
        tb.stalls(0.3 * (i % 2))
        tb.ready_p = [1.0, 0.5][i % 2]
        case = rand_case(rng, kind="small")
        case["variant"] = VARIANTS.get("DOUBLE", min(VARIANTS.values()))
        await with_params(tb, case)
        p = rng.randrange(case["pix"])
        c = rng.randrange(case["ch"])
        a = case["src"] + 8 * (p * case["dstc"] + case["ch0"] + c)
        await one_case(tb, case, faults=[(a, a + 8, kind)], what=f"{kind} at pixel {p} channel {c}")
        case = rand_case(rng)
        await with_params(tb, case)
        await one_case(tb, case, what="after the fault")


@cocotb.test()
async def test_timeout(dut):
    """A sum that never arrives: the read master's timeout words end the job with err_timeout (the
    memory then stays hung: the last test)."""
    tb = await setup(dut, SEED + 400)
    rng = tb.rng
    tb.mem.lat = (1, 8)
    dut.timeout.value = 200
    case = rand_case(rng, kind="small")
    case["pix"] = max(case["pix"], 3)
    await with_params(tb, case)
    p = rng.randrange(1, case["pix"])
    a = case["src"] + 8 * (p * case["dstc"] + case["ch0"])
    await one_case(tb, case, faults=[(a, a + 8, "TIMEOUT")], what=f"timeout at pixel {p}")


@cocotb.test()
async def test_timed(dut):
    """No stall, fixed latency, result port always ready: cycles from start to the last result
    word against the formula of docs/rtl.md and the model's CFG_CYCLES + PIX*CH + LAT_POST."""
    tb = await setup(dut, SEED + 500)
    rng = tb.rng
    tb.ready_p = 1.0
    tb.stalls(0.0)
    for lat in (1, 8):
        tb.mem.lat = (lat, lat)
        for pix, ch, prec in ((1, 1, 0), (5, 1, 0), (3, 7, 2), (10, 33, 1), (40, 40, 0), (17, 16, 3)):
            case = rand_case(rng, kind="small", prec=INT_PRECS[prec])
            case.update(pix=pix, ch=ch, ch0=2, dstc=ch + 5, param_base=8)
            case["src"] = SUMS_AT + 8 * 13
            await with_params(tb, case)
            cycles = await one_case(tb, case, what=f"timed lat {lat}")
            last = tb.got[-1][2] - tb.t0
            model_cycles = C.CFG_CYCLES + pix * ch + C.LAT_POST
            tb.dut._log.info("timed: lat %d pix %d ch %d prec %s: start->last word %d, done %d, "
                             "model %d", lat, pix, ch, INT_PRECS[prec].name, last, cycles,
                             model_cycles)
            # docs/rtl.md: one sum per cycle (CH = 1: one request per pixel, and dtpu_axi_rd
            # issues one AR every other cycle), 15 cycles + the memory latency around it
            want = (pix * ch if ch > 1 else 2 * pix - 1) + 15 + lat
            assert last == want, f"pix {pix} ch {ch} lat {lat}: last word at {last}, formula {want}"
            assert cycles == last + 1, f"done at {cycles}, the last word at {last}"
