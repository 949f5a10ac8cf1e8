"""Read a ``--devices`` list: which devices get a process, and which collective backend.

Accepted (docs/distributed.md):

- ``cuda:0,cuda:1`` (``cuda`` alone is ``cuda:0``): those GPUs, NCCL;
- ``all``: every CUDA GPU this machine has, NCCL;
- ``cpu:0,cpu:1`` or ``cpu*2``: that many cpu processes, gloo (``cpu`` alone is ``cpu:0``);
  ``cuda*2`` is ``cuda:0,cuda:1``.

A list that names a GPU this machine lacks, repeats a device, or mixes cpu and CUDA is
refused with one line (:class:`~einsum_analyze.errors.BackendUnavailableError`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import BackendUnavailableError

__all__ = ["DeviceList", "parse_devices"]

MAX_CPU_PROCESSES = 64
"""More cpu processes than this is a typo, not a plan."""


@dataclass(frozen=True, slots=True)
class DeviceList:
    """The devices of a distributed run, one process each, rank order.

    Attributes:
        devices: ``("cuda:0", "cuda:1")`` or ``("cpu:0", "cpu:1")``.
        backend: ``"nccl"`` for CUDA, ``"gloo"`` for cpu.
    """

    devices: tuple[str, ...]
    backend: str

    @property
    def is_cuda(self) -> bool:
        """Whether the processes run on GPUs."""
        return self.backend == "nccl"


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def parse_devices(text: str, *, cuda_count: Callable[[], int] = _cuda_count) -> DeviceList:
    """Turn ``--devices`` text into the devices and their collective backend.

    Args:
        text: ``cuda:0,cuda:1``, ``all``, ``cpu:0,cpu:1``, ``cpu*2``, ...
        cuda_count: How many CUDA GPUs this machine has (tests inject it).

    Raises:
        BackendUnavailableError: An unreadable name, a GPU this machine lacks, a repeated
            device, an empty list, or a list that mixes cpu and CUDA.
    """
    items = [item.strip().lower() for item in text.split(",") if item.strip()]
    if not items:
        raise BackendUnavailableError("--devices: give a list such as cuda:0,cuda:1, all or cpu*2")
    names: list[str] = []
    for raw in items:
        names.extend(_expand(raw, cuda_count))
    kinds = {name.partition(":")[0] for name in names}
    if len(kinds) > 1:
        raise BackendUnavailableError(
            f"--devices {text!r} mixes cpu and CUDA; one run uses one kind (NCCL or gloo)"
        )
    count = cuda_count() if kinds == {"cuda"} else 0
    for name in names:
        if name.startswith("cuda:") and int(name[5:]) >= count:
            raise BackendUnavailableError(
                f"--devices: {name} does not exist; this machine has {count} CUDA device(s)"
            )
    repeated = sorted(name for name, times in Counter(names).items() if times > 1)
    if repeated:
        raise BackendUnavailableError(f"--devices names {repeated[0]} twice")
    if len(names) > MAX_CPU_PROCESSES:
        raise BackendUnavailableError(
            f"--devices asks for {len(names)} processes; at most {MAX_CPU_PROCESSES}"
        )
    return DeviceList(tuple(names), "nccl" if kinds == {"cuda"} else "gloo")


def _expand(raw: str, cuda_count: Callable[[], int]) -> list[str]:
    if raw == "all":
        count = cuda_count()
        if count == 0:
            raise BackendUnavailableError(
                "--devices all: this machine has no CUDA GPU (use cpu*2 for cpu processes)"
            )
        return [f"cuda:{k}" for k in range(count)]
    kind, star, times = raw.partition("*")
    if star:
        processes = _number(times)
        if kind not in ("cpu", "cuda") or processes is None or processes < 1:
            raise BackendUnavailableError(
                f"--devices: {raw!r:.40} is not cpu*N or cuda*N with N at least 1"
            )
        if processes > MAX_CPU_PROCESSES:  # before a list of that many names is made
            raise BackendUnavailableError(
                f"--devices asks for {processes} processes; at most {MAX_CPU_PROCESSES}"
            )
        return [f"{kind}:{k}" for k in range(processes)]
    kind, colon, index = raw.partition(":")
    number = _number(index) if colon else 0
    if kind not in ("cpu", "cuda") or number is None:
        raise BackendUnavailableError(
            f"--devices: {raw!r:.40} is not cpu, cpu:N, cuda, cuda:N, cpu*N or all"
        )
    return [f"{kind}:{number}"]


def _number(text: str) -> int | None:
    """ASCII digits (at most 18) as an int, else None (``²`` is a digit to str.isdigit)."""
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        return None
    return int(text)
