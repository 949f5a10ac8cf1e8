"""The drop-in einsum's autograd node: one planned einsum, forward and backward.

Traced calls (``torch.compile``, other tracers) go through a ``torch.library.custom_op``,
``einsum_analyze::contract``, whose forward runs the plan's forward events and returns
the result and the new tensors the plan keeps, and whose backward is a second op,
``einsum_analyze::contract_backward``, running the plan's backward events. Both have a
fake implementation that returns tensors of the plan's layouts, so a compiler keeps the
plan as it is. Eager calls run the same plan through :class:`EagerContract`, an
``autograd.Function`` a few microseconds cheaper per call.

Calls go down only: :mod:`einsum_analyze.torch` calls this module, which runs plans of
:mod:`.plans`; nothing here calls back up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import DropinError
from .graphs import CudaGraphs, GraphInstance, GraphSlot
from .plans import DTYPE_NAMES, DropinPlan, eager_plan, get_plan, plan_key, remember_eager

__all__ = ["EagerContract", "GraphedContract", "apply_eager", "contract", "contract_backward",
           "forward_output", "run_graphed"]


def _plan_for(operands: Sequence[torch.Tensor], equation: str, strategy: str, optimize: str,
              budget: int, mask: Sequence[bool]) -> DropinPlan:
    if not operands:
        return get_plan(*plan_key(operands, equation, strategy, optimize, budget, mask))
    first = operands[0]
    fast = ("forward", equation, strategy, optimize, budget, tuple(mask), first.dtype,
            first.device, *[t.shape for t in operands])
    return _cached(fast, lambda: plan_key(operands, equation, strategy, optimize, budget,
                                          mask))


def _cached(fast: tuple[Any, ...], key: Callable[[], tuple[Any, ...]]) -> DropinPlan:
    """The plan of a traced call's key of torch objects (``torch.Size``, dtype, device).

    A compiled graph calls the ops with the same arguments every step: the key of
    :func:`get_plan` (shapes as ints, dtype and device as text) is built on the first
    call only, as the eager path does. A key that cannot be hashed (symbolic sizes,
    while a dynamic trace runs) takes the full lookup.
    """
    try:
        plan = eager_plan(fast)
    except TypeError:
        return get_plan(*key())
    if plan is None:
        slow = key()
        plan = get_plan(*slow)
        remember_eager(fast, slow, plan)
    return plan


def _own(tensor: torch.Tensor, others: Sequence[torch.Tensor]) -> torch.Tensor:
    """``tensor``, or a copy where it shares storage with one of ``others``.

    A custom op's outputs may not alias its inputs.
    """
    ptr = tensor.untyped_storage().data_ptr()
    for other in others:  # a loop: a generator costs more per call
        if other.untyped_storage().data_ptr() == ptr:
            return tensor.clone()
    return tensor


def _own_all(tensors: Sequence[torch.Tensor],
             others: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """:func:`_own` of each of ``tensors``, the storages of ``others`` read once.

    A backward's gradients against its saved tensors: a set lookup per gradient, not a
    scan of every saved tensor per gradient (18 gradients and 35 tensors on
    ``tn18-b512``: 630 storage reads a call, a third of the compiled backward's time).
    """
    ptrs = {other.untyped_storage().data_ptr() for other in others}
    return [t.clone() if t.untyped_storage().data_ptr() in ptrs else t for t in tensors]


@torch.library.custom_op("einsum_analyze::contract", mutates_args=())
def contract(operands: list[torch.Tensor], equation: str, strategy: str, optimize: str,
              budget: int, mask: list[bool]) -> list[torch.Tensor]:
    """The traced forward: the result, then the new tensors the plan keeps for backward."""
    plan = _plan_for(operands, equation, strategy, optimize, budget, mask)
    live = plan.run_forward(operands)
    out = _own(live[plan.output], operands)
    return [out, *(live[name] for name in plan.new_saved)]


@contract.register_fake
def _contract_fake(operands: list[torch.Tensor], equation: str, strategy: str,
                   optimize: str, budget: int, mask: list[bool]) -> list[torch.Tensor]:
    plan = _plan_for(operands, equation, strategy, optimize, budget, mask)
    dtype, device = operands[0].dtype, operands[0].device
    return [torch.empty_strided(shape, stride, dtype=dtype, device=device)
            for shape, stride in plan.forward_layouts]


@torch.library.custom_op("einsum_analyze::contract_backward", mutates_args=())
def contract_backward(upstream: torch.Tensor, saved: list[torch.Tensor], equation: str,
                       strategy: str, optimize: str, budget: int, mask: list[bool],
                       shapes: list[int]) -> list[torch.Tensor]:
    """The traced backward: the gradients of the operands in ``mask``, in order."""
    plan = _plan_for_backward(upstream, equation, strategy, optimize, budget, mask, shapes)
    return _own_all(_run_backward(plan, upstream, list(saved)), [upstream, *saved])


def _plan_for_backward(upstream: torch.Tensor, equation: str, strategy: str, optimize: str,
                       budget: int, mask: Sequence[bool], shapes: Sequence[int]) -> DropinPlan:
    fast = ("backward", equation, strategy, optimize, budget, tuple(mask), upstream.dtype,
            upstream.device, *shapes)
    return _cached(fast, lambda: (equation, _unflatten(shapes), DTYPE_NAMES[upstream.dtype],
                                  str(upstream.device), tuple(mask), strategy, optimize,
                                  budget))


def _run_backward(plan: DropinPlan, upstream: torch.Tensor,
                  saved: list[torch.Tensor]) -> list[torch.Tensor]:
    """The planned backward; ``saved`` is emptied (the schedule owns its tensors)."""
    held = list(saved)
    saved.clear()
    return plan.run_backward(held, _seed(upstream))


def _seed(upstream: torch.Tensor) -> torch.Tensor:
    """The seed the backward schedule takes over: ``upstream``, or a copy of it.

    Contiguous; a complex seed is a copy, which backward conjugates in place (its
    conjugated space). The caller passes it straight to :meth:`.plans.DropinPlan.run_backward`
    and keeps no reference, so that the schedule frees a copy where it frees the seed,
    as the plan's model does.
    """
    seed = upstream.contiguous()
    if seed is upstream and seed.is_complex():
        return seed.clone()
    return seed


@contract_backward.register_fake
def _contract_backward_fake(upstream: torch.Tensor, saved: list[torch.Tensor], equation: str,
                            strategy: str, optimize: str, budget: int, mask: list[bool],
                            shapes: list[int]) -> list[torch.Tensor]:
    plan = _plan_for_backward(upstream, equation, strategy, optimize, budget, mask, shapes)
    return [torch.empty_strided(shape, stride, dtype=upstream.dtype, device=upstream.device)
            for shape, stride in plan.gradient_layouts]


def _flatten(shapes: Sequence[Sequence[int]]) -> list[int]:
    """Shapes as one list of ints (a custom op's schema has no nested lists)."""
    flat: list[int] = []
    for shape in shapes:
        flat.append(len(shape))
        flat.extend(shape)
    return flat


def _unflatten(flat: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    shapes: list[tuple[int, ...]] = []
    position = 0
    while position < len(flat):
        rank = int(flat[position])
        shapes.append(tuple(int(s) for s in flat[position + 1:position + 1 + rank]))
        position += 1 + rank
    return tuple(shapes)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: list[torch.Tensor]) -> None:
    operands, equation, strategy, optimize, budget, mask = inputs
    plan = _plan_for(operands, equation, strategy, optimize, budget, mask)
    saved = [operands[k] for k in plan.saved_operands] + list(output[1:])
    ctx.mark_non_differentiable(*output[1:])
    ctx.set_materialize_grads(False)
    ctx.options = (equation, strategy, optimize, budget, list(mask))
    ctx.shapes = _flatten([t.shape for t in operands])
    ctx.count = len(operands)
    if _tracing(output[0]):
        ctx.save_for_backward(*saved)
        ctx.held = None
    else:
        # Eager: the node holds the saved tensors in a list that backward empties, so
        # that the schedule frees each one when its last reader is done (tensors saved
        # with save_for_backward would live until the whole backward returns).
        _hold(ctx, plan, saved, tuple(operands))


def _tracing(tensor: torch.Tensor) -> bool:
    """Whether a compiler is tracing: save as compilers require.

    Eager tensors are plain ``torch.Tensor`` (or parameters); a tracer's are subclasses
    (fake, functional, proxy), and so are user subclasses, which take the same path.
    """
    return torch.compiler.is_compiling() or type(tensor) not in (torch.Tensor,
                                                                 torch.nn.Parameter)


def _hold(ctx: Any, plan: DropinPlan, saved: list[torch.Tensor],
          operands: tuple[torch.Tensor, ...]) -> None:
    """Keep what backward reads: the saved tensors, their versions, the operands.

    The operands are references to the caller's tensors as given (before autocast's
    cast): inputs, live throughout in the plan's model; only a double backward reads
    them.
    """
    if _saved_tensors_hooks(False) is not None:
        # saved_tensors_hooks are on (torch.utils.checkpoint, save_on_cpu): they see the
        # saved tensors only through save_for_backward, which also checks versions.
        ctx.save_for_backward(*saved)
        ctx.held = _HOOKED
    else:
        ctx.held = [saved]
    ctx.versions = _versions(saved)
    if -1 in ctx.versions:
        raise RuntimeError(
            "Inference tensors cannot be saved for backward: an operand made in "
            "torch.inference_mode is read by the backward of einsum_analyze.torch.einsum; "
            "clone it outside inference mode first")
    ctx.operands = operands
    ctx.operand_versions = _versions(operands)
    ctx.equation = plan.equation


_HOOKED = ("saved with save_for_backward",)
"""``ctx.held`` where saved_tensors_hooks were on in forward: the tensors are in
``ctx.saved_tensors``."""

_saved_tensors_hooks: Callable[[bool], Any] = (
    torch._C._autograd._top_saved_tensors_default_hooks)  # noqa: SLF001
"""The innermost saved_tensors_hooks pair in effect (None: none); its argument says
whether to ignore them while tracing."""


def _versions(tensors: Sequence[torch.Tensor]) -> list[int]:
    """The tensors' version counters; -1 for an inference tensor, which has none.

    Backward refuses to read an inference tensor, as torch's autograd refuses to save
    one; an operand held only for a double backward may be one (torch.einsum's own
    backward then refuses it).
    """
    try:
        return [t._version for t in tensors]  # noqa: SLF001
    except RuntimeError:  # "Inference tensors do not track version counter"
        return [-1 if t.is_inference() else t._version for t in tensors]  # noqa: SLF001


def _take_saved(ctx: Any) -> list[torch.Tensor]:
    """The held tensors for this backward, checked as autograd checks saved tensors.

    With ``retain_graph`` they stay held for the next backward; else this backward
    takes them, and the schedule frees each one as it is done with it.

    Raises:
        RuntimeError: A second backward through a graph that was not retained, or a
            saved tensor modified in place since forward (torch's messages).
    """
    if not ctx.held:
        raise RuntimeError(_SECOND_BACKWARD)
    if ctx.held is _HOOKED:
        return list(ctx.saved_tensors)  # the hooks' unpacked tensors, checked by autograd
    saved: list[torch.Tensor] = ctx.held[-1]
    if _versions(saved) != ctx.versions:
        _check_versions(saved, ctx.versions)
    if _keep_graph():
        return list(saved)
    return ctx.held.pop()  # type: ignore[no-any-return]


_SECOND_BACKWARD = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed): einsum_analyze.torch.einsum frees its saved "
    "tensors in backward; specify retain_graph=True to keep them")
