"""The drop-in einsum's CUDA graphs: one plan's forward and backward, captured and replayed.

A plan on a CUDA device may replay its forward and backward events as two CUDA graphs
(``einsum(..., cuda_graphs=True)`` or ``"auto"``) instead of launching each kernel from
Python: one :class:`GraphSlot` per plan cache entry (equation, shapes, dtype, device,
operands needing gradients and options: the shapes are static by the key). How it keeps
every call's data its own:

- **Static buffers.** The graphs read the slot's own copies of the operands and of the
  upstream gradient: each call copies the caller's tensors in (one ``_foreach_copy_``)
  before it replays, so the caller's tensors may live anywhere.
- **Nothing returned aliases graph memory.** The result and the gradients are copied
  out of the graphs' memory into fresh tensors, which a later replay cannot touch.
- **One call per graph set.** The forward graph writes the tensors its backward reads.
  A grad call claims one set (:class:`GraphInstance`: a token held by its autograd node)
  until its backward has run (or, with ``retain_graph``, until the node is freed). A
  second forward of the same plan meanwhile (a layer used twice, gradient accumulation
  over micro-batches before the first backward) claims another set, captured for it, up
  to :data:`MAX_INSTANCES`; beyond that it runs the eager events. Either way the first
  call's tensors stay as they were.
- **Capture.** On a side stream of the slot's own, after a warm-up of the eager events
  there (libraries' handles made outside the capture); both graphs share one memory
  pool. No capture starts while the current stream is capturing (the caller's own
  graph): such calls run eagerly. A capture that fails leaves the slot eager for good,
  with the error in its description.
- **The BLAS workspace is the pool's.** cuBLAS keeps one workspace per handle and
  stream, and a captured product reads and writes the one it found. torch.compile's
  CUDA graphs (``mode="reduce-overhead"``) clear every such workspace when they
  capture; a workspace our warm-up had made was then freed under our graphs, and
  their next replay ran on memory given to others (an illegal memory access on the
  H200, with compiled reduce-overhead torch.einsum in the same process). So the
  per-stream workspaces are cleared before each capture, as torch.compile does: the
  capture's first product makes its workspace in the graphs' own pool, which nothing
  else allocates from, and clearing them after it leaves no eager product on that
  memory. The pool's prediction counts it (:func:`blas_workspace_bytes`).
- **Streams.** Replays run on the current stream; a call on another stream than the
  last replay's waits for that stream's work first.

Where the graphs pay (``"auto"``): :func:`.graph_model.predict_graphs` prices a replay
with the time model against what the call runs otherwise (our plan's eager events, or
torch.einsum). Where the prediction leaves the graphs a chance
(:attr:`.graph_model.GraphPrediction.plausible`), the entry's deciding call captures them
and measures both sides on the device, interleaved (:meth:`GraphSlot.run_trial`): the
graphs engage where they measured at most :data:`.choice.TIME_MARGIN` of the other
side's time. Their memory: the static copies plus the pool
(:func:`.graph_model.pool_bytes`); the pool's reserved bytes are measured from the
allocator after the capture.

Calls go down only: :mod:`.plans` makes slots, :mod:`.node` runs them; this module
imports neither. It imports torch.
"""

from __future__ import annotations

import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Literal

import torch

from ..errors import DropinValueError, EinsumAnalyzeError
from ..model.units import format_exact_bytes
from .graph_model import GraphPrediction, GraphTrial, pool_bytes, predict_graphs, rounded_bytes

__all__ = ["AUTO_CAPTURE_CALLS", "CUDA_GRAPHS_CHOICES", "MAX_INSTANCES", "TRIAL_CALLS",
           "TRIAL_ROUNDS", "CudaGraphs", "GraphInstance", "GraphSlot", "blas_workspace_bytes",
           "check_cuda_graphs", "clear_blas_workspaces", "pool_bytes", "predict_graphs"]

CudaGraphs = bool | Literal["auto"]
"""The ``cuda_graphs`` option: True (replay wherever a plan of ours can), False (never),
``"auto"`` (where :func:`predict_graphs` predicts the replay faster)."""

