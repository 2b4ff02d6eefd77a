"""Helpers shared by tests/test_delegate*.py (no TensorFlow needed)."""
from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "delegate"
ZOO_INDEX = Path(__file__).resolve().parent / "models" / "zoo" / "index.json"
DTPU_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
# Zoo modes the delegate must claim completely; the others must stay on the CPU entirely.
CLAIMED_MODES = ("int8", "int8_float_io", "int8_per_tensor", "int16x8", "float32", "uint8",
                 "uint8_fakequant")
REFUSED_MODES = ("float16_weights", "dynamic_range")


def own_models() -> dict:
    return json.loads((DATA / "index.json").read_text())


def zoo_entries() -> list[dict]:
    """The zoo's small models; the ImageNet-scale ones (kind "imagenet") are
    tests/test_models_at_scale.py's (as in tests.models.zoo.load_index)."""
    if not ZOO_INDEX.exists():
        return []
    return [e for e in json.loads(ZOO_INDEX.read_text()) if e["kind"] != "imagenet"]


def cpu_ops(interpreter) -> collections.Counter:
    """Ops still run by TFLite itself, by name, from interpreter._get_ops_details().

    After delegation the replaced nodes are still listed; a DELEGATE node's partition is found
    by walking back from its outputs to its inputs, and those nodes are not counted.
    """
    ops = interpreter._get_ops_details()
    producer = {}
    for op in ops:
        if op["op_name"] != "DELEGATE":
            for t in op["outputs"]:
                producer[int(t)] = op
    replaced = set()
    for op in ops:
        if op["op_name"] != "DELEGATE":
            continue
        boundary = {int(t) for t in op["inputs"]}
        stack = [int(t) for t in op["outputs"]]
        while stack:
            t = stack.pop()
            if t in boundary or t not in producer:
                continue
            node = producer[t]
            if node["index"] in replaced or node["op_name"] == "DELEGATE":
                continue
            replaced.add(node["index"])
            stack.extend(int(i) for i in node["inputs"] if int(i) >= 0)
    return collections.Counter(op["op_name"] for op in ops
                               if op["op_name"] != "DELEGATE" and op["index"] not in replaced)


def delegate_nodes(interpreter) -> int:
    return sum(1 for op in interpreter._get_ops_details() if op["op_name"] == "DELEGATE")


def hand_conv_node():
    """An int8 3x3 SAME CONV_2D (8x8x3 -> 8x8x5, per-channel filter scales) as the delegate's
    graph reader describes it, without a .tflite: the support rules' tests change one field of
    it at a time."""
    from dtpu.delegate.graph import NodeInfo, TensorInfo

    tensors = {
        0: TensorInfo(0, "x", "int8", (1, 8, 8, 3), 2, True, 192, (0.0078,), (-1,)),
        1: TensorInfo(1, "w", "int8", (5, 3, 3, 3), 1, True, 135, (0.01,) * 5, (0,) * 5, 0),
        2: TensorInfo(2, "b", "int32", (5,), 1, True, 20, (0.000078,) * 5, (0,) * 5),
        3: TensorInfo(3, "y", "int8", (1, 8, 8, 5), 2, True, 320, (0.02,), (-1,)),
    }
    node = NodeInfo(index=0, builtin_code=3, version=3, inputs=(0, 1, 2), outputs=(3,),
                    params={"padding": 1, "stride": (1, 1), "dilation": (1, 1), "activation": 0})
    return node, tensors


def random_inputs(interpreter, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for detail in interpreter.get_input_details():
        dtype, shape = np.dtype(detail["dtype"]), tuple(detail["shape"])
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True))
        else:
            out.append(rng.uniform(-1.0, 1.0, size=shape).astype(dtype))
    return out