"""torch's message for a second backward through a node whose saved tensors are gone."""


def _gradient_slots(ctx: Any, grad: Sequence[int], gradients: Sequence[Any],
                    leading: int) -> tuple[Any, ...]:
    """``backward``'s return: each gradient in its operand's slot.

    The first ``leading`` arguments (the plan, ...) take none.
    """
    returned: list[Any] = [None] * len(ctx.needs_input_grad)
    for k, gradient in zip(grad, gradients, strict=True):
        returned[k + leading] = gradient
    return tuple(returned)


def _check_versions(tensors: Sequence[torch.Tensor], versions: Sequence[int]) -> None:
    for tensor, version, now in zip(tensors, versions, _versions(tensors), strict=True):
        if now != version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by "
                f"an inplace operation: [{tensor.type()} {list(tensor.shape)}] is at version "
                f"{now}; expected version {version} instead (saved by "
                "einsum_analyze.torch.einsum)")


_keep_graph: Callable[[], bool] = torch._C._autograd._get_current_graph_task_keep_graph  # noqa: SLF001
"""Whether the backward running now retains the graph (``retain_graph=True``)."""


def _differentiable_gradients(ctx: Any, upstream: torch.Tensor,
                              grad: Sequence[int]) -> list[torch.Tensor]:
    """The gradients of operands ``grad`` as differentiable torch ops (double backward).

    torch.einsum's own backward over the caller's operands: under ``create_graph=True``
    the gradients carry a graph back to the operands and to ``upstream``. A batched
    backward (:func:`_torch_backward`) takes it too, with or without a graph.
    """
    from .calls import TORCH_EINSUM

    create_graph = torch.is_grad_enabled()
    _check_versions(ctx.operands, ctx.operand_versions)
    with torch.enable_grad():
        # the caller's operands as the plan read them (autocast's cast made again)
        operands = [t.to(upstream.dtype) for t in ctx.operands]
        result = TORCH_EINSUM(ctx.equation, *operands)
        return list(torch.autograd.grad(result, [operands[k] for k in grad], upstream,
                                        create_graph=create_graph, allow_unused=True))


