package hub

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 36, finding 11: on 2026-07-28 a list or read says who may cache
// it. Every list and read of /operator/mcp is answered to a bearer token
// and depends on it, so each is private: a cache shared by several callers
// must not hand one caller's catalogue, resources or prompts to another.
// server/discover, the same for every caller, is public.
func TestListsAndReadsArePrivateToTheirCaller(t *testing.T) {
	url, _, _ := notesUpstream(t)
	th := keyedHub(t, "notes", url)
	waitFeatures(t, th, "brief")
	ctx := context.Background()
	rec := &wireRecorder{}
	cs := connectAs(t, th, adaTok, "2026-07-28", rec, nil)

	// The discover the client sent as it connected.
	var discover struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
			CacheScope        string   `json:"cacheScope"`
		} `json:"result"`
	}
	for line := range strings.SplitSeq(rec.take(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			data = line
		}
		if strings.Contains(data, "supportedVersions") && json.Unmarshal([]byte(data), &discover) == nil {
			break
		}
	}
	if len(discover.Result.SupportedVersions) == 0 || discover.Result.CacheScope != "public" {
		t.Errorf("server/discover answered cacheScope %q (versions %v), not public", discover.Result.CacheScope, discover.Result.SupportedVersions)
	}

	scopes := map[string]func() (string, error){
		"tools/list": func() (string, error) {
			r, err := cs.ListTools(ctx, nil)
			return scopeOf(r, err)
		},
		"resources/list": func() (string, error) {
			r, err := cs.ListResources(ctx, nil)
			return scopeOf(r, err)
		},
		"resources/templates/list": func() (string, error) {
			r, err := cs.ListResourceTemplates(ctx, nil)
			return scopeOf(r, err)
		},
		"prompts/list": func() (string, error) {
			r, err := cs.ListPrompts(ctx, nil)
			return scopeOf(r, err)
		},
		"resources/read": func() (string, error) {
			r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: notesURI})
			return scopeOf(r, err)
		},
		"resources/read of a template": func() (string, error) {
			r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://notes/by/ada"})
			return scopeOf(r, err)
		},
	}
	for method, scope := range scopes {
		got, err := scope()
		if err != nil || got != "private" {
			t.Errorf("%s answered cacheScope %q (%v), not private", method, got, err)
		}
	}
}

// scopeOf is a cacheable result's scope.
func scopeOf(r mcp.CacheableResult, err error) (string, error) {
	if err != nil || r == nil || reflect.ValueOf(r).IsNil() {
		return "", err
	}
	return r.GetCacheScope(), nil
}
