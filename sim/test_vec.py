"""The vector unit's RTL (contract 2.1) against the golden model: the ADD / SUB lane, the TABLE
lookup, the pixel-word funnel, MEAN's and the pools' datapaths, and VEC lists on dtpu_cl_top built with the unit (VEC_EN=1). The list tests need their own build of the
top (a few minutes on two cores), so they run with make test-all (slow); the default run lints
that build and runs the lane, the lookup, the funnel and the MEAN and pool datapaths."""
import pytest

from dtpu_sim import RTL_DIR, build, lint, rtl_sources, run_tests

#: small core memories for build speed (tb_cl_seq's CFG follows the PARAM_* of the build)
MEM = {"LOG_WEIGHT_WORDS": 10, "LOG_PARAM_ENTRIES": 8, "LOG_ACT_WORDS": 9}


@pytest.mark.parametrize("signed", [1, pytest.param(0, marks=pytest.mark.slow)])
def test_vec_add_lane(signed):
    top = "dtpu_vec_add_lane"
    d = build(top, {}, [RTL_DIR / f"{top}.v", RTL_DIR / "dtpu_vec_rq.v"], name=top)
    run_tests(top, "tb_vec_add_lane", d, extra_env={"DTPU_VEC_SIGNED": str(signed)})


@pytest.mark.parametrize("final", [0, 1])
def test_vec_rq(final):
    """The requantizer on its own against TFLite's arithmetic over the whole int32 range of x
    and M (its four 16-bit-half products: corners at the split, negative halves, the
    saturating INT32_MIN * INT32_MIN), both depths."""
    top = "dtpu_vec_rq"
    params = {"FINAL": final}
    d = build(top, params, [RTL_DIR / f"{top}.v"], name=top)
    run_tests(top, "tb_vec_rq", d, parameters=params)


def test_vec_table():
    """The TABLE lookup on its own: random tables and bytes, results two cycles later."""
    top = "dtpu_vec_table"
    d = build(top, {}, [RTL_DIR / f"{top}.v"], name=top)
    run_tests(top, "tb_vec_table", d)


def test_vec_pix():
    """The pixel-word funnel on its own: every C mod 8, idle cycles and backpressure, and one
    pixel word a cycle from the cycle after the first beat when nothing stalls."""
    top = "dtpu_vec_pix"
    d = build(top, {}, [RTL_DIR / f"{top}.v"], name=top)
    run_tests(top, "tb_vec_pix", d)


@pytest.mark.parametrize("rq", [8, 2, pytest.param(1, marks=pytest.mark.slow)])
def test_vec_mean(rq):
    """MEAN's accumulators and requantization on their own (16 accumulator words: C <= 128),
    random shapes, scales, idle cycles and output room; `rq`: its requantizers (VEC_RQ_LANES,
    a tail word in 8 / rq operations)."""
    top = "dtpu_vec_mean"
    params = {"LOG_ROW": 4, **({"RQ_LANES": rq} if rq != 8 else {})}
    d = build(top, params, [RTL_DIR / f"{top}.v", RTL_DIR / "dtpu_vec_rq.v"],
              name=top + (f"_rq{rq}" if rq != 8 else ""))
    run_tests(top, "tb_vec_mean", d, parameters=params)


def test_vec_pool():
    """The pools on their own (256 accumulator words): random geometries (global, tiling,
    overlapping windows), the corners, types, idle cycles and output room."""
    top = "dtpu_vec_pool"
    params = {"LOG_ROW": 8}
    d = build(top, params, [RTL_DIR / f"{top}.v"], name=top)
    run_tests(top, "tb_vec_pool", d, parameters=params)


def test_lint_cl_top_with_the_unit():
    """verilator -Wall on the top built with the vector unit (test_lint.py: VEC_EN=0)."""
    r = lint("dtpu_cl_top", rtl_sources(), {**MEM, "VEC_EN": 1})
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out


def _cl_vec(testcase, env=None, rq_lanes=8):
    """`rq_lanes`: the build's VEC_RQ_LANES (the model's too: tb_cl_seq's CFG from the
    parameters); 8, the contract's, keeps the build's parameters and name as before."""
    params = {"COLS": 8, **MEM, "VEC_EN": 1, **({"VEC_RQ_LANES": rq_lanes} if rq_lanes != 8 else {})}
    d = build("dtpu_cl_top", params, name="cl_top_vec" + (f"_rq{rq_lanes}" if rq_lanes != 8 else ""))
    run_tests("dtpu_cl_top", "tb_vec", d, parameters=params, extra_env=env or {},
              testcase=testcase)


