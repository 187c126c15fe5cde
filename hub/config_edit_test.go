package hub

import (
	"reflect"
	"testing"

	"github.com/crewlet/hub/hub/config"
	"gopkg.in/yaml.v3"
)

// A server added by PUT /config/mcp-servers/{name} is written to the
// company file with every key it was given: entryYAML lists the keys by
// hand (in the order a person writes them), so a key added to the entry
// and not to it would be dropped from the file without a word, as trust
// once was. Every field is set here, by reflection, so a new one fails
// until it is written.
func TestEntryYAMLWritesEveryKey(t *testing.T) {
	var e config.MCPServer
	fill(t, reflect.ValueOf(&e).Elem())
	node := entryYAML(e)
	b, err := yaml.Marshal(&node)
	if err != nil {
		t.Fatal(err)
	}
	var back config.MCPServer
	if err := yaml.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, e) {
		t.Fatalf("written and read back:\n%+v\nwant\n%+v\nYAML:\n%s", back, e, b)
	}
}

// fill sets every field of a struct to a value that is not its zero, a
// struct pointed to included, so a field the writer leaves out is missed
// when the entry is read back.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			f.SetString("x" + name)
		case reflect.Int:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"a", "b"}))
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			switch p.Elem().Kind() {
			case reflect.Bool:
				p.Elem().SetBool(true)
			case reflect.String:
				p.Elem().SetString("x" + name)
			case reflect.Struct:
				fill(t, p.Elem())
			default:
				t.Fatalf("field %s points to a %s: teach this test to set it", name, p.Elem().Kind())
			}
			f.Set(p)
		case reflect.Map:
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf(map[string]string{"K": "v"}))
			} else {
				f.Set(reflect.ValueOf(map[string]map[string]bool{"tool": {"read_only": true}}))
			}
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", name, f.Kind())
		}
	}
}
