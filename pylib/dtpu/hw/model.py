"""Former name of :mod:`dtpu.hw.core` (the 1.2 core of the golden model), kept importable for one
release so that code written against ``dtpu.hw.model`` keeps working, with a DeprecationWarning;
nothing in this repository imports it any more (tests/test_module_names.py checks). The name is
the module itself, so monkeypatching either name patches the same objects."""
import sys
import warnings

from dtpu.hw import core

warnings.warn("dtpu.hw.model is now dtpu.hw.core; the old name goes in the next release",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = core