def run(interpreter, inputs) -> list[np.ndarray]:
    for detail, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def assert_matches(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Integers bit for bit; float32 within 1e-5 relative (of the output's magnitude)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    if np.issubdtype(want.dtype, np.integer):
        bad = np.argwhere(got != want)
        assert bad.size == 0, (f"{what}: {len(bad)} of {want.size} values differ, first at "
                               f"{bad[0].tolist()}: {got[tuple(bad[0])]} vs {want[tuple(bad[0])]}")
    else:
        scale = max(float(np.max(np.abs(want))), 1e-30)
        err = float(np.max(np.abs(got.astype(np.float64) - want))) / scale
        assert err <= 1e-5, f"{what}: relative error {err:.3g} > 1e-5"


# ---- fixtures (imported by the test modules) --------------------------------------------------
import pytest  # noqa: E402


_ROOT = Path(__file__).resolve().parents[1]
_ZOO = _ROOT / "tests" / "models" / "zoo"
#: issue 25's canonical models, by the short names the one-kick tests use (tests/test_one_kick.py,
#: tests/test_rtl_vector.py): one map, so both run the same files
CANONICAL_MODELS = {
    "mobilenet_like": _ZOO / "mobilenet_like__int8.tflite",
    "vww": _ZOO / "mobilenet_v1_025_96__int8.tflite",
    "dscnn": _ZOO / "dscnn_like__int8.tflite",
    "resnet8": _ROOT / "tests" / "isro" / "resnet8_int8.tflite",
    "autoencoder": _ZOO / "autoencoder_toyadmos__int8.tflite",
    "mobilenet_v1_224": _ZOO / "mobilenet_v1_224__int8.tflite",
    "mobilenet_v1_050_224_uint8": _ZOO / "mobilenet_v1_050_224__uint8.tflite",
    "mobilenet_v2_224": _ZOO / "mobilenet_v2_224__int8.tflite",
    "resnet18_half_224": _ZOO / "resnet18_half_224__int8.tflite",
    "efficientnet_b0_224": _ZOO / "efficientnet_b0_224__int8.tflite",
}


def compare_with_cpu(path, options: dict, tfl, invokes: int = 2):
    """Seeded full-range invokes of the delegate against the CPU interpreter, outputs compared
    each time; the last invoke's report (with two or more, a steady-state one)."""
    import dtpu

    cpu = tfl.Interpreter(model_path=str(path))
    cpu.allocate_tensors()
    ours = dtpu.make_interpreter(path, options)
    ours.allocate_tensors()
    for seed in range(invokes):
        rng = np.random.default_rng(seed)
        xs = []
        for d in cpu.get_input_details():
            info = np.iinfo(d["dtype"])
            xs.append(rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"]))
        for got, want in zip(run(ours, xs), run(cpu, xs)):
            assert_matches(got, want, f"{path.name} seed {seed} {options}")
    report = dtpu.last_report()
    assert invokes < 2 or not report.first, "the steady-state invoke was expected"
    return report


def builtin_cpu_kernels_only():
    """Skip marker for whole-model comparisons whose CPU side (MEAN, ADD, SOFTMAX...) must be
    TFLite 2.14's builtin kernels: under LiteRT XNNPACK computes it with other rounding
    (dtpu.delegate.vector_claim.PROVEN_RUNTIMES)."""
    from dtpu.delegate.vector_claim import PROVEN_RUNTIMES
    from dtpu.tflite import RUNTIME

    return pytest.mark.skipif(RUNTIME not in PROVEN_RUNTIMES,
                              reason=f"{RUNTIME}: XNNPACK computes the CPU's side")


@pytest.fixture(scope="session")
def dtpu_so():
    """dtpu.so built once per session with the running interpreter."""
    import dtpu
    from dtpu.backends.null import register_null_backend

    register_null_backend()
    return dtpu.delegate_path()


@pytest.fixture(scope="session")
def tfl():
    from dtpu import tflite

    return tflite


def no_default_delegates(tflite) -> dict:
    """Interpreter kwargs that keep XNNPACK out, so every DELEGATE node is ours."""
    resolver = getattr(tflite, "OpResolverType", None)
    if resolver is None:
        return {}
    return {"experimental_op_resolver_type": resolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES}


def emulated_board(directory, contract=None):
    """The emulated PYNQ-Z2 as pynq's active device with the default hw/overlays design (2.0),
    or `contract`'s (1: the 1.2 design), written in `directory` (a generator for module
    fixtures: yields the .bit; afterwards the device is deactivated and $DTPU_BITSTREAM
    restored). Skips where pynq is missing."""
    import os

    pytest.importorskip("pynq", reason="the board emulation runs the pynq package, not installed "
                                       "here (pip install pynq)")
    from dtpu.board import emulate

    saved = os.environ.get("DTPU_BITSTREAM")
    bit = emulate.install(directory, **({} if contract is None else {"contract": contract}))
    # install() only sets $DTPU_BITSTREAM where it is unset (a user's own stays); here the
    # default bitstream must be this overlay whatever an earlier test of this process left, since
    # the overlays' names (bitstream=int8) resolve beside it
    os.environ["DTPU_BITSTREAM"] = str(bit)
    try:
        yield bit
    finally:
        emulate.uninstall()
        if saved is None:
            os.environ.pop("DTPU_BITSTREAM", None)
        else:
            os.environ["DTPU_BITSTREAM"] = saved

