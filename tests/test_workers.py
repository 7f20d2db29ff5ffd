"""The worker process: what it keeps between trials, and which arm of a comparison failed."""

import contextlib
import json
import os
import signal
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import QUIET_CONFTEST
from tests.test_faults import FAULTY_C
from tests.test_plugin import TUNE
from tests.test_records_safety import SLOW_C, SLOW_SUITE
from tunebench import Bucket, Buckets, Kernel, Space, Variant
from tunebench.backends import create
from tunebench.kernel import KernelError
from tunebench.measure import MeasureSettings
from tunebench.dtypes import numpy_dtype
from tunebench.owned import folder as owned_folder
from tunebench.prepared import PREFIX
from tunebench.prepared import keep, kept
from tunebench.records import RecordStore
from tunebench.workers import CompareJob, TrialJob, WorkerError, Workers

DOUBLE_C = """\
typedef TB_DTYPE real;
void double_it(const real *x, real *y, int n)
{
    for (int i = 0; i < n; i += step) for (int j = i; j < i + step && j < n; ++j) y[j] = 2 * x[j];
}
"""


def block_scan_kernel(name: str, tmp_path: Path, reference, args=None) -> Kernel:
    """A block scan (``BLOCK_SCAN_C``, BLOCK 16 or 100) on ``(1000,)``, checked by ``reference``;
    its arguments x (random, of the seeded generator unless ``args`` builds them), y and n."""
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)
    return Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                  args=args or (lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),
                                                           "y": np.empty(shape[0], np.float32),
                                                           "n": np.int32(shape[0])}),
                  reference=reference, outputs=["y"], tolerance={"float32": (1e-5, 1e-4)},
                  cpu=Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": [16, 100]}),
                              heuristic=lambda shape: {"BLOCK": 16}))


def logging_args(built: Path):
    """An args builder of ``y = f(x)`` on ``(n,)`` that writes each shape it builds to ``built``."""
    def args(shape, dtype, rng):
        with built.open("a") as f:
            f.write(f"{shape}\n")
        return {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])}
    return args


def trial_each(workers: Workers, kernel: str, param: str, values: tuple, sizes=(1000, 3000)) -> None:
    """A trial of each of ``param``'s ``values`` on each size in turn, as a session measures a
    bucket's shapes config after config; each ok."""
    for value in values:
        for n in sizes:
            result = workers.trial(TrialJob(kernel, {param: value}, (n,), "float32", MeasureSettings(repeats=3)))
            assert result["status"] == "ok", result


def test_a_buckets_shapes_measured_in_turn_are_each_built_once(tmp_path):
    """Config after config the session measures every shape of a bucket; a GPU shape's arguments
    and float64 reference take seconds, so the worker keeps the latest shapes'."""
    (tmp_path / "double.c").write_text(DOUBLE_C)
    built = tmp_path / "built.txt"
    Kernel("double_it", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,), (3000,)])]),
           args=logging_args(built), reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "double.c"), entry="double_it", space=Space({"step": [1, 2, 4]}),
                       heuristic=lambda shape: {"step": 1}))
    workers = Workers("cpu")
    try:
        trial_each(workers, "double_it", "step", (1, 2, 4))
    finally:
        workers.close()
    assert built.read_text().splitlines() == ["(1000,)", "(3000,)"]


def test_a_trials_reading_of_the_machine_spans_its_last_half_second_not_back_to_the_previous_trial(
        tmp_path, monkeypatch):
    """It spanned back to the previous trial's reading: across a slow args builder or reference,
    a retry's pause or a wait for builds, so that load in them disturbed a measurement made on a
    quiet machine, and load during the measurement was diluted into seconds of quiet."""
    from tunebench.builds import Ahead

    (tmp_path / "double.c").write_text(DOUBLE_C)

    def args(shape, dtype, rng):
        time.sleep(1.5 if shape == (3000,) else 0.0)  # a slow shape's inputs and reference
        return {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])}

    kernel = Kernel("double_read", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,), (3000,)])]),
                    args=args, reference=lambda x, n: 2.0 * x, outputs=["y"],
                    cpu=Variant(source=str(tmp_path / "double.c"), entry="double_it", space=Space({"step": [1, 2]}),
                                heuristic=lambda shape: {"step": 1}))

    def trial(n: int, step: int = 1) -> dict:
        result = workers.trial(TrialJob("double_read", {"step": step}, (n,), "float32", MeasureSettings(repeats=3)))
        assert result["status"] == "ok", result
        return result["conditions"]

    def compiled_slowly(self, *args):
        time.sleep(1.5)
        return real(self, *args)

    workers, real = Workers("cpu"), Ahead._compile
    monkeypatch.setattr(Ahead, "_compile", compiled_slowly)
    try:
        trial(1000)
        spans = {"a slow shape's inputs": trial(3000)["window_s"]}
        workers.pause(1.5)
        spans["a retry's pause"] = trial(1000)["window_s"]
        Ahead("cpu", {}).build(kernel, kernel.variant("cpu"), "float32", [], now={"step": 2}, waiting=workers.mark)
        spans["a wait for builds"] = trial(1000, step=2)["window_s"]
        time.sleep(1.5)  # the run busy elsewhere, reading nothing
        long = workers.trial(TrialJob("double_read", {"step": 1}, (4_000_000,), "float32", MeasureSettings(repeats=1000)))
    finally:
        workers.close()
    assert all(span < 1.2 for span in spans.values()), spans  # half a second, and the readings' steps
    # a measurement longer than that is spanned from its start: load early in its samples counts
    assert long["measure_s"] > 0.7 and long["measure_s"] <= long["conditions"]["window_s"] < long["measure_s"] + 1.0, (
        long["measure_s"], long["conditions"])