CUDA_GRAPHS_CHOICES: tuple[CudaGraphs, ...] = (False, True, "auto")

AUTO_CAPTURE_CALLS = 3
"""Under ``"auto"`` a slot captures at its entry's third call: shapes called once or
twice never pay a capture."""

TRIAL_CALLS = 3
"""Under ``"auto"``, forward + backward calls in each timed block of the trial."""

TRIAL_ROUNDS = 3
"""Under ``"auto"``, timed blocks on each side, interleaved; the fastest of each side
is compared (the block a shared host disturbed least)."""

MAX_INSTANCES = 8
"""Graph sets one cache entry may capture: one per call whose backward has not run yet
(a layer used several times in a model, micro-batches accumulated), beyond which such
calls run the eager events."""

_WARMUP = 2
"""Eager runs of the events on the capture stream before a capture."""

_MODE = "thread_local"
"""CUDA's capture mode: other threads' CUDA calls (an eager call of the same plan while
this one captures) neither fail nor join the capture."""


def check_cuda_graphs(value: Any) -> None:
    """Check the ``cuda_graphs`` option.

    Raises:
        DropinValueError: Not True, False or ``"auto"``, in one line.

    Example:
        >>> check_cuda_graphs("auto")
        >>> check_cuda_graphs("yes")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        einsum_analyze.errors.DropinValueError: einsum(): cuda_graphs='yes' is not a choice; ...
    """
    if value is True or value is False or (isinstance(value, str) and value == "auto"):
        return
    raise DropinValueError(f"einsum(): cuda_graphs={value!r:.40} is not a choice; use True, "
                           "False or 'auto'")


_SIDE_STREAMS: dict[int, Any] = {}
_SIDE_LOCK = threading.Lock()


def _side_stream(device: torch.device) -> Any:
    """The device's capture stream, one per device for every slot.

    Its warm-ups made the libraries' workspaces for it.
    """
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _SIDE_LOCK:
        stream = _SIDE_STREAMS.get(index)
        if stream is None:
            stream = _SIDE_STREAMS[index] = torch.cuda.Stream(device=index)  # type: ignore[no-untyped-call]
        return stream


