// Command crewlet runs the Crewlet hub and its tools.
//
//	crewlet serve [--config FILE] [--listen ADDR] [--data-dir DIR] [--session-idle DURATION] [--max-conns N] [--tls-cert FILE --tls-key FILE] [--metrics-listen ADDR] [-debug]
//	crewlet tracker-mcp | knowledge-mcp | artifacts-mcp [flags]   (one first-party server on its own)
//	crewlet config check FILE
//	crewlet secrets set NAME   (value on stdin)
package main

import (
	"fmt"
	"log/slog"
	"os"
)

const usage = `usage:
  crewlet serve [--config FILE] [--listen ADDR] [--data-dir DIR] [--session-idle DURATION] [--max-conns N] [--tls-cert FILE --tls-key FILE] [--metrics-listen ADDR] [-debug]
  crewlet tracker-mcp [--http ADDR] [--data-dir DIR] [--config FILE] [--as HANDLE]
  crewlet knowledge-mcp [--http ADDR] [--data-dir DIR] [--config FILE] [--as HANDLE]
  crewlet artifacts-mcp [--http ADDR] [--data-dir DIR] [--config FILE] [--as HANDLE]
  crewlet config check FILE
  crewlet config default
  crewlet config import FILE [--store-secrets] [--data-dir DIR]   (Claude Desktop, Cursor or VS Code MCP config)
  crewlet secrets set NAME [--data-dir DIR]   (value on stdin)
  crewlet secrets delete NAME [--data-dir DIR]
  crewlet secrets list [--data-dir DIR]`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; {
	case cmd == "serve":
		err = serveCmd(args)
	case cmd == "config" && len(args) == 2 && args[0] == "check":
		os.Exit(configCheck(args[1]))
	case standaloneServers[cmd].Name != "":
		err = runStandalone(standaloneServers[cmd], args)
	case cmd == "secrets":
		err = secretsCmd(args)
	case cmd == "config" && len(args) >= 1 && args[0] == "import":
		os.Exit(configImport(args[1:]))
	case cmd == "config" && len(args) == 1 && args[0] == "default":
		err = printDefault()
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crewlet:", err)
		os.Exit(1)
	}
}

// newLogger is the JSON log on stderr every command writes; -debug lowers
// its level. Stdout is left to the command (the MCP stream, for stdio).
func newLogger(debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
