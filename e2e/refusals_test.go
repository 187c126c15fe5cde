package e2e_test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// Issue 15, finding 7, against the built binary: ten requests with a
// 900 KB Host, ten with a 60 KB Origin and ten with a wrong token add a
// few hundred bytes to the hub's log, never the value sent, and no answer
// echoes it.
func TestRefusedRequestsBarelyTouchTheLog(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	st, err := os.Stat(h.stderr.Name())
	if err != nil {
		t.Fatal(err)
	}
	before := st.Size()
	send := func(mutate func(*http.Request)) {
		t.Helper()
		req, _ := http.NewRequest("GET", h.baseURL()+"/tools", nil)
		mutate(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || strings.Contains(string(body), "zzzzzzzz") || len(body) > 512 {
			t.Fatalf("%d, %d bytes of body", resp.StatusCode, len(body))
		}
	}
	for range 10 {
		send(func(r *http.Request) { r.Host = strings.Repeat("z", 900<<10) + ".example" })
		send(func(r *http.Request) { r.Header.Set("Origin", "https://"+strings.Repeat("z", 60<<10)+".example") })
		send(func(r *http.Request) { r.Header.Set("Authorization", "Bearer zzzzzzzz-not-a-token") })
	}
	logs := h.logs()[before:]
	if strings.Contains(logs, "zzzzzzzz") {
		t.Fatal("a refused value reached the log")
	}
	if len(logs) > 2048 {
		t.Fatalf("thirty refused requests added %d bytes to the log:\n%s", len(logs), logs)
	}
}
