package hub

// Version is the hub's version: what /healthz answers, and how the hub
// names itself in every handshake, to its own first-party servers and to
// third-party ones alike. It is the one version constant of the build.
const Version = "0.1.0"