def test_a_trial_whose_preparation_outlasts_its_limit_says_so_not_that_a_call_did(tmp_path, monkeypatch):
    """An args builder or a compile hanging for the 900 s of the preparing phase was recorded as a
    call that "ran longer than the 10 s timeout": the user raised --tune-timeout, to no avail."""
    monkeypatch.setattr("tunebench.workers.PREPARE_TIMEOUT_S", 1.0)
    (tmp_path / "double.c").write_text(DOUBLE_C)

    def args(shape, dtype, rng):
        time.sleep(30)  # hangs: the worker is killed long before
        return {}

    Kernel("double_hangs", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=args, reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "double.c"), entry="double_it", space=Space({"step": [1, 2]}),
                       heuristic=lambda shape: {"step": 1}))
    workers = Workers("cpu", timeout=10.0)
    try:
        result = workers.trial(TrialJob("double_hangs", {"step": 1}, (1000,), "float32", MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert result["status"] == "timeout" and result["error"].startswith(
        "preparing the trial (compiling the candidate, building the shape's inputs and reference) ran longer than "
        "1 s"), result



#: A split-K row sum: ``SPLITS`` partial sums of each row in a workspace of ``SPLITS * M`` floats.
SPLITK_C = """\
void splitk(const float *a, float *out, float *work, int M, int K)
{
    int chunk = (K + SPLITS - 1) / SPLITS;
    for (int s = 0; s < SPLITS; ++s)
        for (int m = 0; m < M; ++m) {
            float acc = 0;
            for (int k = s * chunk; k < K && k < (s + 1) * chunk; ++k) acc += a[m * K + k];
            work[s * M + m] = acc;
        }
    for (int m = 0; m < M; ++m) {
        float acc = 0;
        for (int s = 0; s < SPLITS; ++s) acc += work[s * M + m];
        out[m] = acc;
    }
}
"""


def test_an_args_builder_that_takes_the_config_sizes_a_workspace_by_it_once_per_config_and_shape(tmp_path):
    """A split-K kernel's workspace holds ``splits * M`` floats, and the args builder, called as
    ``args(shape, dtype, rng)``, could not size it (its ``config`` parameter was a TypeError).
    Given the config, each config gets its own workspace, in a trial and in each arm of a
    comparison, built once per config and shape; the workspace, scratch, is never compared."""
    (tmp_path / "splitk.c").write_text(SPLITK_C)
    built = tmp_path / "built.txt"

    def args(shape, dtype, rng, config):
        M, K = shape
        if config["SPLITS"] > 4:
            raise MemoryError(f"a workspace of {config['SPLITS']} GiB")
        with built.open("a") as f:
            f.write(f"{config['SPLITS']} {config['SPLITS'] * M}\n")
        return {"a": rng.random((M, K), dtype=np.float32), "out": np.empty(M, np.float32),
                "work": np.empty(config["SPLITS"] * M, np.float32), "M": np.int32(M), "K": np.int32(K)}

    kernel = Kernel("splitk_workspace", buckets=Buckets("MK", [Bucket("all", M=(1, None), K=(1, None),
                                                                      shapes=[(8, 256)])]),
                    args=args, reference=lambda a, M, K, work: a.astype(np.float64).sum(axis=1), outputs=["out"],
                    inplace=["work"], tolerance={"float32": (1e-5, 1e-4)},
                    cpu=Variant(source=str(tmp_path / "splitk.c"), entry="splitk",
                                space=Space({"SPLITS": [1, 4, 64]}), heuristic=lambda shape: {"SPLITS": 1}))
    with pytest.raises(KernelError, match="the args builder takes a config, and none was given"):
        kernel.build_args((8, 256), "float32")
    workers = Workers("cpu")
    try:
        for splits in (1, 4, 1, 4):
            result = workers.trial(TrialJob("splitk_workspace", {"SPLITS": splits}, (8, 256), "float32",
                                            MeasureSettings(repeats=3)))
            assert result["status"] == "ok", result
        arms = (("best", {"SPLITS": 4}, None), ("baseline", {"SPLITS": 1}, None))
        result = workers.trial(CompareJob("splitk_workspace", (8, 256), "float32", arms, 5, MeasureSettings(repeats=3)))
        assert result["status"] == "ok", result
        # a config whose workspace the host cannot hold is that candidate's limit, not the task's error
        result = workers.trial(TrialJob("splitk_workspace", {"SPLITS": 64}, (8, 256), "float32",
                                        MeasureSettings(repeats=3)))
        assert result["status"] == "pruned_resources" and "a workspace of 64 GiB" in result["error"], result
        arms = (("best", {"SPLITS": 64}, None), ("baseline", {"SPLITS": 1}, None))
        result = workers.trial(CompareJob("splitk_workspace", (8, 256), "float32", arms, 5, MeasureSettings(repeats=3)))
        assert result["status"] == "pruned_resources" and result["arm"] == "best", result
    finally:
        workers.close()
    assert built.read_text().splitlines() == ["1 8", "4 32"]


#: A scan within blocks of ``BLOCK`` elements: its output's size is the shape's, its values the config's.
BLOCK_SCAN_C = """\
void block_scan(const float *x, float *y, int n)
{
    for (int i = 0; i < n; ++i) y[i] = (i % BLOCK ? y[i - 1] : 0) + x[i];
}
"""


def block_scan(x, config):
    """BLOCK_SCAN_C's right output: a running sum within each block of BLOCK elements."""
    blocks = np.split(x.astype(np.float64), range(config["BLOCK"], len(x), config["BLOCK"]))
    return np.concatenate([np.cumsum(b) for b in blocks])


def logged_block_scan(log, said):
    """:func:`block_scan` as a reference that writes ``said(config)`` to ``log`` at each call."""
    def reference(x, config):
        with log.open("a") as f:
            f.write(f"{said(config)}\n")
        return block_scan(x, config)
    return reference


def test_a_reference_that_takes_the_config_is_given_each_configs_in_trials_arms_and_kept_shapes(tmp_path,
                                                                                                monkeypatch):
    """A kernel whose right answer depends on the config (Kernel Tuner's verify= for one partial
    sum per block) had no reference: given only the inputs, it could not know the blocks. Given the
    config, each config's reference is its own, never the shape's served to another config: in one
    worker, in each arm of a comparison, and read back by a fresh worker from the run's kept shapes,
    though the args builder, which does not take the config, gives the same arguments to each."""
    monkeypatch.setattr("tunebench.workers.SLOW_S", 0.0)  # every shape is kept (forked: the worker sees it)
    given = tmp_path / "given.txt"
    block_scan_kernel("block_scan", tmp_path, logged_block_scan(given, lambda config: config["BLOCK"]))
    workers = Workers("cpu")
    try:
        for block in (16, 100, 16):
            result = workers.trial(TrialJob("block_scan", {"BLOCK": block}, (1000,), "float32",
                                            MeasureSettings(repeats=3)))
            assert result["status"] == "ok", result
        arms = (("best", {"BLOCK": 100}, None), ("baseline", {"BLOCK": 16}, None))
        for _ in range(2):
            workers.restart()
            result = workers.trial(CompareJob("block_scan", (1000,), "float32", arms, 5, MeasureSettings(repeats=3)))
            assert result["status"] == "ok", result
    finally:
        workers.close()
    assert given.read_text().splitlines() == ["16", "100"]


@pytest.mark.usefixtures("quiet_verdicts")
def test_an_arm_built_into_anothers_machine_code_is_not_measured_and_one_arm_left_is_measured_alone(tmp_path):
    """The gate's recorded build of the best, its template edited since in a comment alone, is
    today's machine code: measured against it, it gave a ratio of noise alone. The worker leaves
    it out and measures the other arms; where one is left, every process measures it (the gate
    keeps its time). A recorded build of other code is measured."""
    from tunebench.compare import compare

    kernel = block_scan_kernel("block_scan_same_code", tmp_path, block_scan)
    template = kernel.variant("cpu").template
    commented = {"text": "/* the scan as tuned */\n" + template}
    other = {"text": template.replace("{\n", "{\n    volatile int unread = 1;\n", 1)}
    best, baseline = ("best", {"BLOCK": 100}, None), ("baseline", {"BLOCK": 16}, None)
    workers = Workers("cpu")
    try:
        def compared(*arms):
            return compare(workers, "block_scan_same_code", (1000,), "float32", arms, 2, drop_same=("recorded", "best"))

        alone = compared(best, ("recorded", {"BLOCK": 100}, commented))
        beside = compared(best, baseline, ("recorded", {"BLOCK": 100}, commented))
        measured = compared(best, baseline, ("recorded", {"BLOCK": 100}, other))
    finally:
        workers.close()
    assert (alone.same_code, alone.labels) == (("recorded", "best"), ("best",))
    assert [set(o) for o in alone.objectives] == [{"best"}] * 2
    assert (beside.same_code, beside.labels) == (("recorded", "best"), ("best", "baseline"))
    assert [set(o) for o in beside.objectives] == [{"best", "baseline"}] * 2
    assert (measured.same_code, [set(o) for o in measured.objectives]) == (None, [{"best", "baseline", "recorded"}] * 2)


def test_a_reference_that_alone_takes_the_config_is_run_on_the_shapes_arguments_built_once(tmp_path, monkeypatch):
    """Only the reference taking the config, the args builder's inputs were built again for every
    config (on a GPU, hundreds of MB and seconds a trial), and configs were not verified on the
    same inputs. They are built once per shape, in trials and a comparison's arms, and read back
    by a fresh worker; the reference is run on them once per config and shape."""
    monkeypatch.setattr("tunebench.workers.SLOW_S", 0.0)  # every shape is kept (forked: the worker sees it)
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)
    built, given = tmp_path / "built.txt", tmp_path / "given.txt"
    Kernel("block_scan_once", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,), (3000,)])]),
           args=logging_args(built), reference=logged_block_scan(given, lambda config: config["BLOCK"]), outputs=["y"],
           tolerance={"float32": (1e-5, 1e-4)},
           cpu=Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": [16, 100, 256]}),
                       heuristic=lambda shape: {"BLOCK": 16}))
    workers = Workers("cpu")
    try:
        trial_each(workers, "block_scan_once", "BLOCK", (16, 100, 256))
        arms = (("best", {"BLOCK": 256}, None), ("baseline", {"BLOCK": 16}, None))
        for _ in range(2):
            result = workers.trial(CompareJob("block_scan_once", (3000,), "float32", arms, 5,
                                              MeasureSettings(repeats=3)))
            assert result["status"] == "ok", result
            workers.restart()
    finally:
        workers.close()
    assert built.read_text().splitlines() == ["(1000,)", "(3000,)"]
    assert given.read_text().splitlines() == ["16", "16", "100", "100", "256", "256"]


def test_a_shapes_reference_outputs_per_config_are_held_for_the_latest_configs_alone(tmp_path, monkeypatch):
    """Each config's outputs on the shape's one set of arguments, never another config's; a tune
    of hundreds of configs holds the latest few, not every config's, and beyond the memory share
    the config's own alone."""
    from collections import OrderedDict
    from types import SimpleNamespace

    import tunebench.workers
    from tunebench.workers import _prepare
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)
    calls = []

    def args(shape, dtype, rng):
        calls.append(shape)
        return {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], np.float32),
                "n": np.int32(shape[0])}

    blocks = [16, 32, 64, 100, 128, 256, 512]
    Kernel("block_scan_held", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=args, reference=block_scan, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": blocks}),
                       heuristic=lambda shape: {"BLOCK": 16}))
    held = (OrderedDict(), tmp_path / "kept")
    found = {block: _prepare(SimpleNamespace(name="cpu"), "block_scan_held", (1000,), "float32", held,
                             {"BLOCK": block})[2:] for block in blocks}
    (x,) = {id(a["x"]): a["x"] for a, _ in found.values()}.values()  # one set of arguments for every config
    for block, (_, (reference,)) in found.items():
        np.testing.assert_array_equal(reference, block_scan(x, {"BLOCK": block}))
    assert calls == [(1000,)] and len(held[0]) == 1
    (references,) = [entry.references for entry in held[0].values()]
    assert [dict(own)["BLOCK"] for own in references] == blocks[-tunebench.workers.PREPARED_CONFIGS:]
    monkeypatch.setattr("tunebench.workers.PREPARED_MEMORY_SHARE", 0.0)
    _prepare(SimpleNamespace(name="cpu"), "block_scan_held", (1000,), "float32", held, {"BLOCK": 16})
    assert [dict(own) for own in references] == [{"BLOCK": 16}] and calls == [(1000,)]


def test_a_reference_given_the_config_gets_todays_names_and_its_args_builders_memory_error_is_the_tasks(tmp_path):
    """The gate's recorded arm builds the recorded template with the names it was tuned with beside
    today's (a param renamed since): a reference spreading the config failed on them. An args
    builder that takes no config ran out of memory: every config was pruned as beyond the device,
    though none of them was at fault. ``reference(**config)`` takes every input, not the config."""
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)
    given = tmp_path / "given.txt"
    reference = logged_block_scan(given, sorted)

    def args(shape, dtype, rng):
        if shape[0] > 2000:
            raise MemoryError("no room for the inputs")
        return {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], np.float32),
                "n": np.int32(shape[0])}

    kernel = Kernel("block_scan_named", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                    args=args, reference=reference, outputs=["y"], tolerance={"float32": (1e-5, 1e-4)},
                    cpu=Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": [16, 100]}),
                                heuristic=lambda shape: {"BLOCK": 16}))
    assert kernel.declaration(kernel.variant("cpu"), "float32")["reference"].endswith(" (given the config)")
    workers = Workers("cpu")
    try:
        arms = (("best", {"BLOCK": 100}, None), ("recorded", {"BLOCK": 100, "TILE": 100}, None))
        result = workers.trial(CompareJob("block_scan_named", (1000,), "float32", arms, 3, MeasureSettings(repeats=3)))
        assert result["status"] == "ok", result
        with pytest.raises(KernelError, match=r"the args builder raised MemoryError: no room for the inputs "
                                              r"\(shape \(3000,\), float32\)"):
            workers.trial(TrialJob("block_scan_named", {"BLOCK": 16}, (3000,), "float32", MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert set(given.read_text().splitlines()) == {"['BLOCK']"}
    for spread in (lambda **config: sum(config.values()), lambda x, config, /: x):
        assert not Kernel("spread", buckets=kernel.buckets, args=args, reference=spread, outputs=["y"],
                          cpu=kernel.variant("cpu")).reference_per_config


def test_an_args_builder_or_reference_out_of_memory_beside_others_held_is_built_again_without_them(tmp_path):
    """An args builder that takes no config, out of memory beside another shape's arguments held,
    failed the task instead of trying again alone; a reference given the config, out of memory
    beside the shape's other configs' outputs held, pruned its config. Each is built once more
    with nothing else held (the shape's arguments apart, which the reference is run on).
    A reference(x, config=None) given none before, then the config, is another declaration even
    where its records hashed it by bytecode."""
    from collections import OrderedDict
    from types import SimpleNamespace

    from tunebench.kernel import bytecode_hash
    from tunebench.workers import _prepare
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)
    calls, referenced = [], []

    def args(shape, dtype, rng):
        calls.append(shape)
        if len(calls) == 2:  # the second shape's, beside the first's held
            raise MemoryError("no room beside the others")
        return {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], np.float32),
                "n": np.int32(shape[0])}

    def reference(x, config=None):
        referenced.append(config["BLOCK"])
        if referenced == [16, 100]:  # the second config's, beside the first's held
            raise MemoryError("no room beside the others")
        return block_scan(x, config)

    kernel = Kernel("block_scan_memory", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
                    args=args, reference=reference, outputs=["y"],
                    cpu=Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": [16, 100]}),
                                heuristic=lambda shape: {"BLOCK": 16}))
    held = (OrderedDict(), tmp_path / "kept")
    for block in (16, 100):
        _prepare(SimpleNamespace(name="cpu"), "block_scan_memory", (1000,), "float32", held, {"BLOCK": block})
    (references,) = [entry.references for entry in held[0].values()]
    assert referenced == [16, 100, 100] and [dict(own) for own in references] == [{"BLOCK": 100}]
    _prepare(SimpleNamespace(name="cpu"), "block_scan_memory", (2000,), "float32", held, {"BLOCK": 100})
    assert calls == [(1000,), (2000,), (2000,)] and [key[1] for key in held[0]] == [(2000,)]
    variant = kernel.variant("cpu")
    assert kernel.declaration(variant, "float32", {"reference": bytecode_hash(reference)})["reference"] != \
        bytecode_hash(reference)
    given = bytecode_hash(reference) + " (given the config)"
    assert kernel.declaration(variant, "float32", {"reference": given})["reference"] == given


