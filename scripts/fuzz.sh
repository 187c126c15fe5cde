#!/usr/bin/env bash
# Explores every fuzz target for FUZZTIME each (default 60s), or only those
# whose name matches the first argument (a regular expression). Run it by
# hand or on a schedule, never in CI: what it finds depends on chance. A
# failing input is written under the package's testdata/fuzz/; fix the code
# and commit that file, and the test run replays it from then on.
#
#   scripts/fuzz.sh                 # every target, 60s each
#   FUZZTIME=5m scripts/fuzz.sh Act # the targets matching "Act", 5 minutes each
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-60s}
match=${1:-.}
status=0
while read -r file; do
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    [[ "$target" =~ $match ]] || continue
    echo "-- $target ($(dirname "$file"), $fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "./$(dirname "$file")"; then
      status=1
    fi
  done
done < <(git grep -l '^func Fuzz' -- '*_test.go')
exit $status
