package editdistance

import "testing"

func TestBetween(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"mcp_servers", "mcp_servers", 0},
		{"mcp_serverz", "mcp_servers", 1}, // a substitution
		{"mpc_servers", "mcp_servers", 1}, // a swap of neighbours is one
		{"mcp_server", "mcp_servers", 1},  // a deletion
		{"mcp_serverss", "mcp_servers", 1},
		{"", "abc", 3},
		{"kitten", "sitting", 3},
		{"grace", "gracee", 1},
		{"alna", "alan", 1},
		{"héllo", "hello", 1},
		{"ca", "abc", 3},      // optimal string alignment: no edit of a swapped pair
		{"ünits", "units", 1}, // runes, not bytes
	} {
		if got := Between(c.a, c.b); got != c.want {
			t.Errorf("Between(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Between(c.b, c.a); got != c.want {
			t.Errorf("Between(%q, %q) = %d, want %d (the distance is symmetric)", c.b, c.a, got, c.want)
		}
	}
}
