package config

import (
	"strings"
	"testing"
)

// Issue 37 (caps per credential): api.limits is read with a default for
// each key left out, and a cap that would refuse everybody, a number past
// any cap, a per-session cap its credential's cap always meets first and
// a misspelt key are refused, each said at once.
func TestLimitsKeys(t *testing.T) {
	c, err := Parse([]byte("company: {name: Acme}\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := c.API.Limits
	if l.Requests() != DefaultRequestsPerCredential || l.Sessions() != DefaultSessionsPerCredential || l.Streams() != DefaultStreamsPerCredential ||
		l.Calls() != DefaultCallsPerCredential || l.SessionCalls() != DefaultCallsPerSession {
		t.Fatalf("defaults: %d %d %d %d", l.Sessions(), l.Streams(), l.Calls(), l.SessionCalls())
	}
	c, err = Parse([]byte("company: {name: Acme}\napi:\n  limits: {requests_per_credential: 7, sessions_per_credential: 3, streams_per_credential: 2, calls_per_credential: 5, calls_per_session: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.API.Limits; l.Requests() != 7 || l.Sessions() != 3 || l.Streams() != 2 || l.Calls() != 5 || l.SessionCalls() != 1 {
		t.Fatalf("as written: %d %d %d %d", l.Sessions(), l.Streams(), l.Calls(), l.SessionCalls())
	}
	_, err = Parse([]byte("company: {name: Acme}\napi:\n  limits: {requests_per_credential: 0, sessions_per_credential: 0, streams_per_credential: -1, calls_per_credential: 4, calls_per_session: 99999999, sessions_per_token: 3}\n"))
	for _, want := range []string{
		"api.limits.requests_per_credential: 0 would refuse every credential",
		"api.limits.sessions_per_credential: 0 would refuse every credential",
		"api.limits.streams_per_credential: -1 would refuse every credential",
		"api.limits.calls_per_session: 99999999 is past the largest cap",
		"sessions_per_token",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	_, err = Parse([]byte("company: {name: Acme}\napi:\n  limits: {calls_per_credential: 4, calls_per_session: 8}\n"))
	if err == nil || !strings.Contains(err.Error(), "calls_per_session: 8 is more than calls_per_credential (4)") {
		t.Fatalf("a session cap past its credential's: %v", err)
	}
}
