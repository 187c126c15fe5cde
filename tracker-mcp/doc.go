// Package tracker is the native work tracker, served as a first-party MCP
// server. It is mounted by the hub only when the company runs the native
// tracker. It imports the servers kit and authority, never the hub.
package tracker
