"""Quantization on the ground, end to end: `dtpu isro compile MODEL.h5 --quantize int8`.

Calibrates a float Keras model (:mod:`dtpu.isro.quantize`), writes the int8 graph into the
bundle directory as ``quantized.tflite``, compiles it with the TFLite front end, measures the
accuracy drop against the float model on the calibration set and on held-out inputs, and runs the
bundle against the interpreter layer by layer: TFLite's CPU kernels are the I8 reference.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dtpu.isro import keras_h5
from dtpu.isro.ir import CompileError
from dtpu.isro.quantize import (DEFAULT_PERCENTILE, Quantized, calibrate, load_samples, quantize_keras,
                                split)

log = logging.getLogger(__name__)

# -- accuracy ---------------------------------------------------------------------------------------

@dataclass
class Accuracy:
    """The int8 model against the float one on a set of inputs."""

    samples: int
    top1_agree: int | None          # samples whose argmax agrees (None: not a class vector)
    max_abs_err: float
    mean_abs_err: float
    output_range: float             # largest |float output|, the errors' yardstick

    def line(self, label: str) -> str:
        top = ("" if self.top1_agree is None else
               f"top-1 agreement {self.top1_agree}/{self.samples} ({100 * self.top1_agree / self.samples:.1f} %), ")
        return (f"{label}: {self.samples} inputs, {top}max |err| {self.max_abs_err:.4g}, mean |err| "
                f"{self.mean_abs_err:.4g} (float outputs up to {self.output_range:.4g})")

    def to_dict(self) -> dict:
        return {"samples": self.samples, "top1_agree": self.top1_agree, "max_abs_err": self.max_abs_err,
                "mean_abs_err": self.mean_abs_err, "output_range": self.output_range}


def int8_outputs(tflite: bytes, samples: np.ndarray) -> np.ndarray:
    """The quantized model's real-valued outputs, from TFLite's CPU kernels (the oracle)."""
    from dtpu.isro.bundle import quantize
    from dtpu.tflite import Interpreter
    it = Interpreter(model_content=tflite)
    it.allocate_tensors()
    d, o = it.get_input_details()[0], it.get_output_details()[0]
    scale, zp = d["quantization"]
    oscale, ozp = o["quantization"]
    out = []
    for x in samples:
        it.set_tensor(d["index"], quantize(x[None], scale, zp).astype(np.int8))
        it.invoke()
        out.append((it.get_tensor(o["index"]).astype(np.float64) - ozp) * oscale)
    return np.stack(out)


def accuracy(model: keras_h5.KerasModel, tflite: bytes, samples: np.ndarray) -> Accuracy:
    from dtpu.isro.verify import keras_reference
    final = model.layers[-1].name
    want = np.stack([np.asarray(keras_reference(model, x)[final], np.float64).reshape(-1) for x in samples])
    got = int8_outputs(tflite, samples).reshape(want.shape)
    err = np.abs(got - want)
    top = None
    if want.shape[1] > 1:
        top = int(np.sum(np.argmax(got, axis=1) == np.argmax(want, axis=1)))
    return Accuracy(len(samples), top, float(err.max()), float(err.mean()), float(np.abs(want).max()))


# -- the whole ground step --------------------------------------------------------------------------

def _front_end(path: Path, build):
    """A Keras file whose weights are missing or misshapen is the model's fault: one CompileError
    naming the file, as the compiler's own front ends give."""
    try:
        return build()
    except CompileError:
        raise
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
        raise CompileError(f"{path}: malformed model ({type(exc).__name__}: {' '.join(str(exc).split())}); "
                           f"it does not describe a network this quantizer can read") from None


class _AnyRange(dict):
    """Placeholder ranges: checking that a model can be quantized needs no calibration."""

    def __missing__(self, key):
        return (-1.0, 1.0)


QUANTIZED_NAME = "quantized.tflite"      # in the bundle directory: the I8 reference, not uplinked


