"""A package's names given lazily (PEP 562): each imported from the module that defines it when first asked for, so
that importing the package, or one light module of it, does not import its heavy modules (torch, transformers,
datasets: seconds) with it. A script's --help or usage error imports the packages its parser reads from."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_names(package: str, names: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of `package` (its ``__name__``) for `names`: {name: the module that
    defines it, relative to the package (".modeling")}. A name once given is kept in the package's namespace."""
    import sys

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(names[name], package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