def test_what_ran_out_of_memory_is_freed_before_it_is_built_again_alone(tmp_path):
    """Built once more alone inside the except block, the failed attempt's arguments and the
    reference's copies of them stayed alive through the traceback, beside the retry: "alone"
    freed nothing of its own. A shape's reference and a config's, each out of memory once."""
    import weakref
    from collections import OrderedDict
    from types import SimpleNamespace

    from tunebench.workers import _prepare
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)
    built, given, alive = [], [], []

    def args(shape, dtype, rng):
        x = rng.random(shape[0], dtype=np.float32)
        built.append(weakref.ref(x))
        return {"x": x, "y": np.empty(shape[0], np.float32), "n": np.int32(shape[0])}

    def given_once_too_many(x):  # the second call is out of memory; the third, its retry, notes what is alive
        given.append(weakref.ref(x))
        if len(given) == 2:
            raise MemoryError("no room beside the others")
        if len(given) == 3:
            alive.append([ref() is not None for ref in (*built[1:-1], given[1])])

    def per_shape(x):
        given_once_too_many(x)
        return x.astype(np.float64)

    def per_config(x, config):
        given_once_too_many(x)
        return block_scan(x, config)

    variant = Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": [16, 100]}),
                      heuristic=lambda shape: {"BLOCK": 16})
    buckets = Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,), (2000,)])])
    Kernel("scan_freed_per_shape", buckets=buckets, args=args, reference=per_shape, outputs=["y"], cpu=variant)
    Kernel("scan_freed_per_config", buckets=buckets, args=args, reference=per_config, outputs=["y"], cpu=variant)
    held = (OrderedDict(), tmp_path / "kept")
    for n in (1000, 2000):  # the second shape's reference fails, its arguments built once more
        _prepare(SimpleNamespace(name="cpu"), "scan_freed_per_shape", (n,), "float32", held, {"BLOCK": 16})
    built.clear()
    given.clear()
    for block in (16, 100):  # the second config's reference fails, on the one set of arguments
        _prepare(SimpleNamespace(name="cpu"), "scan_freed_per_config", (1000,), "float32", held, {"BLOCK": block})
    assert alive == [[False, False], [False]]


def test_a_configs_kept_reference_outputs_are_served_only_on_the_arguments_they_were_computed_on(tmp_path,
                                                                                                 monkeypatch):
    """Where only the reference takes the config, the shape's arguments and each config's outputs
    are kept apart: an args builder's fast inputs were not kept, a slow reference's outputs were,
    and a fresh worker (the final round's, the gate's) checked a correct config against outputs
    computed on other inputs: an args builder drawing from numpy's own generators (a Kernel Tuner
    script's np.random.randn) gives others at each build. The disk's clean-up may remove the
    arguments' file and leave the outputs' (then a later worker keeps other arguments)."""
    from tunebench.prepared import _path
    monkeypatch.setattr("tunebench.workers.SLOW_S", 0.2)  # forked: the worker sees it

    def reference(x, config):
        time.sleep(0.3)  # over SLOW_S: kept for the next worker
        return block_scan(x, config)

    block_scan_kernel("block_scan_unseeded", tmp_path, reference,
                      args=lambda shape, dtype, rng: {"x": np.random.default_rng().random(shape[0], dtype=np.float32),
                                                      "y": np.empty(shape[0], np.float32), "n": np.int32(shape[0])})
    workers = Workers("cpu")
    try:
        for block, fresh in ((16, False), (16, True), (100, True)):
            if fresh:
                workers.restart()
            result = workers.trial(TrialJob("block_scan_unseeded", {"BLOCK": block}, (1000,), "float32",
                                            MeasureSettings(repeats=3)))
            assert result["status"] == "ok", (block, result)
            if block == 16 and fresh:  # the least recently used: config 16's outputs stay
                _path(workers.inputs, "block_scan_unseeded", (1000,), "float32", None).unlink()
        workers.restart()
        arms = (("best", {"BLOCK": 100}, None), ("baseline", {"BLOCK": 16}, None))
        result = workers.trial(CompareJob("block_scan_unseeded", (1000,), "float32", arms, 5,
                                          MeasureSettings(repeats=3)))
        assert result["status"] == "ok", result
    finally:
        workers.close()


def test_a_shapes_slow_arguments_are_kept_alone_and_age_on_disk_with_the_configs_outputs_kept_on_them(tmp_path,
                                                                                                      monkeypatch):
    """A slow args builder's seconds were counted again with every config's reference: each
    config's outputs were written, a 2 ms reference's too, and the clean-up then removed the
    arguments' file first (the worker holding them never reads it again), so that the outputs
    kept on it served no fresh worker. Slow alone, they are kept alone, and a config's outputs
    where its reference took long; their file is marked used as outputs kept on it are written or
    served; outputs kept on other arguments are neither read nor marked used. Read back, the
    arguments weigh with a config's reference as they did where built (0 s, they did not)."""
    from collections import OrderedDict
    from types import SimpleNamespace

    from tunebench.prepared import _path
    from tunebench.records import config_key
    from tunebench.workers import _prepare
    now, took, referenced = [0.0], {"args": 2.0, "reference": 0.002}, []  # on the worker's clock; SLOW_S is 1
    monkeypatch.setattr("tunebench.workers.time", SimpleNamespace(perf_counter=lambda: now[0]))
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)

    def args(shape, dtype, rng):
        now[0] += took["args"]
        return {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], np.float32),
                "n": np.int32(shape[0])}

    def reference(x, config):
        now[0] += took["reference"]
        referenced.append(config["BLOCK"])
        return block_scan(x, config)

    Kernel("block_scan_aged", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,), (2000,)])]),
           args=args, reference=reference, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": [16, 100, 256, 512]}),
                       heuristic=lambda shape: {"BLOCK": 16}))
    folder = tmp_path / "kept"
    folder.mkdir()

    def path(n, block=None):
        return _path(folder, "block_scan_aged", (n,), "float32", block and config_key({"BLOCK": block}))

    def prepared(held, n, block):
        return _prepare(SimpleNamespace(name="cpu"), "block_scan_aged", (n,), "float32", (held, folder),
                        {"BLOCK": block})[2:]

    held = OrderedDict()
    for block in (16, 100, 256):
        prepared(held, 1000, block)
    assert sorted(folder.glob("*.npz")) == [path(1000)]  # the arguments alone, no 2 ms reference's outputs
    (shape,) = held.values()
    took["reference"] = 2.0
    for block in (512, 512):  # written, then served from disk, the arguments held
        shape.references.clear()
        os.utime(path(1000), (1, 1))
        prepared(held, 1000, block)
        assert path(1000).stat().st_mtime > 1, block
    keep(folder, "block_scan_aged", (1000,), "float32", {}, [np.zeros(1000)], config=config_key({"BLOCK": 100}),
         on="other arguments")
    os.utime(path(1000, 100), (1, 1))
    took["reference"] = 0.002
    shape.references.clear()
    x = prepared(held, 1000, 100)[0]["x"]
    np.testing.assert_array_equal(prepared(held, 1000, 100)[1][0], block_scan(x, {"BLOCK": 100}))
    assert referenced == [16, 100, 256, 512, 100] and path(1000, 100).stat().st_mtime == 1
    took.update(args=0.6, reference=0.6)  # each under SLOW_S, over it together
    prepared(held, 2000, 16)
    prepared(OrderedDict(), 2000, 100)  # a fresh worker's: the arguments read back
    assert path(2000).exists() and path(2000, 16).exists() and path(2000, 100).exists()


def test_a_shapes_arguments_and_a_configs_reference_slow_together_are_kept_for_fresh_workers(tmp_path,
                                                                                             monkeypatch):
    """Kept apart, the shape's arguments and a config's reference outputs were each timed alone
    against SLOW_S, where they were timed together before: each just under it, a fresh worker of
    the final round built both again (a comparison of two configs took 2 s instead of 0.1). Slow
    together, they are kept together, and a fresh worker builds neither."""
    monkeypatch.setattr("tunebench.workers.SLOW_S", 0.5)  # forked: the worker sees it
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)
    built = tmp_path / "built.txt"

    def args(shape, dtype, rng):
        with built.open("a") as f:
            f.write("args\n")
        time.sleep(0.1)  # well under SLOW_S, even on a busy runner, and over it with the reference's
        return {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], np.float32),
                "n": np.int32(shape[0])}

    def reference(x, config):
        with built.open("a") as f:
            f.write(f"{config['BLOCK']}\n")
        time.sleep(0.42)
        return block_scan(x, config)

    Kernel("block_scan_slow", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=args, reference=reference, outputs=["y"], tolerance={"float32": (1e-5, 1e-4)},
           cpu=Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": [16, 100]}),
                       heuristic=lambda shape: {"BLOCK": 16}))
    workers = Workers("cpu")
    try:
        for block in (16, 100):
            result = workers.trial(TrialJob("block_scan_slow", {"BLOCK": block}, (1000,), "float32",
                                            MeasureSettings(repeats=3)))
            assert result["status"] == "ok", result
        workers.restart()
        arms = (("best", {"BLOCK": 100}, None), ("baseline", {"BLOCK": 16}, None))
        result = workers.trial(CompareJob("block_scan_slow", (1000,), "float32", arms, 5, MeasureSettings(repeats=3)))
        assert result["status"] == "ok", result
    finally:
        workers.close()
    assert built.read_text().splitlines() == ["args", "16", "100"]