@pytest.mark.parametrize("rq", [pytest.param(2, marks=pytest.mark.slow),
                                pytest.param(1, marks=pytest.mark.slow),
                                pytest.param(4, marks=pytest.mark.slow)])
def test_vec_rq_lanes_list_cycles(rq):
    """VEC_RQ_LANES < 8 (ADD / SUB / MUL a word in 8 / VEC_RQ_LANES cycles, MEAN's tail words
    too): element-wise and MEAN lists on the contract's memory, CL_CYCLES, IDLE, RD/WR_BEATS
    equal the Timeline's and DDR the model's, the corners (one-word and 4 KiB-crossing
    operands, B vectors, TABLE beside)."""
    _cl_vec("test_vec_cycles", {"DTPU_VEC_OPS": "ADD,SUB,MUL,MEAN", "DTPU_CASES": 12},
            rq_lanes=rq)


@pytest.mark.parametrize("rq", [pytest.param(2, marks=pytest.mark.slow),
                                pytest.param(1, marks=pytest.mark.slow)])
def test_vec_rq_lanes_list_words(rq):
    """The same with random memory latency and backpressure on every AXI channel: DDR and
    CL_* equal (the lanes' ready beside the read stream's backpressure)."""
    _cl_vec("test_vec_words", {"DTPU_VEC_OPS": "ADD,SUB,MUL,TABLE,MEAN", "DTPU_CASES": 12},
            rq_lanes=rq)


@pytest.mark.slow
def test_vec_list_words():
    """Element-wise VEC lists, random memory latency and backpressure: DDR and CL_* equal."""
    _cl_vec("test_vec_words")


@pytest.mark.slow
def test_vec_list_cycles():
    """Element-wise VEC lists on the contract's memory: CL_CYCLES, IDLE, RD/WR_BEATS equal."""
    _cl_vec("test_vec_cycles")


@pytest.mark.slow
def test_vec_among_runs_words():
    """RUN -> VEC -> RUN -> VEC lists, random memory latency and backpressure."""
    _cl_vec("test_vec_among_runs", {"DTPU_CASES": 8})


@pytest.mark.slow
def test_vec_among_runs_cycles():
    """The same on the contract's memory: CL_CYCLES, IDLE, RD/WR_BEATS equal the Timeline's."""
    _cl_vec("test_vec_among_runs", {"DTPU_CASES": 8, "DTPU_EXACT": 1})


@pytest.mark.slow
def test_vec_copy_words():
    """COPY lists alone (channel slices at any byte, packed pixels, long rows), random memory
    latency and backpressure: DDR (the bytes between the pixels untouched) and CL_* equal."""
    _cl_vec("test_vec_words", {"DTPU_VEC_OPS": "COPY", "DTPU_CASES": 16})


@pytest.mark.slow
def test_vec_copy_cycles():
    """The same on the contract's memory: CL_CYCLES, IDLE, RD/WR_BEATS equal the Timeline's
    (the store unit's simulation of the pixel words, units.vector._copy_step)."""
    _cl_vec("test_vec_cycles", {"DTPU_VEC_OPS": "COPY", "DTPU_CASES": 16})


@pytest.mark.slow
def test_vec_pool_words():
    """Pool lists (global, tiling and overlapping windows of 1..4, strides 1..3, VALID and
    SAME, C up to 70) with COPYs among them (Inception's concatenation after its pools: a
    COPY whose writes still drained when a pool's words came hung before the unit latched its
    KIND), random memory latency and backpressure: DDR and CL_* equal."""
    _cl_vec("test_vec_words", {"DTPU_VEC_OPS": "AVG_POOL,MAX_POOL,COPY", "DTPU_CASES": 16})


@pytest.mark.slow
def test_vec_pool_cycles():
    """The same on the contract's memory, and the corners (a 1x1 image, a SAME window larger
    than the image, C not a multiple of 8, rows and columns no window reads): CL_CYCLES, IDLE,
    RD/WR_BEATS equal the Timeline's (units.vector.pool_schedule)."""
    _cl_vec("test_vec_cycles", {"DTPU_VEC_OPS": "AVG_POOL,MAX_POOL", "DTPU_CASES": 16})
