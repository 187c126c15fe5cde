package hub

import "github.com/crewlet/hub/servers"

// Version is the hub's version: what /healthz answers, and how the hub
// names itself in every handshake, to its own first-party servers and to
// third-party ones alike. It is the build's one version constant, kept in
// the servers kit so first-party servers, which never import the hub, name
// the same one.
const Version = servers.Version