def _torch_backward() -> bool:
    """Whether backward runs torch.einsum's own (:func:`_differentiable_gradients`).

    Under ``create_graph=True`` (grad mode on), and under vmap: a batched backward
    (``autograd.grad(is_grads_batched=True)``, ``gradcheck(check_batched_grad=True)``,
    ``jacobian(vectorize=True)``, a functorch transform) hands a batched upstream
    gradient that the plan's kernels (``out=`` products, storage reads) cannot take.
    """
    return (torch.is_grad_enabled() or _functorch_active()
            or (_VMAP_MODE is not None and _vmap_mode_on(_VMAP_MODE)))


_functorch_active: Callable[[], bool] = getattr(
    torch._C, "_are_functorch_transforms_active", lambda: False)
_vmap_mode_on: Callable[[Any], bool] = torch._C._dispatch_tls_is_dispatch_key_included
try:
    _VMAP_MODE: Any = torch._C._parse_dispatch_key("VmapMode")  # torch's legacy vmap
except (AttributeError, RuntimeError):  # pragma: no cover - a torch without it
    _VMAP_MODE = None


def _backward(ctx: Any, grads: list[torch.Tensor | None]) -> tuple[Any, ...]:
    nones = (None,) * 5
    upstream = grads[0]
    equation, strategy, optimize, budget, mask = ctx.options
    if upstream is None or not any(mask):
        return ([None] * ctx.count, *nones)
    if ctx.held is None:
        saved = list(ctx.saved_tensors)
        if torch.is_grad_enabled() and not torch.compiler.is_compiling():
            raise DropinError(
                "einsum_analyze.torch.einsum: double backward (create_graph=True) through a "
                "traced call; call it eagerly, or use torch.einsum")
        computed = contract_backward(upstream, saved, equation, strategy, optimize, budget,
                                      mask, ctx.shapes)
    elif _torch_backward():
        wanted = [k for k, on in enumerate(mask) if on]
        computed = _differentiable_gradients(ctx, upstream, wanted)
    else:
        saved = _take_saved(ctx)
        plan = _plan_for_backward(upstream, equation, strategy, optimize, budget, mask,
                                  ctx.shapes)
        computed = _run_backward(plan, upstream, saved)
    flow = iter(computed)
    return ([next(flow) if wanted else None for wanted in mask], *nones)


