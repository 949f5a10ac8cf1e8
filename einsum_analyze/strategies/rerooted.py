"""The forward tree re-rooted at each operand: every gradient core from one shared tree.

The core contraction of operand ``k``'s gradient (docs/method.md section 3) can follow
the forward contraction tree re-rooted at ``k``: every forward step away from ``k`` is
replayed as it was, then the upstream gradient ``G`` meets, from the root down, the
sibling results along ``k``'s path to the root. That is reverse mode for one operand
alone.

The re-rooted trees of all operands share almost everything, and this module computes
each shared piece once:

- a forward step off ``k``'s path is the forward step itself (same terms, FLOPs and
  size): only its ids and positions in ``k``'s core differ;
- the gradient flowing into a node ``v`` on the way down has the labels of ``v``'s
  forward output whichever operand below ``v`` is being differentiated, so the step
  that produces it (``down step`` of ``v``) is one record per node.

A core then costs one pass over the forward steps (ids and positions) and no label
work, where planning it from its text costs a pass over every label of every step.
The result is the same :class:`~einsum_analyze.model.planning.Plan` the text would give
(checked against :meth:`Plan.from_path` in the tests).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass

from ..model.equation import Equation
from ..model.gradients import GradientSpec
from ..model.planning import Plan, Step, count_flops, size_of

__all__ = ["DownStep", "RerootedTree"]


@dataclass(frozen=True, slots=True)
class DownStep:
    """The step of a re-rooted core that produces the gradient flowing into one node.

    Attributes:
        node: Single-use id (forward numbering) of the node whose gradient is produced.
        parent: Single-use id of the node above (its gradient is consumed; the root's
            is ``G``).
        siblings: Forward ids of the other inputs of the forward step above ``node``,
            in the order the core's step lists them.
        upstream_last: Whether the consumed gradient is the core's last input (it is
            when it is ``G``, the core's source 0) rather than its first.
        input_terms: Terms of the step's inputs, in the core's order.
        output_term: Term of the produced gradient.
        summed: Labels summed away.
        flops: FLOPs (opt_einsum convention).
        output_elements: Elements of the produced gradient.
    """

    node: int
    parent: int
    siblings: tuple[int, ...]
    upstream_last: bool
    input_terms: tuple[str, ...]
    output_term: str
    summed: str
    flops: int
    output_elements: int

    @property
    def equation(self) -> str:
        """The step's einsum, e.g. ``'ac,bc->ab'``."""
        return ",".join(self.input_terms) + "->" + self.output_term


