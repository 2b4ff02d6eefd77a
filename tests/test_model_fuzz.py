"""Byte-mutated zoo models: whatever TFLite's CPU interpreter runs, the delegate runs too.

Property (issue #12): for a mutant of a zoo model that the plain CPU interpreter loads, allocates
and invokes, the same with the DTPU delegate applied (backend=reference and backend=model)
neither kills the process (signal) nor hangs nor fails where the CPU passed, and for integer
models gives the CPU's outputs bit for bit (nodes the delegate cannot run exactly stay on the
CPU, which also gives the CPU's outputs).

Each mutant runs in child processes (a signal or a hang there is observed, not suffered): one
child runs the plain interpreter (and dtpu.model_check), another the delegated ones, so that
heap damage done by TFLite's own kernels in the CPU run cannot surface in the delegate's. Many
mutants share a child, which reports each stage on its stdout before entering it; the parent
waits with a timeout and restarts a child only when it died or hung, attributing the death to
the stage the child had announced (a death in the CPU stage is TFLite's own and not ours). See
`judge` for what counts: deaths are confirmed in fresh processes against a CPU-only control;
mutants that model_check refuses (TFLite read outside the file to build them, which
dtpu.make_interpreter and dtpu run no longer let happen) are not comparable between processes.

Mutations are a deterministic function of (model, kind, seed), so every finding is a recipe:

* ``flip``: a few random bytes XORed with a random non-zero value;
* ``int32``: a few 4-byte-aligned words overwritten with boundary values (0, -1, 2^31-1, ...);
* ``truncate``: the file cut at a random length;
* ``name``: a tensor's name offset pointed outside the file (TFLite keeps the pointer unread);
* ``field``: one field that the delegate reads (a tensor's shape, type, buffer index, affine
  scales / zero points / quantized dimension and their vector lengths, an operator's tensor
  indices and builtin options, a buffer's length) overwritten with a boundary value of its type.
  Random bytes rarely hit those; this kind aims at them (located with dtpu.tflite_model's reader).

Hand-written rather than hypothesis-driven: a hypothesis example cannot be run in a long-lived
child and resumed after the child is killed, and shrinking a mutant that kills the process would
restart a child per step; a seed per mutant gives the same reproducibility.

``python tests/test_model_fuzz.py --sweep N [--kinds ...] [--seed S]`` runs a larger sweep and
prints every violation's recipe (what the slow test runs, with any size).
"""
from __future__ import annotations

import gc
import json
import math
import os
import random
import re
import select
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from dtpu.backends.base import Backend

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "models" / "zoo"
BACKENDS = ("reference", "model")
KINDS = ("flip", "int32", "truncate", "field", "name")
STAGE_TIMEOUT = 20.0       # seconds a child may spend on one stage of one mutant
INT32_BOUNDARY = (0, 1, -1, 2, 3, 4, 7, 8, 255, 256, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF,
                  -0x80000000, 0x3FFFFFFF, -2)
FLOAT_BOUNDARY = (math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1e-45, 1e-38, 1e30, 3.4e38,
                  1.0, 1e-12)
INT64_BOUNDARY = (0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 2**31,
                  -2**31 - 1, 2**63 - 1, -2**63)


def zoo_models() -> list[Path]:
    return sorted(ZOO.glob("*.tflite"))


# -- mutations ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Recipe:
    model: str      # file name in tests/models/zoo
    kind: str
    seed: int

    def __str__(self) -> str:
        return f"Recipe({self.model!r}, {self.kind!r}, {self.seed})"


def _fields(data: bytes) -> list[tuple[int, str]]:
    """(position, format) of every field the delegate reads, for the ``field`` mutation."""
    from tests.flatbuf_fields import FieldReader   # lazily: workers run this file as a script

    r = FieldReader(data)
    out: list[tuple[int, str]] = []

    def scalar(table, index, fmt):
        pos = r.field_pos(table, index)
        if pos is not None:
            out.append((pos, fmt))

    def vector(table, index, fmt):
        pos = r.field_pos(table, index)
        if pos is None:
            return
        start = r.deref(pos)
        n = r.unpack("I", start)
        out.append((start, "I"))        # the length itself
        size = struct.calcsize("<" + fmt)
        for i in range(min(n, 16)):
            out.append((start + 4 + i * size, fmt))

    root = r.root()
    for buf in r.tables(root, 4):
        vector(buf, 0, "B")
    for sg in r.tables(root, 2):
        vector(sg, 1, "i")
        vector(sg, 2, "i")
        for t in r.tables(sg, 0):
            vector(t, 0, "i")
            scalar(t, 1, "b")
            scalar(t, 2, "I")
            q = r.table(t, 4)
            if q is not None:
                vector(q, 2, "f")
                vector(q, 3, "q")
                scalar(q, 6, "i")
        for op in r.tables(sg, 3):
            scalar(op, 0, "I")
            vector(op, 1, "i")
            vector(op, 2, "i")
            options = r.table(op, 4)
            if options is not None:
                for index in range(7):
                    scalar(options, index, "i")  # formats vary; an int32 write covers them all
    return out


