"""Backends by name: ``register_backend``, ``get_backend``, ``backend_names``.

The built-in backends are registered in :mod:`einsum_analyze.backends`; a new one is one
module with an :class:`~einsum_analyze.backends.base.Executor` and one call to
:func:`register_backend` (see docs/backends.md).
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import BackendUnavailableError
from .base import Executor

__all__ = ["backend_names", "get_backend", "register_backend"]

_FACTORIES: dict[str, tuple[Callable[[], Executor], str]] = {}


def register_backend(name: str, factory: Callable[[], Executor], help: str = "") -> None:
    """Make ``factory`` the backend called ``name`` (replacing any earlier one).

    Args:
        name: What ``--backend`` takes.
        factory: Makes the executor; called on each :func:`get_backend`. It must not
            import heavy libraries at registration time.
        help: One line for the CLI's help.
    """
    if not name or any(char.isspace() or char == "," for char in name):
        raise ValueError(f"backend name {name!r} must be one word")
    _FACTORIES[name] = (factory, help)


def get_backend(name: str) -> Executor:
    """The executor registered as ``name``.

    Raises:
        BackendUnavailableError: No backend has that name (the message lists them).
    """
    entry = _FACTORIES.get(name)
    if entry is None:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; choose one of: {', '.join(backend_names())}"
        )
    return entry[0]()


def backend_names() -> tuple[str, ...]:
    """Registered backend names, in registration order."""
    return tuple(_FACTORIES)


def backend_help() -> str:
    """One line per backend, for the CLI."""
    return "; ".join(f"{name}: {help}" if help else name
                     for name, (_, help) in _FACTORIES.items())
