"""The report's ``host`` record on today's job-by-job path (dtpu.driver.hostops): register
accesses, doorbells and stream transfers counted where the driver makes them, the compiled fast
path's derived counts equal to the protocol's for the same jobs, and the lowering's transforms.
The emulated board's record is checked in tests/test_board.py (same jobs as backend=model)."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.backends.base import Probes
from dtpu.backends.model import ModelBackend
from dtpu.driver import ModelTransport, run_jobs
from dtpu.driver.hostops import CountingTransport, HostOps
from dtpu.driver.model_transport import run_jobs_compiled
from dtpu.hw.config import get_config
from dtpu.hw.core import Core
from dtpu.hw.lower import lower
from dtpu.report import HOST_FIELDS
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant


def _node(kind, seed=0, shape=(1, 6, 6, 16), oc=24, kernel=(3, 3), mult=1):
    rng = np.random.default_rng(seed)
    c = shape[3]
    if kind is OpKind.DEPTHWISE_CONV_2D:
        oc = c * mult
        fshape = (1, *kernel, oc)
    elif kind is OpKind.FULLY_CONNECTED:
        fshape = (oc, c)
    else:
        fshape = (oc, *kernel, c)
    spec = ConvSpec(kind, DataMode.INT8, shape, fshape,
                    padding=Padding.SAME, depth_multiplier=mult,
                    input_q=Quant((0.02,), (-3,)),
                    filter_q=Quant(tuple(rng.uniform(0.005, 0.02, oc)), (0,) * oc),
                    output_q=Quant((0.4,), (5,)))
    x = rng.integers(-128, 128, shape).astype(np.int8)
    f = rng.integers(-127, 128, fshape).astype(np.int8)
    b = rng.integers(-1000, 1000, oc).astype(np.int32)
    return spec, x, f, b


NODES = {
    "conv3x3": lambda: _node(OpKind.CONV_2D),
    "conv1x1": lambda: _node(OpKind.CONV_2D, kernel=(1, 1)),
    "dw": lambda: _node(OpKind.DEPTHWISE_CONV_2D, shape=(1, 7, 7, 16)),
    "dw_mult2": lambda: _node(OpKind.DEPTHWISE_CONV_2D, shape=(1, 7, 7, 8), mult=2),
    # K = 3*3*4096 lanes: more words than the activation memory holds, a K split with host sums
    "split_k": lambda: _node(OpKind.CONV_2D, shape=(1, 2, 2, 4096), oc=8),
}


class _Spy(ModelTransport):
    """Counts every call the driver makes, independently of CountingTransport (the golden model
    never calls its own write_reg/read_reg/send/expect internally)."""

    def __init__(self):
        super().__init__(Core(get_config()))
        self.reads = self.writes = self.starts = self.transfers = 0

    def write_reg(self, offset, value):
        self.writes += 1
        self.starts += offset == self.cfg.REG_CTRL and bool(value & self.cfg.encode("CTRL", START=1))
        super().write_reg(offset, value)

    def read_reg(self, offset):
        self.reads += 1
        return super().read_reg(offset)

    def send(self, stream, words):
        self.transfers += bool(np.size(words))
        super().send(stream, words)

    def expect(self, stream, n):
        self.transfers += 1


@pytest.mark.parametrize("name", sorted(NODES))
def test_counting_layer_counts_the_drivers_calls_and_the_compiled_path_derives_the_same(name):
    spec, x, f, b = NODES[name]()
    low = lower(spec, f, b)
    spy = _Spy()
    run_jobs(spy, low.load_jobs)
    jobs = low.jobs(x)
    spy.reads = spy.writes = spy.starts = spy.transfers = 0
    ops = HostOps()
    res, cnt = run_jobs(CountingTransport(spy, ops), jobs)
    assert ops.counts() == (spy.reads, spy.writes, spy.starts, spy.transfers)
    assert ops.doorbells == len(jobs) > 0
    # the same jobs on the compiled path: results, counters and host counts equal
    t = ModelTransport(Core(get_config()))
    run_jobs(t, low.load_jobs)
    fast_ops = HostOps()
    res_fast, cnt_fast = run_jobs_compiled(t, jobs, {}, fast_ops)
    assert cnt_fast == cnt and all(np.array_equal(a, c) for a, c in zip(res_fast, res))
    assert fast_ops.counts() == ops.counts()
    assert fast_ops.device_s > 0 and ops.device_s > 0


def _invoke_host(backend, spec, x, f, b, invokes=2, handles=None):
    handle = backend.prepare(spec, f, b)
    if handles is not None:
        handles.append(handle)
    got = []
    for _ in range(invokes):
        y, counters = backend.invoke(handle, x, Probes())
        got.append((np.array(y), counters.host, counters.idle_cycles))
    return got


@pytest.mark.parametrize("name", sorted(NODES))
def test_model_backend_host_record_is_the_same_compiled_and_through_the_protocol(name):
    spec, x, f, b = NODES[name]()
    handles = []
    fast = _invoke_host(ModelBackend({}), spec, x, f, b, handles=handles)
    slow = _invoke_host(ModelBackend({"fast": False}), spec, x, f, b)
    for (yf, hf, idle_f), (ys, hs, idle_s) in zip(fast, slow):
        assert np.array_equal(yf, ys)
        assert set(hf) == set(hs) == set(HOST_FIELDS)
        assert {k: hf[k] for k in HOST_FIELDS if k != "us"} == {k: hs[k] for k in HOST_FIELDS if k != "us"}
        assert hf["us"] > 0 and hs["us"] > 0
        assert idle_f == idle_s == 0   # the golden model never stalls
    # one doorbell per job of the node's lowering; a streamed node's weight pages ride on its
    # compute jobs as prefetch in the steady state, so only those start
    jobs = handles[0].lowered.jobs(x)
    if handles[0].planned:
        jobs = [j for j in jobs if j.recv]
    assert fast[-1][1]["doorbells"] == len(jobs) > 0


def test_transforms_are_counted_where_the_host_reshapes_or_sums():
    backend = ModelBackend({})
    counts, handles = {}, []
    for name, make in NODES.items():
        spec, x, f, b = make()
        counts[name] = _invoke_host(backend, spec, x, f, b, handles=handles)[-1][1]["transforms"]
    # a 3x3 conv needs an im2col gather; a 1x1 stride-1 conv's activation is the NHWC tensor
    assert counts["conv3x3"] == 1 and counts["conv1x1"] == 0
    # a depthwise node whose stream is the NHWC tensor needs none; a channel multiplier a repeat
    assert counts["dw"] == 0 and counts["dw_mult2"] >= 1
    # the K split: im2col, a column slice per chunk job, a sum per partial and a requantization
    spec, x, f, b = NODES["split_k"]()
    low = handles[-1].lowered
    assert low.k_chunks > 1
    partials = len([j for j in low.jobs(x) if j.recv])
    assert counts["split_k"] == 1 + 2 * partials + 1