def mutate(data: bytes, kind: str, seed: int) -> bytes:
    rng = random.Random(f"{kind}:{seed}")
    buf = bytearray(data)
    if kind == "flip":
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] ^= rng.randint(1, 255)
    elif kind == "int32":
        for _ in range(rng.randint(1, 2)):
            pos = rng.randrange(len(buf) // 4) * 4
            struct.pack_into("<i", buf, pos, rng.choice(INT32_BOUNDARY))
    elif kind == "truncate":
        return bytes(buf[:rng.randrange(len(buf))])
    elif kind == "name":
        from tests.flatbuf_fields import FieldReader

        r = FieldReader(data)
        tensors = [t for sg in r.tables(r.root(), 2) for t in r.tables(sg, 0)]
        pos = r.field_pos(rng.choice(tensors), 3)
        if pos is not None:
            struct.pack_into("<I", buf, pos, rng.choice((0x40000000, 0x7FFFFFF0, 0xFFFFFFF0,
                                                         len(buf) - pos + rng.randrange(1 << 20))))
    elif kind == "field":
        fields = _fields(data)
        pos, fmt = rng.choice(fields)
        size = struct.calcsize("<" + fmt)
        if fmt == "f":
            value = rng.choice(FLOAT_BOUNDARY)
        elif fmt == "q":
            value = rng.choice(INT64_BOUNDARY)
        else:
            value = rng.choice(INT32_BOUNDARY)
            fmt = "i" if size == 4 else fmt
        if fmt in ("b", "B"):
            value = rng.choice((0, 1, 2, 3, 4, 5, 6, 9, 10, 16, 127, 128, 255)) & 0xFF
            fmt = "B"
        elif fmt in ("i", "I"):
            fmt = "i"
        struct.pack_into("<" + fmt, buf, pos, value)
    else:
        raise ValueError(f"mutation kind {kind!r}; accepted: {', '.join(KINDS)}")
    return bytes(buf)


def mutant(recipe: Recipe) -> bytes:
    return mutate((ZOO / recipe.model).read_bytes(), recipe.kind, recipe.seed)


# -- the child ------------------------------------------------------------------------------------

def _inputs(interpreter, seed: int):
    """Inputs in each input's dtype and shape (by index: get_input_details() reads the tensors'
    names, which in a damaged model may point outside the file, TFLite's wrapper then faults)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = []
    for index in interpreter._interpreter.InputIndices():
        like = interpreter.tensor(index)()
        dtype, shape = like.dtype, like.shape
        del like
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            values.append((index, rng.integers(info.min, int(info.max) + 1, size=shape, dtype=dtype)))
        elif dtype == np.bool_:
            values.append((index, rng.integers(0, 2, size=shape).astype(bool)))
        else:
            values.append((index, rng.uniform(-1, 1, size=shape).astype(dtype)))
    return values


def _run(data: bytes, delegate, **kwargs) -> list:
    from dtpu import tflite

    if delegate is not None:
        kwargs["experimental_delegates"] = [delegate]
    interpreter = tflite.Interpreter(model_content=data, **kwargs)
    interpreter.allocate_tensors()
    for index, value in _inputs(interpreter, 0):
        interpreter.set_tensor(index, value)
    interpreter.invoke()
    outputs = [interpreter.get_tensor(i).copy() for i in interpreter._interpreter.OutputIndices()]
    del interpreter     # torn down inside the stage (a crash in a kernel's free is the stage's)
    gc.collect()
    return outputs


def _digest(outputs) -> list:
    """What is compared between the CPU's and the delegate's outputs: shapes and dtypes, and the
    values of integer outputs (floats may differ in the last bits: the delegate's float32 sums
    are not TFLite's)."""
    import hashlib

    import numpy as np

    return [[str(o.dtype), list(o.shape),
             hashlib.sha256(o.tobytes()).hexdigest() if not np.issubdtype(o.dtype, np.floating)
             else None] for o in outputs]


class RefuseAll(Backend):
    """A backend that runs nothing: every node stays on the CPU (the control of `judge`)."""

    name = "refuse"

    def prepare(self, spec, filters, bias):
        raise ValueError("the control backend runs nothing")

    def invoke(self, handle, x, probes):
        raise AssertionError("nothing is prepared, so nothing runs")

    def release(self, handle) -> None:
        pass

    def close(self) -> None:
        pass


def _worker(mode: str) -> None:
    """Read jobs (JSON lines) on stdin; announce each stage, then its outcome, on stdout.

    mode "cpu": the plain interpreter (and dtpu.model_check's verdict); "delegate": each backend.
    Separate processes: a damaged model can make TFLite's own kernels corrupt the heap, which
    must not surface later as a crash in the delegate's process.
    """
    import resource

    import dtpu

    limit = 4 << 30     # an absurd shape fails an allocation instead of swapping the machine
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    delegates = {}
    if mode == "delegate":
        from dtpu import backends

        backends.register("refuse", f"{__name__}:RefuseAll")
        delegates = {b: dtpu.load_delegate({"backend": b}) for b in BACKENDS + ("refuse",)}
    out = sys.stdout

    def say(**msg):
        out.write(json.dumps(msg) + "\n")
        out.flush()

    say(ready=True)
    for line in sys.stdin:
        job = json.loads(line)
        data = mutant(Recipe(*job["recipe"]))
        result: dict = {}
        if mode == "cpu":
            say(stage="check")
            try:
                from dtpu import model_check
                model_check.check_bytes(data, "mutant")
                result["check"] = "ok"
            except ValueError as exc:
                result["check"] = str(exc)
            for i in range(job.get("repeat", 1)):
                say(stage="cpu")
                try:
                    result["cpu"] = _digest(_run(data, None, **job.get("kwargs", {})))
                except Exception as exc:
                    result["cpu"] = f"error: {exc!r}"[:300]
        for backend in job.get("backends", BACKENDS) if mode == "delegate" else ():
            say(stage=backend)
            try:
                result[backend] = _digest(_run(data, delegates[backend]))
            except Exception as exc:
                result[backend] = f"error: {exc!r}"[:500]
        say(done=True, **result)


class Pool:
    """One child at a time running jobs; restarted when it dies or hangs."""

    def __init__(self, mode: str, timeout: float = STAGE_TIMEOUT) -> None:
        self.mode = mode
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.buffer = b""

    def _start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "pylib") + os.pathsep + str(ROOT),
                   DTPU_LOG_LEVEL="error", PYTHONFAULTHANDLER="1")
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", self.mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        self.buffer = b""
        msg = self._read(120.0)
        if not msg or not msg.get("ready"):
            raise RuntimeError(f"fuzz worker did not start: {msg}")

    def _read(self, timeout: float) -> dict | None:
        """The next message, None if the child died or said nothing for `timeout` seconds."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def _kill(self) -> str:
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            return "hang"
        return f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"

    def run(self, recipe: Recipe, **job) -> dict:
        if self.proc is not None and self.proc.poll() is not None:
            self._kill()    # died after its last answer (at exit of a job): start afresh
        if self.proc is None:
            self._start()
        job["recipe"] = [recipe.model, recipe.kind, recipe.seed]
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return {"died": "start", "how": self._kill()}
        stage = None
        while True:
            msg = self._read(self.timeout)
            if msg is None:
                return {"died": stage, "how": self._kill()}
            if msg.get("done"):
                return msg
            stage = msg["stage"]

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self._kill()
            self.proc = None


def judge(recipe: Recipe, cpu: Pool, delegate: Pool, log=None,
          strict: bool = False) -> tuple[str, str | None]:
    """(category, violation or None) of one mutant.

    Categories: "cpu_died" / "cpu_failed" (nothing to compare with), "cpu_ok", and
    "cpu_ok_unchecked": the CPU ran a mutant that dtpu.model_check refuses, i.e. TFLite read
    outside the file to build it (dtpu run and dtpu.make_interpreter refuse such files before
    TFLite sees them). What TFLite reads there differs between processes (ASLR), and it can
    corrupt or hang its own process, so in a sweep nothing the delegated run does on such a
    mutant counts; `strict` (the regressions of deaths found in the delegate's own code) counts
    a confirmed death there too. A death in the delegate's process is confirmed in fresh
    processes before it counts: the delegate's run alone must die again while a control running
    the plain interpreter twice (the most TFLite work the delegated run contains) survives;
    otherwise TFLite itself corrupted its process. Outputs that differ count only when the
    CPU's own outputs stay the same under a delegate that claims nothing (backend RefuseAll):
    TFLite's 16x8 depthwise kernel, given a depth_multiplier that disagrees with the shapes, writes
    outside its output or not at all, so its outputs depend on where the arena put the tensors,
    and applying any delegate changes that layout.
    """
    base = cpu.run(recipe)
    if base.get("died"):
        return "cpu_died", None
    if isinstance(base.get("cpu"), str):
        return "cpu_failed", None
    checked = base.get("check") == "ok"
    category = "cpu_ok" if checked else "cpu_ok_unchecked"
    result = delegate.run(recipe)
    if result.get("died"):
        died = f"{result['how']} in stage {result['died']}"
        if not checked and not strict:
            if log:
                log(f"{recipe}: {died} (refused by model_check: not counted)")
            return category, None
        fresh, control = Pool("delegate"), Pool("cpu")
        try:
            again = fresh.run(recipe, backends=[result["died"]])
            ctl = control.run(recipe, repeat=2)
        finally:
            fresh.close()
            control.close()
        if not again.get("died") or ctl.get("died"):
            if log:
                log(f"{recipe}: {died}, not confirmed ({'control died' if ctl.get('died') else 'fresh run passed'})")
            return category, None
        return category, died
    if not checked:  # TFLite read outside the file: what it built is not reproducible
        return "cpu_ok_unchecked", None
    bad = {}
    for backend in BACKENDS:
        got = result.get(backend)
        if isinstance(got, str):
            bad[backend] = got
        elif got != base["cpu"]:
            bad[backend] = "outputs differ"
    if any(why == "outputs differ" for why in bad.values()):
        control = delegate.run(recipe, backends=["refuse"])
        if control.get("refuse") != base["cpu"]:  # its outputs depend on the arena's layout
            if log:
                log(f"{recipe}: {bad}, but the CPU's own outputs change with the arena layout: "
                    "not counted")
            bad = {b: why for b, why in bad.items() if why != "outputs differ"}
    return "cpu_ok", (f"delegate: {bad}" if bad else None)


def recipes(count: int, seed: int = 0, kinds=KINDS, models=None) -> list[Recipe]:
    rng = random.Random(seed)
    names = [p.name for p in (models or zoo_models())]
    return [Recipe(rng.choice(names), kinds[i % len(kinds)], rng.randrange(1 << 30))
            for i in range(count)]


def sweep(todo: list[Recipe], log=None) -> tuple[list[tuple[Recipe, str]], dict]:
    cpu, delegate = Pool("cpu"), Pool("delegate")
    found, stats = [], {"cpu_ok": 0, "cpu_ok_unchecked": 0, "cpu_failed": 0, "cpu_died": 0}
    try:
        for recipe in todo:
            category, bad = judge(recipe, cpu, delegate, log)
            stats[category] += 1
            if bad:
                found.append((recipe, bad))
                if log:
                    log(f"{recipe}: {bad}")
    finally:
        cpu.close()
        delegate.close()
    return found, stats


# -- tests ----------------------------------------------------------------------------------------

def test_mutations_are_deterministic_and_change_the_model():
    data = (ZOO / zoo_models()[0].name).read_bytes()
    for kind in KINDS:
        a, b = mutate(data, kind, 7), mutate(data, kind, 7)
        assert a == b
        assert a != data


def test_default_sweep():
    """A bounded sweep of every mutation kind (well under two minutes on two cores), over the zoo
    less its ImageNet-scale nets: one invoke of those takes 20 s of a loaded 2-core machine on
    backend=model, the stage limit that tells a hang (the slow sweep keeps them)."""
    small = [p for p in zoo_models() if "_224" not in p.name]
    found, stats = sweep(recipes(int(os.environ.get("DTPU_FUZZ_COUNT", "160")), seed=12,
                                 models=small))
    assert stats["cpu_ok"] > 0, stats       # the sweep exercised the delegate at all
    assert not found, "\n".join(f"{r}: {why}" for r, why in found)


# Findings of the sweeps (issue #12), each kept as its recipe. Crashes run in a child process.
CRASHES = [
    # a flipped byte of a name's string offset: tensor 3's name points past the model; the
    # delegate's strlen() (cffi's ffi.string) on it raised SIGSEGV at the delegate's Prepare
    # (found as ("dw_i8x8x3_m1_k3x3_s1x1_same_none__int8_float_io.tflite", "int32", 400455259),
    # which also damages a quantization offset that TFLite itself reads, so it is not kept)
    Recipe("dw_i9x9x5_m1_k3x3_s2x2_same_relu__uint8_fakequant.tflite", "flip", 949180216),
    Recipe("conv_i8x8x3_o5_k3x3_s1x1_same_none__int8.tflite", "name", 1),
    Recipe("mobilenet_v1_025_96__int8.tflite", "name", 2),
    # a damaged int32 (a shape) made a delegated depthwise node's input (1, 0, 0, 32) once
    # TFLite propagated the shapes: claimed at select, the kernel's Prepare refused it ("empty
    # tensor") where the CPU computes nothing; now such a node runs nowhere, its output empty
    Recipe("mobilenet_like__uint8.tflite", "int32", 212162372),
]
# (recipe, backend, why the node must now stay on the CPU): before, the delegate's outputs
# differed from the CPU's, or its Prepare / Invoke failed where the CPU's passed.
LEFT_ON_CPU = [
    # dilation_h 65535: it and its SAME padding of 65535 wrap in TFLite's int16 ConvParams and
    # PaddingValues (outputs differed)
    (Recipe("conv_i10x10x5_o7_k3x3_s1x1_d2x2_same_relu__uint8.tflite", "field", 345653723),
     "reference", "16-bit fields"),
    # input zero point -2^31-1 (int64 in the file, int32 in TFLite): outputs differed
    (Recipe("conv_i12x12x7_o5_k4x4_s2x1_same_relu6__int8_per_tensor.tflite", "field", 987816171),
     "reference", "outside int8's range"),
    # a filter scale of 3.4e38: TFLite saturates the multiplier's shift at 30 (outputs differed)
    (Recipe("dw_i12x12x5_m1_k2x2_s1x2_same_relu_n1_to_1__int8.tflite", "field", 867040630),
     "reference", "requantization multiplier"),
    # an int16 output scale of 1e-12: a 16x8 multiplier of ~3e5, whose shift TFLite's int64
    # requantization cannot take (dtpu.reference raised at invoke)
    (Recipe("dw_i8x8x3_m1_k3x3_s1x1_same_none__int16x8.tflite", "field", 248568950),
     "reference", "reaches 2^7"),
    # stride_h 32767 does not fit the DTPU's 8-bit DW_STRIDE.SY: kernel Prepare failed
    (Recipe("dw_i9x9x5_m1_k3x3_s2x2_same_relu__int16x8.tflite", "field", 232152855),
     "model", "backend model cannot run it"),
    # stride_w 65535 wraps in TFLite's int16 DepthwiseParams.stride_width (outputs differed)
    (Recipe("dw_i9x9x7_m1_k5x5_s2x2_same_relu6_b2__int8.tflite", "field", 767706942),
     "reference", "16-bit fields"),
    # depth_multiplier 0: TFLite's 16x8 depthwise kernel uses it as is and writes no output, so
    # the CPU's output is whatever its arena held (outputs differed; not comparable: see below)
    (Recipe("dw_i8x8x5_m2_k5x5_s1x1_same_relu_n1_to_1__int16x8.tflite", "field", 1071612893),
     "reference", "depth_multiplier 0"),
    # QUANTIZE's input index became its own output: TFLite's partitioner, handed a cyclic graph,
    # hung (or left the model's output unallocated); the CPU reads an unwritten tensor there
    (Recipe("conv_i8x8x3_o5_k3x3_s1x1_same_none__int8_float_io.tflite", "field", 104785298),
     "reference", "not a DAG"),
    # input height 65535: 9.4M elements; backend=model's golden model ran out of 4 GiB at invoke
    (Recipe("dw_i11x11x13_m1_k5x5_s1x1_valid_relu_n1_to_1__uint8_fakequant.tflite", "int32",
            424981737), "model", "elements exceeds"),
    # a flipped byte of an int64 bias: |accumulator + bias| >= 2^47, the DTPU raised OVERFLOW
    (Recipe("dw_i10x10x7_m1_k3x3_s2x2_same_relu6__int16x8.tflite", "field", 751114066),
     "model", "2^47"),
]


@pytest.mark.parametrize("recipe", CRASHES, ids=str)
def test_found_crashes_stay_fixed(recipe):
    cpu, delegate = Pool("cpu"), Pool("delegate")
    try:
        category, bad = judge(recipe, cpu, delegate, strict=True)
    finally:
        cpu.close()
        delegate.close()
    assert category in ("cpu_ok", "cpu_ok_unchecked")   # the CPU ran it; the delegate was tried
    assert bad is None, bad


@pytest.mark.parametrize("recipe, backend, reason", LEFT_ON_CPU, ids=lambda v: str(v)[:60])
def test_found_divergences_stay_on_the_cpu(recipe, backend, reason, caplog):
    import logging

    import numpy as np

    import dtpu

    data = mutant(recipe)
    want = _run(data, None)
    with caplog.at_level(logging.INFO, logger="dtpu"):
        got = _run(data, dtpu.load_delegate({"backend": backend}))
    logged = [r.getMessage() for r in caplog.records if "stays on the CPU" in r.getMessage()]
    assert any(reason in m for m in logged), logged
    if "depth_multiplier" in reason or "DAG" in reason:
        return      # TFLite leaves a tensor unwritten there: no two runs need agree
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_names_are_read_without_faulting():
    """dtpu_read_string: an unmapped or unterminated name gives a fallback or a prefix, no signal."""
    import mmap

    import dtpu
    from dtpu.delegate import glue
    from dtpu.delegate import graph as g

    dtpu.load_delegate({"backend": "reference"})    # loads dtpu.so, installs the reader
    ffi, lib = glue.ffi_and_lib()
    assert g.c_string(ffi, ffi.cast("char*", 8), "fallback") == "fallback"
    assert g.c_string(ffi, ffi.NULL, "fallback") == "fallback"
    page = mmap.PAGESIZE
    area = mmap.mmap(-1, 2 * page)
    buf = ffi.from_buffer(area)
    base = int(ffi.cast("uintptr_t", buf))
    import ctypes

    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(ctypes.c_void_p(base + page), page, 0) == 0   # PROT_NONE
    try:
        area[page - 5:page] = b"abcde"                                   # no NUL before the hole
        assert g.c_string(ffi, ffi.cast("char*", base + page - 5), "x") == "abcde"
        area[page - 300:page - 299] = b"\0"
        area[page - 400:page - 300] = b"n" * 100
        assert g.c_string(ffi, ffi.cast("char*", base + page - 400), "x") == "n" * 100
        area[0:page - 400] = b"m" * (page - 400)                         # longer than the limit
        assert g.c_string(ffi, ffi.cast("char*", base), "x") == "m" * (g.NAME_LIMIT - 1)
    finally:
        libc.mprotect(ctypes.c_void_p(base + page), page, 3)
        del buf
        area.close()


@pytest.mark.slow
def test_large_sweep():
    found, stats = sweep(recipes(3000, seed=1012))
    assert stats["cpu_ok"] > 0, stats
    assert not found, "\n".join(f"{r}: {why}" for r, why in found)


# -- the plain TFLite API: Interpreter(model_path=..., experimental_delegates=[load_delegate(...)]) --

PLAIN_TIMEOUT = 60.0


def _plain(path: str, mode: str) -> None:
    """One child run of the plain TFLite API on a model file (issue 24.9): `mode` "cpu" (no
    delegate, dtpu never imported), "loaded" (dtpu.so loaded, not applied: the control, same
    address-space layout as a delegated run) or a backend name (applied). Prints one JSON line:
    the number of DTPU partitions, the outputs' digest, the dtpu logger's warnings."""
    import logging

    import numpy as np

    from dtpu import tflite

    warnings: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())

    logging.getLogger("dtpu").addHandler(Keep(logging.WARNING))
    delegates = []
    if mode != "cpu":
        import dtpu

        delegate = tflite.load_delegate(dtpu.delegate_path(), {"backend": "reference" if mode ==
                                                                "loaded" else mode})
        delegates = [] if mode == "loaded" else [delegate]
    interpreter = tflite.Interpreter(model_path=path, experimental_delegates=delegates)
    interpreter.allocate_tensors()
    for index, value in _inputs(interpreter, 0):
        interpreter.set_tensor(index, value)
    interpreter.invoke()
    outputs = [interpreter.get_tensor(i).copy() for i in interpreter._interpreter.OutputIndices()]
    delegated = 0       # DTPU partitions (DELEGATE nodes may also be XNNPACK's, on floats)
    if mode not in ("cpu", "loaded"):
        report = dtpu.last_report()
        delegated = report.partitions if report is not None else 0
    print(json.dumps({"delegated": delegated, "outputs": _digest(outputs), "warnings": warnings}))


def plain_run(path: Path, mode: str) -> dict:
    """_plain in a fresh process: its JSON, or {"died": how} (a signal, a hang, an exception)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "pylib") + os.pathsep + str(ROOT),
               DTPU_LOG_LEVEL="error", PYTHONFAULTHANDLER="1")
    try:
        done = subprocess.run([sys.executable, __file__, "--plain", str(path), mode], env=env,
                              cwd=ROOT, capture_output=True, text=True, timeout=PLAIN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"died": "hang"}
    if done.returncode != 0:
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
        return {"died": how, "stderr": done.stderr[-1500:],
                "in_builder": _died_in_builder(done.stderr)}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _builder_lines() -> set[tuple[str, int]]:
    """(file, line) of the interpreter module's CreateWrapperFromFile calls: the Python frame
    faulthandler names when a process dies inside TFLite's InterpreterBuilder, which parses the
    file before any delegate is applied (ModifyGraphWithDelegate comes later in __init__)."""
    import inspect

    from dtpu import tflite

    source = inspect.getsourcefile(tflite.Interpreter)
    lines, first = inspect.getsourcelines(tflite.Interpreter.__init__)
    return {(source, first + i) for i, line in enumerate(lines) if "CreateWrapperFromFile(" in line}


