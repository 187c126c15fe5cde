package upstream

import "github.com/crewlet/hub/servers/upstream/launch"

// The rules of package launch, under the names callers of this package have
// always used, so moving them out (for fast tests) changed no caller.

// Transports a server may be declared with.
const (
	TransportStdio = launch.TransportStdio
	TransportHTTP  = launch.TransportHTTP
	TransportSSE   = launch.TransportSSE
)

// Why a server is not started.
const (
	Waiting = launch.Waiting
	Failed  = launch.Failed
)

// Schedule defaults.
const (
	DefaultBase    = launch.DefaultBase
	DefaultMax     = launch.DefaultMax
	DefaultHealthy = launch.DefaultHealthy
	DefaultJitter  = launch.DefaultJitter
)

type (
	Declared  = launch.Declared
	SeatBlock = launch.SeatBlock
	Lookup    = launch.Lookup
	HoldState = launch.HoldState
	Hold      = launch.Hold
	Resolved  = launch.Resolved
	Schedule  = launch.Schedule
)

// Resolve is launch.Resolve.
func Resolve(d Declared, seat *SeatBlock, lookup Lookup, dataDir string) (Resolved, *Hold) {
	return launch.Resolve(d, seat, lookup, dataDir)
}

// SealCommand is launch.SealCommand.
func SealCommand(name, dataDir string) string { return launch.SealCommand(name, dataDir) }

// References is launch.References.
func References(v string) []string { return launch.References(v) }

// CheckOptionalKeys is launch.CheckOptionalKeys.
func CheckOptionalKeys(d Declared, blocks []SeatBlock) []string {
	return launch.CheckOptionalKeys(d, blocks)
}

// ChildEnv is launch.ChildEnv.
func ChildEnv(r Resolved, host []string) []string { return launch.ChildEnv(r, host) }

// MaskValue is launch.MaskValue.
func MaskValue(v string) string { return launch.MaskValue(v) }

// MaskURLs is launch.MaskURLs.
func MaskURLs(s string) string { return launch.MaskURLs(s) }

// Expand is launch.Expand.
func Expand(v string, lookup Lookup) (string, []string) { return launch.Expand(v, lookup) }