def test_a_reference_that_writes_into_its_inputs_writes_into_its_own_copy(tmp_path):
    """Every config of a shape is verified on one set of arguments: a reference that wrote into
    them (``x *= 2``) changed the next config's inputs, and failed it though it was right; the
    kernel, too, ran on inputs the reference had changed (a softmax's ``x -= x.max()``). It is
    given copies of its own, as it is an inout output's values."""
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)

    def halved(x, config):  # its own x, halved: the kernel's is not, so every config is off
        x *= 0.5
        return block_scan(x, config)

    def scanned(x, config):
        x *= 2  # written, and then not read
        return block_scan(x / 2, config)

    args = lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32),  # noqa: E731
                                      "y": np.ones(shape[0], np.float32), "n": np.int32(shape[0])}
    variant = Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": [16, 100]}),
                      heuristic=lambda shape: {"BLOCK": 16})
    buckets = Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])])
    declared = [Kernel(name, buckets=buckets, args=args, reference=reference, outputs=["y"],
                       tolerance={"float32": (1e-5, 1e-4)}, cpu=variant)
                for name, reference in (("block_scan_halves", halved), ("block_scan_doubles", scanned))]
    workers = Workers("cpu")
    try:
        settings = MeasureSettings(repeats=3)
        statuses = [workers.trial(TrialJob(name, {"BLOCK": block}, (1000,), "float32", settings))["status"]
                    for name in ("block_scan_halves", "block_scan_doubles") for block in (16, 100, 16)]
    finally:
        workers.close()
    assert statuses == ["wrong_result"] * 3 + ["ok"] * 3

    def softmax(x):
        x -= x.max()
        return np.exp(x) / np.exp(x).sum()

    def accumulated(x, y):
        y += x
        return y

    given = declared[1].build_args((8,), "float32")
    held = {name: value.copy() for name, value in given.items()}
    shifted = Kernel("softmax_shifts", buckets=buckets, args=args, reference=softmax, outputs=["y"], cpu=variant)
    np.testing.assert_allclose(shifted.expected(given)[0], np.exp(held["x"]) / np.exp(held["x"]).sum(), rtol=1e-6)
    accumulating = Kernel("accumulated", buckets=buckets, args=args, reference=accumulated, outputs=["y"],
                          inout=["y"], cpu=variant)
    np.testing.assert_array_equal(accumulating.expected(given)[0], 1 + held["x"])
    for name, value in held.items():
        np.testing.assert_array_equal(given[name], value)


def test_a_reference_returning_a_view_holds_no_more_than_its_outputs(tmp_path):
    """A reference returning a view of its copy of an input (a strided gather's
    ``x.reshape(n, 4)[:, 0]``), or of a larger array of its own, kept the whole of it alive while
    the worker held the outputs for its latest configs, and the memory share counted the view
    alone (100 MB held of 400 kB counted). Outputs are the reference's own arrays, as given back."""
    import weakref
    (tmp_path / "scan.c").write_text(BLOCK_SCAN_C)
    copies = []

    def gathered(x):
        copies.append(weakref.ref(x))
        return x.reshape(-1, 4)[:, 0]

    def padded(x):
        return np.concatenate([x[::4], np.zeros(len(x))])[:len(x) // 4]

    args = lambda shape, dtype, rng: {"x": rng.random(4 * shape[0], dtype=np.float32),  # noqa: E731
                                      "y": np.empty(shape[0], np.float32), "n": np.int32(shape[0])}
    variant = Variant(source=str(tmp_path / "scan.c"), entry="block_scan", space=Space({"BLOCK": [16]}),
                      heuristic=lambda shape: {"BLOCK": 16})
    buckets = Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])])
    for name, reference in (("gather_views", gathered), ("gather_pads", padded)):
        kernel = Kernel(name, buckets=buckets, args=args, reference=reference, outputs=["y"], cpu=variant)
        given = kernel.build_args((1000,), "float32")
        (outputs,) = kernel.expected(given)
        np.testing.assert_array_equal(outputs, given["x"][::4])
        assert outputs.base is None or outputs.base.nbytes == outputs.nbytes
    assert copies[0]() is None


def test_a_slow_shapes_arguments_are_built_once_a_run_and_fresh_workers_read_them_back(tmp_path, monkeypatch):
    """The final round and the gate measure in fresh workers: each built a GPU shape's inputs and
    float64 reference again (3 to 10 s a process on an H200), and the round of one bucket took over
    a minute. Arrays, a scalar and the argument order come back as built; the run's folder goes
    with it."""
    monkeypatch.setattr("tunebench.workers.SLOW_S", 0.0)  # every shape is slow (forked: the worker sees it)
    (tmp_path / "double.c").write_text(DOUBLE_C.replace("2 * x[j]", "2 * (TB_DTYPE)w[j]").replace(
        "const real *x,", "const real *x, const unsigned short *w,"))
    built = tmp_path / "built.txt"

    def args(shape, dtype, rng):
        with built.open("a") as f:
            f.write(f"{shape}\n")
        x = rng.random(shape[0], dtype=np.float32)
        w = (x * 1000).astype(np.uint16)
        return {"x": x, "w": w, "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])}

    Kernel("double_kept", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=args, reference=lambda x, w, n: 2.0 * w, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "double.c"), entry="double_it", space=Space({"step": [1, 2]}),
                       heuristic=lambda shape: {"step": 1}))
    workers = Workers("cpu")
    try:
        result = workers.trial(TrialJob("double_kept", {"step": 1}, (1000,), "float32", MeasureSettings(repeats=3)))
        assert result["status"] == "ok", result
        arms = (("a", {"step": 1}, None), ("b", {"step": 2}, None))
        for _ in range(3):
            workers.restart()
            result = workers.trial(CompareJob("double_kept", (1000,), "float32", arms, 5, MeasureSettings(repeats=3)))
            assert result["status"] == "ok", result
        folder = workers.inputs
        (kept_args, reference, _, _), = [kept(folder, "double_kept", (1000,), "float32")]
    finally:
        workers.close()
    assert built.read_text().splitlines() == ["(1000,)"]
    assert list(kept_args) == ["x", "w", "y", "n"] and kept_args["w"].dtype == np.uint16
    assert type(kept_args["n"]) is np.int32 and kept_args["n"] == 1000
    assert np.array_equal(reference[0], 2.0 * kept_args["w"])
    assert not folder.exists()


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e5m2", "float8_e4m3fn", "complex64", "bool"])
def test_kept_arguments_come_back_with_their_dtypes_and_scalar_types(tmp_path, dtype):
    """numpy saves ml_dtypes' floats as raw bytes, and float8_e5m2 (a '<f1' to numpy) it could
    not read back: every later worker crashed on it."""
    values = np.arange(4, dtype=np.float32).astype(numpy_dtype(dtype))
    keep(tmp_path, "k", (4,), dtype, {"x": values, "s": values[1], "n": np.int32(4)}, [values])
    args, (reference,), _, _ = kept(tmp_path, "k", (4,), dtype)
    assert list(args) == ["x", "s", "n"] and args["x"].dtype == values.dtype and np.array_equal(args["x"], values)
    assert type(args["s"]) is type(values[1]) and args["s"] == values[1] and type(args["n"]) is np.int32
    assert reference.dtype == values.dtype and np.array_equal(reference, values)


def test_what_would_not_come_back_as_given_is_not_kept_and_an_unused_output_is_kept_as_its_shape(tmp_path):
    """Two files would be two arrays; a strided or read-only array would come back contiguous and
    writable (a strided one is refused by the target, and must stay so); a record's fields and
    another byte order have no dtype name. An output no call reads costs no disk."""
    x = np.ones(8, np.float32)
    frozen = np.ones(8, np.float32)
    frozen.flags.writeable = False
    for name, given in {"inplace": {"x": x, "y": x}, "strided": {"x": x[::2]}, "frozen": {"x": frozen},
                        "records": {"x": np.zeros(2, [("a", "f4"), ("b", "i4")])},
                        "swapped": {"x": x.astype(">f4")}}.items():
        keep(tmp_path, name, (8,), "float32", given, [x])
        assert kept(tmp_path, name, (8,), "float32") is None, name
    keep(tmp_path, "plain", (8,), "float32", {"x": x, "y": np.zeros((2, 4), np.float16)}, [x], blank=("y",))
    args, _, _, _ = kept(tmp_path, "plain", (8,), "float32")
    assert args["y"].shape == (2, 4) and args["y"].dtype == np.float16 and args["y"].flags.writeable
    assert kept(tmp_path, "plain", (8,), "float16") is None


def test_kept_shapes_are_bounded_by_disk_space_and_the_least_recently_used_goes_first(tmp_path, monkeypatch):
    """A bucket of six shapes taken in turn was built again in every process under a bound of four
    files; the bound is a share of the temp folder's free space now, for the run's folders together
    (one per device of a cluster), checked before a file is written: a file over it is not kept
    (the compilers write to the same disk, and a full one stops the task)."""
    run = [tmp_path / "tunebench-inputs-123-a", tmp_path / "tunebench-inputs-123-b"]
    other = tmp_path / "tunebench-inputs-456-a"
    for folder in (*run, other):
        folder.mkdir()
    x = np.ones(1000, np.float32)
    for n in range(6):
        keep(run[n % 2], "k", (n,), "float32", {"x": x}, [x])
    keep(other, "k", (0,), "float32", {"x": x}, [x])
    assert all(kept(run[n % 2], "k", (n,), "float32") is not None for n in range(6))
    size = next(run[0].glob("*.npz")).stat().st_size
    monkeypatch.setattr("tunebench.prepared.DISK_SHARE", 2.5 * size / shutil.disk_usage(tmp_path).free)
    os.utime(next(run[1].glob("*.npz")), (0, 0))  # read long ago: the first to go
    keep(run[0], "k", (6,), "float32", {"x": x}, [x])
    assert len([f for d in run for f in d.glob("*.npz")]) == 2 and kept(run[0], "k", (6,), "float32") is not None
    assert kept(other, "k", (0,), "float32") is not None  # another run's
    keep(run[1], "big", (1,), "float32", {"x": np.ones(10_000, np.float32)}, [x])
    assert kept(run[1], "big", (1,), "float32") is None and len([f for d in run for f in d.glob("*")]) == 2


def test_a_kept_file_that_cannot_be_read_is_built_again_not_a_crash(tmp_path):
    keep(tmp_path, "k", (8,), "float32", {"x": np.ones(8, np.float32)}, [np.ones(8)])
    (path,) = tmp_path.glob("*.npz")
    path.write_bytes(path.read_bytes()[:100])
    assert kept(tmp_path, "k", (8,), "float32") is None and not path.exists()


def _faulty_kernel(folder, name: str, n: int, params: dict) -> None:
    """A kernel over FAULTY_C on one shape of ``n`` elements, declared as ``name``."""
    (folder / "faulty.c").write_text(FAULTY_C)
    Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(n,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                           "n": np.int32(shape[0])},
           reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(folder / "faulty.c"), entry="faulty", heuristic=lambda shape: {"passes": 1, "fault": 0},
                       space=Space(params)))


