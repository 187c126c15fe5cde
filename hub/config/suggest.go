package config

import (
	"fmt"
	"github.com/crewlet/hub/servers/editdistance"
	"reflect"
	"regexp"
	"sort"
	"strings"
)

// unknownFieldRe is how the YAML decoder says a key is not a field.
var unknownFieldRe = regexp.MustCompile(`^line (\d+): field (.+) not found in type (\S+)$`)

// keysByType is every key each type of the company file takes, by the
// name the decoder gives the type (config.Company), read from the yaml
// tags so it cannot drift from what the decoder accepts.
var keysByType = func() map[string][]string {
	out := map[string][]string{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || out[t.String()] != nil || t.PkgPath() != reflect.TypeFor[Company]().PkgPath() {
			return
		}
		var keys []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			keys = append(keys, name)
		}
		sort.Strings(keys)
		out[t.String()] = keys
		for i := range t.NumField() {
			walk(t.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[Company]())
	return out
}()

// unknownKey rewrites the decoder's "field mcp_serverz not found in type
// config.Company", which names a Go type a person never wrote, as the key
// and the one most likely meant, or the keys that place takes.
func unknownKey(msg string) string {
	m := unknownFieldRe.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, key, keys := m[1], m[2], keysByType[m[3]]
	if keys == nil {
		return msg
	}
	if near := nearest(key, keys); near != "" {
		return fmt.Sprintf("line %s: %s is not a key here; did you mean %s?", line, key, near)
	}
	return fmt.Sprintf("line %s: %s is not a key here (the keys here are %s)", line, key, strings.Join(keys, ", "))
}

// nearest is the known key a mistyped one most likely meant: the same
// but for case, '-' or '_' (mcp-servers, toolPrefix), or within a typo or
// two of it; "" when none is close.
func nearest(key string, known []string) string {
	fold := func(s string) string { return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s)) }
	best, bestD := "", -1
	for _, k := range known {
		if fold(k) == fold(key) {
			return k
		}
		d := editdistance.Between(key, k)
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	// Two edits in a short key are another word, not a typo of it.
	limit := 2
	if len(key) <= 4 {
		limit = 1
	}
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}
