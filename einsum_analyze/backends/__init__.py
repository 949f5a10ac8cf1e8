"""Executors: run a strategy's schedule on a device, by backend name.

The registrations below are the built-in backends; a new backend is one module with an
:class:`~einsum_analyze.backends.base.Executor` plus one :func:`register_backend` call
(see docs/backends.md). No module here imports torch or numpy when it is imported.
"""

from __future__ import annotations

from .base import DeviceContext, Executor, MemoryFigures, Run
from .numpy_backend import NumpyExecutor
from .registry import backend_help, backend_names, get_backend, register_backend
from .torch_backend import TorchExecutor

__all__ = [
    "DeviceContext",
    "Executor",
    "MemoryFigures",
    "Run",
    "backend_help",
    "backend_names",
    "get_backend",
    "register_backend",
]

register_backend("torch", TorchExecutor, "cpu and CUDA, beside the torch baselines")
register_backend("numpy", NumpyExecutor, "cpu only, no baselines")
