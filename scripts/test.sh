#!/usr/bin/env bash
# Everything the tests need, then every test: the pinned npm peers of the e2e
# suite, chromium for the browser tests, formatting, vet, staticcheck, go
# test with the race detector (which also runs every fuzz target's seed
# corpus), then each fuzz target for a short bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== npm ci (e2e peers, pinned by e2e/package-lock.json)"
npm ci --prefix e2e --no-audit --no-fund --loglevel=error

# The screen's browser tests drive Debian's chromium headless; they fail,
# never skip, without it, so it is installed here when missing.
echo "== chromium (Debian's package, for the screen's browser tests)"
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
# Screenshots of the screen taken by the browser tests are kept here.
export CREWLET_SCREENSHOTS_DIR="${CREWLET_SCREENSHOTS_DIR:-$PWD/e2e/screenshots}"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

echo "== go test"
# The artifact store's 50 MiB round trip alone takes minutes under the race
# detector on a busy 2-core machine: the default 10 minutes per package is
# too tight for it.
go test -race -count=1 -timeout 25m ./...

# Each fuzz target explores for FUZZTIME (10s unless set): bounded, so CI
# stays well inside its time, and long enough to catch a parser that falls
# over on its first unusual input. Targets are found, not listed, so a new
# one runs without touching this script.
echo "== fuzz"
fuzztime=${FUZZTIME:-10s}
fuzzlog=$(mktemp)
trap 'rm -f "$fuzzlog"' EXIT
# Go 1.26's fuzzing coordinator can report a bare "context deadline
# exceeded" when -fuzztime ends while a worker is mid-call on a loaded
# machine (go.dev/issue/75804, fixed in Go 1.27): no input is written and
# nothing reproduces. That one shape is run again once; anything else — a
# failing input written, a panic, a second deadline — fails the run.
fuzz_one() {
  local target=$1 dir=$2
  go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "./$dir" >"$fuzzlog" 2>&1 && { cat "$fuzzlog"; return 0; }
  cat "$fuzzlog"
  if grep -q 'context deadline exceeded' "$fuzzlog" && ! grep -qE 'Failing input written|panic:' "$fuzzlog"; then
    echo "-- $target: the fuzzing engine's deadline race (go.dev/issue/75804), no input written; once more"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "./$dir"
    return
  fi
  return 1
}
git grep -l '^func Fuzz' -- '*_test.go' | while read -r file; do
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    echo "-- $target ($(dirname "$file"), $fuzztime)"
    fuzz_one "$target" "$(dirname "$file")"
  done
done
