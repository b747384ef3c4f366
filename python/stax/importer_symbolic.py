"""Moved to `stax.importer.symbolic` (the importer package's symbolic mode). This name is
the same module object, kept for the code and tests that import it."""
import sys

from stax.importer import symbolic as _moved

sys.modules[__name__] = _moved
