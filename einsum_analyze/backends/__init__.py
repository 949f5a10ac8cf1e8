"""Executors: run a strategy's schedule on a device, by backend name.

The registrations below are the built-in backends; a new backend is one module with an
:class:`~einsum_analyze.backends.base.Executor` plus one :func:`register_backend` call
(see docs/backends.md). A factory imports its module when a run asks for it, so that
importing this package (the CLI does, for ``--backend``) loads no executor, torch or
numpy. :mod:`.timing` times a prepared callable, :mod:`.precision` sets how runs compute,
:mod:`.calibration` measures a device for the roofline, and :mod:`.baselines` runs
torch.einsum under autograd beside our executor.

It may import :mod:`einsum_analyze.model` and :mod:`einsum_analyze.roofline` (the step
records), never the report: backends return :class:`~.base.Run` records, and what needs a
whole report around the runs lives in :mod:`einsum_analyze.runs` (docs/architecture.md).
"""

from __future__ import annotations

from .base import DeviceContext, Executor, MemoryFigures, Run
from .registry import backend_help, backend_names, get_backend, register_backend

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


def _torch() -> Executor:
    from .torch_backend import TorchExecutor

    return TorchExecutor()


def _numpy() -> Executor:
    from .numpy_backend import NumpyExecutor

    return NumpyExecutor()


register_backend("torch", _torch, "cpu and CUDA, beside the torch baselines")
register_backend("numpy", _numpy, "cpu only, no baselines")
