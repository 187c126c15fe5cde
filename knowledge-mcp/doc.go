// Package knowledge is the native knowledge base, served as a first-party MCP
// server. It is mounted by the hub only when the company runs the native
// knowledge base. It imports the servers kit and authority, never the hub.
package knowledge