@dataclass
class GroundReport:
    """What `compile --quantize` prints and records in meta.json ``quantization``."""

    quantized: Quantized
    calibration: Accuracy
    holdout: Accuracy | None
    holdout_source: str                  # "--holdout FILE", "the last N of the calibration file", "none"
    checks: list                         # verify.Check per layer per verified input
    verified_inputs: int

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def lines(self) -> list[str]:
        q = self.quantized
        how = "min/max" if q.method == "minmax" else f"{q.percentile:g}th percentile"
        out = [f"quantized to int8 on the ground: weights symmetric per output channel, biases int32, "
               f"activations by {how} over {self.calibration.samples} calibration inputs "
               f"(input scale {q.input_scale:.6g}, zero point {q.input_zero_point})",
               "accuracy against F32: " + self.calibration.line("calibration set")]
        if self.holdout is not None:
            out.append("                      " + self.holdout.line(f"held out ({self.holdout_source})"))
        else:
            out.append("                      no held-out inputs (fewer than 5 samples and no --holdout)")
        compared = [c for c in self.checks if not c.note]
        exact = sum(c.exact for c in compared)
        bad = sorted({c.layer for c in self.checks if not c.ok})
        verdict = "bit-exact" if not bad else f"MISMATCH in {', '.join(bad)}"
        out.append(f"verified against its int8 reference (TFLite's kernels) layer by layer on "
                   f"{self.verified_inputs} inputs: {exact} of {len(compared)} layer outputs equal -- {verdict}")
        return out

    def to_meta(self) -> dict:
        q = self.quantized
        return {"scheme": "int8: weights symmetric per channel, activations asymmetric per tensor",
                "calibration": {"method": q.method, "percentile": q.percentile,
                                **self.calibration.to_dict()},
                "holdout": None if self.holdout is None else {"source": self.holdout_source,
                                                              **self.holdout.to_dict()},
                "verified": {"inputs": self.verified_inputs, "ok": self.ok},
                "reference": QUANTIZED_NAME}


def compile_quantized(model_path: str | Path, calibration: str | Path, directory: str | Path, *,
                      holdout: str | Path | None = None, method: str = "minmax",
                      percentile: float = DEFAULT_PERCENTILE, x: np.ndarray | None = None,
                      chip=None, pe: int | None = None, reuse: bool | None = None, output: str | None = None):
    """Quantize a Keras model on `calibration` and compile it to an I8 bundle (not yet saved).

    Writes the int8 graph to `directory`/quantized.tflite (the bundle's source model from then
    on, so ``run --verify`` checks against it), measures accuracy against the float model, and
    runs the bundle on the first calibration and held-out input, comparing every layer with the
    interpreter. Returns (bundle, :class:`GroundReport`)."""
    from dtpu.isro.compiler import compile_tflite
    from dtpu.isro.bundle import sha256
    from dtpu.isro.machine import run
    from dtpu.isro import verify
    model_path = Path(model_path)
    if not model_path.is_file():
        raise FileNotFoundError(f"model {model_path} does not exist")
    if model_path.suffix.lower() not in (".h5", ".hdf5", ".keras"):
        raise CompileError(f"{model_path}: --quantize takes a float Keras model (.h5, .hdf5, .keras); a "
                           f"{model_path.suffix or 'suffix-less'} file is not one (an int8 .tflite compiles "
                           f"as it is)")
    model = _front_end(model_path, lambda: keras_h5.read(model_path))
    samples = load_samples(calibration, model.input_shape, "calibration data")
    held = None if holdout is None else load_samples(holdout, model.input_shape, "held-out data")
    cal, held = split(samples, held)
    source = ("--holdout " + str(holdout) if holdout is not None else
              f"the last {0 if held is None else len(held)} of {len(samples)} calibration samples")
    # refuse what cannot be quantized before calibrating (which evaluates every layer in float)
    _front_end(model_path, lambda: quantize_keras(model, _AnyRange()))
    log.info("calibrating %s on %d inputs (%s)", model_path, len(cal), method)
    ranges = calibrate(model, cal, method, percentile)
    q = _front_end(model_path, lambda: quantize_keras(model, ranges, method=method,
                                                      percentile=percentile if method == "percentile" else None))
    d = Path(directory)
    created = not d.exists()
    d.mkdir(parents=True, exist_ok=True)
    ref = d / QUANTIZED_NAME
    ref.write_bytes(q.tflite)
    try:
        bundle = compile_tflite(ref, x, chip=chip, pe=pe, reuse=reuse, output=output)
    except Exception:
        ref.unlink()                         # a refused compile leaves nothing behind
        if created:
            d.rmdir()
        raise
    bundle.meta["source"]["quantized_from"] = {"path": str(model_path), "kind": "keras-h5",
                                               "sha256": sha256(model_path.read_bytes())}
    cal_acc = accuracy(model, q.tflite, cal)
    hold_acc = None if held is None else accuracy(model, q.tflite, held)
    checks = []
    inputs = [cal[0]] + ([] if held is None else [held[0]])
    for xi in inputs:
        checks += verify.against_tflite(bundle, run(bundle, xi), ref, xi)
    report = GroundReport(q, cal_acc, hold_acc, source if held is not None else "none", checks, len(inputs))
    bundle.meta["quantization"] = report.to_meta()
    return bundle, report
