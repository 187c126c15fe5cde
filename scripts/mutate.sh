#!/usr/bin/env bash
# Mutation testing of the packages that hold rules: gremlins puts one small
# bug at a time into a package (a flipped comparison, a negated condition,
# an off-by-one) and runs the package's tests; a bug no test notices
# "lived". Test efficacy is killed / (killed + lived) for each package.
#
#   scripts/mutate.sh                      every package of RULE_PACKAGES
#   scripts/mutate.sh hub/sanitize authority
#   scripts/mutate.sh hub:catalogue.go     only the named files of a package
#
# Environment:
#   MUTATE_TIMEOUT        bound on one package's whole run (default 40m)
#   MUTATE_WORKERS        mutants tested at once (default 1: a shared machine)
#   MUTATE_COEFFICIENT    a mutant's test run is bounded at this many times
#                         the unmutated run (default 30; lower it on a quiet
#                         machine, where a mutant that loops is cut sooner)
#   MUTATE_MIN_EFFICACY   exit 1 if a package scores below this (default 90)
#   MUTATE_KEEP=1         keep the work directory (gremlins' JSON results)
set -euo pipefail
cd "$(dirname "$0")/.."

# The packages whose tests guard rules. A package is a directory of the
# module; "dir:a.go,b.go" mutates only those files of it (the rest of the
# package is supervision or wiring, tested elsewhere and too slow to run
# once per mutant). Subdirectories are never mutated as part of their
# parent: list them on their own.
RULE_PACKAGES=(
	authority                # principals, tokens, the refusal classes
	servers                  # the servers kit: hints, the tool table, refusals, fences, the write path
	servers/state:opid.go,node.go,project.go,rows.go,backoff.go  # the op_id, the op ledger, turn memory, the projection, its retry schedule
	servers/upstream/launch  # ${VAR} resolution, optional keys, the child env, the restart schedule
	hub/sanitize             # control characters, redaction, binary
	hub/config               # checking a company document
	hub/secrets              # the sealed secret store
	hub:catalogue.go         # the catalogue and a seat's resolution order
)

# Packages whose full tests also form fleets of nodes and wait out leases
# (a minute a run): their mutants are tested with -short, which leaves
# those out. The files mutated there hold no fleet code; the fleet tests
# run in every full test run.
SHORT_PACKAGES=(servers/state)

GREMLINS_VERSION=v0.6.0
timeout_per_package=${MUTATE_TIMEOUT:-40m}
workers=${MUTATE_WORKERS:-1}
coefficient=${MUTATE_COEFFICIENT:-30}
min_efficacy=${MUTATE_MIN_EFFICACY:-90}

# gremlins, at its pinned version, built once into the build cache's
# neighbourhood rather than onto the PATH.
bindir="$(go env GOCACHE)/../crewlet-tools/gremlins-$GREMLINS_VERSION"
gremlins="$bindir/gremlins"
if [ ! -x "$gremlins" ]; then
	echo "== installing gremlins $GREMLINS_VERSION"
	GOBIN="$bindir" go install "github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION"
fi

# gremlins copies the whole module once per worker, node_modules included;
# it works on a copy of the files git knows (tracked, or new and not
# ignored) instead, which is also what is being tested: the working tree.
work=$(mktemp -d "${TMPDIR:-/tmp}/crewlet-mutate.XXXXXX")
if [ "${MUTATE_KEEP:-}" != 1 ]; then
	trap 'rm -rf "$work"' EXIT
fi
mkdir "$work/module"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/module"

if [ $# -gt 0 ]; then
	packages=("$@")
else
	packages=("${RULE_PACKAGES[@]}")
fi

results=()
status=0
for spec in "${packages[@]}"; do
	dir=${spec%%:*}
	files=""
	if [ "$dir" != "$spec" ]; then
		files=${spec#*:}
	fi
	if [ ! -d "$work/module/$dir" ]; then
		echo "mutate.sh: no package $dir" >&2
		results+=("$(printf '%-26s %s' "$spec" "no such package")")
		status=1
		continue
	fi
	# A mutant's test run is bounded at MUTATE_COEFFICIENT times the unmutated run, which
	# gremlins times with a warm build cache; each mutant is compiled
	# afresh, which on a busy machine takes many times longer, and a bound
	# too tight reports mutants as timed out that a test would have killed.
	# Paths gremlins matches are relative to the package directory. Leave
	# out subdirectories, and every file not named when files are named.
	excludes=(-E '/')
	if [ -n "$files" ]; then
		for f in "$work/module/$dir"/*.go; do
			base=$(basename "$f")
			case "$base" in *_test.go) continue ;; esac
			if [[ ",$files," != *",$base,"* ]]; then
				excludes+=(-E "^${base//./\\.}\$")
			fi
		done
	fi
	goflags=${GOFLAGS:-}
	if [[ " ${SHORT_PACKAGES[*]} " == *" $dir "* ]]; then
		goflags="$goflags -short"
	fi
	echo "== $spec (bound $timeout_per_package${goflags:+, GOFLAGS=$goflags})"
	out="$work/$(echo "$spec" | tr '/:,' '___').json"
	log="$work/$(echo "$spec" | tr '/:,' '___').log"
	set +e
	(cd "$work/module" && GOFLAGS="$goflags" timeout "$timeout_per_package" "$gremlins" unleash "./$dir" \
		--workers "$workers" --timeout-coefficient "$coefficient" "${excludes[@]}" -o "$out") >"$log" 2>&1
	rc=$?
	set -e
	# Lived mutants are the ones to look at: each is a change to the code
	# that no test noticed.
	grep -E '^ *LIVED' "$log" | sed "s|^ *|  |" || true
	if [ $rc -eq 124 ]; then
		results+=("$(printf '%-26s %s' "$spec" "timed out after $timeout_per_package")")
		status=1
		continue
	fi
	summary=$(grep -E 'Killed: [0-9]+, Lived: [0-9]+' "$log" | tail -1 | sed 's/^ *//' || true)
	efficacy=$(grep -Eo 'Test efficacy: [0-9.]+%' "$log" | tail -1 | grep -Eo '[0-9.]+' || true)
	if [ -z "$efficacy" ]; then
		if [ -n "$summary" ] || grep -q 'No results to report' "$log"; then
			results+=("$(printf '%-26s %s' "$spec" "no mutant covered by a test")")
		else
			tail -20 "$log" >&2
			results+=("$(printf '%-26s %s' "$spec" "gremlins failed (exit $rc)")")
		fi
		status=1
		continue
	fi
	verdict=ok
	if awk -v e="$efficacy" -v m="$min_efficacy" 'BEGIN { exit !(e < m) }'; then
		verdict="below $min_efficacy%"
		status=1
	fi
	results+=("$(printf '%-26s %6s%%  %-4s %s' "$spec" "$efficacy" "$verdict" "$summary")")
done

echo
echo "== test efficacy per package (killed / (killed + lived))"
printf '%s\n' "${results[@]}"
if [ "${MUTATE_KEEP:-}" = 1 ]; then
	echo "work directory kept: $work"
fi
exit $status
