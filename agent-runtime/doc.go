// Package agent is the engine side of a seat: its turns and the engine's own
// built-in tools. The built-ins are served as a first-party MCP server
// (NewBuiltinServer), so the hub mounts them like any other server and tags
// their tools builtin; this package never imports the hub.
package agent
