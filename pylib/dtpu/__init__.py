"""DTPU: a TensorFlow Lite delegate for the DTPU accelerator, its models and its drivers.

User API (pycoral-style)::

    import dtpu
    interpreter = dtpu.make_interpreter("model.tflite", {"backend": "reference"})
    interpreter.allocate_tensors()
    interpreter.set_tensor(...); interpreter.invoke()
    print(dtpu.last_report().table())

Imports are lazy: ``import dtpu`` loads neither numpy nor a TFLite runtime.
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from dtpu.report import Report

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())


def delegate_path() -> str:
    """Path of dtpu.so, built first (with this interpreter) if missing or stale."""
    from dtpu.delegate import library_path

    return str(library_path())


def _option_strings(options: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): v if isinstance(v, str) else str(v) for k, v in (options or {}).items()}


def load_delegate(options: Mapping[str, Any] | None = None):
    """Load the DTPU delegate with `options` (see docs/delegate.md for the table).

    Args:
      options: key/value options, e.g. ``{"backend": "reference", "report": "summary"}``; values
        may be any type and are passed as ``str(value)``.

    Returns:
      The runtime's delegate object, for ``Interpreter(experimental_delegates=[...])``.

    Raises:
      ValueError: an unknown option or a bad value; the message names the key, the value and
        what is accepted.
    """
    from dtpu import tflite
    from dtpu.delegate.options import parse

    strings = _option_strings(options)
    parse(strings)  # the same parser the library runs: fail here with a clean message
    return tflite.load_delegate(delegate_path(), strings)


def make_interpreter(model_path_or_content: str | os.PathLike | bytes,
                     options: Mapping[str, Any] | None = None, num_threads: int | None = None,
                     **interpreter_kwargs: Any):
    """An Interpreter for a model (file path or the model's bytes) with the DTPU delegate applied.

    Args:
      model_path_or_content: path of a .tflite file, or its content as bytes.
      options: delegate options, as for :func:`load_delegate`.
      num_threads: threads for the ops that stay on the CPU.
      **interpreter_kwargs: passed to the runtime's Interpreter (e.g.
        ``experimental_op_resolver_type``).

    Raises:
      ValueError: the model is not a well-formed TFLite file (dtpu.model_check: TFLite itself
        would read outside it), or cannot be read; the message names the file and the problem.
        Also a bad option, as for :func:`load_delegate`.
    """
    from dtpu import model_check, tflite

    if isinstance(model_path_or_content, (bytes, bytearray)):
        model_check.check_bytes(model_path_or_content, "model content")
    else:
        try:
            model_check.check_file(model_path_or_content)
        except OSError as exc:
            raise ValueError(f"cannot read model {os.fspath(model_path_or_content)!r}: "
                             f"{exc.strerror or exc}") from None
    delegate = load_delegate(options)
    kwargs: dict[str, Any] = {"experimental_delegates": [delegate], **interpreter_kwargs}
    if num_threads is not None:
        kwargs["num_threads"] = num_threads
    if isinstance(model_path_or_content, (bytes, bytearray)):
        return tflite.Interpreter(model_content=bytes(model_path_or_content), **kwargs)
    return tflite.Interpreter(model_path=os.fspath(model_path_or_content), **kwargs)


def last_report() -> "Report | None":
    """The report of the most recent delegated invoke in this process (None if there was none)."""
    from dtpu.report import STORE

    return STORE.last()


def reports() -> "list[Report]":
    """The recent reports of this process, oldest first (at most DTPU_REPORT_KEEP, default 1000)."""
    from dtpu.report import STORE

    return STORE.all()


__all__ = ["__version__", "delegate_path", "last_report", "load_delegate", "make_interpreter", "reports"]
