package agent

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// The coding agent's reads stay in its conversation and are sent again
// every round, so read_file and list_files answer at most 256 KiB
// (262144 bytes) each: a longer file is refused whole, saying its size and
// how to read it in parts, and read in parts with offset and length; a
// longer listing stops at a whole line saying the skip to list on with.
func TestBoxReadsAreCapped(t *testing.T) {
	const big = 300000 // bytes of big.txt, past the cap
	skipAt := regexp.MustCompile(`list on with skip: (\d+)`)
	steps := []func(c modeltest.Conversation) modeltest.Reply{
		func(modeltest.Conversation) modeltest.Reply {
			return call("run_command", map[string]any{"command": "head -c " + strconv.Itoa(big) + " /dev/zero | tr '\\0' a > big.txt && " +
				`mkdir d && cd d && for i in $(seq 1 1500); do : > "$(printf '%0200d' "$i")"; done`})
		},
		func(modeltest.Conversation) modeltest.Reply {
			return call("read_file", map[string]any{"path": "big.txt"})
		},
		func(modeltest.Conversation) modeltest.Reply {
			return call("read_file", map[string]any{"path": "big.txt", "offset": 262144})
		},
		func(modeltest.Conversation) modeltest.Reply {
			return call("read_file", map[string]any{"path": "big.txt", "offset": 10, "length": 5})
		},
		func(modeltest.Conversation) modeltest.Reply {
			return call("read_file", map[string]any{"path": "big.txt", "length": 262145})
		},
		func(modeltest.Conversation) modeltest.Reply {
			return call("list_files", map[string]any{"path": "d"})
		},
		func(c modeltest.Conversation) modeltest.Reply {
			m := skipAt.FindStringSubmatch(lastText(c))
			if m == nil {
				return call("finish", map[string]any{"report": "no skip"})
			}
			n, _ := strconv.Atoi(m[1])
			return call("list_files", map[string]any{"path": "d", "skip": n})
		},
	}
	h, _ := runHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if !isCodingAgent(c) {
			return seatTurn(c)
		}
		if r := c.Round(); r < len(steps) {
			return steps[r](c)
		}
		return call("finish", map[string]any{"report": "read"})
	}, time.Hour)
	h.turn()
	got := map[int]string{}
	for _, c := range h.model.Requests() {
		if isCodingAgent(c) && c.Round() > 0 {
			got[c.Round()-1] = lastText(c)
		}
	}
	if !strings.HasPrefix(got[0], "exit status 0") {
		t.Fatalf("the setup command: %q", got[0])
	}
	if want := "big.txt is 300000 bytes (300000 from byte 0), past the 262144 one read answers; read it in parts with offset and length"; !strings.Contains(got[1], want) {
		t.Errorf("read_file of a file past the cap answered %.300q", got[1])
	}
	if got[2] != strings.Repeat("a", big-262144) {
		t.Errorf("read_file from byte 262144 answered %d bytes", len(got[2]))
	}
	if got[3] != "aaaaa" {
		t.Errorf("read_file of 5 bytes answered %q", got[3])
	}
	if !strings.Contains(got[4], "length is 262145 bytes, past the 262144 one read answers") {
		t.Errorf("read_file of a length past the cap answered %.300q", got[4])
	}
	m := skipAt.FindStringSubmatch(got[5])
	if len(got[5]) > 262144 || m == nil || !strings.Contains(got[5], "of 1500 (a listing answers at most 262144 bytes)") {
		t.Fatalf("the long listing: %d bytes, ending %q", len(got[5]), got[5][max(0, len(got[5])-300):])
	}
	first := strings.Count(got[5], "file\td/")
	rest := strings.Count(got[6], "file\td/")
	if n, _ := strconv.Atoi(m[1]); first != n || first+rest != 1500 || strings.Contains(got[6], "list on with skip") {
		t.Errorf("the listing in two parts: %d entries then %d (skip %s); want all 1500", first, rest, m[1])
	}
	if !strings.Contains(got[6], "file\td/"+strings.Repeat("0", 196)+"1500\t0\n") {
		t.Errorf("the listing's second part does not end with the last file: %.200q", got[6][max(0, len(got[6])-300):])
	}
}
