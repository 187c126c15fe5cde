package toolsnap

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRulesCatchEachViolation(t *testing.T) {
	bad := &mcp.Tool{
		Name:        "BadName",
		Description: "short",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`),
	}
	got := strings.Join(Rules(bad), "\n")
	for _, want := range []string{"snake_case", "description", "unknown arguments", "argument x has no description", "no hints", "no delivers"} {
		if !strings.Contains(got, want) {
			t.Errorf("Rules missed %q; said:\n%s", want, got)
		}
	}
	good := &mcp.Tool{
		Name:        "good_tool",
		Description: "A tool described well enough for a model.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string","description":"x"}}}`),
		Meta:        mcp.Meta{"crewlet/hints": map[string]string{}, "crewlet/delivers": ""},
	}
	if v := Rules(good); len(v) != 0 {
		t.Errorf("good tool flagged: %v", v)
	}
}
