package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSetLookupPersistsSealed(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("GH_TOKEN", "ghp_plaintext_value_123"); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, sealedFile))
	if strings.Contains(string(raw), "plaintext_value") {
		t.Fatal("the value is stored in the clear")
	}
	for _, f := range []string{keyFile, sealedFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi.Mode(), err)
		}
	}
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := again.Lookup("GH_TOKEN"); !ok || v != "ghp_plaintext_value_123" {
		t.Fatalf("reopened Lookup = %q %v", v, ok)
	}
	if _, ok := again.Lookup("OTHER"); ok {
		t.Fatal("found a secret never set")
	}
	if names := again.Names(); len(names) != 1 || names[0] != "GH_TOKEN" {
		t.Fatalf("Names = %v", names)
	}
	if ok, err := again.Delete("GH_TOKEN"); !ok || err != nil {
		t.Fatal("Delete failed")
	}
	if _, ok := again.Lookup("GH_TOKEN"); ok {
		t.Fatal("deleted secret still there")
	}
}

func TestSetRefusals(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, value, want string }{
		{"1BAD", "x", "not a variable name"},
		{"OK", "", "empty"},
		{"OK", strings.Repeat("x", MaxValueBytes+1), "at most"},
		{"A-B", "x", "not a variable name"},
	} {
		if err := s.Set(tc.name, tc.value); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Set(%q, %d bytes) = %v", tc.name, len(tc.value), err)
		}
	}
}

// A sealed value moved under another name does not open.
func TestSealedValueBoundToName(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	_ = s.Set("A", "value-of-a")
	s.mu.Lock()
	s.sealed["B"] = s.sealed["A"]
	s.mu.Unlock()
	if _, ok := s.Lookup("B"); ok {
		t.Fatal("a value opened under a name it was not sealed for")
	}
}

func TestDamagedStoreRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, sealedFile), []byte("{not json"), 0o600)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Open of a damaged store: %v", err)
	}
	_ = os.WriteFile(filepath.Join(dir, keyFile), []byte("short"), 0o600)
	if _, err := Open(dir); err == nil {
		t.Fatal("a bad key was accepted")
	}
}

// The store is sealed with AES-256: a key file of any other length is
// refused by name, including the 16 and 24 bytes AES itself would take (and
// quietly seal with a weaker cipher), and the store it guards stays shut.
func TestKeyOfWrongLengthRefused(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, keyFile), make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir)
		if err == nil || !strings.Contains(err.Error(), keyFile) || !strings.Contains(err.Error(), "32-byte") {
			t.Errorf("a %d-byte key: store %v, error %v", n, s != nil, err)
		}
	}
	// A 32-byte key of the operator's own is used as it is.
	dir := t.TempDir()
	key := []byte("0123456789abcdef0123456789abcdef")
	if err := os.WriteFile(filepath.Join(dir, keyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("A", "value-of-a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, keyFile)); string(got) != string(key) {
		t.Fatal("the operator's key was replaced")
	}
	if again, err := Open(dir); err != nil {
		t.Fatal(err)
	} else if v, ok := again.Lookup("A"); !ok || v != "value-of-a" {
		t.Fatalf("reopened with the same key: %q %v", v, ok)
	}
}

// A value of exactly MaxValueBytes is stored whole, and a Store sees what
// it has just set, before anything reopens the file.
func TestSetLargestValueAndReadItBack(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	largest := strings.Repeat("v", MaxValueBytes)
	if err := s.Set("LARGEST", largest); err != nil {
		t.Fatalf("a value of exactly %d bytes: %v", MaxValueBytes, err)
	}
	if err := s.Set("SMALL", "small-value"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"LARGEST": largest, "SMALL": "small-value"} {
		if v, ok := s.Lookup(name); !ok || v != want {
			t.Errorf("the store that set %s reads %d bytes, %v", name, len(v), ok)
		}
	}
	if names := s.Names(); strings.Join(names, ",") != "LARGEST,SMALL" {
		t.Errorf("Names = %v", names)
	}
	if vals := s.Values(); len(vals) != 2 {
		t.Errorf("Values gave %d values", len(vals))
	}
	if ok, err := s.Delete("SMALL"); !ok || err != nil {
		t.Fatalf("Delete: %v %v", ok, err)
	}
	if ok, err := s.Delete("SMALL"); ok || err != nil {
		t.Fatalf("Delete of a name no longer held: %v %v", ok, err)
	}
	if _, ok := s.Lookup("SMALL"); ok {
		t.Error("the store that deleted SMALL still reads it")
	}
}
