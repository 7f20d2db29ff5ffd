"""Search strategies on replayed GPU tuning spaces, against Kernel Tuner's own strategies.

For every Kernel Tuner cache file in ../shared/replay/ (spaces brute-forced on an RTX 3090), runs
every tunebench strategy with seeds 0..K-1 (``tunebench.replay.simulate``) and Kernel Tuner's
strategies in its simulation mode on the same file and budget (``tune_kernel(...,
simulation_mode=True, cache=FILE, strategy_options={"max_fevals": N})``, seeded through
``random.seed`` and ``numpy.random.seed``). Both are scored alike: after each trial (a config
evaluated for the first time, as ``max_fevals`` counts them) the fraction ``optimum / recorded
median time of the incumbent``, the incumbent being the config each search itself saw fastest.

Warm start: on each replay file, every model- or population-based tunebench strategy runs cold
and warm, warm data being a noisy partial view of the same space (see ``noisy_view``): there is
no second bucket or device in these files, so this stands in for a related task. With
``--warm RECORDS``, every task of a tunebench records file with enough recorded candidates is
also replayed cold and warm, warm data being the same kernel's other buckets in that file.

Writes docs/strategies.md (the tables, the commands, the machine) and
docs/strategies-convergence.png (median best-so-far fraction against trials, a panel per file).
Kernel Tuner is a benchmark-only dependency (the ``bench`` extra), never a runtime one.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/strategies.py                       # ~20 minutes on 2 cores
    .venv/bin/python bench/strategies.py --warm records/cpu-amd-epyc-2t-b42c66.json
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one search per core: threaded BLAS only thrashes

import argparse
import importlib
import json
import math
import platform
import random
import statistics
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from tunebench.replay import BUDGETS, TARGETS, Replay, convergence, simulate
from tunebench.strategies import MODULES

ROOT = Path(__file__).resolve().parents[1]

REPLAY = ROOT.parent / "shared" / "replay"
#: Kernel Tuner's strategies compared, its best ones included.
KERNEL_TUNER = ("random_sample", "genetic_algorithm", "simulated_annealing", "bayes_opt", "greedy_ils",
                "mls", "pso", "diff_evo", "firefly_algorithm", "dual_annealing", "basinhopping")
#: tunebench strategies that use warm data.
WARMED = ("annealing", "genetic", "bayes")
#: The noisy partial view of a space that stands in for a related task: this share of its
#: configs that ran, each score multiplied by exp(N(0, sigma)).
VIEW_SHARE, VIEW_SIGMA = 0.2, 0.15


def tunebench_trace(job: tuple) -> list[float]:
    path, strategy, budget, seed, warm, select = job
    return simulate(path, strategy, budget, seed, warm=warm, **select)


def kernel_tuner_trace(job: tuple) -> tuple[list[float] | str, list[str]]:
    """Kernel Tuner's search in simulation mode, scored like :func:`simulate` (a string instead
    when it could not run), and the distinct warnings it raised."""
    path, strategy, budget, seed = job
    import kernel_tuner

    data = json.loads(path.read_text())
    names = data["tune_params_keys"]
    recording = Replay(path).recording()
    recorded, optimum = recording.objectives, recording.optimum

    def recorded_config(params):  # the space is what the cache holds
        return tuple(params[n] for n in names) in recorded

    random.seed(seed)
    np.random.seed(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            results, _ = kernel_tuner.tune_kernel(
                data["kernel_name"], "__global__ void replayed() {}", data["problem_size"], [],
                data["tune_params"], restrictions=[recorded_config], cache=str(path), simulation_mode=True,
                strategy=strategy, strategy_options={"max_fevals": budget}, quiet=True, lang="CUDA")
        except Exception as e:  # noqa: BLE001 - a strategy that cannot run is reported, not fatal
            return f"{type(e).__name__}: {e}", []
    said = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:60]}" for w in caught})
    trace, seen, best = [], set(), (math.inf, 0.0)
    for result in results:
        key = tuple(result[n] for n in names)
        if key in seen:
            continue
        seen.add(key)
        if not isinstance(result["time"], str) and result["time"] < best[0]:
            best = (result["time"], optimum / recorded[key])
        trace.append(best[1])
    return trace[:budget], said


def noisy_view(path: Path, seed: int) -> list[tuple[tuple, float]]:
    """Warm data standing in for a related task: a random share of the configs that ran, their
    scores (objective over the best) perturbed multiplicatively, then made relative again."""
    rng = random.Random(f"view:{seed}")
    scores = Replay(path).recording().scores()
    view = rng.sample(scores, max(2, int(VIEW_SHARE * len(scores))))
    noisy = [(k, s * math.exp(rng.gauss(0, VIEW_SIGMA))) for k, s in view]
    best = min(s for _, s in noisy)
    return [(k, s / best) for k, s in noisy]


def related(path: Path, recording) -> list[tuple[tuple, float]]:
    """Warm data from a records file: the same kernel's and dtype's other buckets."""
    warm = []
    for other in Replay(path).recordings:
        same_kernel = (other.kernel, other.dtype) == (recording.kernel, recording.dtype)
        if same_kernel and other.bucket.name != recording.bucket.name:
            for key, score in other.scores():
                config = other.space.config(key)
                if recording.space.contains(config):
                    warm.append((recording.space.key(config), score))
    return warm


def cell(summary: dict, target: float | None = None, at: int | None = None) -> str:
    """A table cell: the median fraction at a budget, or the median trials to a target."""
    if at is not None:
        return f"{summary['fraction_at'][str(at)]:.3f}"
    t = summary["trials_to"][str(target)]
    median = "never" if t["median"] is None else f"{t['median']:g}"
    return f"{median} ({t['reached']})"


def plot(curves: dict, budget: int, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = list(curves)
    fig, axes = plt.subplots(1, len(files), figsize=(7 * len(files), 5.5), squeeze=False)
    for ax, name in zip(axes[0], files):
        ours = [k for k in curves[name] if k[0] == "tunebench"]
        theirs = [k for k in curves[name] if k[0] != "tunebench"]
        colours = {**{k: plt.cm.tab10(i) for i, k in enumerate(ours)},
                   **{k: plt.cm.tab20b((2 * i) % 20 / 20 + 0.025) for i, k in enumerate(theirs)}}
        for (source, strategy), traces in curves[name].items():
            padded = [t + [t[-1]] * (budget - len(t)) if t else [0.0] * budget for t in traces]
            median = np.median(np.array(padded), axis=0)
            ax.plot(range(1, budget + 1), median, label=f"{strategy} ({source})", color=colours[(source, strategy)],
                    lw=2.2 if source == "tunebench" else 1.0, ls="-" if source == "tunebench" else "--")
        ax.set_title(name)
        ax.set_xlabel("trials (configs measured)")
        ax.set_ylabel("median best-so-far fraction of the optimum")
        ax.set_xscale("log")
        ax.set_ylim(0.4, 1.005)
        ax.axhline(0.95, color="grey", lw=0.5)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=25, help="seeds of the headline table (default: 25)")
    p.add_argument("--more-seeds", type=int, default=100,
                   help="seeds of the robustness columns, 0 for none (default: 100)")
    p.add_argument("--budget", type=int, default=200)
    p.add_argument("--files", nargs="*", type=Path, default=sorted(REPLAY.glob("*.json")))
    p.add_argument("--kernel-tuner", nargs="*", default=list(KERNEL_TUNER), metavar="STRATEGY")
    p.add_argument("--warm", type=Path, metavar="RECORDS", help="also replay a records file cold and warm")
    p.add_argument("--out", type=Path, default=ROOT / "docs")
    args = p.parse_args()
    seeds = max(args.seeds, args.more_seeds)
    began = time.perf_counter()
    jobs: dict[tuple, object] = {}
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        for path in args.files:
            for strategy in MODULES:
                for seed in range(seeds):
                    jobs[(path.name, "tunebench", strategy, seed)] = pool.submit(
                        tunebench_trace, (path, strategy, args.budget, seed, (), {}))
            for strategy in args.kernel_tuner:
                for seed in range(seeds):
                    jobs[(path.name, "Kernel Tuner", strategy, seed)] = pool.submit(
                        kernel_tuner_trace, (path, strategy, args.budget, seed))
            for strategy in WARMED:
                for seed in range(args.seeds):
                    jobs[(path.name, "warm", strategy, seed)] = pool.submit(
                        tunebench_trace, (path, strategy, args.budget, seed, noisy_view(path, seed), {}))
        warm_tasks = []
        if args.warm:
            for recording in Replay(args.warm).recordings:
                warm = related(args.warm, recording)
                if len(recording.candidates) < 20 or not warm:
                    continue
                select = {"kernel": recording.kernel, "dtype": recording.dtype, "bucket": recording.bucket.name}
                warm_tasks.append((recording, len({k for k, _ in warm} & set(recording.candidates))))
                for strategy in WARMED:
                    for seed in range(args.seeds):
                        for kind, data in (("cold", ()), ("warm", warm)):
                            jobs[(recording.label(), kind, strategy, seed)] = pool.submit(
                                tunebench_trace, (args.warm, strategy, args.budget, seed, data, select))
        results = {k: f.result() for k, f in jobs.items()}
        print(f"{len(jobs)} searches in {time.perf_counter() - began:.0f} s", flush=True)
    write(args, results, warm_tasks, seeds, time.perf_counter() - began)


def write(args, results: dict, warm_tasks: list, seeds: int, wall: float) -> None:
    budget = args.budget
    rows, curves, headline, notes = [], {}, [], []
    for path in args.files:
        recording = Replay(path).recording()
        curves[path.name], summaries, robust = {}, {}, {}
        for source, strategies in (("tunebench", list(MODULES)), ("Kernel Tuner", args.kernel_tuner)):
            for strategy in strategies:
                traces = [results[(path.name, source, strategy, s)] for s in range(seeds)]
                if source == "Kernel Tuner":
                    said = sorted({w for _, ws in traces for w in ws})
                    traces = [t for t, _ in traces]
                    broken = next((t for t in traces if isinstance(t, str)), None)
                    if broken:
                        notes.append(f"- {strategy} on {path.name} could not run: {broken}")
                        continue
                    length = statistics.median(len(t) for t in traces)
                    if length < budget:
                        notes.append(f"- {strategy} on {path.name} ends on its own after a median of "
                                     f"{length:g} trials (its last fraction is carried on)")
                    if said:
                        notes.append(f"- {strategy} on {path.name} warned: {'; '.join(said)}")
                first, more = convergence(traces[: args.seeds], budget), convergence(traces, budget)
                summaries[(source, strategy)] = {**first, "seeds": args.seeds}
                if args.more_seeds:
                    robust[(source, strategy)] = {**more, "seeds": seeds}
                curves[path.name][(source, strategy)] = traces[: args.seeds]
                columns = [cell(first, at=b) for b in BUDGETS if b <= budget] + [cell(first, target=t) for t in TARGETS]
                if args.more_seeds:
                    columns += [cell(more, target=t) for t in TARGETS]
                rows.append(f"| {path.name} | {strategy} | {source} | " + " | ".join(columns) + " |")
        headline.append(targets(path, recording, summaries, robust))
    args.out.mkdir(exist_ok=True)
    plot(curves, budget, args.out / "strategies-convergence.png")

    warm_rows = [warm_row(path.name, strategy, *([results[(path.name, source, strategy, s)] for s in range(args.seeds)]
                                                 for source in ("tunebench", "warm")), budget)
                 for path in args.files for strategy in WARMED]
    records_rows = [warm_row(f"{r.kernel} {r.bucket.name} ({len(r.candidates)} candidates, {count} warm)", strategy,
                             *([results[(r.label(), kind, strategy, s)] for s in range(args.seeds)]
                               for kind in ("cold", "warm")), budget)
                    for r, count in warm_tasks for strategy in WARMED]
    overall = []  # per strategy: the median over tasks of the median trials to 0.95, cold and warm
    for strategy in WARMED:
        medians = [[convergence([results[(r.label(), kind, strategy, s)] for s in range(args.seeds)], budget)
                    ["trials_to"]["0.95"]["median"] or math.inf for r, _ in warm_tasks] for kind in ("cold", "warm")]
        if warm_tasks:
            overall.append(f"{strategy} {statistics.median(medians[0]):g} / {statistics.median(medians[1]):g}")

    import kernel_tuner

    at = [b for b in BUDGETS if b <= budget]
    head = ["file", "strategy", "by", *(f"@{b}" for b in at), *(f"to {t}" for t in TARGETS)]
    if args.more_seeds:
        head += [f"to {t}, {seeds} seeds" for t in TARGETS]
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?")
    command = "python bench/strategies.py" + (f" --warm {args.warm}" if args.warm else "")
    more = (f"The last columns repeat the trials to 0.95 and 0.99 over seeds 0..{seeds - 1}: over 25 seeds, "
            "a median number of trials is noisy, Kernel Tuner's included.") if args.more_seeds else ""
    described = "\n".join(f"- {importlib.import_module(module).__doc__.splitlines()[0]}"
                          for module in MODULES.values())
    sections = [f"""# Search strategies on replayed tuning spaces

