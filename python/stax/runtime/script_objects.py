"""Non-tensor graph inputs that stax passes through: script objects and opaque objects
(a DeviceMesh or a ProcessGroup that torch.distributed's ops and DTensor graphs take).
The compile sees a fake of one (FakeScriptObject, FakeOpaqueObject); the call gets the
real object. Stax computes nothing on them: library ops read them and outputs return
them. Runtime code: it needs torch only."""
from __future__ import annotations

import torch


def object_class_name(x) -> str | None:
    """The fully qualified class name of a script or opaque object (or of its fake), the
    same for the fake the graph was traced with and the real object of a call; None for
    anything else (a tensor, a number, None)."""
    if isinstance(x, (torch.Tensor, int, float, bool, str)) or x is None:
        return None
    name = getattr(x, "script_class_name", None)  # FakeScriptObject
    if isinstance(name, str):
        return name
    if isinstance(x, torch.ScriptObject):
        try:
            return x._type().qualified_name()
        except RuntimeError:
            return "torch.ScriptObject"
    try:
        from torch._library import opaque_object as opaque
    except ImportError:  # a torch without opaque objects
        return None
    fake = getattr(opaque, "FakeOpaqueObject", None)
    if fake is not None and isinstance(x, fake):
        real = getattr(x, "real_obj", None) or getattr(x, "_real_obj", None)
        if real is not None:
            return class_name(type(real))
    if opaque.is_opaque_value(x):
        return class_name(type(x))
    return None


def class_name(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
