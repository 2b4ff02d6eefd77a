"""The timeline (dtpu.isro.timing): loads, compute and stores on three units, each in program
order, an instruction waiting only for its data; double-buffered staging hides transfers."""
from __future__ import annotations

from pathlib import Path

from dtpu.isro import compile_model, run
from dtpu.isro.isa import Fmt, Instruction, Mem, Op
from dtpu.isro.profile import Profile, load
from dtpu.isro.timing import schedule

FIXTURES = Path(__file__).resolve().parent / "isro"


def _load(dst, n=16):
    return Instruction(Op.XFER, xsrc=Mem.EXTERNAL, xdst=Mem.FRAME, src=0, dst=dst, len=n, count=1)


def _pool(src, dst):
    return Instruction(Op.MAXPOOL, fmt=Fmt.I8, src=src, dst=dst, cin=1, hin=4, win=4, kh=1, kw=1, sh=1, sw=1,
                       hout=4, wout=4)


def _store(src):
    return Instruction(Op.XFER, xsrc=Mem.FRAME, xdst=Mem.EXTERNAL, src=src, dst=64, len=16, count=1)


def test_a_load_into_the_other_buffer_overlaps_compute_and_a_dependent_one_waits():
    sizes = dict(frame_bytes=256, filter_bytes=64, external_bytes=256)
    end = Instruction(Op.END)
    # load A, load B, compute A -> out, compute B -> out2: the second load runs during compute A
    prog = [_load(0), _load(32), _pool(0, 128), _pool(32, 160), end]
    s = schedule(prog, [10, 10, 100, 100, 0], **sizes)
    assert s.cycles == 10 + 100 + 100 and s.transfer_cycles == 20 and s.hidden_cycles == 10
    # the second load reuses buffer A: it must wait for compute A to read it (write after read)
    prog = [_load(0), _pool(0, 128), _load(0), _pool(0, 160), end]
    s = schedule(prog, [10, 100, 10, 100, 0], **sizes)
    assert s.cycles == 10 + 100 + 10 + 100 and s.hidden_cycles == 0
    # a store waits for the compute that wrote its source (read after write), then runs beside the next compute
    prog = [_load(0), _pool(0, 128), _store(128), _pool(0, 160), end]
    s = schedule(prog, [10, 100, 30, 100, 0], **sizes)
    assert s.cycles == 10 + 100 + 100 and s.hidden_cycles == 30 and s.stall_cycles == 10


def test_on_chip_programs_take_the_plain_sum():
    bundle = compile_model(FIXTURES / "resnet_s_int8.tflite")
    result = run(bundle)
    assert result.schedule.cycles == result.counters.cycles and result.schedule.transfer_cycles == 0


def test_double_buffered_staging_hides_transfers():
    on_chip = compile_model(FIXTURES / "resnet8_int8.tflite")
    base = load()
    small = Profile(**{**base.__dict__, "frame_bytes": on_chip.meta["frame_bytes"] // 4,
                       "filter_bytes": on_chip.meta["filter_bytes"] // 2})
    staged = compile_model(FIXTURES / "resnet8_int8.tflite", chip=small)
    assert any(layer["staging"]["double"] for layer in staged.layers)
    result = run(staged)
    s = result.schedule
    assert s.hidden_cycles > 0 and s.cycles < result.counters.cycles        # overlap shortens the run
    assert s.cycles >= max(s.compute_cycles, result.counters.cycles - s.transfer_cycles)


def _partial(src, dst):
    return Instruction(Op.CONV, fmt=Fmt.I8, src=src, dst=dst, wgt=0, cin=1, hin=4, win=4, cout=1, kh=1, kw=1,
                       hout=4, wout=4, cn=1, rn=1, sn=1, partial=1)


def _add(src, dst):
    return Instruction(Op.ADD, fmt=Fmt.I8, src=src, dst=dst, cout=1, hout=4, wout=4, npart=1)


def test_add_runs_on_the_adder_beside_the_next_blocks_and_waits_for_its_partials():
    """A staged band's ADD reduces its partials on the adder while the next band's blocks write
    the other partial-sum set; writing the same set again waits for the ADD to read it."""
    sizes = dict(frame_bytes=256, filter_bytes=512, external_bytes=256)
    end = Instruction(Op.END)
    # load, blocks -> set A, ADD A, blocks -> set B, ADD B: ADD A runs beside the second blocks
    prog = [_load(0), _partial(0, 256), _add(256, 128), _partial(0, 384), _add(384, 160), end]
    s = schedule(prog, [10, 100, 40, 100, 40, 0], **sizes)
    assert s.cycles == 10 + 100 + 100 + 40 and s.post_cycles == 80 and s.compute_cycles == 200
    assert s.ends == (10, 110, 150, 210, 250, 250)
    # one set only: the second blocks wait for ADD A to read it (write after read)
    prog = [_load(0), _partial(0, 256), _add(256, 128), _partial(0, 256), _add(256, 160), end]
    s = schedule(prog, [10, 100, 40, 100, 40, 0], **sizes)
    assert s.cycles == 10 + 100 + 40 + 100 + 40