def _died_in_builder(stderr: str) -> bool:
    """True when faulthandler's innermost Python frame of the dying thread is TFLite's model
    builder: the damaged offsets were followed by TFLite itself, and whether that stray read
    faults depends on what the address space holds next to the mapped file (seen: the kernel's
    vvar page), not on anything the delegate does."""
    current = stderr.split("Current thread", 1)[-1]
    frames = re.findall(r'File "([^"]+)", line (\d+) in ', current)
    if not frames:
        return False
    file, line = frames[0]
    return (file, int(line)) in _builder_lines()


def judge_plain(recipe: Recipe, tmp: Path, log=None) -> tuple[str, str | None]:
    """(category, violation or None) of one mutant through the plain TFLite API with model_path.

    Categories: "cpu_died" / "cpu_failed" (the CPU alone does not run it), "cpu_ok" (model_check
    accepts it: every backend's outputs equal the CPU's), "cpu_ok_unchecked" (model_check refuses
    it: the delegate must claim nothing and say why in one warning). A delegated run that dies
    or fails counts only when the control (dtpu.so loaded, not applied: the same layout of the
    address space) survives: TFLite's InterpreterBuilder follows the damaged offsets before any
    delegate is called, and whether its stray reads fault depends on what is mapped there.
    """
    from dtpu import model_check

    path = tmp / f"{recipe.kind}_{recipe.seed}_{recipe.model}"
    data = mutant(recipe)
    path.write_bytes(data)
    try:
        model_check.check_bytes(data, path.name)
        refused = None
    except ValueError as exc:
        refused = str(exc)
    cpu = plain_run(path, "cpu")
    if cpu.get("died"):
        return "cpu_died" if cpu["died"].startswith(("signal", "hang")) else "cpu_failed", None
    category = "cpu_ok" if refused is None else "cpu_ok_unchecked"
    bad = {}
    for backend in BACKENDS:
        got = plain_run(path, backend)
        if got.get("died"):
            if got["in_builder"]:
                if log:
                    log(f"{recipe}: {got['died']} with {backend} inside TFLite's InterpreterBuilder, "
                        f"before any delegate callback: TFLite's own")
                continue
            control = plain_run(path, "loaded")
            if control.get("died"):
                if log:
                    log(f"{recipe}: {got['died']} with {backend}, and without the delegate applied "
                        f"too ({control['died']}): TFLite's own")
                continue
            bad[backend] = f"{got['died']}: {got.get('stderr', '')[-400:]}"
        elif refused is not None:
            said = [w for w in got["warnings"] if "fails the delegate's checks" in w]
            if got["delegated"] or len(said) != 1 or refused not in said[0]:
                bad[backend] = (f"model_check refuses it ({refused}) but the delegate claimed "
                                f"{got['delegated']} partition(s) and warned {got['warnings']}")
        elif got["outputs"] != cpu["outputs"]:
            bad[backend] = "outputs differ"
    return category, (f"plain API: {bad}" if bad else None)


