#!/usr/bin/env bash
# Everything the tests need, then every test: the pinned npm peers of the e2e
# suite, chromium for the browser tests, formatting, vet, staticcheck, and go
# test with the race detector, which also runs every fuzz target's seeds and
# its committed corpus (testdata/fuzz/) as plain tests. The same tests run
# every time: fuzzing's exploration, which finds new inputs at random, is
# scripts/fuzz.sh, run apart; its finds are fixed and committed to the
# corpus, so they run here from then on.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== npm ci (e2e peers, pinned by e2e/package-lock.json)"
npm ci --prefix e2e --no-audit --no-fund --loglevel=error

# The screen's browser tests drive Debian's chromium headless, the TLS and
# Quickstart tests run curl as a user would, coding runs are boxed by
# bubblewrap, and the fleet tests put HAProxy in front of the nodes; they
# fail, never skip, without them, so what is missing is installed here.
echo "== chromium, curl, bubblewrap, haproxy (Debian's packages)"
missing=""
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  missing="chromium"
fi
if ! command -v curl >/dev/null 2>&1; then
  missing="$missing curl"
fi
if ! command -v bwrap >/dev/null 2>&1; then
  missing="$missing bubblewrap"
fi
if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
  missing="$missing haproxy"
fi
if [ -n "$missing" ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
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
