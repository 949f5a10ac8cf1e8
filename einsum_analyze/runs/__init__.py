"""What :func:`einsum_analyze.execute` adds to a report around the backends' runs.

:mod:`.roofline` calibrates each device that ran and bounds each timed step by its
calibrated roofline; :mod:`.timeline` records a CUDA run's measured memory timeline from
the caching allocator's history (``measured_timelines``). Both read a whole report, so
they sit above :mod:`einsum_analyze.report` and the backends, beside
:mod:`einsum_analyze.execution`. torch is imported inside the functions only.
"""