The strategies (`--tune-strategy NAME`; each module's docstring lists its options):

{described}

Every strategy searches spaces that were brute-forced on an NVIDIA RTX 3090 (the Kernel Tuner
cache files in `../shared/replay/`, from the FAIR Benchmark Hub for Auto-Tuning), replayed by
`tunebench.replay`: a trial costs no device time and its samples are drawn from the recorded
runs. Each strategy runs with seeds 0..{args.seeds - 1} and a budget of {budget} trials; Kernel
Tuner's strategies run in its simulation mode on the same files, budget and seeds (seeded through
`random.seed` and `numpy.random.seed`). A trial is a config measured for the first time (as
Kernel Tuner's `max_fevals` counts them); failed configs count. After each trial, the
**fraction of the optimum** is the space's best recorded median time over the recorded median
time of the search's incumbent (the config the search itself saw fastest).

`brute_force` measures in the space's declared order, the same for every seed, so its figures say
where that order happens to put the best configs.

Columns: the median fraction over the seeds after 20, 50, 100 and 200 trials; the median number
of trials to reach 0.95 and 0.99 of the optimum (a seed that never did counts as never; "never"
when half of them never did) with, in brackets, how many seeds reached it. {more}

![convergence](strategies-convergence.png)

| {" | ".join(head)} |
|{"---|" * len(head)}
""" + "\n".join(rows), "## Targets\n\n" + "\n".join(headline),
                "Kernel Tuner, as run here:\n\n" + ("\n".join(notes) or "- every strategy ran to the budget"),
                f"""## Warm start

There is no second bucket or device in these files, so warm data is a noisy partial view of the
same space standing in for a related task: a random {VIEW_SHARE:.0%} of the configs that ran,
each score multiplied by exp(N(0, {VIEW_SIGMA})) (seeded per seed) and made relative to its best,
as (key, objective / best) pairs, the form the session hands a strategy from other buckets or
devices. The warmed strategies measure the best warm configs first; `bayes` also starts its
model from them (with extra noise). This shows what a strategy makes of a good view in its
first trials; a real related task agrees less than this one.

Each cell: cold / warm.

| space | strategy | @1 | @5 | @20 | to 0.95 | to 0.99 |
|---|---|---|---|---|---|---|
""" + "\n".join(warm_rows)]
    if args.warm:
        sections.append(f"""### A tunebench records file

`{args.warm}`: every task with at least 20 recorded candidates and other buckets of the same
kernel in the file, replayed cold and warm from those buckets. A replayed space holds only the
configs recorded on every shape of its bucket, so a space here is what the run that made the
file measured, and only the warm configs also recorded on this bucket can seed it ("N warm").
Budget {budget}, seeds 0..{args.seeds - 1}; each cell: cold / warm.

| task | strategy | @1 | @5 | @20 | to 0.95 | to 0.99 |
|---|---|---|---|---|---|---|
""" + ("\n".join(records_rows) or "| no task qualified | | | | | | |")
                        + (f"\n\nOver the {len(warm_tasks)} tasks, the median of the median trials to 0.95, "
                           "cold / warm: " + ", ".join(overall) + "." if overall else ""))
    sections.append(f"""## How it was made

    .venv/bin/pip install kernel_tuner   # {kernel_tuner.__version__}, a benchmark-only dependency
    .venv/bin/{command}

Machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}.
Wall time of the whole benchmark: {wall / 60:.0f} min.
""")
    text = "\n\n".join(sections)
    (args.out / "strategies.md").write_text(text)
    print(text)


def warm_row(space: str, strategy: str, cold: list, warm: list, budget: int) -> str:
    """One table row: a strategy on one space, cold and warm side by side."""
    cells = []
    for b in (1, 5, 20):
        pair = [statistics.median(t[min(b, len(t)) - 1] for t in traces) for traces in (cold, warm)]
        cells.append(f"{pair[0]:.3f} / {pair[1]:.3f}")
    summaries = convergence(cold, budget), convergence(warm, budget)
    cells += [f"{cell(summaries[0], target=t)} / {cell(summaries[1], target=t)}" for t in TARGETS]
    return f"| {space} | {strategy} | " + " | ".join(cells) + " |"


def targets(path: Path, recording, summaries: dict, more: dict) -> str:
    """The issue's targets on one space: >= 0.97 of the optimum within 100 trials, and at most
    half the trials of Kernel Tuner's best strategy to reach 0.95; the latter also over the
    robustness seeds (``more``) where there are any."""
    ours = [k for k in summaries if k[0] == "tunebench"]
    best_at = max(ours, key=lambda k: (summaries[k]["fraction_at"].get("100", 0.0),
                                       -(summaries[k]["trials_to"]["0.95"]["median"] or math.inf)))
    at100 = summaries[best_at]["fraction_at"].get("100")
    line = f"- **{path.name}** ({len(recording.candidates)} candidates): " + (
        "the budget is below 100 trials." if at100 is None else
        f"best at 100 trials: {best_at[1]}, {at100:.3f} of the optimum "
        f"({'met' if at100 >= 0.97 else 'NOT met'}: >= 0.97).")
    for label, found in (("", summaries), (" (robustness seeds)", more)):
        if not found:
            continue
        def to95(key, found=found):
            return found[key]["trials_to"]["0.95"]["median"]
        fastest = min((k for k in found if k[0] == "tunebench" and to95(k) is not None), key=to95, default=None)
        rival = min((k for k in found if k[0] == "Kernel Tuner" and to95(k) is not None), key=to95, default=None)
        seeds = next(iter(found.values()))["seeds"]
        if fastest is None or rival is None:
            line += f" Trials to 0.95 over {seeds} seeds{label}: not comparable (a side never reached it)."
            continue
        ratio = to95(fastest) / to95(rival)
        line += (f" Trials to 0.95 over {seeds} seeds{label}: {fastest[1]} {to95(fastest):g} against Kernel "
                 f"Tuner's best, {rival[1]}, {to95(rival):g}: {ratio:.2f}x "
                 f"({'met' if ratio <= 0.5 else 'NOT met'}: at most 0.5x).")
    return line


if __name__ == "__main__":
    main()