class RerootedTree:
    """A forward plan's tree, with the pieces every operand's re-rooted core shares.

    Args:
        forward: The forward plan.

    Example:
        >>> from einsum_analyze import parse_equation
        >>> from einsum_analyze.model.gradients import derive_gradient
        >>> from einsum_analyze.model.planning import plan_contraction
        >>> eq = parse_equation("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)])
        >>> tree = RerootedTree(plan_contraction(eq, [(0, 1), (0, 1)]))
        >>> core = tree.core_plan(derive_gradient(eq, 0), "forward-tree")
        >>> core.path, [step.equation for step in core.steps]
        (((0, 2), (0, 1)), ['cd,ad->ca', 'ca,bc->ab'])
    """

    def __init__(self, forward: Plan) -> None:
        self.forward = forward
        equation = forward.equation
        self.num_operands = equation.num_operands
        self.size_dict = equation.size_dict
        steps = forward.steps
        self.consumer: dict[int, int] = {}
        for t, step in enumerate(steps):
            for i in step.inputs:
                self.consumer[i] = t
        # The forward position of each input, in the order of step.inputs (descending).
        self.positions = [tuple(sorted(step.operands, reverse=True)) for step in steps]
        self.terms: dict[int, str] = dict(enumerate(equation.terms))
        for step in steps:
            self.terms[step.output] = step.output_term
        self._down: dict[int, DownStep] = {}
        distinct = [len(set(term)) for term in equation.terms]
        self._distinct_total = sum(distinct)
        self._distinct = distinct
        self._output_distinct = len(set(equation.output))
        size_dict = self.size_dict
        self._shapes = [tuple(size_dict[char] for char in term) for term in equation.terms]
        self._output_shape = tuple(size_dict[char] for char in equation.output)

    def path(self, operand: int) -> list[int]:
        """Indices of the forward steps from ``operand`` up to the root."""
        steps = self.forward.steps
        found = []
        node = operand
        while node in self.consumer:
            t = self.consumer[node]
            found.append(t)
            node = steps[t].output
        return found

    def down_step(self, node: int, spec: GradientSpec | None = None) -> DownStep:
        """The step producing the gradient flowing into ``node`` (memoised per node).

        ``spec`` is given for the last step of a core (``node`` is its operand): the
        result then has the core's output labels and is not memoised.
        """
        if spec is None:
            found = self._down.get(node)
            if found is not None:
                return found
        steps = self.forward.steps
        step = steps[self.consumer[node]]
        parent = step.output
        is_top = step is steps[-1]
        upstream = self.forward.equation.output if is_top else self.down_step(parent).output_term
        siblings = tuple(i for i in step.inputs if i != node)
        sibling_terms = tuple(self.terms[i] for i in siblings)
        input_terms = (*sibling_terms, upstream) if is_top else (upstream, *sibling_terms)
        joint = "".join(dict.fromkeys("".join(input_terms)))
        if spec is not None:
            output_term = spec.core_output
        else:
            keep = set(self.terms[node])
            output_term = "".join(char for char in joint if char in keep)
        summed = "".join(char for char in joint if char not in output_term)
        made = DownStep(
            node=node,
            parent=parent,
            siblings=siblings,
            upstream_last=is_top,
            input_terms=input_terms,
            output_term=output_term,
            summed=summed,
            flops=count_flops(joint, bool(summed), len(input_terms), self.size_dict),
            output_elements=size_of(output_term, self.size_dict),
        )
        if spec is None:
            self._down[node] = made
        return made

    def core_equation(self, spec: GradientSpec) -> Equation:
        """``spec.core(equation)``, built from the shapes the tree already has."""
        k = spec.operand
        terms, output = spec.core_terms, spec.core_output
        shapes = (self._output_shape, *self._shapes[:k], *self._shapes[k + 1 :])
        size_dict = self.size_dict
        used = {char: size_dict[char] for char in dict.fromkeys("".join(terms) + output)}
        return Equation(text=",".join(terms) + "->" + output, terms=terms, output=output,
                        shapes=shapes, size_dict=used)

    def core_plan(self, spec: GradientSpec, optimizer: str) -> Plan:
        """Operand ``spec.operand``'s core contraction along the re-rooted tree.

        The core's inputs are ``G`` (position 0) and the other operands in order, as
        :meth:`GradientSpec.core` has them.
        """
        forward = self.forward
        steps = forward.steps
        n = self.num_operands
        k = spec.operand
        path = self.path(k)
        on_path = set(path)
        core = self.core_equation(spec)
        core_steps: list[Step] = []
        new_id: dict[int, int] = {}

        def core_id(x: int) -> int:
            if x < n:
                return x + 1 if x < k else x
            return new_id[x]

        # Phase 1: the forward steps off the path, in forward order. A tensor's core
        # position is its forward position, plus 1 for G (source 0), less 1 when the
        # path tensor (not in the core) sits below it, plus the siblings the forward
        # pass had consumed on the path but the core keeps for later.
        early: list[int] = []
        current = k
        next_id = n
        make = Step
        for t, step in enumerate(steps):
            if t in on_path:
                for i in step.inputs:
                    if i != current:
                        insort(early, i)
                current = step.output
                continue
            inputs = step.inputs
            if len(inputs) == 2:  # the usual pairwise step, without generators
                x0, x1 = inputs
                p0, p1 = self.positions[t]
                c0 = (x0 + (x0 < k)) if x0 < n else new_id[x0]
                c1 = (x1 + (x1 < k)) if x1 < n else new_id[x1]
                # Inputs come in decreasing order of id, so of position: list them
                # increasing, as ssa_to_linear does.
                raw: tuple[int, ...] = (
                    p1 + 1 - (current < x1) + bisect_left(early, x1),
                    p0 + 1 - (current < x0) + bisect_left(early, x0),
                )
                ids: tuple[int, ...] = (c0, c1)
            else:
                raw = tuple(sorted(
                    pos + 1 - (current < x) + bisect_left(early, x)
                    for x, pos in zip(inputs, self.positions[t], strict=True)
                ))
                ids = tuple(core_id(x) for x in inputs)
            core_steps.append(make(
                index=len(core_steps), operands=raw, inputs=ids, output=next_id,
                input_terms=step.input_terms, output_term=step.output_term,
                summed=step.summed, flops=step.flops, output_elements=step.output_elements,
            ))
            new_id[step.output] = next_id
            next_id += 1

        # Phase 2: from the root down, the gradient meets the siblings on the path.
        # Remaining then: the accumulated gradient and the siblings not yet consumed.
        consumed: list[int] = []
        accumulated = 0
        children = [k, *(steps[t].output for t in path[:-1])]
        for depth in range(len(path) - 1, -1, -1):
            node = children[depth]
            down = self.down_step(node, spec if depth == 0 else None)
            sibling_ids = tuple(core_id(x) for x in down.siblings)
            sibling_pos = tuple(
                bisect_left(early, x) - bisect_left(consumed, x) + down.upstream_last
                for x in down.siblings
            )
            remaining = len(early) - len(consumed)
            if down.upstream_last:
                raw = (0, *sorted(sibling_pos))
                inputs = (*sibling_ids, 0)
            else:
                raw = (*sorted(sibling_pos), remaining)
                inputs = (accumulated, *sibling_ids)
            for x in down.siblings:
                insort(consumed, x)
            core_steps.append(Step(
                index=len(core_steps), operands=raw, inputs=inputs, output=next_id,
                input_terms=down.input_terms, output_term=down.output_term,
                summed=down.summed, flops=down.flops,
                output_elements=down.output_elements,
            ))
            accumulated = next_id
            next_id += 1

        labels = "".join(core.size_dict)
        distinct = self._distinct_total - self._distinct[k] + self._output_distinct
        return Plan(
            equation=core,
            optimizer=optimizer,
            path=tuple(step.operands for step in core_steps),
            steps=tuple(core_steps),
            flops=sum(step.flops for step in core_steps),
            naive_flops=count_flops(labels, distinct > len(labels), max(n, 1), self.size_dict),
            largest_intermediate_elements=max(step.output_elements for step in core_steps),
        )
