# ruff: noqa  (an offline replay of three H200 runs, kept as it ran)
"""The nominal H200 profile's time model against three suites' measured runs (above 0.2 ms),
with the cold host figures it carried until 2026-12-04 and with the warm ones now, and the
drop-in's choice under each and under this session's calibration.

    PYTHONPATH=$PWD python docs/results/gpu_2026-12-04/replay_nominal.py
"""
import dataclasses, json, statistics
from einsum_analyze.analysis import analyze
from einsum_analyze.backends.calibration import Calibration
from einsum_analyze.roofline.host import HostCosts
from einsum_analyze.roofline.profiles import NOMINAL
from einsum_analyze.roofline.time_model import predict_time
from einsum_analyze.training import choice as ch

COLD = HostCosts(  # GPU_HOST before 2026-12-04
    forward_step_s=1e-6, backward_step_s=1.6e-6, forward_run_s=1.2e-6, backward_run_s=1.2e-4,
    forward_kind_s=8e-6, backward_kind_s=6.5e-5, forward_label_s=2.2e-6, backward_label_s=2.75e-6,
    torch_forward=((2, 6.5e-5), (3, 4.3e-4), (4, 7.7e-4), (6, 2.9e-3), (9, 1.5e-3), (17, 2.8e-3)),
    torch_node_s=1.4e-4, torch_backward_s=2.9e-4,
    torch_backward=((2, 7.9e-4), (4, 9.4e-4), (6, 1.1e-3), (10, 1.5e-3), (16, 2.3e-3), (32, 5e-3)))
warm = NOMINAL["h200"]
cold = dataclasses.replace(warm, host=COLD)
RUNS = ["docs/results/gpu_2026-12-02f/final/timemodel.json",
        "docs/results/gpu_2026-12-02h/s10a/timemodel.json",
        "docs/results/gpu_2026-12-04/s11b/timemodel.json"]
cases = {x["name"]: x for x in json.load(open("benchmarks/cases.json"))["cases"]}
band = lambda v: sum(0.75 <= x <= 1.33 for x in v)
for path in RUNS:
    got = {"cold": [], "warm": []}
    for r in json.load(open(path))["results"]:
        if r["measured_s"] < 2e-4:
            continue
        case = cases[r["case"]]
        rep = analyze(case["equation"], [tuple(s) for s in case["shapes"]], strategies=(r["strategy"],))
        s = rep.strategies[0]
        sizes = s.sizes(rep.equation.size_dict)
        for name, profile in (("cold", cold), ("warm", warm)):
            got[name].append(predict_time(s.events, sizes, 4, profile, "float32").total_s / r["measured_s"])
    print(path, len(got["cold"]), "runs; in band: cold", band(got["cold"]), "warm", band(got["warm"]),
          "; median: cold", round(statistics.median(got["cold"]), 2), "warm", round(statistics.median(got["warm"]), 2))

c = dict(json.load(open(RUNS[-1]))["results"][0]["calibration"][0])
host, kt = c.pop("host"), c.pop("kernel_times")
calibrated = Calibration(**{**c, "bmm_shape": tuple(c["bmm_shape"]),
                            "host": HostCosts(**{k: tuple(tuple(p) for p in v) if isinstance(v, list) else v
                                                 for k, v in host.items()}),
                            "kernel_times": {k: tuple(tuple(p) for p in v) for k, v in kt.items()}}).profile()
every = json.load(open("benchmarks/cases.json"))["cases"] + json.load(open("benchmarks/model_einsums.json"))["cases"]
for case in every:
    shapes = [tuple(s) for s in case["shapes"]]
    picks = []
    for profile in (cold, warm, calibrated):
        r = ch._choose_dropin(case["equation"], shapes, "float32", list(range(len(shapes))), "auto", "auto",
                              ch.NO_BUDGET, profile)
        picks.append("torch.einsum" if r.runs_torch else r.result.name)
    print(f"{case['name']:20} cold {picks[0]:13} warm {picks[1]:13} calibrated {picks[2]}")