@pytest.mark.parametrize("fault, status", [(2, "timeout"), (1, "crashed")])
def test_a_comparison_whose_arm_hangs_or_crashes_names_that_arm(tmp_path, fault, status):
    """The gate says which config hung or crashed, though the worker was killed mid-job."""
    _faulty_kernel(tmp_path, "faulty_arms", 1000, {"passes": [1], "fault": [0, 1, 2]})
    workers = Workers("cpu", timeout=1.0)
    try:
        arms = (("best", {"passes": 1, "fault": 0}, None), ("baseline", {"passes": 1, "fault": fault}, None))
        result = workers.trial(CompareJob("faulty_arms", (1000,), "float32", arms, 5, MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert (result["status"], result["arm"]) == (status, "baseline"), result


class Interrupted(BaseException):
    """What pytest-timeout raises in a test that outlives its limit (pytest's Failed)."""


def test_a_trial_interrupted_while_its_worker_measures_leaves_no_answer_for_the_next(tmp_path):
    """The interrupted job's answer stayed in the pipe and was read as the next job's: a slow
    config's time recorded under a fast one's name, and reused by every later run."""
    _faulty_kernel(tmp_path, "faulty_interrupted", 200000, {"passes": [1, 20000], "fault": [0, 3]})
    workers = Workers("cpu", timeout=60.0)

    def interrupt(*_):
        raise Interrupted()

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.alarm(2)  # a slow config: seconds a call
        with pytest.raises(Interrupted):
            workers.trial(TrialJob("faulty_interrupted", {"passes": 20000, "fault": 0}, (200000,), "float32",
                                   MeasureSettings(repeats=3)))
        result = workers.trial(TrialJob("faulty_interrupted", {"passes": 1, "fault": 3}, (200000,), "float32",
                                        MeasureSettings(repeats=3)))
        assert result["status"] == "wrong_result", result
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        workers.close()


#: One process's trials of a faulty config, then of a good one, printed: the candidate writes into
#: descriptors 3..63, which reach the worker's pipe only in a process with few open (not pytest's).
PIPE_SCRIPT = """
import json, pathlib, sys, time
import tunebench.workers
from tests.test_workers import _faulty_kernel
from tunebench.measure import MeasureSettings
from tunebench.workers import TrialJob, Workers
tunebench.workers.RECEIVE_S = 1.0
fault = int(sys.argv[2])
_faulty_kernel(pathlib.Path(sys.argv[1]), "faulty_pipe", 1000, {"passes": [1], "fault": [0, fault]})
workers = Workers("cpu", timeout=5.0)
began = time.monotonic()
written = workers.trial(TrialJob("faulty_pipe", {"passes": 1, "fault": fault}, (1000,), "float32", MeasureSettings(repeats=3)))
spent = time.monotonic() - began
after = workers.trial(TrialJob("faulty_pipe", {"passes": 1, "fault": 0}, (1000,), "float32", MeasureSettings(repeats=3)))
workers.close()
print(json.dumps([written["status"], written["error"], spent, after["status"]]))
"""


@pytest.mark.parametrize("fault", [13, 15, 16])
def test_bytes_a_candidate_writes_into_the_pipe_cost_that_trial_alone(tmp_path, fault):
    """Text reads as a length over the limit; four zero bytes as a message of none, which had
    passed for the worker's death and waited on it for good; a float as a length that no
    message follows, which had waited past every timeout."""
    run = subprocess.run([sys.executable, "-c", PIPE_SCRIPT, str(tmp_path), str(fault)], capture_output=True,
                         text=True, timeout=120, cwd=Path(__file__).parent.parent)
    assert run.returncode == 0, run.stderr[-3000:]
    status, error, spent, after = json.loads(run.stdout.splitlines()[-1])
    assert status == "crashed" and "its pipe to tunebench" in error and spent < 30, (status, error, spent)
    assert after == "ok"


def test_a_worker_that_died_between_jobs_is_replaced_for_the_next(tmp_path):
    """Its pipe was broken when the job was sent: the task failed with a BrokenPipeError."""
    _faulty_kernel(tmp_path, "faulty_between", 1000, {"passes": [1], "fault": [0]})
    job = TrialJob("faulty_between", {"passes": 1, "fault": 0}, (1000,), "float32", MeasureSettings(repeats=3))
    workers = Workers("cpu", timeout=5.0)
    try:
        assert workers.trial(job)["status"] == "ok"
        dead = workers._process
        os.killpg(dead.pid, signal.SIGKILL)
        while dead.is_alive():
            time.sleep(0.01)
        looks_alive = iter([True])  # it died after trial() last looked (the OOM killer, say)
        dead.is_alive = lambda: next(looks_alive, False)
        assert workers.trial(job)["status"] == "ok"
    finally:
        workers.close()


def test_a_worker_that_died_waiting_to_load_its_build_is_a_crashed_trial(tmp_path):
    """It waits for the parent's word to load once its trial is marked; killed then (the OOM
    killer, say), the word raised BrokenPipeError past the trial."""
    _faulty_kernel(tmp_path, "faulty_waiting", 1000, {"passes": [1], "fault": [0]})
    job = TrialJob("faulty_waiting", {"passes": 1, "fault": 0}, (1000,), "float32", MeasureSettings(repeats=3))

    def killed():
        os.killpg(workers._process.pid, signal.SIGKILL)
        workers._process.join()

    workers = Workers("cpu", timeout=5.0, loading=killed)
    try:
        result = workers.trial(job)
    finally:
        workers.close()
    assert result["status"] == "crashed" and "the worker was killed by SIGKILL" in result["error"], result


@contextlib.contextmanager
def killing_workers(kills: int, how: signal.Signals = signal.SIGTERM):
    """Within the block, a thread kills from outside each of the next ``kills`` workers of this
    process (its children that lead a process group: a worker's sentinel does not) half a second
    after it appears, in its job, as a scheduler or a user's ``kill`` does; the pids it killed."""
    killed, done = [], threading.Event()

    def kill():
        while len(killed) < kills and not done.is_set():
            for pid in map(int, Path(f"/proc/self/task/{os.getpid()}/children").read_text().split()):
                with contextlib.suppress(ProcessLookupError):
                    if pid not in killed and os.getpgid(pid) == pid and not done.wait(0.5):
                        os.kill(pid, how)
                        killed.append(pid)
            time.sleep(0.01)

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    try:
        yield killed
    finally:
        done.set()
        killer.join()


def slow_kernel(tmp_path: Path, name: str) -> None:
    """A kernel over SLOW_C whose every call sleeps 100 ms, on one shape."""
    (tmp_path / "slow.c").write_text(SLOW_C)
    Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                           "n": np.int32(shape[0])},
           reference=lambda x, n: x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "slow.c"), entry="slow", heuristic=lambda shape: {"pause": 50, "tag": 0},
                       space=Space({"pause": [50], "tag": [0]})))


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_worker_killed_from_outside_is_no_crash_of_its_candidate(tmp_path, how):
    """A worker killed by a scheduler or a user's kill was recorded as its candidate's crash: the
    config was broken for good, and a heuristic's no competitor. Killed once, the job is run again
    in a fresh worker; killed again, nothing is left to record: the task stops, saying so."""
    slow_kernel(tmp_path, "slow_killed")
    job = TrialJob("slow_killed", {"pause": 50, "tag": 0}, (1000,), "float32", MeasureSettings(repeats=3))
    workers = Workers("cpu", timeout=30.0)
    try:
        with killing_workers(1, how) as killed:
            assert workers.trial(job)["status"] == "ok" and len(killed) == 1
        with killing_workers(2, how), pytest.raises(
                WorkerError, match=f"kernel 'slow_killed': the worker measuring \\[pause:50 tag:0\\] on \\(1000,\\) was "
                                   f"killed by {how.name} 2 times in a row, by something outside .* or by the "
                                   f"candidate itself"):
            workers.trial(job)
    finally:
        workers.close()


def test_a_worker_killed_by_sigint_is_a_crash_of_its_candidate(tmp_path):
    """The worker ignores SIGINT, so nothing outside kills it so: a candidate that stops ignoring
    it and raises it was run again, and stopped its task as a kill from outside would have."""
    (tmp_path / "interrupt.c").write_text("#include <signal.h>\ntypedef TB_DTYPE real;\n"
                                          "void interrupt(const real *x, real *y, int n) { signal(SIGINT, SIG_DFL); "
                                          "raise(SIGINT); }\n")
    Kernel("interrupting", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                           "n": np.int32(shape[0])},
           reference=lambda x, n: x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "interrupt.c"), entry="interrupt", heuristic=lambda shape: {"v": 0},
                       space=Space({"v": [0]})))
    workers = Workers("cpu", timeout=30.0)
    try:
        result = workers.trial(TrialJob("interrupting", {"v": 0}, (1000,), "float32", MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert result["status"] == "crashed" and result["error"].startswith("the worker was killed by SIGINT"), result


def test_a_worker_killed_from_outside_as_it_starts_is_started_again_and_named_with_its_job(tmp_path, monkeypatch):
    """Killed while starting (a CUDA context takes seconds to create), a worker was not started
    again: one such kill stopped the task with "the worker was killed by SIGTERM", naming neither
    the kernel nor the config, nor saying that the same command resumes it."""
    slow_kernel(tmp_path, "slow_starting")
    # the worker, forked, sees it: it starts for a second, and is killed meanwhile
    monkeypatch.setattr("tunebench.workers.create", lambda target: (time.sleep(1.0), create(target))[1])
    job = TrialJob("slow_starting", {"pause": 50, "tag": 0}, (1000,), "float32", MeasureSettings(repeats=3))
    workers = Workers("cpu", timeout=30.0)
    try:
        with killing_workers(1) as killed:
            assert workers.trial(job)["status"] == "ok" and len(killed) == 1
        workers.restart()
        with killing_workers(2), pytest.raises(
                WorkerError, match="kernel 'slow_starting': the worker measuring \\[pause:50 tag:0\\] on \\(1000,\\) "
                                   "was killed by SIGTERM 2 times in a row.* resumes it"):
            workers.trial(job)
    finally:
        workers.close()


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_worker_killed_from_outside_is_no_crash_of_its_candidate_whatever_handler_pytest_has(tmp_path, how):
    """The worker is forked from pytest with its Python handlers: where a conftest's or a plugin's
    handler raised, the kill was an exception in the worker (it exited with status 1), recorded as
    its candidate's crash."""
    slow_kernel(tmp_path, "slow_handled")
    job = TrialJob("slow_handled", {"pause": 50, "tag": 0}, (1000,), "float32", MeasureSettings(repeats=3))

    def handler(signum, frame):
        sys.exit(128 + signum)

    old = signal.signal(how, handler)
    workers = Workers("cpu", timeout=30.0)
    try:
        with killing_workers(1, how) as killed:
            result = workers.trial(job)
    finally:
        workers.close()
        signal.signal(how, old)
    assert result["status"] == "ok" and len(killed) == 1, result


@pytest.mark.usefixtures("quiet_verdicts")
def test_a_tune_whose_worker_is_killed_from_outside_records_nothing_of_its_config_and_resumes_it(pytester):
    """Killed twice at the heuristic's trial, the worker's task stops with one line saying so, and
    records nothing: the same command measures the heuristic again (recorded crashed, it was no
    competitor for good, and the gate never measured it)."""
    pytester.path.joinpath("slow.c").write_text(SLOW_C)
    pytester.path.joinpath("test_slow.py").write_text(textwrap.dedent(SLOW_SUITE).replace('"pause": 1,', '"pause": 50,')
                                                      .replace('"pause": [1, 2], "tag": range(10)', '"pause": [50], "tag": [0]'))
    with killing_workers(2):
        killed = pytester.runpytest("test_slow.py", *TUNE, "--tune-timeout", "30")
    killed.stdout.fnmatch_lines(["kernel 'slow': the worker measuring [[]pause:50 tag:0[]] on (1000,) was killed by "
                                 "SIGTERM 2 times in a row, by something outside *the same command resumes it*"])
    killed.assert_outcomes(failed=1, skipped=1)  # the heuristic's item, and its config's: not run
    assert not list(pytester.path.joinpath("records").glob("*.json"))
    pytester.runpytest("test_slow.py", *TUNE).assert_outcomes(passed=2)
    (path,) = pytester.path.joinpath("records").glob("*.json")
    assert [t["status"] for t in RecordStore(path).trials(baseline=True)] == ["ok"]


def test_a_candidate_waiting_for_all_its_children_and_a_suite_reading_its_open_files_work(tmp_path):
    """The worker's sentinel was its child, so `while (wait(NULL) > 0);` waited for it until the
    timeout; and the worker closed every descriptor it inherited, the suite's own open files
    among them (a table opened at import read as a bad file descriptor)."""
    table = tmp_path / "table.bin"
    np.arange(1000, dtype=np.float32).tofile(table)
    opened = table.open("rb")  # as a suite opens a file at import and reads it lazily
    (tmp_path / "faulty.c").write_text(FAULTY_C)

    def args(shape, dtype, rng):
        opened.seek(0)
        return {"x": np.frombuffer(opened.read(), np.float32)[:shape[0]].copy(), "y": np.empty(shape[0], dtype),
                "n": np.int32(shape[0])}

    Kernel("faulty_waiting", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=args, reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "faulty.c"), entry="faulty", heuristic=lambda shape: {"passes": 1, "fault": 0},
                       space=Space({"passes": [1], "fault": [0, 17]})))
    workers = Workers("cpu", timeout=5.0)
    try:
        result = workers.trial(TrialJob("faulty_waiting", {"passes": 1, "fault": 17}, (1000,), "float32",
                                        MeasureSettings(repeats=3)))
        assert result["status"] == "ok", result
    finally:
        workers.close()
        opened.close()


