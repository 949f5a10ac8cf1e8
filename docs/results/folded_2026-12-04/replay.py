# ruff: noqa  (an offline replay of three H200 suites' time-model runs, kept as it ran)
"""torch autograd's backward call priced by its product nodes' gradient contractions, the
reductions those nodes make themselves not counted (``StepCost.folded``): the torch-autograd
runs of three H200 suites (above 0.2 ms) predicted on each lease's own calibration and on the
nominal H200 profile, and the drop-in's choice on the 23 cases on the nominal H200 and cpu
profiles and the latest lease's calibration.

    PYTHONPATH=$PWD python docs/results/folded_2026-12-04/replay.py

Run once with the package before the change on PYTHONPATH and once after, side by side.
"""
import json, statistics
from einsum_analyze.analysis import analyze
from einsum_analyze.backends.calibration import Calibration
from einsum_analyze.roofline.host import HostCosts
from einsum_analyze.roofline.profiles import NOMINAL
from einsum_analyze.roofline.time_model import predict_time
from einsum_analyze.training import choice as ch

RUNS = ["docs/results/gpu_2026-12-02f/final/timemodel.json",
        "docs/results/gpu_2026-12-02h/s10a/timemodel.json",
        "docs/results/gpu_2026-12-04/s11b/timemodel.json",
        "docs/results/gpu_2026-12-04/s11d/timemodel.json"]


def calibrated(entry):
    c = dict(entry)
    host, kt = c.pop("host"), c.pop("kernel_times")
    return Calibration(**{**c, "bmm_shape": tuple(c["bmm_shape"]),
                          "host": HostCosts(**{k: tuple(tuple(p) for p in v) if isinstance(v, list) else v
                                               for k, v in host.items()}),
                          "kernel_times": {k: tuple(tuple(p) for p in v) for k, v in kt.items()}}).profile()


cases = {x["name"]: x for x in json.load(open("benchmarks/cases.json"))["cases"]}
band = lambda v: sum(0.75 <= x <= 1.33 for x in v)
for path in RUNS:
    data = json.load(open(path))
    profile = calibrated(data["results"][0]["calibration"][0])
    got = {"calibrated": [], "nominal": []}
    rows = []
    for r in data["results"]:
        if r["measured_s"] < 2e-4 or r["strategy"] != "torch-autograd":
            continue
        case = cases[r["case"]]
        rep = analyze(case["equation"], [tuple(s) for s in case["shapes"]], strategies=(r["strategy"],))
        s = rep.strategies[0]
        sizes = s.sizes(rep.equation.size_dict)
        ratios = []
        for name, prof in (("calibrated", profile), ("nominal", NOMINAL["h200"])):
            ratio = predict_time(s.events, sizes, 4, prof, "float32").total_s / r["measured_s"]
            got[name].append(ratio)
            ratios.append(ratio)
        rows.append(f"  {r['case']:20} measured {r['measured_s'] * 1e3:6.3f} ms  pred/meas calibrated "
                    f"{ratios[0]:.2f} nominal {ratios[1]:.2f}")
    print(f"{path}: {len(rows)} torch-autograd runs; in [0.75, 1.33]: calibrated "
          f"{band(got['calibrated'])}, nominal {band(got['nominal'])}; median calibrated "
          f"{statistics.median(got['calibrated']):.2f}, nominal {statistics.median(got['nominal']):.2f}")
    print("\n".join(rows))

latest = calibrated(json.load(open(RUNS[2]))["results"][0]["calibration"][0])
every = json.load(open("benchmarks/cases.json"))["cases"] + json.load(open("benchmarks/model_einsums.json"))["cases"]
print("drop-in choice (no budget), nominal h200 / nominal cpu / 2026-12-04 s11b calibration:")
for case in every:
    shapes = [tuple(s) for s in case["shapes"]]
    picks = []
    for profile in (NOMINAL["h200"], NOMINAL["cpu"], latest):
        r = ch._choose_dropin(case["equation"], shapes, "float32", list(range(len(shapes))), "auto", "auto",
                              ch.NO_BUDGET, profile)
        picks.append("torch.einsum" if r.runs_torch else r.result.name)
    print(f"  {case['name']:20} {picks[0]:13} {picks[1]:13} {picks[2]}")
