"""The one verifier registry. A verifier module registers itself with @register;
`load_all()` imports every module of the `verifiers` package, so adding a verifier is
adding a module, with no edit here or in any other verifier."""

from __future__ import annotations

import importlib
import pkgutil

from verifiers.base import UnknownVerifier, Verifier

_REGISTRY: dict[str, Verifier] = {}
_loaded = False


def register(cls: type[Verifier]) -> type[Verifier]:
    if cls.name in _REGISTRY and type(_REGISTRY[cls.name]) is not cls:
        raise ValueError(f"two verifiers named {cls.name!r}")
    _REGISTRY[cls.name] = cls()
    return cls


def load_all() -> dict[str, Verifier]:
    """Import every verifier module once (some may have been imported, and so registered,
    before: that must not hide the others)."""
    global _loaded
    if not _loaded:
        import verifiers

        for info in pkgutil.walk_packages(verifiers.__path__, prefix="verifiers."):
            importlib.import_module(info.name)
        _loaded = True
    return dict(_REGISTRY)


def get(name: str) -> Verifier:
    load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownVerifier(f"unknown verifier {name!r}; known: {sorted(_REGISTRY)}") from None


def names() -> list[str]:
    load_all()
    return sorted(_REGISTRY)
