package state

import (
	"bytes"
	"testing"
)

// Issue 39, build 2: a value sealed in the fleet's bucket reads back on
// any node given the key, is stored sealed (the bucket never holds it in
// the clear), and does not open under another key.
func TestSealedValuesAreSealed(t *testing.T) {
	ctx, js := testFleetLog(t)
	key := bytes.Repeat([]byte{7}, 32)
	a, err := js.OpenSealedValues(ctx, "TEST_SEALED", key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := js.OpenSealedValues(ctx, "TEST_SEALED", key)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "refresh-token-0123456789"
	if err := a.Set("GRANT_1", secret); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.Lookup("GRANT_1"); !ok || got != secret {
		t.Fatalf("the other node read %q, %v", got, ok)
	}
	e, err := a.kv.Get(ctx, "GRANT_1")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(e.Value(), []byte(secret)) {
		t.Fatal("the bucket holds the value in the clear")
	}
	other, err := js.OpenSealedValues(ctx, "TEST_SEALED", bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := other.Lookup("GRANT_1"); ok {
		t.Fatalf("another key opened the value: %q", got)
	}
	if had, err := b.Delete("GRANT_1"); !had || err != nil {
		t.Fatalf("delete: %v, %v", had, err)
	}
	if _, ok := a.Lookup("GRANT_1"); ok {
		t.Fatal("a deleted value still reads")
	}
	if had, err := a.Delete("GRANT_1"); had || err != nil {
		t.Fatalf("deleting it again: %v, %v", had, err)
	}
}