# Mutants that dtpu.model_check refuses and that TFLite's CPU interpreter loads and runs from a
# file; before issue 24.9 the delegate read their tensors (built from bytes outside the file).
PLAIN_REFUSED = [
    # a tensor's name offset past the file: TFLite keeps the pointer unread and runs the model
    Recipe("dw_i10x10x7_m1_k3x3_s2x2_same_relu6__int8_per_tensor.tflite", "name", 510694214),
    Recipe("conv_i8x8x3_o5_k3x3_s1x1_same_none__int8.tflite", "name", 484468761),
    # a shape vector's offset 64 KiB past the file: the SIGBUS of the issue, inside TFLite's
    # InterpreterBuilder::ParseTensors (FlatBufferIntArrayToVector) before any delegate callback,
    # when the mapped file happens to sit below the kernel's vvar page; whether it does depends on
    # the address space's layout (with dtpu.so loaded, applied or not, mostly; once in CI the
    # control survived): judged by where it died, it is TFLite's own and not counted
    Recipe("dw_i10x10x7_m1_k3x3_s2x2_same_relu6__uint8_fakequant.tflite", "int32", 415237648),
]


def _plain_sweep(todo, tmp):
    found, stats = [], {"cpu_ok": 0, "cpu_ok_unchecked": 0, "cpu_failed": 0, "cpu_died": 0}
    for recipe in todo:
        category, bad = judge_plain(recipe, tmp)
        stats[category] += 1
        if bad:
            found.append((recipe, bad))
    return found, stats


