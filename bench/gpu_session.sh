#!/bin/bash
# One GPU session's work for the CUDA suites, inside a time limit: install (the offline bundle in
# .gpu/, see ../shared/gpu/README.md), tests/test_cuda.py (its GPU tests among them), every shipped CUDA
# suite tuned (resuming what records/ already holds for this device), the gate on them, and
# bench/gpu.py's comparison with the copy bandwidth and PyTorch. Each stage gets what the limit
# leaves it; what a stage finished is kept (records are written trial by trial, bench rows as
# lines of JSON), so a later session resumes where this one stopped.
#
#   bash bench/gpu_session.sh OUT_DIR [SECONDS (default 570)] [TRIALS (default 8)]
#
# TESTS_S (default 90) limits the GPU tests, TESTS_K (a -k expression, "lead or fault") narrows them; BENCH_ARGS (e.g. "--kernel softmax") narrows the bench
# to what this session tuned, leaving the tune more of a short lease. GATE_S (default 55) limits the
# gate, GATE_SUITES (default every CUDA suite) narrows it: a tuned pick of large shapes takes
# minutes of fresh processes, and the gate judges suites in their order. BENCH_S (default 120) is
# what the tune leaves the bench.
set -u
OUT=${1:?usage: bash bench/gpu_session.sh OUT_DIR [SECONDS] [TRIALS]}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TUNEBENCH_CACHE=${TUNEBENCH_CACHE:-/tmp/tbc}
END=$(( $(date +%s) + ${2:-570} ))
# the tune gets what the others leave: 570 s left it about 300
left() { echo $(( END - $(date +%s) )); }
SUITES="suites/test_row_reduce.py suites/test_matmul_add.py suites/test_softmax.py suites/test_layernorm.py"
L=$OUT/log.txt
stage() { echo "=== $(date +%T) ($(left) s left) $*" | tee -a "$L"; }
# seconds for a stage: what is left less what the later stages need, at least 1 (timeout 0 is no limit)
budget() { local s=$(( $(left) - $1 )); echo $(( s > 0 ? s : 1 )); }
# the records with their journal folded in: a stage stopped by its limit leaves its last trials
# there, which a copy of the file alone loses (the store's own fold, as the next writer's; what
# cannot be folded comes back as the journal)
fold='import json, sys
from tunebench.records import RecordStore
for p in sys.argv[1:]:
    RecordStore(p, fingerprint=next(iter(json.load(open(p))["device"].values()))).compact()'
save() { python3 -c "$fold" records/cuda-*.json >> "$L" 2>&1; cp records/cuda-*.json records/.journal/cuda-*.jsonl "$OUT"/ 2>/dev/null; }
stage setup
timeout 60 bash .gpu/setup.sh >> "$L" 2>&1; echo "setup rc $?" | tee -a "$L"
. .gpu/env.sh
stage gpu-tests
timeout "${TESTS_S:-90}" python3 -m pytest -p no:cacheprovider tests/test_cuda.py ${TESTS_K:+-k "$TESTS_K"} -q -rs >> "$L" 2>&1
rc=$?; echo "tests rc $rc$([ $rc = 5 ] && echo ' (no test selected: TESTS_K selects none)')" | tee -a "$L"
stage tune
# shellcheck disable=SC2086
# no -q: a progress line every 10 s; a test running 90 s leaves every thread's stack in the log
timeout "$(budget $(( ${GATE_S:-55} + ${BENCH_S:-120} )))" python3 -m pytest -p no:cacheprovider $SUITES --tune --tune-target cuda --tune-trials "${3:-8}" \
    -o faulthandler_timeout=90 >> "$L" 2>&1
echo "tune rc $?" | tee -a "$L"
save
stage gate
# shellcheck disable=SC2086
timeout "${GATE_S:-55}" python3 -m pytest -p no:cacheprovider ${GATE_SUITES:-$SUITES} --tune-target cuda -q >> "$L" 2>&1
echo "gate rc $?" | tee -a "$L"
save
stage bench
timeout "$(budget 5)" python3 bench/gpu.py ${BENCH_ARGS:-} --rounds 30 --json "$OUT"/bench.json --out "$OUT"/table.md > "$OUT"/bench.jsonl 2>&1
echo "bench rc $?" | tee -a "$L"
save
stage end
