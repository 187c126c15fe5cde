#!/usr/bin/env bash
# Everything the tests need, then every test: the pinned npm peers of the e2e
# suite, formatting, vet, staticcheck, and go test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== npm ci (e2e peers, pinned by e2e/package-lock.json)"
npm ci --prefix e2e --no-audit --no-fund --loglevel=error

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
go test -race -count=1 ./...
