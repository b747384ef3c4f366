"""The handler table: `HANDLERS` maps an ATen OpOverload to its handler, and `_reg`
registers one. Every ops_* module fills it when imported; importing `stax.importer`
imports them all, so the table is complete."""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.fx

from stax.importer.builder import _Builder


Handler = Callable[[_Builder, torch.fx.Node, dict], Any]
HANDLERS: dict[Any, Handler] = {}


def _reg(*targets):
    def deco(fn):
        for t in targets:
            HANDLERS[t] = fn
        return fn
    return deco
