"""A sliced plan's slices spread over devices with torch.distributed (docs/distributed.md).

- :mod:`.assign`: which device runs which slices (runs of consecutive slices, or longest
  first), and the first efficiency model (pure, no torch);
- :mod:`.comm`: which collectives a step needs: parts of sliced buffers gathered from
  their owners, the rest all-reduced (pure); :mod:`.collectives` runs them on a rank;
- :mod:`.projection`: a step's time on N devices from parts measured apart (pure);
- :mod:`.devices`: ``--devices`` lists (``cuda:0,cuda:1``, ``all``, ``cpu*2``);
- :mod:`.contract`: what the ``sliced`` strategy provides (:class:`.SliceRunner`) and
  what a run is given (:class:`.DistributedJob`);
- :mod:`.launch`: one spawned process per device, failures reported, none left behind;
- :mod:`.worker`: one rank's slices, its collectives, timing and allocator peaks;
- :mod:`.run`: :func:`.run_distributed`, the whole run as one :class:`.DistributedResult`;
- :mod:`.training`: :func:`.training.sliced_einsum` for a loop that already runs
  torch.distributed (``torchrun``).

Importing this package imports no torch; :mod:`.worker` does when it runs, and
:mod:`.training` (not imported by this ``__init__``) at import. It may import the model,
the backends, :mod:`einsum_analyze.slicing` and the report (:mod:`.from_report` reads a
report's ``sliced`` strategy), never the command line, which calls it, or the renderers,
which read its result (docs/architecture.md).
"""

from __future__ import annotations

from .assign import Projection, assign_slices, project_efficiency
from .contract import DistributedJob, SliceRunner
from .devices import DeviceList, parse_devices
from .run import DeviceFigures, DistributedResult, run_distributed

__all__ = [
    "DeviceFigures",
    "DeviceList",
    "DistributedJob",
    "DistributedResult",
    "Projection",
    "SliceRunner",
    "assign_slices",
    "parse_devices",
    "project_efficiency",
    "run_distributed",
]