def clear_blas_workspaces() -> None:
    """Drop cuBLAS's per-stream workspaces: a stream's next product makes its own."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)  # noqa: SLF001
    if clear is not None:
        clear()


_WORKSPACES: dict[int, int] = {}


def blas_workspace_bytes(device: Any) -> int:
    """Bytes the first matrix products on a stream without a workspace allocate.

    Measured once per device, from the allocator: a product and a batched product of
    8 x 8 matrices on the capture stream right after the workspaces were cleared, less
    their results. What a capture adds to its pool at its first product.
    """
    device = torch.device(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _SIDE_LOCK:
        known = _WORKSPACES.get(index)
    if known is not None:
        return known
    side = _side_stream(torch.device("cuda", index))
    a = torch.ones(8, 8, device=device)
    torch.cuda.synchronize(index)
    clear_blas_workspaces()
    base = torch.cuda.memory_allocated(index)
    with torch.cuda.stream(side):
        products = [torch.mm(a, a), torch.bmm(a[None], a[None])]
    torch.cuda.synchronize(index)
    grown = torch.cuda.memory_allocated(index) - base
    grown -= sum(rounded_bytes(p.numel() * p.element_size()) for p in products)
    del products
    clear_blas_workspaces()
    with _SIDE_LOCK:
        _WORKSPACES[index] = max(int(grown), 0)
    return _WORKSPACES[index]


class _Token:
    """What a grad call's autograd node holds while an instance's tensors are its own."""

    __slots__ = ("__weakref__",)


class GraphInstance:
    """One captured pair of graphs, their static tensors, and who holds them now.

    Made empty by :meth:`GraphSlot.claim`; :meth:`warm_up` and :meth:`record` capture
    it (:meth:`GraphSlot.capture` calls both); :meth:`run_forward` and
    :meth:`run_backward` replay it. Methods take the plan as an argument.
    """

    def __init__(self, copies_by_tensor: bool) -> None:
        self.copies_by_tensor = copies_by_tensor  # complex: conjugate views, copy_ each
        self.forward_graph: Any = None
        self.backward_graph: Any = None
        self.static_inputs: list[torch.Tensor] = []
        self.static_upstream: torch.Tensor | None = None
        self.static_output: torch.Tensor | None = None
        self.static_saved: list[torch.Tensor] = []
        self.static_gradients: list[torch.Tensor] = []
        self.pool_reserved_bytes: int | None = None
        self.owner: weakref.ref[_Token] | None = None
        self.last_stream: Any = None
        self.device_index = 0

    def is_free(self) -> bool:
        """No call's backward reads this instance's tensors."""
        owner = self.owner
        return owner is None or owner() is None

    def follow_stream(self) -> None:
        """Make the current stream wait for the last replay's, where they differ.

        The streams are compared by their raw handles first (one C call, where torch
        has it): a replay on the stream of the last makes no stream object.
        """
        last = self.last_stream
        if last is not None and _RAW_STREAM is not None \
                and _RAW_STREAM(self.device_index) == last.cuda_stream:
            return
        current = torch.cuda.current_stream()
        if last is not None and last != current:
            current.wait_stream(last)
        self.last_stream = current

    # -- capturing ---------------------------------------------------------------
    def warm_up(self, plan: Any, tensors: Any, needs_grad: bool) -> None:
        """Make the static copies and run the events eagerly on the capture stream."""
        device = tensors[0].device
        self.device_index = device.index if device.index is not None else 0
        current = torch.cuda.current_stream(device)
        statics = [torch.empty_like(t) for t in tensors]
        self._copy(statics, tensors)
        upstream = None
        if needs_grad:
            upstream = torch.zeros(plan.forward_layouts[0][0], dtype=tensors[0].dtype,
                                   device=device)
        side = _side_stream(device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            for _ in range(_WARMUP):
                live = plan.run_forward(statics)
                if needs_grad:
                    assert upstream is not None
                    plan.run_backward([live[name] for name in plan.saved_names],
                                      torch.zeros_like(upstream))
                del live
        current.wait_stream(side)
        self.static_inputs, self.static_upstream = statics, upstream
        self.last_stream = current

    def record(self, plan: Any, needs_grad: bool) -> None:
        """Capture the graphs on the warmed-up static copies (one pool for both).

        The BLAS workspaces are cleared on both sides of the captures (the module's
        docstring): the captured products use one made in this pool.
        """
        statics, upstream = self.static_inputs, self.static_upstream
        current = torch.cuda.current_stream(statics[0].device)
        side = _side_stream(statics[0].device)
        side.wait_stream(current)
        torch.cuda.synchronize(statics[0].device)  # no product in flight on a workspace
        clear_blas_workspaces()
        try:
            self._capture(plan, needs_grad, statics, upstream, side)
        finally:
            torch.cuda.synchronize(statics[0].device)
            clear_blas_workspaces()
        current.wait_stream(side)
        self.last_stream = current

    def _capture(self, plan: Any, needs_grad: bool, statics: list[torch.Tensor],
                 upstream: torch.Tensor | None, side: Any) -> None:
        pool = torch.cuda.graph_pool_handle()
        forward = torch.cuda.CUDAGraph()
        with torch.cuda.graph(forward, pool=pool, stream=side, capture_error_mode=_MODE):
            live = plan.run_forward(statics)
            output = live[plan.output]
            saved = [live[name] for name in plan.saved_names]
            del live
        gradients: list[torch.Tensor] = []
        backward = None
        if needs_grad:
            backward = torch.cuda.CUDAGraph()
            with torch.cuda.graph(backward, pool=pool, stream=side,
                                  capture_error_mode=_MODE):
                gradients = plan.run_backward(list(saved), upstream)
        self.static_output, self.static_saved = output, saved
        self.static_gradients = gradients
        self.forward_graph, self.backward_graph = forward, backward
        self.pool_reserved_bytes = _pool_reserved(pool)

    # -- replaying ---------------------------------------------------------------
    def run_forward(self, tensors: Any) -> torch.Tensor:
        """Copy the operands in, replay the forward graph, return a copy of the result."""
        self._copy(self.static_inputs, tensors)
        self.forward_graph.replay()
        assert self.static_output is not None
        return self.static_output.clone()

    def run_backward(self, upstream: torch.Tensor) -> list[torch.Tensor]:
        """Copy the upstream gradient in, replay the backward graph, return copies."""
        self.follow_stream()
        assert self.static_upstream is not None
        self.static_upstream.copy_(upstream)
        self.backward_graph.replay()
        if self.copies_by_tensor:
            return [g.clone() for g in self.static_gradients]
        gradients = [torch.empty_like(g) for g in self.static_gradients]
        self._copy(gradients, self.static_gradients)
        return gradients

    def _copy(self, targets: list[torch.Tensor], sources: Any) -> None:
        """``targets[k].copy_(sources[k])`` for each ``k``.

        One ``_foreach_copy_`` (a launch or a few); one ``copy_`` each for complex
        tensors, so that a conjugate view is copied as its values.
        """
        if self.copies_by_tensor:
            for target, source in zip(targets, sources, strict=True):
                target.copy_(source)
        else:
            torch._foreach_copy_(targets, list(sources))  # noqa: SLF001


class GraphSlot:
    """One plan cache entry's CUDA graphs: its instances, its decision, its counters.

    Made (empty) with the plan for a CUDA device. A call claims a free instance
    (:meth:`claim`), capturing a new one where every instance is held by a call whose
    backward has not run yet, up to :data:`MAX_INSTANCES`. Methods take the plan as an
    argument: the slot holds no reference to it.
    """

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        device = str(key[3])
        self.device_index = int(device.split(":")[1]) if ":" in device else 0
        self.copies_by_tensor = str(key[2]).startswith("complex")
        self.calls = 0
        self.lock = threading.Lock()
        self.prediction: GraphPrediction | None = None
        self.failed: str | None = None
        self.instances: list[GraphInstance] = []
        self.replays = 0
        self.fallbacks = 0
        self.last_fallback = ""
        self.mode: CudaGraphs = False
        self.trial: GraphTrial | None = None

    # -- deciding ----------------------------------------------------------------
    def wanted(self, plan: Any, mode: CudaGraphs) -> bool:
        """Whether a call with option ``mode`` replays this plan's graphs (or captures)."""
        self.calls += 1
        self.mode = mode
        if self.failed is not None:
            return False
        if self.prediction is None:
            if mode is not True and self.calls < AUTO_CAPTURE_CALLS:
                return False
            workspace = self.workspace_bytes()
            if workspace is None:  # capturing: :meth:`usable` says why; a later call predicts
                return True
            try:
                self.prediction = predict_graphs(plan, self.key, workspace)
            except EinsumAnalyzeError as err:  # a profile without this dtype's rate, ...
                self.failed = f"not predicted: {err}"
                return False
        if mode is True:
            return self.prediction.fits  # a budget binds the graphs too
        if self.trial is not None:
            return self.trial.faster
        return self.prediction.plausible  # captured, then tried (:meth:`run_trial`)

    def workspace_bytes(self) -> int | None:
        """The device's BLAS workspace (:func:`blas_workspace_bytes`).

        None while the current stream is capturing, when it cannot be measured; 0 where
        torch has no CUDA (the prediction alone, as the tests on the CPU make it).
        """
        if not torch.cuda.is_available():
            return 0
        if _capturing():
            return None
        return blas_workspace_bytes(self.key[3])

    def needs_trial(self, mode: CudaGraphs) -> bool:
        """Whether this call, having captured, measures the graphs first (``"auto"``)."""
        return mode is not True and self.trial is None

    def run_trial(self, graphed: Callable[[], Any], other: Callable[[], Any]) -> GraphTrial:
        """Measure a graphed call against the call it replaces; ``"auto"`` then keeps it.

        ``graphed`` and ``other`` each run one forward (+ backward) of the call on the
        same tensors, away from the caller's autograd graph. Each runs once untimed,
        then :data:`TRIAL_ROUNDS` blocks of :data:`TRIAL_CALLS` calls each, the sides
        interleaved (each goes first as often), every block fenced by a device
        synchronisation (:meth:`block_s`); the fastest block of each side is kept.
        """
        sides: Mapping[str, Callable[[], Any]] = {"graphs": graphed, "other": other}
        for call in sides.values():
            call()
        best = dict.fromkeys(sides, float("inf"))
        for round_ in range(TRIAL_ROUNDS):
            for name in (("graphs", "other") if round_ % 2 else ("other", "graphs")):
                best[name] = min(best[name], self.block_s(name, sides[name]))
        prediction = self.prediction
        self.trial = GraphTrial(graph_s=best["graphs"], other_s=best["other"],
                                other=prediction.other if prediction is not None
                                else "the eager call", calls=TRIAL_CALLS * TRIAL_ROUNDS)
        return self.trial

    def block_s(self, side: str, call: Callable[[], Any]) -> float:
        """Seconds per call of one trial block of ``side``'s ``call``, device-fenced."""
        torch.cuda.synchronize(self.device_index)
        start = time.perf_counter()
        for _ in range(TRIAL_CALLS):
            call()
        torch.cuda.synchronize(self.device_index)
        return (time.perf_counter() - start) / TRIAL_CALLS

    def usable(self, needs_grad: bool) -> str | None:
        """Why this call may not replay now (None: it may)."""
        if _current_device() != self.device_index:
            return "the operands are not on the current CUDA device"
        if _capturing():
            return "the current stream is capturing"
        if torch.is_inference_mode_enabled():
            return "inference mode"
        if needs_grad and _saved_tensors_hooks(False) is not None:
            return "saved_tensors_hooks are on"
        return None

    def note_fallback(self, why: str) -> None:
        """Count a call that ran eagerly where it wanted the graphs."""
        self.fallbacks += 1
        self.last_fallback = why

    # -- claiming ----------------------------------------------------------------
    def claim(self) -> tuple[GraphInstance, _Token] | None:
        """A free instance for one call, and the token that holds it.

        A new, empty instance where every one is held (:meth:`capture` fills it), up to
        :data:`MAX_INSTANCES` and, under a budget, as far as their memory fits it; None
        beyond. The current stream waits on the instance's last replay's stream.
        """
        with self.lock:
            chosen = next((i for i in self.instances if i.is_free()), None)
            if chosen is None:
                if not self._room():
                    return None
                chosen = self.new_instance()
                self.instances.append(chosen)
            token = _Token()
            chosen.owner = weakref.ref(token)
        chosen.follow_stream()
        return chosen, token

    def _room(self) -> bool:
        """Whether one more instance may be captured."""
        count = len(self.instances)
        if count >= MAX_INSTANCES:
            return False
        prediction = self.prediction
        if prediction is None or prediction.budget_bytes is None:
            return True
        each = prediction.static_bytes + prediction.pool_bytes
        return prediction.peak_bytes + count * each <= prediction.budget_bytes

    def new_instance(self) -> GraphInstance:
        """An empty instance, not yet captured."""
        return GraphInstance(self.copies_by_tensor)

    def drop_graphs(self) -> None:
        """Forget every captured set (``"auto"`` measured no gain): their pools go."""
        with self.lock:
            self.instances.clear()

    def release(self, instance: GraphInstance, token: _Token) -> None:
        """Give ``instance`` back after ``token``'s call has finished with its tensors."""
        with self.lock:
            owner = instance.owner
            if owner is not None and owner() is token:
                instance.owner = None

    # -- capturing ---------------------------------------------------------------
    def capture(self, plan: Any, instance: GraphInstance, tensors: Any,
                needs_grad: bool) -> bool:
        """Warm up and capture ``instance``; False (the slot stays eager) if it failed."""
        try:
            instance.warm_up(plan, tensors, needs_grad)
            with warnings.catch_warnings():
                # a pass of views alone launches no kernel: its graph is empty, rightly
                warnings.filterwarnings("ignore", message=".*CUDA Graph is empty")
                instance.record(plan, needs_grad)
        except (RuntimeError, torch.cuda.OutOfMemoryError) as err:
            with self.lock:
                self.instances.remove(instance)
            lines = str(err).strip().splitlines()
            self.failed = f"capture failed: {lines[0] if lines else type(err).__name__}"
            return False
        return True

    # -- describing --------------------------------------------------------------
    def describe(self) -> str:
        """One line for :func:`.plans.cache_info`: whether it replays, and why (not)."""
        prediction = self.prediction
        said = f"; {prediction.describe()}" if prediction is not None else ""
        tried = f"; {self.trial.describe()}" if self.trial is not None else ""
        if self.failed is not None:
            return f"eager: CUDA graphs {self.failed}{said}"
        captured = [i for i in self.instances if i.forward_graph is not None]
        if captured:
            why = "cuda_graphs=True" if self.mode is True else "auto: measured faster"
            reserved = [i.pool_reserved_bytes for i in captured]
            pools = ("pools' reserved bytes not reported by the allocator"
                     if None in reserved else
                     f"pool{'s' if len(captured) > 1 else ''} reserved "
                     f"{format_exact_bytes(sum(r for r in reserved if r is not None))} "
                     "(measured)")
            fell = (f", {self.fallbacks} eager (last: {self.last_fallback})"
                    if self.fallbacks else "")
            plural = "" if self.replays == 1 else "s"
            sets = "" if len(captured) == 1 else f" on {len(captured)} graph sets"
            return (f"replays CUDA graphs ({why}): {self.replays} replay{plural}{sets}"
                    f"{fell}; {pools}{tried}{said}")
        if self.mode is False:
            return "eager: cuda_graphs=False"
        if prediction is None:
            return (f"eager: cuda_graphs='auto' decides at call {AUTO_CAPTURE_CALLS} "
                    f"({self.calls} so far)")
        if not prediction.fits:
            return f"eager: the graphed peak is over the budget{said}"
        if self.mode is True:  # wanted, not yet replayed: every call fell back
            return f"eager: {self.last_fallback or 'not captured yet'}{said}"
        if self.trial is not None:
            return f"eager: auto measured no gain{tried}{said}"
        return f"eager: auto predicts no gain{said}"


