#!/usr/bin/env bash
# Fuzzes keel's decoders of untrusted bytes for a fixed time: installs clang
# and libFuzzer's runtime if missing, builds the five libFuzzer programs with
# clang in build-fuzz/ (incrementally), runs each for N seconds in a scratch
# copy of its seeds and regression inputs (never in tests/fuzz/), and prints
# per program: executions, executions per second, coverage (libFuzzer's cov
# and ft) when the seeds were loaded and at the end, corpus growth, and
# whether it found a crash. tests/fuzz/README.md explains the figures.
#   bash scripts/fuzz.sh                        60 s per program
#   bash scripts/fuzz.sh --seconds 20           20 s per program
#   bash scripts/fuzz.sh fuzz_frame_decode      only the programs named
#   KEEL_FUZZ_SECONDS=20 bash scripts/fuzz.sh   the default from the
#                                               environment (for CI)
# Stops by itself: each program ends after its N seconds (a hung one is
# killed 60 s later). Exits 0 if nothing was found, 1 if a program found a
# crash, leak, timeout or out-of-memory input (its artifact and how to
# minimise it are printed), 2 on a usage error, 3 if the build fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

all_programs=(fuzz_frame_decode fuzz_caf_deserialize fuzz_snapshot_file fuzz_manifest_file
  fuzz_shard_messages)
seconds="${KEEL_FUZZ_SECONDS:-60}"
programs=()
while (($#)); do
  case "$1" in
    --seconds) seconds="${2:-}"; shift 2 || { echo "fuzz: --seconds needs a value" >&2; exit 2; } ;;
    --seconds=*) seconds="${1#--seconds=}"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    fuzz_*)
      if [[ " ${all_programs[*]} " != *" $1 "* ]]; then
        echo "fuzz: no program '$1' (expected one of: ${all_programs[*]})" >&2; exit 2
      fi
      programs+=("$1"); shift ;;
    *) echo "fuzz: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: --seconds wants a whole number of seconds above 0, not '$seconds'" >&2
  exit 2
