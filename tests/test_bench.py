"""The benchmarks the docs give commands for, run where a reader runs them: on a machine other
than the one whose records are committed. Their measuring steps are stubbed: what is checked is
which records they measure on."""

import importlib
import importlib.util
import json
import sys
from pathlib import Path

from tunebench.records import RecordStore

ROOT = Path(__file__).parent.parent


def bench(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lookup_bench_measures_the_device_named(monkeypatch, tmp_path):
    """docs/lookup.md ran it on another VM, its processes naming the device by $TUNEBENCH_DEVICE:
    it read this machine's id alone, and refused for want of records."""
    lookup = bench("lookup")
    named = "cuda-nvidia-h200-sm90-132sm-00b1c7"  # committed, and never this machine's cpu device
    monkeypatch.setenv("TUNEBENCH_DEVICE", named)
    monkeypatch.setattr(lookup, "probe", lambda project, calls: {"first_call_s": 0.0})
    out = tmp_path / "lookup.json"
    monkeypatch.setattr(sys, "argv", ["lookup.py", "--trials", "10", "--repeats", "1", "--out", str(out)])
    assert lookup.main() == 0
    assert json.loads(out.read_text())["device"] == named


def test_scale_bench_without_this_machines_records(monkeypatch):
    """Without committed records of this machine it copies another device's, which keep that
    device's id: filed under this machine's, the first step refused them."""
    scale = bench("scale")
    monkeypatch.setattr(importlib.import_module("tunebench.lookup"), "this_device",
                        lambda target=None: "cpu-none-1t-000000")
    opened = []

    def timed(code, path, device, repeats):  # the steps' processes open the records, as here
        opened.append((path.stem, device, len(RecordStore(path).trials())))
        return 0.0

    monkeypatch.setattr(scale, "timed", timed)
    monkeypatch.setattr(scale, "wall", lambda command, cwd: 0.0)
    monkeypatch.setattr(sys, "argv", ["scale.py", "--sizes", "100", "--repeats", "1"])
    assert scale.main() == 0
    assert opened and all(stem == device != "cpu-none-1t-000000" and n == 100 for stem, device, n in opened)


def test_scale_bench_folds_what_it_times(monkeypatch, tmp_path):
    """Its fold step timed compact() on a store opened without its fingerprint, which only reads:
    nothing was folded, in microseconds, where docs/scale.md reads about a second."""
    scale = bench("scale")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the step's process imports this checkout's tunebench
    (tmp_path / "records").mkdir()
    path = tmp_path / "records" / "cpu-amd-epyc-f26m2-2t-506d4e.json"
    scale.synthetic(ROOT / "records" / path.name, path, 100)
    scale.timed(scale.STEPS["fold"], path, path.stem, 1)
    store = RecordStore(path)
    assert len(store.trials()) == 200 and not store.pending()
