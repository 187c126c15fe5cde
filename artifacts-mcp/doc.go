// Package artifacts is the artifact store and its datastore, served as a
// first-party MCP server on nodes that can take uploads. It imports the
// servers kit and authority, never the hub.
package artifacts