def test_plain_tflite_api_with_the_delegate(tmp_path):
    """Issue 24.9: a handful of mutants through Interpreter(model_path=...,
    experimental_delegates=[load_delegate(...)]), each in its own processes (a crash fails the
    test, not pytest); `slow` runs more."""
    todo = PLAIN_REFUSED + recipes(int(os.environ.get("DTPU_FUZZ_PLAIN_COUNT", "2")), seed=24)
    found, stats = _plain_sweep(todo, tmp_path)
    assert stats["cpu_ok"] + stats["cpu_ok_unchecked"] > 0, stats
    assert not found, "\n".join(f"{r}: {why}" for r, why in found)


def test_a_death_inside_tflites_builder_is_told_from_one_after_it():
    """The criterion that keeps TFLite's own stray reads (which fault or not by address-space
    layout) out of the delegate's account: only the builder's frame counts, innermost first."""
    (source, line), *_ = sorted(_builder_lines())
    builder = f'  File "{source}", line {line} in __init__\n  File "x.py", line 9 in _plain\n'
    later = f'  File "{source}", line {line + 40} in __init__\n' + builder
    other = 'Thread 0x1 (most recent call first):\n' + builder
    assert _died_in_builder("Fatal Python error: Bus error\n\nCurrent thread 0x7 (most recent "
                            "call first):\n" + builder)
    assert not _died_in_builder("Current thread 0x7 (most recent call first):\n" + later)
    assert not _died_in_builder(other + "Current thread 0x7 (most recent call first):\n" + later)
    assert not _died_in_builder("Segmentation fault")


