"""What a report gains around the backends' runs: calibrated rooflines, CUDA timelines.

:mod:`.roofline` calibrates each device that ran and bounds each timed step by its
calibrated roofline (:func:`einsum_analyze.execute` calls it); :mod:`.timeline` records a
CUDA run's measured memory timeline from the caching allocator's history
(``measured_timelines``, which the command line records with ``--plot``). Both read a
whole report, so they sit above :mod:`einsum_analyze.report` and the backends and below
:mod:`einsum_analyze.execution`: they may import the report, the backends, the roofline
and the strategy registry (docs/architecture.md). torch is imported inside the functions
only.
"""
