package serve

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 40: a start that is refused does no work first. A missing company
// file, half a TLS pair and a port another program holds are each refused
// before a new data directory is made (so nothing, a generated operator
// token least of all, is left behind); on an existing data directory, a
// busy port is found before the state is opened, the company applied or
// a seat claimed.
func TestRefusedStartLeavesNothingBehind(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"a missing company file", Options{ConfigFile: filepath.Join(t.TempDir(), "nope.yaml")}, "nope.yaml"},
		{"half a TLS pair", Options{TLS: TLSFiles{CertFile: filepath.Join(t.TempDir(), "hub.pem")}}, "--tls-key"},
		{"a busy port", Options{Listen: busy.Addr().String()}, "address already in use: another program holds that address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.DataDir, o.Stdout, o.LookupEnv = filepath.Join(t.TempDir(), "data"), io.Discard, noEnv
			if o.Listen == "" {
				o.Listen = "127.0.0.1:0"
			}
			err := Run(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want it refused saying %q", err, tc.want)
			}
			if _, serr := os.Stat(o.DataDir); !os.IsNotExist(serr) {
				entries, _ := os.ReadDir(o.DataDir)
				t.Fatalf("refused (%v), yet the data directory was made: %v", err, entries)
			}
		})
	}

	t.Run("a busy port on an existing data directory", func(t *testing.T) {
		dir := t.TempDir()
		err := Run(context.Background(), Options{DataDir: dir, Listen: busy.Addr().String(), Stdout: io.Discard, LookupEnv: noEnv})
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("Run: %v", err)
		}
		for _, f := range []string{TokenFile, "state", "children.json"} {
			if _, serr := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(serr) {
				t.Errorf("refused for its port, yet it made %s", f)
			}
		}
	})
}
