package hub

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// Issue 40: every start of a company without MCP servers logged that the
// company "does not run" the catalogue, which no company runs or not: the
// line says what the catalogue lacks.
func TestCatalogueNotRegisteredSaysWhy(t *testing.T) {
	var buf lockedBuffer
	newTestHub(t, func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&buf, nil)) })
	buf.mu.Lock()
	logs := buf.b.String()
	buf.mu.Unlock()
	var found bool
	for _, line := range strings.Split(logs, "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) != nil || ev["msg"] != "first_party_not_registered" || ev["server"] != "catalogue" {
			continue
		}
		found = true
		if r, _ := ev["reason"].(string); !strings.HasPrefix(r, "the company declares no MCP server") {
			t.Errorf("the catalogue's reason: %q", r)
		}
	}
	if !found {
		t.Fatalf("no first_party_not_registered line for the catalogue:\n%s", logs)
	}
}