@pytest.mark.slow
def test_plain_tflite_api_sweep(tmp_path):
    found, stats = _plain_sweep(recipes(80, seed=2409), tmp_path)
    assert stats["cpu_ok_unchecked"] > 0, stats
    assert not found, "\n".join(f"{r}: {why}" for r, why in found)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        _worker(sys.argv[2])
        sys.exit(0)
    if sys.argv[1:2] == ["--plain"]:
        _plain(sys.argv[2], sys.argv[3])
        sys.exit(0)
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweep", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kinds", nargs="*", default=list(KINDS))
    p.add_argument("--models", nargs="*", default=None)
    a = p.parse_args()
    models = [ZOO / m for m in a.models] if a.models else None
    started = time.monotonic()
    found, stats = sweep(recipes(a.sweep, a.seed, tuple(a.kinds), models), log=print)
    print(f"{len(found)} violation(s) in {a.sweep} mutants, {time.monotonic() - started:.0f} s: {stats}")


# -- the support rules behind the findings, on hand-made tensors (no TFLite) -----------------------

def _hand_conv_node():
    """tests.delegate_util's, imported when a test runs: this file also runs as a script."""
    from tests.delegate_util import hand_conv_node

    return hand_conv_node()


@pytest.mark.parametrize("tensor, change, reason", [
    (0, {"zero_point": (200,)}, "outside int8's range"),
    (3, {"zero_point": (-2**31,)}, "outside int8's range"),
    (0, {"scale": (math.nan,)}, "non-finite"),
    (3, {"scale": (math.inf,)}, "non-finite"),
    (0, {"scale": (0.0,)}, "non-positive"),
    (0, {"scale": (1e-45,)}, "not a normal float32"),
    (1, {"scale": (3.4e38,) * 5}, "requantization multiplier"),
    (3, {"scale": (1e-30,)}, "requantization multiplier"),
    (1, {"scale": (0.01,) * 4, "zero_point": (0,) * 4}, "4 scales for 5 output channels"),
    (1, {"quantized_dimension": 3}, "quantized along axis 3"),
    (1, {"zero_point": (0,) * 4}, "zero points"),
    (0, {"scale": (0.1, 0.2), "zero_point": (0, 0)}, "per-channel activation"),
])
def test_absurd_quantization_stays_on_the_cpu(tensor, change, reason):
    import dataclasses

    from dtpu.delegate.options import parse
    from dtpu.delegate.support import analyze

    node, tensors = _hand_conv_node()
    options = parse({"backend": "reference"})
    assert analyze(node, tensors.__getitem__, options).claimed     # the unchanged node is ours
    tensors[tensor] = dataclasses.replace(tensors[tensor], **change)
    decision = analyze(node, tensors.__getitem__, options)
    assert not decision.claimed
    assert reason in decision.reason, decision.reason


