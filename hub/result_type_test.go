package hub

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 36, Why 10: a 2026-07-28 tools/call result names its type, as a
// go-sdk server's does: "complete" on every answer that asks for nothing,
// a refusal included, on the fast path and the SDK's. A session
// revision's client is given none.
func TestToolResultsSayComplete(t *testing.T) {
	th := newTestHub(t)
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		cs := hubtest.Connect(t, th.url+"/operator/mcp", adaTok, version)
		for _, fast := range []bool{true, false} {
			th.operator.noFast.Store(!fast)
			for _, call := range []*mcp.CallToolParams{
				{Name: "echo", Arguments: map[string]any{"text": "hi"}},
				{Name: "echo", Arguments: map[string]any{"text": "hi", "fail": "conflict"}},
				{Name: "nothing_called_this"},
			} {
				res, err := cs.CallTool(context.Background(), call)
				if err != nil {
					t.Fatalf("%s fast=%v %s: %v", version, fast, call.Name, err)
				}
				b, _ := json.Marshal(res)
				typed := strings.Contains(string(b), `"resultType":"complete"`)
				if typed != (version == "2026-07-28") {
					t.Errorf("%s fast=%v %s %v: %s", version, fast, call.Name, call.Arguments, b)
				}
			}
		}
	}
	th.operator.noFast.Store(false)
}

// typedResult copies a result field by field: every exported field of the
// SDK's CallToolResult must come through, or a field a later SDK adds
// would be lost on 2026-07-28.
func TestTypedResultKeepsEveryField(t *testing.T) {
	res := &mcp.CallToolResult{}
	v := reflect.ValueOf(res).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("s")
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
			if f.Type().Key().Kind() == reflect.String && f.Type().Elem() == reflect.TypeFor[any]() {
				f.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf(any("v")))
			}
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Interface:
			f.Set(reflect.ValueOf(any("structured")))
		default:
			t.Fatalf("CallToolResult.%s is a %s the test cannot fill", v.Type().Field(i).Name, f.Kind())
		}
	}
	out := reflect.ValueOf(typedResult(res)).Elem()
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		if !reflect.DeepEqual(v.Field(i).Interface(), out.Field(i).Interface()) {
			t.Errorf("typedResult lost CallToolResult.%s", v.Type().Field(i).Name)
		}
	}
}