contract.register_autograd(_backward, setup_context=_setup_context)


def forward_output(plan: DropinPlan, operands: Sequence[torch.Tensor]) -> torch.Tensor:
    """The result alone, for a call where no operand needs a gradient (no node)."""
    out: torch.Tensor = plan.run_forward(operands)[plan.output]
    return _own(out, operands) if plan.output_may_alias else out


class EagerContract(torch.autograd.Function):
    """The op's eager twin: the same plan, forward and backward, as one autograd node."""

    @staticmethod
    def forward(ctx: Any, plan: DropinPlan, operands: tuple[torch.Tensor, ...],
                *tensors: torch.Tensor) -> torch.Tensor:
        """The plan's forward events on ``tensors`` (``operands`` cast and made contiguous).

        The tensors the plan keeps are held for backward; ``operands``, the caller's
        tensors, only as references for a double backward.
        """
        live = plan.run_forward(tensors)
        out: torch.Tensor = live[plan.output]
        if plan.output_may_alias:
            out = _own(out, tensors)
        elif out._base is not None:  # noqa: SLF001
            # A view of a tensor the kernels made (a bmm's result seen in the output's
            # labels): returned as a plain tensor over the same storage, so that the
            # caller may modify it in place as torch.einsum's result.
            out = out.detach()
        ctx.plan = plan
        _hold(ctx, plan, [live[name] for name in plan.saved_names], operands)
        ctx.set_materialize_grads(False)
        return out

    @staticmethod
    def backward(ctx: Any, upstream: torch.Tensor | None) -> tuple[Any, ...]:
        """The plan's backward events; the held tensors are freed as the schedule says.

        Under ``create_graph=True`` the gradients are torch.einsum's differentiable
        backward instead, so that they can be differentiated again.
        """
        plan: DropinPlan = ctx.plan
        if upstream is None:
            return (None,) * len(ctx.needs_input_grad)
        if _torch_backward():
            gradients = _differentiable_gradients(ctx, upstream, plan.grad)
        else:
            saved = _take_saved(ctx)
            # empties ``saved`` and holds the only reference to the seed: freed as scheduled
            gradients = plan.run_backward(saved, _seed(upstream))
        if len(gradients) == len(plan.operand_names):
            return (None, None, *gradients)  # the plan's and operands' slots, then each one's
        return _gradient_slots(ctx, plan.grad, gradients, 2)


