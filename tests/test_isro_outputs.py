"""Models with several outputs (issue 28): the output to compile is chosen by name or index,
and by default the one no operator reads (the zoo's ImageNet models also output a feature map).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu.isro import cli, compile_tflite, run, verify
from dtpu.isro.ir import CompileError
from dtpu.isro.tflite_model import Graph, choose_output
from dtpu.tflite_model import Operator, Tensor

HERE = Path(__file__).resolve().parent
RESNET18 = HERE / "models" / "zoo" / "resnet18_half_224__int8.tflite"
FIXTURES = HERE / "isro"
needs_zoo = pytest.mark.skipif(not RESNET18.is_file(), reason="model zoo (tests/models/zoo) not present")


def _graph(outputs, reads):
    """A graph of four tensors: op 0 makes 1 from 0, op 1 makes 2 from `reads`, op 2 makes 3 from 1."""
    tensors = [Tensor(i, f"t{i}", (1, 4), "INT8", np.dtype(np.int8), 0, None, None) for i in range(4)]
    ops = [Operator(0, "RELU", 1, (0,), (1,), "NONE", {}), Operator(1, "RELU", 1, (reads,), (2,), "NONE", {}),
           Operator(2, "RELU", 1, (1,), (3,), "NONE", {})]
    return Graph("g.tflite", tensors, ops, (0,), tuple(outputs))


def test_default_is_the_output_no_operator_reads():
    assert choose_output(_graph((1, 2), reads=0)) == (2, ["t1"])          # t1 feeds op 1 and op 2
    assert choose_output(_graph((2, 1), reads=0)) == (2, ["t1"])          # order does not matter
    assert choose_output(_graph((1,), reads=0)) == (1, [])                # a single output is taken


def test_chosen_by_name_or_index_and_ambiguity_is_refused():
    g = _graph((2, 3), reads=1)                                           # neither is read: ambiguous
    with pytest.raises(CompileError, match="choose the one to compile with --model-output"):
        choose_output(g)
    assert choose_output(g, "t3") == (3, ["t2"])
    assert choose_output(g, "0") == (2, ["t3"])
    with pytest.raises(CompileError, match=r"no model output 't9'.*0: 't2' \(1, 4\), 1: 't3' \(1, 4\)"):
        choose_output(g, "t9")
    with pytest.raises(CompileError, match="no model output '2'"):
        choose_output(g, "2")


@needs_zoo
def test_zoo_model_with_a_debug_output_compiles_its_logits_bit_exact():
    bundle = compile_tflite(RESNET18)
    tfl = bundle.meta["tflite"]
    assert tfl["output_name"] == "StatefulPartitionedCall:0" and tfl["outputs_left_out"] == ["StatefulPartitionedCall:1"]
    assert bundle.meta["output"]["shape"] == [1000, 1, 1]
    x = np.random.default_rng(3).integers(-128, 128, (1, 224, 224, 3)).astype(np.int8)
    result = run(bundle, x)
    checks = verify.against_tflite(bundle, result, RESNET18, x)
    assert checks and all(c.exact for c in checks if not c.note), "\n".join(map(str, checks))
    ref = verify.tflite_reference(RESNET18, x)[tfl["output_tensor"]]
    np.testing.assert_array_equal(result.output, ref)


@needs_zoo
def test_zoo_feature_map_output_chosen_by_index_compiles_only_what_it_needs(tmp_path, capsys):
    assert cli.main(["compile", str(RESNET18), "-o", str(tmp_path / "b"), "--model-output", "0"]) == 0
    text = capsys.readouterr().out
    assert "model output 'StatefulPartitionedCall:1'; left out: 'StatefulPartitionedCall:0'" in text
    assert "dense" not in text and "avgpool" not in text               # the head after it is not compiled
    assert cli.main(["run", str(tmp_path / "b"), "--verify", "--no-dump"]) == 0
    text = capsys.readouterr().out
    assert "verification passed" in text
    assert np.load(tmp_path / "b" / "run" / "output.npy").shape == (1, 7, 7, 256)


@needs_zoo
def test_unknown_output_names_the_accepted_ones(tmp_path, capsys):
    assert cli.main(["compile", str(RESNET18), "-o", str(tmp_path / "b"), "--model-output", "logits"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "no model output 'logits'" in err
    assert "1: 'StatefulPartitionedCall:0' (1, 1000)" in err and not (tmp_path / "b").exists()


def test_keras_output_is_checked_against_its_one_output(tmp_path, capsys):
    assert cli.main(["compile", str(FIXTURES / "vgg_s.h5"), "-o", str(tmp_path / "b"), "--model-output", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no model output 'nope'" in err and "accepted: the model's one output" in err
    assert cli.main(["compile", str(FIXTURES / "vgg_s.h5"), "-o", str(tmp_path / "b"), "--model-output", "0"]) == 0
