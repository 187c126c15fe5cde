package config

import "testing"

// CAT-4: the backend a company names is the one it gets; native only when
// it names none.
func TestEffectiveBackends(t *testing.T) {
	for _, tc := range []struct {
		doc                string
		tracker, knowledge string
	}{
		{"units: [{id: core, name: Core}]\n", "native", "native"},
		{"units: [{id: core, name: Core}]\ntracker: {backend: jira}\nknowledge: {backend: confluence}\n", "jira", "confluence"},
		{"units: [{id: core, name: Core}]\ntracker: {backend: github}\n", "github", "native"},
	} {
		c, err := Parse([]byte(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		if c.TrackerBackend() != tc.tracker || c.KnowledgeBackend() != tc.knowledge {
			t.Errorf("%q: tracker %q knowledge %q, want %q %q", tc.doc, c.TrackerBackend(), c.KnowledgeBackend(), tc.tracker, tc.knowledge)
		}
	}
}