def test_cyclic_data_flow_keeps_the_whole_graph_on_the_cpu():
    import dataclasses

    from dtpu.delegate.support import dataflow_reason

    node, _ = _hand_conv_node()
    quantize = dataclasses.replace(node, index=1, builtin_code=114, inputs=(5,), outputs=(0,))
    assert dataflow_reason([quantize, node]) is None
    assert "not a DAG" in dataflow_reason([dataclasses.replace(quantize, inputs=(0,)), node])
    assert "not a DAG" in dataflow_reason([node, quantize])             # reads 0 before it exists
    assert "written by nodes" in dataflow_reason([quantize, dataclasses.replace(node, outputs=(0,))])


def test_out_of_range_operands_and_huge_padding_stay_on_the_cpu():
    import dataclasses

    from dtpu.delegate.options import parse
    from dtpu.delegate.support import analyze

    node, tensors = _hand_conv_node()
    options = parse({"backend": "reference"})

    def tensor(index):
        if index not in tensors:
            raise IndexError(f"tensor index {index} out of range (context has {len(tensors)})")
        return tensors[index]

    decision = analyze(dataclasses.replace(node, inputs=(0, 9, 2)), tensor, options)
    assert not decision.claimed and "out of range" in decision.reason
    wide = dataclasses.replace(node, params={**node.params, "dilation": (40000, 1)})
    decision = analyze(wide, tensor, options)
    assert not decision.claimed and "stride (1, 1) / dilation (40000, 1) exceeds" in decision.reason
    tall = {**tensors, 1: dataclasses.replace(tensors[1], shape=(5, 5, 3, 3))}
    wide = dataclasses.replace(node, params={**node.params, "dilation": (20000, 1)})
    decision = analyze(wide, tall.__getitem__, options)
    assert not decision.claimed and "16-bit padding" in decision.reason
    tensors[0] = dataclasses.replace(tensors[0], shape=(1, 1024, 1366, 3))     # 2^22 + 1024
    tensors[3] = dataclasses.replace(tensors[3], shape=(1, 1024, 1366, 5))
    decision = analyze(node, tensor, options)
    assert not decision.claimed and "elements exceeds" in decision.reason
