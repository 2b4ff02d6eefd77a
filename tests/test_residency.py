"""The residency policy (dtpu.hw.residency): which nodes keep their weights on chip, as a pure
function of their weight words, the memory sizes and the profiles a caller hands in, and the
command-list compiler's placement with it: first come by default, or a choice made elsewhere
(compile_program(resident=)), bit-exact either way."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu import reference
from dtpu.driver.lists import ListProgram
from dtpu.driver.model_transport import ModelTransport
from dtpu.hw import residency
from dtpu.hw.config import HwConfig, ceil_div
from dtpu.hw.listcompiler import NodeIn, compile_program
from dtpu.hw.listformat import CmdlistError
from dtpu.hw.lower import footprint
from tests.delegate_util import assert_matches, dtpu_so, run, tfl  # noqa: F401
from tests.test_backend_prefetch import SMALL, _fc_last_net

ZOO = Path(__file__).resolve().parents[1] / "tests" / "models" / "zoo"


def _synthetic(cfg, net):
    """Candidates of `net` and a profile_of that prices a node at its MACs over the MXU's peak
    per page job (one compute job per page): no lowering, no device."""
    cands = [residency.Candidate(s, footprint(s, cfg, None)[0], True) for s, *_ in net]
    peak = cfg.ROWS * cfg.COLS

    def profile_of(i, page):
        spec, words = cands[i].spec, cands[i].words
        total = ceil_div(spec.macs, peak)
        if page is None:
            return residency.Profile([total], [], 0)
        n = ceil_div(words, page)
        pages = [(np.zeros(min(page, words - k * page), np.uint64), k, k) for k in range(n)]
        return residency.Profile([ceil_div(total, n)] * n, pages, 0)

    return cands, profile_of


def test_select_keeps_the_classifier_resident_from_weight_words_and_profiles_alone():
    with HwConfig(**SMALL) as cfg:
        net = _fc_last_net(np.random.default_rng(11))
        cands, profile_of = _synthetic(cfg, net)
        ring = cfg.WEIGHT_WORDS // 8
        # first come: both convolutions resident, the classifier streamed through what is left
        current = [None, None, residency.page_size(cfg, cands[2].spec, cands[2].words, ring)]
        used = sum(residency.aligned(cfg, c.words) for c in cands[:2])
        first = residency.cost(cfg, current, profile_of, (used, cfg.WEIGHT_WORDS))
        choice, estimate = residency.select(cfg, cands, current, (used, cfg.WEIGHT_WORDS),
                                            profile_of)
    assert choice[2] is None and choice[0] is not None and choice[1] is not None
    assert estimate < first
    # nothing cheaper than the current choice: it is kept, as the same object
    kept, same = residency.select(cfg, cands, choice, (cands[2].words, cfg.WEIGHT_WORDS),
                                  profile_of, fractions=())
    assert kept is choice and same == residency.cost(cfg, choice, profile_of,
                                                     (cands[2].words, cfg.WEIGHT_WORDS))


def test_first_come_places_in_order_and_a_choice_only_where_it_says():
    with HwConfig(**SMALL) as cfg:
        places, top = residency.first_come(cfg, [(384, 48), (240, 40), (768, 16)], 896, 448)
        assert places == [(0, 0), (384, 48), None] and top == 624
        places, top = residency.first_come(cfg, [(384, 48), (240, 40), (768, 16)], 896, 448,
                                           [False, False, True])
        assert places == [None, None, (0, 0)] and top == 768
        # weights with room, parameters without: streamed, its weight words stay taken
        places, top = residency.first_come(cfg, [(64, 500), (64, 8)], 896, 448)
        assert places == [None, (64, 0)] and top == 128


def _run_lists(cfg, net, resident):
    parts = [[NodeIn(s, f, b)] for s, x, f, b in net]
    prog = ListProgram(ModelTransport(cfg=cfg, lists=True), parts, resident=resident)
    cycles = 0
    for k, (s, x, f, b) in enumerate(net):
        part = prog.program.partitions[k]
        y = np.empty(part.output.shape, part.output.dtype)
        for _ in range(2):   # the second invoke: steady state
            run = prog.invoke(k, [x], {0: y})
        assert np.array_equal(y, reference.run(s, x, f, b)), s.name
        cycles += run.cycles
    return prog.program, cycles


def test_a_list_program_takes_a_residency_chosen_elsewhere_bit_exact():
    with HwConfig(**SMALL) as cfg:
        net = _fc_last_net(np.random.default_rng(11))
        first, _ = _run_lists(cfg, net, None)
        # the job path's choice for this net (tests/test_backend_prefetch.py): the classifier
        # resident, the convolutions streamed (on lists of one node each it is the slower one,
        # 28.7 k cycles against 25.6 k: a list hides a LOAD only behind earlier RUNs of its own
        # list, see docs/architecture.md, "One residency policy?")
        chosen, _ = _run_lists(cfg, net, [False, False, True])
        assert (first.streamed_nodes, first.resident_words) == (1, 624)
        assert (chosen.streamed_nodes, chosen.resident_words) == (2, 768)
        with pytest.raises(CmdlistError, match="3 MXU nodes"):
            compile_program([[NodeIn(s, f, b)] for s, x, f, b in net], cfg, resident=[True])


def test_the_job_path_chooses_residency_at_prepare_not_at_the_first_invoke(dtpu_so, tfl,
                                                                           monkeypatch):
    """The autoencoder's 33 k weight words do not fit: job by job, the selection runs when the
    graph's Prepare ends (GraphState.compile_if_prepared -> DeviceBackend.settle), the nodes it
    made resident load there, and the invokes (bit-exact with TFLite's CPU kernels) choose
    nothing again."""
    import dtpu
    from dtpu.backends.model import DeviceBackend
    from dtpu.delegate import runtime

    calls = []
    original = DeviceBackend.select_residency

    def counting(self):
        calls.append(len(self.nodes))
        return original(self)

    monkeypatch.setattr(DeviceBackend, "select_residency", counting)
    path = ZOO / "autoencoder_toyadmos__int8.tflite"
    ours = dtpu.make_interpreter(path, {"backend": "model", "path": "jobs"})
    ours.allocate_tensors()
    backend = list(runtime.DELEGATES.values())[-1].backend
    assert calls == [10] and backend.has_plan and backend.last_estimate is not None
    assert any(h.streamed for h in backend.nodes) and not any(h.pending for h in backend.nodes)
    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    for seed in (0, 1):
        x = [np.random.default_rng(seed).integers(-128, 128, (1, 640)).astype(np.int8)]
        for g, w in zip(run(ours, x), run(cpu, x)):
            assert_matches(g, w, f"seed {seed}")
    assert calls == [10]