apply_eager: Callable[..., torch.Tensor] = getattr(
    super(torch.autograd.Function, EagerContract), "apply", EagerContract.apply)
"""``autograd.Function.apply`` without its Python wrapper, which binds default arguments
(the node has none) and unwraps functorch's dead wrappers (none outside a functorch
transform, where :func:`einsum_analyze.torch.einsum` calls the wrapper): a microsecond
less per call."""


def run_graphed(plan: DropinPlan, mode: CudaGraphs, operands: tuple[torch.Tensor, ...],
                tensors: Sequence[torch.Tensor], needs_grad: bool) -> torch.Tensor | None:
    """The call through the plan's CUDA graphs (:mod:`.graphs`); None: run it eagerly.

    None where ``mode`` or ``"auto"``'s prediction does not ask for the graphs, where
    they may not run now (another device current, the current stream capturing,
    inference mode, saved_tensors_hooks on), where every graph set is held by a call
    whose backward has not run and no other may be captured, or where the capture
    failed.
    """
    slot = plan.graphs
    if slot is None or not slot.wanted(plan, mode):
        return None
    why = slot.usable(needs_grad)
    if why is not None:
        slot.note_fallback(why)
        return None
    claimed = slot.claim()
    if claimed is None:
        slot.note_fallback("every graph set is held by a call whose backward has not run")
        return None
    instance, token = claimed
    if instance.forward_graph is None and not slot.capture(plan, instance, tensors,
                                                           needs_grad):
        return None
    if slot.needs_trial(mode) and not _tried_faster(plan, slot, instance, tensors,
                                                    needs_grad):
        slot.release(instance, token)
        slot.drop_graphs()
        return None
    slot.replays += 1
    if not needs_grad:
        try:
            return instance.run_forward(tensors)
        finally:
            slot.release(instance, token)
    return apply_graphed(plan, slot, instance, token, operands, *tensors)


