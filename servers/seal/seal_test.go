package seal

import (
	"bytes"
	"errors"
	"testing"
)

// A sealed value opens under its key and binding only: another binding,
// another key, a flipped byte or a cut value are each ErrUnsealed; two
// seals of one value differ (a nonce each).
func TestSealOpensUnderItsKeyAndBindingOnly(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := b.Seal([]byte("the value"), []byte("name"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Open(sealed, []byte("name")); err != nil || string(got) != "the value" {
		t.Fatalf("open: %q %v", got, err)
	}
	again, _ := b.Seal([]byte("the value"), []byte("name"))
	if bytes.Equal(again, sealed) {
		t.Fatal("two seals of one value are the same bytes")
	}
	other, _ := New(bytes.Repeat([]byte{8}, 32))
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-1] ^= 1
	for what, open := range map[string]func() ([]byte, error){
		"another binding": func() ([]byte, error) { return b.Open(sealed, []byte("other")) },
		"another key":     func() ([]byte, error) { return other.Open(sealed, []byte("name")) },
		"a flipped byte":  func() ([]byte, error) { return b.Open(flipped, []byte("name")) },
		"cut short":       func() ([]byte, error) { return b.Open(sealed[:5], []byte("name")) },
		"empty":           func() ([]byte, error) { return b.Open(nil, []byte("name")) },
	} {
		if got, err := open(); !errors.Is(err, ErrUnsealed) || got != nil {
			t.Errorf("%s: %q %v", what, got, err)
		}
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("a 5-byte key was taken")
	}
}
