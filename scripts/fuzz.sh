#!/usr/bin/env bash
# Run or replay the libFuzzer harnesses built by `make fuzz-build`.
#
#   scripts/fuzz.sh run SECONDS TARGET...   fuzz each target for SECONDS
#   scripts/fuzz.sh regress 0 TARGET...     every seed and regression input, once
#
# A run reads tests/fuzz/corpus/<t> and tests/fuzz/regressions/<t> and writes
# what it finds to a scratch corpus, $FUZZ_BUILD/corpus/<t> (not committed);
# a crashing input lands in $FUZZ_BUILD/artifacts/<t>/. Extra libFuzzer flags
# for a target go in tests/fuzz/<t>.options (one line), a dictionary in
# tests/fuzz/<t>.dict. Exits non-zero when any harness failed.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=$1
seconds=$2
shift 2
build=${FUZZ_BUILD:-build-fuzz}
failed=()
# Symbolized stack traces in reports (llvm-14 ships it outside PATH).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi

for t in "$@"; do
  bin=$build/fuzz_$t
  dirs=()
  for d in tests/fuzz/corpus/$t tests/fuzz/regressions/$t; do
    [ -d "$d" ] && dirs+=("$d")
  done
  opts=(-timeout=10 -rss_limit_mb=2048)
  [ -f "tests/fuzz/$t.options" ] && read -r -a extra < "tests/fuzz/$t.options" && opts+=("${extra[@]}")
  [ -f "tests/fuzz/$t.dict" ] && opts+=("-dict=tests/fuzz/$t.dict")
  mkdir -p "$build/logs" "$build/artifacts/$t" "$build/corpus/$t"
  log=$build/logs/$t.$mode.log
  case $mode in
    regress)
      mapfile -t files < <(find "${dirs[@]}" -type f 2>/dev/null | sort)
      if [ ${#files[@]} -eq 0 ]; then
        echo "fuzz $t: no inputs to replay"
        continue
      fi
      if "$bin" "${opts[@]}" "${files[@]}" > "$log" 2>&1; then
        echo "fuzz $t: ${#files[@]} inputs replayed, no failure"
      else
        echo "fuzz $t: FAILED replaying (log: $log)"
        tail -n 40 "$log" | sed 's/^/    /'
        failed+=("$t")
      fi
      ;;
    run)
      if "$bin" "${opts[@]}" -max_total_time="$seconds" -print_final_stats=1 \
           -artifact_prefix="$build/artifacts/$t/" "$build/corpus/$t" "${dirs[@]}" > "$log" 2>&1; then
        summary=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -n 1)
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
        echo "fuzz $t: ${seconds}s, $execs runs, $rate exec/s | $summary"
      else
        echo "fuzz $t: FAILED (log: $log; artifacts: $build/artifacts/$t/)"
        grep -E 'ERROR|SUMMARY|Test unit written|==[0-9]+==' "$log" | head -n 20 | sed 's/^/    /'
        failed+=("$t")
      fi
      ;;
    *)
      echo "usage: $0 run|regress SECONDS TARGET..." >&2
      exit 2
      ;;
  esac
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}"
  exit 1
fi
