"""Moved to `stax.runtime.guards` (the runtime package: what a loaded artifact needs).
This name is the same module object, kept for the code and tests that import it."""
import sys

from stax.runtime import guards as _moved

sys.modules[__name__] = _moved
