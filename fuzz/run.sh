#!/usr/bin/env bash
# Fuzzing stage of ./scripts/test: builds the cargo-fuzz targets of fuzz/fuzz_targets/ and
# runs each for a bounded time on its committed seed corpus (fuzz/corpus/TARGET/, copied
# to a temporary folder so the committed one is not churned) plus the inputs libFuzzer
# makes from it. A crash (panic, failed invariant, sanitizer report, timeout, memory
# limit) fails the target; the input is kept under fuzz/artifacts/TARGET/ and the command
# that replays it is printed.
#
# Usage: fuzz/run.sh [TARGET...]      (default: every target)
# Environment: FUZZ_SECONDS (per target, default 15), FUZZ_JOBS (targets run at once,
# default one per CPU; on 2 cores the whole stage, build included, takes about 3
# minutes), FUZZ_KEEP_CORPUS=1 keeps the grown corpora (their folder is printed),
# FUZZ_SEED (libFuzzer's -seed; default 1, so that the gate in ./scripts/test replays on
# CI the mutation sequence that passed where the change was made, instead of failing at
# random on a bug nobody has seen yet; 0 picks a random seed: use it, with a larger
# FUZZ_SECONDS, to hunt for new bugs).
# Needs the nightly toolchain (cargo fuzz builds with -Zsanitizer=address); installs
# cargo-fuzz itself when `cargo fuzz` is missing.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-15}"
seed="${FUZZ_SEED:-1}"
start=$(date +%s)

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "fuzz: FAIL: no nightly toolchain (rustup toolchain list shows none); cargo fuzz needs one"
  echo "0 passed, 1 failed"
  exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz (cargo install cargo-fuzz --locked)"
  if ! cargo install cargo-fuzz --locked; then
    echo "fuzz: FAIL: cargo-fuzz could not be installed"
    echo "0 passed, 1 failed"
    exit 1
  fi
fi

echo "fuzz: building the targets (cargo +nightly fuzz build)"
if ! cargo +nightly fuzz build; then
  echo "fuzz: FAIL: the fuzz targets do not build"
  echo "0 passed, 1 failed"
  exit 1
fi
built=$(( $(date +%s) - start ))

if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
bin_dir="fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
work=$(mktemp -d "${TMPDIR:-/tmp}/ioswitch-fuzz.XXXXXX")
[ "${FUZZ_KEEP_CORPUS:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

# One target's bounded run; writes its table row and, on a crash, its details to
# $work/$t.out, and its exit status to $work/$t.rc.
fuzz_one() {
  local t=$1 corpus="$work/$1" log="$work/$1.log" out="$work/$1.out" t0 rc took execs size a
  mkdir -p "$corpus" "fuzz/artifacts/$t"
  [ -d "fuzz/corpus/$t" ] && cp -r "fuzz/corpus/$t/." "$corpus/"
  t0=$(date +%s)
  # -timeout: one input taking longer is a hang; -rss_limit_mb: memory blow-ups crash.
  "$bin_dir/$t" "$corpus" -max_total_time="$seconds" -seed="$seed" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - t0 ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  size=$(find "$corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    printf '%-12s %8s %12s %8s  %s\n' "$t" "$took" "${execs:-?}" "$size" ok >"$out"
  else
    {
      printf '%-12s %8s %12s %8s  %s\n' "$t" "$took" "${execs:-?}" "$size" "CRASH (exit $rc)"
      cp "$log" "fuzz/artifacts/$t/last-crash.log"
      grep -a -E -A3 'panicked at' "$log" | grep -v '^note: run with' | head -8 | sed 's/^/    | /'
      grep -a -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|SUMMARY' "$log" | head -3 | sed 's/^/    | /'
      echo "    whole log: fuzz/artifacts/$t/last-crash.log"
      for a in $(sed -n 's/.*Test unit written to \(\S*\).*/\1/p' "$log"); do
        echo "    reproducer kept: $a"
        echo "    replay: cargo +nightly fuzz run $t $a"
      done
    } >"$out"
  fi
  echo "$rc" >"$work/$t.rc"
}

# The targets run side by side, FUZZ_JOBS at a time (default: one per CPU). Each libFuzzer
# run is single-threaded and bounded by its own -max_total_time, so running them in
# parallel changes no target's budget, only the stage's wall-clock time.
jobs="${FUZZ_JOBS:-$(nproc)}"
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

passed=0
failed=()
printf '\n%-12s %8s %12s %8s  %s\n' target seconds executions corpus result
for t in "${targets[@]}"; do
  cat "$work/$t.out" 2>/dev/null || printf '%-12s %8s %12s %8s  %s\n' "$t" ? ? ? "NO RESULT"
  if [ "$(cat "$work/$t.rc" 2>/dev/null)" = 0 ]; then passed=$((passed + 1)); else failed+=("$t"); fi
done
[ "${FUZZ_KEEP_CORPUS:-0}" = 1 ] && echo "grown corpora kept in $work"

total=$(( $(date +%s) - start ))
echo
echo "fuzz: build ${built}s, whole stage ${total}s, ${seconds}s per target, ${jobs} at a time, seed ${seed}"
if [ ${#failed[@]} -gt 0 ]; then echo "fuzz: crashed: ${failed[*]}"; fi
echo "${passed} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