def _tried_faster(plan: DropinPlan, slot: GraphSlot, instance: GraphInstance,
                  tensors: Sequence[torch.Tensor], needs_grad: bool) -> bool:
    """``"auto"``'s trial: whether the graphed call measured faster than the eager one.

    Both sides run this call's forward (and, for a grad call, a backward of a unit
    upstream gradient) on leaves detached from the caller's tensors, so the caller's
    autograd graph sees neither: the graphs through :class:`GraphedContract` on the
    claimed ``instance`` (its token stays the caller's), the other side as the call
    runs without graphs (torch.einsum's own execution, or the plan's eager node).
    A trial that fails leaves the slot eager, as a failed capture does.
    """
    leaves = [t.detach().requires_grad_(needs_grad and k in plan.grad)
              for k, t in enumerate(tensors)]
    wanted = [leaves[k] for k in plan.grad] if needs_grad else []
    operands = tuple(leaves)
    upstream = torch.ones(plan.forward_layouts[0][0], dtype=leaves[0].dtype,
                          device=leaves[0].device)

    def graphed() -> Any:
        if not needs_grad:
            return instance.run_forward(leaves)
        result = apply_graphed(plan, slot, instance, _TRIAL_TOKEN, operands, *leaves)
        return torch.autograd.grad(result, wanted, upstream)

    def other() -> Any:
        if plan.runs_torch:
            result = plan.call_torch(plan.equation, operands)
        elif not needs_grad:
            return forward_output(plan, leaves)
        else:
            result = apply_eager(plan, operands, *leaves)
        return torch.autograd.grad(result, wanted, upstream) if needs_grad else result

    try:
        return slot.run_trial(graphed, other).faster
    except (RuntimeError, torch.cuda.OutOfMemoryError) as err:
        lines = str(err).strip().splitlines()
        slot.failed = f"trial failed: {lines[0] if lines else type(err).__name__}"
        return False


_TRIAL_TOKEN = object()
"""The token a trial's graphed calls carry: never the instance's owner, so their
backward leaves the instance claimed by the call that is trying it."""


class GraphedContract(torch.autograd.Function):
    """The eager node of a call whose forward and backward replay CUDA graphs.

    Forward replays an instance's forward graph (its result copied out); the instance
    stays claimed by this node's token until backward has replayed its backward graph
    (or, under ``retain_graph``, until the node is freed). A double backward runs
    torch.einsum's differentiable backward, as :class:`EagerContract`'s does.
    """

    @staticmethod
    def forward(ctx: Any, plan: DropinPlan, slot: GraphSlot, instance: GraphInstance,
                token: Any, operands: tuple[torch.Tensor, ...],
                *tensors: torch.Tensor) -> torch.Tensor:
        """Replay ``instance``'s forward graph; ``token`` holds it for backward."""
        out = instance.run_forward(tensors)
        ctx.plan, ctx.slot, ctx.instance, ctx.token = plan, slot, instance, token
        ctx.operands = operands  # for a double backward only
        ctx.operand_versions = _versions(operands)
        ctx.equation = plan.equation
        ctx.set_materialize_grads(False)
        return out

    @staticmethod
    def backward(ctx: Any, upstream: torch.Tensor | None) -> tuple[Any, ...]:
        """Replay the backward graph (the gradients copied out), then free the instance."""
        plan: DropinPlan = ctx.plan
        if upstream is None:
            return (None,) * len(ctx.needs_input_grad)
        if _torch_backward():
            gradients = _differentiable_gradients(ctx, upstream, plan.grad)
        else:
            token = ctx.token
            if token is None:
                raise RuntimeError(_SECOND_BACKWARD)
            instance: GraphInstance = ctx.instance
            gradients = instance.run_backward(upstream)
            if not _keep_graph():
                ctx.token = None
                ctx.slot.release(instance, token)
        return _gradient_slots(ctx, plan.grad, gradients, 5)


apply_graphed: Callable[..., torch.Tensor] = getattr(
    super(torch.autograd.Function, GraphedContract), "apply", GraphedContract.apply)
"""``GraphedContract.apply`` without its Python wrapper (as :data:`apply_eager`)."""