fi
((${#programs[@]})) || programs=("${all_programs[@]}")

KEEL_FUZZ=1 bash scripts/install-deps.sh

build_dir="${KEEL_FUZZ_BUILD_DIR:-build-fuzz}"
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  flags=(-DKEEL_FUZZ=ON -DKEEL_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  if command -v ccache >/dev/null 2>&1; then
    flags+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  # As in scripts/build.sh: warnings are errors in CI.
  if [ "${CI:-}" = true ]; then
    flags+=(-DKEEL_WERROR=ON)
  fi
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" "${flags[@]}" >/dev/null
fi
echo "fuzz: building ${programs[*]} in $build_dir"
build_start=$SECONDS
cmake --build "$build_dir" -j "$(nproc)" --target "${programs[@]}" >"$build_dir/fuzz-build.log" 2>&1 || {
  tail -n 40 "$build_dir/fuzz-build.log" >&2
  echo "fuzz: the build failed (whole log: $build_dir/fuzz-build.log)" >&2
  exit 3
}
echo "fuzz: built in $((SECONDS - build_start)) s"

# The sanitizer settings of the test suite (scripts/test.sh, tests/CMakeLists.txt).
export UBSAN_OPTIONS="suppressions=$root/tests/ubsan.supp:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp"

run_dir="$(cd "$build_dir" && pwd)/fuzz-runs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$run_dir"
echo "fuzz: $seconds s per program; corpora, logs and artifacts in $run_dir"

# libFuzzer's progress line "#<n> <event> cov: <c> ft: <f> corp: ...": prints
# "<c> <f>" of the first line with `event` (INITED), or of the last line.
coverage_at() {
  local log="$1" event="$2"
  if [ "$event" = last ]; then
    grep -E '^#[0-9]+[[:space:]].*cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1
  else
    grep -E "^#[0-9]+[[:space:]]+$event .*cov: [0-9]+ ft: [0-9]+" "$log" | head -n 1
  fi | sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+).*/\1 \2/' || true
}
final_stat() {  # -print_final_stats=1 prints "stat::<name>: <value>"
  grep -E "^stat::$2:" "$1" | tail -n 1 | awk '{print $2}' || true
}
growth() {  # "a->b (+d)", or "?" when libFuzzer did not print both
  if [[ "$1" =~ ^[0-9]+$ && "$2" =~ ^[0-9]+$ ]]; then
    printf '%s->%s (+%s)' "$1" "$2" "$(($2 - $1))"
  else
    printf '?'
  fi
}

rows=()
found=0
for program in "${programs[@]}"; do
  dir="$run_dir/$program"
  corpus="$dir/corpus"
  mkdir -p "$corpus"
  for kind in corpus regressions; do
    if [ -d "tests/fuzz/$kind/$program" ]; then
      cp "tests/fuzz/$kind/$program"/* "$corpus"/
    fi
  done
  seeds=$(find "$corpus" -type f | wc -l)
  log="$dir/libfuzzer.log"
  echo "fuzz: $program: $seeds seeds, $seconds s ..."
  # Flags as in tests/fuzz/README.md; -max_len is left to libFuzzer, whose
  # default is the larger of 4096 and the longest seed.
  rc=0
  timeout --kill-after=10 $((seconds + 60)) "$build_dir/tests/fuzz/$program" \
    -max_total_time="$seconds" -malloc_limit_mb=512 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$dir/" "$corpus" >"$log" 2>&1 || rc=$?

  cov0='' ft0='' cov1='' ft1='' artifact=''
  read -r cov0 ft0 <<<"$(coverage_at "$log" INITED)" || true
  read -r cov1 ft1 <<<"$(coverage_at "$log" last)" || true
  execs=$(final_stat "$log" number_of_executed_units)
  rate=$(final_stat "$log" average_exec_per_sec)
  after=$(find "$corpus" -type f | wc -l)
  if [ "$rc" = 0 ]; then
    result=ok
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    result="STUCK (killed after $((seconds + 60)) s)"
  else
    artifact=$(grep -oE 'Test unit written to .*' "$log" | tail -n 1 | sed 's/^Test unit written to //' || true)
    result="FOUND ${artifact:+$(basename "$artifact")}"
  fi
  row=$(printf '%-22s %10s %7s %20s %20s %14s  %s' "$program" "${execs:-?}" "${rate:-?}" \
    "$(growth "$cov0" "$cov1")" "$(growth "$ft0" "$ft1")" "$(growth "$seeds" "$after")" "$result")
  rows+=("$row")
  echo "$row"
  if [ "$result" != ok ]; then
    found=1
    # The first line that says what broke: an invariant, a sanitizer or libFuzzer.
    grep -m 1 -E 'invariant broken|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|terminate called' \
      "$log" | sed 's/^/    /' || true
    echo "    log: $log"
    if [ -n "${artifact:-}" ]; then
      echo "    input: $artifact"
      echo "    replay: $build_dir/tests/fuzz/$program $artifact"
      echo "    minimise: $build_dir/tests/fuzz/$program -minimize_crash=1 -max_total_time=60" \
        "-exact_artifact_path=$dir/minimised $artifact"
      echo "    then fix the decoder and save the input as tests/fuzz/regressions/$program/<what-it-is>"
    fi
  fi
done

echo
echo "fuzz: $seconds s per program (cov/ft: libFuzzer's coverage counters when the seeds were"
echo "loaded -> at the end; corpus: files before -> after)"
printf '%-22s %10s %7s %20s %20s %14s  %s\n' program executions exec/s cov ft corpus result
printf '%s\n' "${rows[@]}"
if [ "$found" = 1 ]; then
  echo "fuzz: FOUND: see the lines under the program above; logs and artifacts in $run_dir" >&2
  exit 1
fi
