"""One import for whichever TFLite runtime is installed.

tflite-runtime 2.14 needs numpy<2 and ai-edge-litert needs numpy>=2, so the two never share an
environment; code and tests import `Interpreter` and `load_delegate` from here. Set
DTPU_TFLITE_RUNTIME=tflite_runtime or =ai_edge_litert to force one.
"""
from __future__ import annotations

import importlib
import os

#: runtime name -> the module its Interpreter and load_delegate come from (a subprocess
#: imports the same one: tests/test_delegate_build.py)
MODULES = {
    "tflite_runtime": "tflite_runtime.interpreter",
    "ai_edge_litert": "ai_edge_litert.interpreter",
}


def _select():
    forced = os.environ.get("DTPU_TFLITE_RUNTIME", "").strip()
    if forced and forced not in MODULES:
        raise ValueError(f"DTPU_TFLITE_RUNTIME={forced!r}; accepted: {', '.join(MODULES)}")
    errors = []
    for name in [forced] if forced else list(MODULES):
        try:
            return name, importlib.import_module(MODULES[name])
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
    raise ImportError("no TFLite runtime could be imported (" + "; ".join(errors) + ")")


RUNTIME, _module = _select()
Interpreter = _module.Interpreter
load_delegate = _module.load_delegate
OpResolverType = getattr(_module, "OpResolverType", None)


def runtime_version() -> str:
    root = importlib.import_module(RUNTIME)
    return f"{RUNTIME} {getattr(root, '__version__', '?')}"