def _pool_reserved(pool: Any) -> int | None:
    """Bytes the allocator reserved for ``pool``'s segments (None: it does not say)."""
    try:
        segments = torch.cuda.memory_snapshot()  # type: ignore[no-untyped-call]
        wanted = tuple(pool)
        if not any("segment_pool_id" in s for s in segments):
            return None
        return sum(int(s["total_size"]) for s in segments
                   if tuple(s.get("segment_pool_id") or ()) == wanted)
    except (RuntimeError, TypeError, KeyError):
        return None


_saved_tensors_hooks: Any = torch._C._autograd._top_saved_tensors_default_hooks  # noqa: SLF001
"""The innermost saved_tensors_hooks pair in effect (None: none)."""

_current_device: Callable[[], int] = getattr(torch._C, "_cuda_getDevice",
                                            torch.cuda.current_device)
"""The current CUDA device's index (torch's C call where it has one: no lazy-init check,
which a slot's device has passed)."""

_capturing: Callable[[], bool] = getattr(torch._C, "_cuda_isCurrentStreamCapturing",
                                         torch.cuda.is_current_stream_capturing)
"""Whether the current stream is capturing a CUDA graph."""

_RAW_STREAM: Callable[[int], int] | None = getattr(torch._C, "_cuda_getCurrentRawStream", None)
"""The current stream's raw handle on a device index (None: a torch without CUDA)."""
