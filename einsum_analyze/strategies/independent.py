"""``independent``: each operand's gradient as its own planned einsum (docs/method.md section 5).

The forward pass runs as inference (nothing retained); then each differentiated
operand's core contraction (:mod:`einsum_analyze.model.gradients`), planned on its own by
:func:`~einsum_analyze.strategies.gradient_plans.plan_gradients`, runs from the upstream
gradient and the operands. FLOPs grow with the number of operands.
"""

from __future__ import annotations

from ..model.gradients import GradientSpec, unreduce_kind
from ..model.memory import forward_schedule, tensor_name
from ..model.planning import Plan, size_of
from ..model.schedule import Event
from .common import ScheduleBuilder, StrategyInput
from .registry import StrategySpec
from .rerooted import DownStep, RerootedTree

__all__ = ["SPEC", "build_independent"]


def build_independent(given: StrategyInput) -> ScheduleBuilder:
    """Inference forward, then every gradient's core contraction planned on its own."""
    plan, gradients = given.plan, given.gradients
    if gradients is None:
        raise ValueError("the independent strategy needs the planned gradients")
    num_ops = plan.equation.num_operands
    builder = ScheduleBuilder(plan.equation.size_dict)
    builder.optimizer = gradients.optimizer
    builder.warnings.extend(gradients.warnings)
    builder.events.extend(forward_schedule(plan))
    if not gradients.specs:
        return builder
    output = plan.equation.output
    builder.alloc("G", output, op="seed", equation=f"->{output}")
    last = len(gradients.specs) - 1
    consumed = False
    shared = _SharedEvents(plan) if gradients.optimizer == "forward-tree" else None
    for number, (spec, core) in enumerate(zip(gradients.specs, gradients.plans, strict=True)):
        if shared is not None and core.optimizer == "forward-tree":
            shared.emit(builder, spec, core)
            continue
        sources = ["G" if src < 0 else tensor_name(src, num_ops) for src in spec.core_sources]
        consumed = builder.gradient(
            steps=core.steps,
            num_sources=core.equation.num_operands,
            sources=sources,
            target=f"d{spec.operand}",
            target_term=spec.term,
            operand=spec.operand,
            prefix=f"c{spec.operand}.",
            can_consume=number == last,
        )
    if not consumed:
        builder.free("G", output)
    return builder


class _SharedEvents:
    """The events of re-rooted cores, each shared piece built once.

    Args:
        plan: The forward plan whose tree the cores follow.
    """

    def __init__(self, plan: Plan) -> None:
        self.tree = RerootedTree(plan)
        self.num_operands = plan.equation.num_operands
        self.size_dict = plan.equation.size_dict
        # Per forward step: its replay in a core (the alloc, then the frees of the
        # intermediates it consumes).
        self.replay: list[tuple[Event, ...]] = []
        n = self.num_operands
        for step in plan.steps:
            events = [Event(
                kind="alloc", tensor=self._replayed(step.output), elements=step.output_elements,
                phase="backward", op="contract",
                inputs=tuple(self._replayed(i) for i in step.inputs),
                equation=step.equation, flops=step.flops,
            )]
            for i, term in zip(step.inputs, step.input_terms, strict=True):
                if i >= n:
                    events.append(Event(kind="free", tensor=self._replayed(i),
                                        elements=size_of(term, self.size_dict),
                                        phase="backward"))
            self.replay.append(tuple(events))
        self._down: dict[int, tuple[Event, ...]] = {}

    def _replayed(self, node: int) -> str:
        """A forward tensor's name in a core: the operand, or its replayed copy."""
        return f"in{node}" if node < self.num_operands else f"r{node}"

    def _upstream(self, node: int) -> str:
        """Name of the gradient flowing into a forward node (``G`` at the root)."""
        return f"b{node}"

    def emit(self, builder: ScheduleBuilder, spec: GradientSpec, core: Plan) -> None:
        """Append operand ``spec.operand``'s core: replayed steps, then the way down."""
        tree = self.tree
        k = spec.operand
        path = tree.path(k)
        on_path = set(path)
        events = builder.events
        for t, replay in enumerate(self.replay):
            if t not in on_path:
                events.extend(replay)
        steps = tree.forward.steps
        children = [k, *(steps[t].output for t in path[:-1])]
        for depth in range(len(path) - 1, 0, -1):
            events.extend(self._down_node(children[depth]))
        self._last_step(builder, spec, children[0])
        builder.operand_flops[k] = builder.operand_flops.get(k, 0) + core.flops

    def _inputs_of(self, down: DownStep) -> tuple[tuple[str, ...], list[Event]]:
        """Input names of a down step, and the frees of its intermediates after it."""
        root = down.upstream_last
        upstream = "G" if root else self._upstream(down.parent)
        siblings = tuple(self._replayed(x) for x in down.siblings)
        names = (*siblings, upstream) if root else (upstream, *siblings)
        sources = (*down.siblings, -1) if root else (down.parent, *down.siblings)
        frees = [
            Event(kind="free", tensor=name, elements=size_of(term, self.size_dict),
                  phase="backward")
            for source, name, term in zip(sources, names, down.input_terms, strict=True)
            if source >= self.num_operands
        ]
        return names, frees

    def _down_node(self, node: int) -> tuple[Event, ...]:
        """The events of the down step into an inner node (memoised per node)."""
        found = self._down.get(node)
        if found is not None:
            return found
        down = self.tree.down_step(node)
        names, frees = self._inputs_of(down)
        made = (
            Event(kind="alloc", tensor=self._upstream(node), elements=down.output_elements,
                  phase="backward", op="contract", inputs=names, equation=down.equation,
                  flops=down.flops),
            *frees,
        )
        self._down[node] = made
        return made

    def _last_step(self, builder: ScheduleBuilder, spec: GradientSpec, leaf: int) -> None:
        """The core's last step, into operand ``leaf``: its gradient, as ``gradient`` emits."""
        down = self.tree.down_step(leaf, spec)
        names, frees = self._inputs_of(down)
        kind = unreduce_kind(down.output_term, spec.term)
        target = f"d{spec.operand}"
        out_name = f"c{spec.operand}.c" if kind == "embed" else target
        builder.alloc(out_name, down.output_term, op="contract", inputs=names,
                      equation=down.equation, view=spec.term if kind == "view" else "",
                      flops=down.flops)
        builder.events.extend(frees)
        if kind == "embed":
            builder.alloc(target, spec.term, op="unreduce", inputs=(out_name,),
                          equation=f"{down.output_term}->{spec.term}")
            builder.free(out_name, down.output_term)


SPEC = StrategySpec(
    name="independent",
    build=build_independent,
    needs_gradient_plans=True,
    description="each operand's gradient as its own planned einsum, retaining nothing",
    default_max_operands=200,
)