def test_closed_workers_leave_no_open_file():
    """A run's end closes the worker's log too: pytest 8 shows an unclosed file as a
    ResourceWarning in every tune's output, and a host serving many tunes would leak one each."""
    workers = Workers("cpu")
    log = workers._log
    workers.restart()  # a restart keeps the log: the next worker writes into it
    assert not log.closed
    workers.close()
    assert log.closed


def _one_trial(kernel: str) -> dict:
    """The result of one trial of a kernel's config ``step: 1`` on its shape (1000,), in a worker of its own."""
    workers = Workers("cpu")
    try:
        return workers.trial(TrialJob(kernel, {"step": 1}, (1000,), "float32", MeasureSettings(repeats=3)))
    finally:
        workers.close()


def test_a_scalar_output_through_a_pointer_may_be_a_0_d_array(tmp_path):
    """``np.empty((), np.int64)`` for a ``long long *`` out: its poison fills its bytes as any
    output's. Before, every config ended crashed, the error tunebench's own, under both patterns."""
    (tmp_path / "count.c").write_text("void count(const float *x, long long *hits, int n)\n"
                                      "{ long long c = 0; for (int i = 0; i < n; i += step) c += x[i] > 0.5f;"
                                      " *hits = c; }\n")

    def args(shape, dtype, rng):
        return {"x": rng.random(shape[0], dtype=np.float32), "hits": np.empty((), np.int64), "n": np.int32(shape[0])}

    Kernel("count_0d", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]), args=args,
           reference=lambda x, n: np.int64((x > 0.5).sum()), outputs=["hits"],
           cpu=Variant(source=str(tmp_path / "count.c"), entry="count", space=Space({"step": [1]}),
                       heuristic=lambda shape: {"step": 1}))
    assert _one_trial("count_0d")["status"] == "ok"


ALIAS_C = """\
void scale(const float *x, float *y, int n)
{   /* an in-place call has its own path, as a library's often has; the other is planted wrong */
    for (int i = 0; i < n; ++i) y[i] = x == y ? 2 * y[i] : -1;
}
"""


def _alias_kernel(folder, name: str, **declared) -> Kernel:
    (folder / "scale.c").write_text(ALIAS_C)

    def args(shape, dtype, rng):
        x = rng.random(shape[0], dtype=np.float32)
        return {"x": x, "y": x, "n": np.int32(shape[0])}

    return Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]), args=args,
                  reference=lambda x, y, n: 2.0 * x, outputs=["y"], **declared,
                  cpu=Variant(source=str(folder / "scale.c"), entry="scale", space=Space({"step": [1]}),
                              heuristic=lambda shape: {"step": 1}))


def test_one_array_given_for_two_arguments_is_one_buffer_as_in_the_callers_call(tmp_path):
    """``f(x, x)``, a framework's in-place call: each argument given a copy of its own, the kernel
    ran its out-of-place path, which was tuned and recorded with no word."""
    _alias_kernel(tmp_path, "scale_aliased", inout=["y"])
    result = _one_trial("scale_aliased")
    assert result["status"] == "ok", result


def test_an_output_given_as_an_input_array_must_be_inout(tmp_path):
    kernel = _alias_kernel(tmp_path, "scale_unsaid")
    with pytest.raises(KernelError, match=r"kernel 'scale_unsaid': arguments 'x' and 'y' are one array, which the "
                                          r"kernel writes as output 'y': for an in-place call declare inout=\['y'\], "
                                          r".*; else give 'y' an array of its own \(np.empty_like\)"):
        kernel.build_args((1000,), "float32")


def test_arguments_that_overlap_without_being_one_array_are_refused(tmp_path):
    kernel = _alias_kernel(tmp_path, "scale_shifted", inout=["y"])
    kernel.args = lambda shape, dtype, rng: (lambda b: {"x": b[:-1], "y": b[1:], "n": np.int32(shape[0])})(
        np.zeros(shape[0] + 1, np.float32))
    with pytest.raises(KernelError, match=r"arguments 'x' and 'y' overlap without being one array .*, and the "
                                          r"kernel writes 'y'"):
        kernel.build_args((1000,), "float32")


def test_inputs_that_overlap_and_are_only_read_are_copied_each_as_before(tmp_path):
    """A Gram matrix's ``{"a": a, "b": a.T}``: neither is written, so each gets its copy."""
    kernel = _alias_kernel(tmp_path, "scale_read_twice")
    kernel.args = lambda shape, dtype, rng: (lambda a: {"x": a, "xt": a.T, "y": np.empty(shape[0], np.float32),
                                                        "n": np.int32(shape[0])})(np.zeros((4, 4), np.float32))
    assert kernel.aliases(kernel.build_args((1000,), "float32")) == {}


CACHING_C = """\
void cached(const float *x, float *y, int n)
{   /* a legacy shortcut: the result for these buffers is already there */
    static const float *last;
    if (skip && x == last) return;
    last = x;
    for (int i = 0; i < n; ++i) y[i] = 2 * x[i];
}
"""


def test_a_candidate_that_skips_its_work_when_called_again_is_a_wrong_result_not_the_best(tmp_path):
    """It was right on the one verifying call, then timed doing nothing: recorded 816x faster
    than its heuristic, confirmed by the final round, served to frameworks."""
    (tmp_path / "cached.c").write_text(CACHING_C)
    Kernel("cached", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(20000,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                           "n": np.int32(shape[0])},
           reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "cached.c"), entry="cached", space=Space({"skip": [0, 1]}),
                       heuristic=lambda shape: {"skip": 0}))
    workers = Workers("cpu")
    try:
        trials = {skip: workers.trial(TrialJob("cached", {"skip": skip}, (20000,), "float32", MeasureSettings()))
                  for skip in (0, 1)}
        arms = (("best", {"skip": 1}, None), ("baseline", {"skip": 0}, None))
        compared = workers.trial(CompareJob("cached", (20000,), "float32", arms, 5, MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert trials[0]["status"] == "ok", trials[0]
    assert trials[1]["status"] == "wrong_result" and "samples" not in trials[1], trials[1]
    assert "after its timed calls" in trials[1]["error"]
    assert (compared["status"], compared["arm"]) == ("wrong_result", "best"), compared


LEAKY_C = """\
#include <omp.h>
void leaky(const float *x, float *y, int n)
{   /* settings of the whole process, as a library may make them */
    omp_set_num_threads(omp_get_num_procs() + 3);
    omp_set_dynamic(1);
#pragma omp parallel for
    for (int i = 0; i < n; ++i) y[i] = 2 * x[i];
}
"""

#: Denormal products, which flush-to-zero makes 0; and the OpenMP settings, each as the process began.
VICTIM_C = """\
#include <omp.h>
void victim(const float *x, float *y, int n)
{
    int own = omp_get_max_threads() <= omp_get_num_procs() && !omp_get_dynamic();
#pragma omp parallel for
    for (int i = 0; i < n; ++i) y[i] = own ? x[i] * 1e-30f : -1;
}
"""


def test_process_wide_state_a_candidate_sets_is_not_inherited_by_the_kernels_measured_after_it(tmp_path,
                                                                                                monkeypatch):
    """A library built with -ffast-math flushes denormals to zero for the whole process once
    loaded, and omp_set_num_threads holds for every later kernel: a kernel measured after
    either in one worker was recorded wrong (every config) or on the wrong thread count."""
    monkeypatch.delenv("OMP_DYNAMIC", raising=False)
    (tmp_path / "leaky.c").write_text(LEAKY_C)
    (tmp_path / "victim.c").write_text(VICTIM_C)

    def args(shape, dtype, rng):
        return {"x": (rng.random(shape[0]) * 1e-9 + 1e-10).astype(np.float32), "y": np.empty(shape[0], dtype),
                "n": np.int32(shape[0])}

    buckets = Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])])
    Kernel("leaky", buckets=buckets, args=args, reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "leaky.c"), entry="leaky", space=Space({"u": [1]}),
                       heuristic=lambda shape: {"u": 1}, flags=("-ffast-math", "-fopenmp")))
    Kernel("victim", buckets=buckets, args=args, outputs=["y"], tolerance={"float32": (1e-3, 0.0)},
           reference=lambda x, n: x.astype(np.float64) * np.float64(np.float32(1e-30)),
           cpu=Variant(source=str(tmp_path / "victim.c"), entry="victim", space=Space({"u": [1]}),
                       heuristic=lambda shape: {"u": 1}, flags=("-fopenmp",)))
    workers = Workers("cpu")
    try:
        job = TrialJob("victim", {"u": 1}, (1000,), "float32", MeasureSettings(repeats=3))
        alone = workers.trial(job)
        assert workers.trial(TrialJob("leaky", {"u": 1}, (1000,), "float32", MeasureSettings(repeats=3)))["status"] == "ok"
        after = workers.trial(job)
        arms = (("leaky", {"u": 1}, None),)
        assert workers.trial(CompareJob("leaky", (1000,), "float32", arms, 5, MeasureSettings(repeats=3)))["status"] == "ok"
        after_comparison = workers.trial(job)
    finally:
        workers.close()
    assert alone["status"] == "ok", alone
    assert after["status"] == "ok", after
    assert after_comparison["status"] == "ok", after_comparison


