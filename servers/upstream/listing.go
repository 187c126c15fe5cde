package upstream

import (
	"encoding/json"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func toolKey(t Tool) string {
	b, _ := json.Marshal(struct {
		Def *mcp.Tool
		Ann json.RawMessage
	}{t.Def, t.Annotations})
	return string(b)
}

func sameTools(a, b []Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if toolKey(a[k]) != toolKey(b[k]) {
			return false
		}
	}
	return true
}

func diffTools(old, cur []Tool) (added, removed []string) {
	had := map[string]bool{}
	for _, t := range old {
		had[t.Def.Name] = true
	}
	has := map[string]bool{}
	for _, t := range cur {
		has[t.Def.Name] = true
		if !had[t.Def.Name] {
			added = append(added, t.Def.Name)
		}
	}
	for n := range had {
		if !has[n] {
			removed = append(removed, n)
		}
	}
	sort.Strings(removed)
	return added, removed
}

func sameFeatures(a, b Features) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
