"""DTPU: a TensorFlow Lite delegate for the DTPU accelerator, its models and its drivers."""
from __future__ import annotations

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())