@pytest.mark.parametrize("body, said", [
    ("__builtin_trap();", "killed by SIGILL: an illegal instruction: a trap the code sets"),
    ("volatile int zero = 0; volatile int r = n / zero; y[0] = r;", "killed by SIGFPE: an integer division by zero"),
])
def test_a_candidate_killed_by_an_illegal_instruction_or_a_division_by_zero_is_told_what_it_means(tmp_path, body, said):
    """A bare "killed by SIGILL" left a user of -mavx512fp16 on an AMD EPYC guessing."""
    (tmp_path / "dies.c").write_text(f"void dies(const float *x, float *y, int n) {{ {body} }}\n")
    Kernel("dies", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                           "n": np.int32(shape[0])},
           reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "dies.c"), entry="dies", space=Space({"step": [1]}),
                       heuristic=lambda shape: {"step": 1}))
    result = _one_trial("dies")
    assert result["status"] == "crashed" and said in result["error"], result


#: Whether every thread of its team computes with flush-to-zero: 1 where each does, as a
#: -ffast-math build's own threads do in a process of their own; ``want`` picks which is right.
FTZ_C = """\
#include <xmmintrin.h>
void ftz(const float *x, float *y, int n)
{
#pragma omp parallel for schedule(static, 1)
    for (int i = 0; i < n; ++i) y[i] = (float)((_mm_getcsr() >> 15) & 1) + 0 * x[i];
}
"""


def _ftz_kernel(folder, name: str, fast: bool) -> None:
    (folder / f"{name}.c").write_text(FTZ_C)
    Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(64,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                           "n": np.int32(shape[0])},
           reference=lambda x, n: np.full(x.shape, float(fast)), outputs=["y"],
           cpu=Variant(source=str(folder / f"{name}.c"), entry="ftz", space=Space({"u": [1]}),
                       heuristic=lambda shape: {"u": 1}, flags=("-fopenmp", *(("-ffast-math",) if fast else ()))))


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="reads the x86 MXCSR register")
def test_every_thread_of_a_kernels_team_computes_in_its_own_builds_floating_point_state(tmp_path, monkeypatch):
    """The calling thread's state was set, not the OpenMP pool's: a pool made by a -ffast-math
    kernel flushed the next kernel's denormals on every thread but the first (500 of 1000 values
    wrong), and a pool made before a -ffast-math kernel left half of it without."""
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    _ftz_kernel(tmp_path, "ftz_fast", fast=True)
    _ftz_kernel(tmp_path, "ftz_plain", fast=False)
    workers = Workers("cpu")
    try:
        results = [(name, workers.trial(TrialJob(name, {"u": 1}, (64,), "float32", MeasureSettings(repeats=3))))
                   for name in ("ftz_plain", "ftz_fast", "ftz_plain", "ftz_fast")]
    finally:
        workers.close()
    assert [(name, r["status"]) for name, r in results] == [(name, "ok") for name, _ in results], results


SERIAL_FAST_C = "void tiny(const float *x, float *y, int n) { for (int i = 0; i < n; ++i) y[i] = x[i] * 1e-30f; }\n"


def test_a_reference_is_computed_in_the_workers_own_floating_point_state(tmp_path):
    """Left in the state of the kernel called last, a -ffast-math one's, numpy computed the next
    kernel's reference with denormals flushed, and rejected a correct kernel."""
    for name, flags in (("tiny_fast", ("-ffast-math",)), ("tiny_exact", ())):
        (tmp_path / f"{name}.c").write_text(SERIAL_FAST_C)
        Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
               args=lambda shape, dtype, rng: {"x": (rng.random(shape[0]) * 1e-9 + 1e-10).astype(np.float32),
                                               "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])},
               reference=lambda x, n: x * np.float32(1e-30), outputs=["y"], tolerance={"float32": (1e-3, 0.0)},
               cpu=Variant(source=str(tmp_path / f"{name}.c"), entry="tiny", space=Space({"u": [1]}),
                           heuristic=lambda shape: {"u": 1}, flags=flags))
    workers = Workers("cpu")
    try:
        workers.trial(TrialJob("tiny_fast", {"u": 1}, (1000,), "float32", MeasureSettings(repeats=3)))
        exact = workers.trial(TrialJob("tiny_exact", {"u": 1}, (1000,), "float32", MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert exact["status"] == "ok", exact


CTOR_C = """\
#include <omp.h>
__attribute__((constructor)) static void one_thread(void) { omp_set_num_threads(1); }
void ctor(const float *x, float *y, int n) { for (int i = 0; i < n; ++i) y[i] = x[i]; }
"""

TEAM_C = """\
#include <omp.h>
void team(const float *x, float *y, int n)
{
#pragma omp parallel for
    for (int i = 0; i < n; ++i) y[i] = omp_get_num_threads() + 0 * x[i];
}
"""


def test_openmp_settings_a_librarys_initialiser_makes_are_not_the_workers_own(tmp_path, monkeypatch):
    """Taken as the runtime's own when first seen, after a constructor set one thread: every
    later kernel of the worker ran on one thread."""
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    for name, source in (("ctor", CTOR_C), ("team", TEAM_C)):
        (tmp_path / f"{name}.c").write_text(source)
        Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(64,)])]),
               args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                               "n": np.int32(shape[0])},
               reference=(lambda x, n: x) if name == "ctor" else (lambda x, n: np.full(x.shape, 3.0)), outputs=["y"],
               cpu=Variant(source=str(tmp_path / f"{name}.c"), entry=name, space=Space({"u": [1]}),
                           heuristic=lambda shape: {"u": 1}, flags=("-fopenmp",)))
    workers = Workers("cpu")
    try:
        workers.trial(TrialJob("ctor", {"u": 1}, (64,), "float32", MeasureSettings(repeats=3)))
        team = workers.trial(TrialJob("team", {"u": 1}, (64,), "float32", MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert team["status"] == "ok", team


def test_a_worker_forked_from_a_process_whose_openmp_pool_ran_measures_as_before(tmp_path):
    """A worker forked after the parent ran a parallel region (a framework's torch, an in-process
    kernel) held the parent's pool without its threads: setting a build's floating-point state on
    it, and any OpenMP candidate's first region, waited for them for ever (a full test run hung,
    then timed every OpenMP kernel out). The parent lets its pools go before it forks."""
    import ctypes

    (tmp_path / "team.c").write_text("#include <omp.h>\nvolatile int seen;\n"
                                     "void team(void) {\n#pragma omp parallel\n{ seen += omp_get_thread_num(); }\n}\n")
    subprocess.run(["gcc", "-O2", "-fopenmp", "-shared", "-fPIC", "-o", tmp_path / "team.so", tmp_path / "team.c"],
                   check=True)
    ctypes.CDLL(str(tmp_path / "team.so")).team()  # the pool is up, in this process
    (tmp_path / "double.c").write_text(DOUBLE_C.replace("    for (int i = 0;", "#pragma omp parallel for\n    for (int i = 0;"))
    Kernel("double_forked", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                           "n": np.int32(shape[0])},
           reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "double.c"), entry="double_it", space=Space({"step": [1]}),
                       heuristic=lambda shape: {"step": 1}, flags=("-ffast-math",)))  # a state of its own to set
    workers = Workers("cpu", timeout=5.0)

    def stuck(*_):
        raise TimeoutError("the worker's trial did not return")

    previous = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(60)
    try:
        result = workers.trial(TrialJob("double_forked", {"step": 1}, (1000,), "float32", MeasureSettings(repeats=3)))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        workers.close()
    assert result["status"] == "ok", result


@pytest.mark.parametrize("cc", ["gcc", "clang-19"])  # GCC's OpenMP runtime, LLVM's
def test_a_serial_kernels_calls_wake_no_openmp_pool_in_any_job(tmp_path, monkeypatch, cc):
    """In a worker whose process held an OpenMP runtime (a framework's torch), the first call of
    each job after the first ran a parallel region to set the pool's floating-point state, and a
    -ffast-math build's every job: a serial kernel's trial had a pool thread spinning into its
    timed span, recorded as run on 2 threads (CI, a 1 ms axpb under OMP_NUM_THREADS=2)."""
    import ctypes

    from tunebench.backends.process_state import ProcessState, _threads, release_pools

    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    (tmp_path / "team.c").write_text("#include <omp.h>\nvolatile int seen;\n"
                                     "void team(void) {\n#pragma omp parallel\n{ seen += omp_get_thread_num(); }\n}\n")
    (tmp_path / "serial.c").write_text("void serial(void) {}\n")
    for name, flags in (("team", ["-fopenmp"]), ("plain", []), ("fast", ["-ffast-math"])):
        subprocess.run([cc, "-O2", *flags, "-shared", "-fPIC", "-o", tmp_path / f"{name}.so",
                        tmp_path / ("team.c" if name == "team" else "serial.c")], check=True)
    ctypes.CDLL(str(tmp_path / "team.so")).team()  # the runtime is in this process, its pool up
    release_pools()  # as Workers does before it forks
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the worker: one thread, the runtime loaded
        said = []
        try:
            state = ProcessState()
            for job in range(3):
                for build in ("plain", "fast"):  # each a job of its own, as a trial is
                    _, env = state.load(build, lambda: ctypes.CDLL(str(tmp_path / f"{build}.so")))
                    before = _threads()
                    state.enter(env)  # its call
                    said += [f"job {job}, {build}: {len(_threads() - before)} thread(s) started"] * (
                        _threads() != before)
                    state.leave()
                    state.left()  # the job's end: the pool is let go
        except BaseException as e:  # noqa: BLE001 - said to the test, in its process
            said.append(repr(e))
        finally:
            os.write(write, "; ".join(said).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        said = f.read()
    assert os.waitpid(child, 0)[1] == 0 and said == "", said


def test_a_compiler_killed_by_a_file_size_limit_stops_the_task_and_records_nothing(tmp_path, monkeypatch):
    """Under ``ulimit -f`` gcc died of SIGXFSZ, and the worker answered a crashed (or a compile
    error) trial, recorded for the config and reused once the limit was lifted."""
    import resource

    monkeypatch.setenv("TUNEBENCH_CACHE", str(tmp_path / "cache"))
    _faulty_kernel(tmp_path, "faulty_limited", 1000, {"passes": [1], "fault": [0]})
    job = TrialJob("faulty_limited", {"passes": 1, "fault": 0}, (1000,), "float32", MeasureSettings(repeats=3))
    workers = Workers("cpu", timeout=5.0)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, limit[1]))  # the worker, forked now, and gcc inherit it
        try:
            with pytest.raises(KernelError, match=r"File size limit exceeded signal terminated program .*the machine "
                                                  r"or its limits stopped it"):
                workers.trial(job)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, limit)
        workers.restart()
        assert workers.trial(job)["status"] == "ok"
    finally:
        workers.close()


