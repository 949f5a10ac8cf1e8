"""Analyse tn18-b512 from Python: which planner and which backward strategy to train with."""

from einsum_analyze import analyze

EQUATION = "bc,bd,be,bf,bg,bh,bi,bj,bk,cm,mdn,neo,ofp,pgzq,qhr,ris,sjt,tk->bz"
SHAPES = [(512, 2)] * 9 + [(2, 7)] + [(7, 2, 7)] * 3 + [(7, 2, 10, 7)] + [(7, 2, 7)] * 3 + [(7, 2)]


def main() -> None:
    for optimizer in ("greedy", "dp"):
        report = analyze(EQUATION, SHAPES, optimize=optimizer, dtype="float64")
        plan = report.plan
        print(
            f"{optimizer:>6}: forward {plan.flops:.3e} FLOPs, largest intermediate "
            f"{plan.largest_intermediate_elements} elements, inference peak "
            f"{report.forward_memory.peak_bytes} B"
        )
        for strategy in report.strategies:
            print(
                f"        {strategy.name:<15} backward {strategy.backward_flops:.3e} FLOPs, "
                f"retained {strategy.memory.retained_bytes} B, "
                f"training peak {strategy.memory.peak_bytes} B"
            )
    # Only the nine parameters (operands 9..17) need gradients in training:
    report = analyze(EQUATION, SHAPES, optimize="dp", dtype="float64", grad="9-17")
    reverse = next(s for s in report.strategies if s.name == "reverse")
    print(f"dp, parameters only: reverse retains {reverse.memory.retained_bytes} B")


if __name__ == "__main__":
    main()
