// Package launch holds the rules for launching a third-party MCP server:
// how a declared server's ${VAR} references become the values it is started
// with (Resolve), which optional_keys declarations a document may carry
// (CheckOptionalKeys), the exact environment a stdio child is handed
// (ChildEnv), and when a server that died or would not start is tried again
// (Schedule).
//
// The rules are pure. They read no clock, host or network: lookups, the
// host environment and the random source are passed in, and their
// results are plain values any number of goroutines may read. A Schedule is
// one server's retry series, guarded by its own lock.
//
// They live apart from package upstream, which runs the servers, so that
// their tests start no process, open no socket and wait on no timer: a
// mutation run (scripts/mutate.sh) can afford to run them once per mutant.
// Package upstream re-exports them under the same names.
package launch