#: A helper forked once that leaves the worker's group and session and forks again, as a daemon does:
#: its child, orphaned, says its pid before the call returns.
DAEMON_C = """\
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
void daemonise(const float *x, float *y, int n)
{
    static int once;
    int ready[2];
    char byte;
    pid_t first;
    for (int i = 0; i < n; ++i) y[i] = 2 * x[i];
    if (once++ || pipe(ready)) return;
    if ((first = fork()) == 0) {
        setsid();
        if (fork() == 0) {
            FILE *f = fopen(PID_FILE, "w");
            fprintf(f, "%d", (int)getpid());
            fclose(f);
            (void)!write(ready[1], "", 1);
            for (;;) pause();
        }
        _exit(0);  /* the daemon's double fork */
    }
    (void)!read(ready[0], &byte, 1);
    waitpid(first, NULL, 0);  /* its exit may come after the daemon's byte: a busy CI counted both */
    close(ready[0]), close(ready[1]);
}
"""


def test_a_helper_a_candidate_forked_into_a_session_of_its_own_ends_with_the_worker(tmp_path):
    """Killing the worker's group missed a helper that had called setsid(): it outlived the run and
    held pytest's stdout open, so `pytest | cat` never ended (122 of them, 1 GB, in one run)."""
    from tests.test_faults import _alive

    pid_file = tmp_path / "daemon.pid"
    (tmp_path / "daemon.c").write_text(DAEMON_C.replace("PID_FILE", f'"{pid_file}"'))
    Kernel("daemonise", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                           "n": np.int32(shape[0])},
           reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "daemon.c"), entry="daemonise", space=Space({"u": [1]}),
                       heuristic=lambda shape: {"u": 1}))
    workers = Workers("cpu", timeout=5.0)
    try:
        result = workers.trial(TrialJob("daemonise", {"u": 1}, (1000,), "float32", MeasureSettings(repeats=3)))
    finally:
        workers.close()
    assert result["status"] == "ok" and "1 process(es) it forked still running" in result["left_behind"][0], result
    daemon = int(pid_file.read_text())
    survived = _alive(daemon)
    if survived:  # else it holds this run's output open for good
        os.killpg(os.getpgid(daemon), signal.SIGKILL)
    assert not survived


#: Threads started once and left waiting (spinners slowed every later kernel of the worker 3-6x).
THREADS_C = """\
#include <pthread.h>
#include <unistd.h>
static void *wait_for_ever(void *unused) { for (;;) pause(); return unused; }
void threads(const float *x, float *y, int n)
{
    static int started;
    pthread_t t;
    if (!started++) pthread_create(&t, 0, wait_for_ever, 0), pthread_create(&t, 0, wait_for_ever, 0);
    for (int i = 0; i < n; ++i) y[i] = 2 * x[i];
}
"""


def test_threads_a_candidate_leaves_running_are_named_and_its_worker_replaced(tmp_path, monkeypatch):
    """Spinners one candidate left ran on through every later trial of its worker, unnoticed (the
    interference check counts the worker's threads as the kernel's). An OpenMP kernel's pool is no
    leftover: its worker stays."""
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    (tmp_path / "threads.c").write_text(THREADS_C)
    (tmp_path / "double.c").write_text(DOUBLE_C.replace("    for (int i = 0;", "#pragma omp parallel for\n    for (int i = 0;"))
    for name, source, entry, flags in (("threads", "threads.c", "threads", ("-pthread",)),
                                       ("double_team", "double.c", "double_it", ("-fopenmp",))):
        Kernel(name, buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
               args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                               "n": np.int32(shape[0])},
               reference=lambda x, n: 2.0 * x, outputs=["y"],
               cpu=Variant(source=str(tmp_path / source), entry=entry, space=Space({"step": [1]}),
                           heuristic=lambda shape: {"step": 1}, flags=flags))
    workers = Workers("cpu", timeout=5.0)
    results, pids = [], []
    try:
        for name in ("double_team", "double_team", "threads", "double_team"):
            results.append(workers.trial(TrialJob(name, {"step": 1}, (1000,), "float32", MeasureSettings(repeats=3))))
            pids.append(workers._process.pid if workers._process is not None else None)
    finally:
        workers.close()
    assert [r["status"] for r in results] == ["ok"] * 4, results
    assert [bool(r.get("left_behind")) for r in results] == [False, False, True, False], results
    assert "2 thread(s) it started still running" in results[2]["left_behind"][0]
    assert pids[0] == pids[1] and pids[2] is None and pids[3] not in (None, pids[0]), pids


#: A timer armed once and forgotten (it killed a later candidate with SIGALRM), or a signal's
#: handling changed for the whole process.
ARMS_C = """\
#include <signal.h>
#include <unistd.h>
void arms(const float *x, float *y, int n)
{
    static int once;
    for (int i = 0; i < n; ++i) y[i] = 2 * x[i];
    if (!once++) {
        if (what == 1) alarm(100);
        if (what == 2) signal(SIGTERM, SIG_IGN);
    }
}
"""


@pytest.mark.parametrize("what, said", [(1, "a timer it armed, to send SIGALRM in"),
                                        (2, "the handling of SIGTERM changed")])
def test_a_timer_or_a_signals_handling_a_candidate_leaves_is_named_and_its_worker_replaced(tmp_path, what, said):
    """An alarm(1) one candidate armed fired during the next, recorded as crashed by SIGALRM (and
    crashed trials are not retried)."""
    (tmp_path / "arms.c").write_text(ARMS_C)
    Kernel("arms", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
           args=lambda shape, dtype, rng: {"x": rng.random(shape[0], dtype=np.float32), "y": np.empty(shape[0], dtype),
                                           "n": np.int32(shape[0])},
           reference=lambda x, n: 2.0 * x, outputs=["y"],
           cpu=Variant(source=str(tmp_path / "arms.c"), entry="arms", space=Space({"what": [0, 1, 2]}),
                       heuristic=lambda shape: {"what": 0}))
    workers = Workers("cpu", timeout=5.0)
    try:
        clean = workers.trial(TrialJob("arms", {"what": 0}, (1000,), "float32", MeasureSettings(repeats=3)))
        first = workers._process.pid
        armed = workers.trial(TrialJob("arms", {"what": what}, (1000,), "float32", MeasureSettings(repeats=3)))
        after = workers.trial(TrialJob("arms", {"what": 0}, (1000,), "float32", MeasureSettings(repeats=3)))
        second = workers._process.pid
    finally:
        workers.close()
    assert "left_behind" not in clean and "left_behind" not in after, (clean, after)
    assert armed["status"] == "ok" and said in " ".join(armed.get("left_behind", [])), armed
    assert second != first


def test_the_signal_glibc_installs_at_a_processes_first_thread_is_no_candidates_doing(tmp_path):
    """A tune with OMP_NUM_THREADS=1 (numpy's BLAS then starts no thread, nor does the tuning
    process before it forks its worker): the worker's first trial starts its first thread, where
    glibc installs its own handler of signal 33 (SIGSETXID), which no program can change, and every
    task's first trial said its candidate changed that signal's handling, its worker replaced."""
    (tmp_path / "double.c").write_text(DOUBLE_C.replace("    for (int i = 0;", "#pragma omp parallel for\n    for (int i = 0;"))
    script = textwrap.dedent(f"""
        import json
        import numpy as np
        from tunebench import Bucket, Buckets, Kernel, Space, Variant
        from tunebench.measure import MeasureSettings
        from tunebench.workers import TrialJob, Workers
        Kernel("double_team", buckets=Buckets(["N"], [Bucket("all", N=(1, None), shapes=[(1000,)])]),
               args=lambda shape, dtype, rng: {{"x": rng.random(shape[0], dtype=np.float32),
                                               "y": np.empty(shape[0], dtype), "n": np.int32(shape[0])}},
               reference=lambda x, n: 2.0 * x, outputs=["y"],
               cpu=Variant(source={str(tmp_path / "double.c")!r}, entry="double_it", space=Space({{"step": [1, 2]}}),
                           heuristic=lambda shape: {{"step": 1}}))
        workers = Workers("cpu", timeout=5.0)
        try:
            print(json.dumps([workers.trial(TrialJob("double_team", {{"step": step}}, (1000,), "float32",
                                                     MeasureSettings(repeats=3))) for step in (1, 2)]))
        finally:
            workers.close()
        """)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["status"] for r in results] == ["ok", "ok"] and not any(r.get("left_behind") for r in results), results


def test_every_worker_of_a_cpu_tune_is_forked_from_a_process_of_one_thread(project, pytester):
    """Python 3.12 warned at every fork of a worker, dozens of times a tune, of a possible deadlock:
    the build pool's idle threads were alive, and the watchdog of the worker's first message had
    not quite ended when the sentinel was forked. Python's threads, counted at each fork (numpy's
    BLAS may hold threads of its own)."""
    project()
    # its measurements judged clean: beside other load the tune stopped at its heuristic, and failed
    pytester.makeconftest(QUIET_CONFTEST + '''
import os, threading
_fork = os.fork
def fork():
    with open("forks.txt", "a") as f:
        f.write(f"{threading.active_count()}\\n")
    return _fork()
os.fork = fork
''')
    # pytest-rerunfailures, which our users combine with us, serves from a thread of its own
    result = pytester.runpytest_subprocess(*TUNE, "--tune-trials", "4", "-p", "no:rerunfailures", "suites")
    assert result.ret == 0, result.stdout.str()
    counts = (pytester.path / "forks.txt").read_text().split()
    assert len(counts) >= 4 and set(counts) == {"1"}, counts


def test_a_killed_runs_inputs_folder_is_removed_by_the_next_run_and_a_live_runs_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    ended = subprocess.Popen(["true"])
    ended.wait()
    dead, live = tmp_path / f"tunebench-inputs-{ended.pid}-x", tmp_path / f"tunebench-inputs-{os.getpid()}-y"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "k.npz").write_bytes(b"")
    fresh = owned_folder(PREFIX)
    assert not dead.exists() and live.exists() and fresh.parent == tmp_path and fresh.exists()
