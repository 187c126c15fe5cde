package authority

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// OPS-4: attribution of bound and unbound credentials.
func TestPrincipalCaller(t *testing.T) {
	tests := []struct {
		p    Principal
		want Caller
	}{
		{Principal{TokenID: "laptop", Seat: "ada"}, Caller{Seat: "ada", Kind: KindHuman, Requester: "ada", OperatorID: "laptop"}},
		{Principal{TokenID: "ci"}, Caller{Seat: "token:ci", Kind: KindOperator, Requester: "token:ci", OperatorID: "ci"}},
	}
	for _, tc := range tests {
		if got := tc.p.Caller(); got != tc.want {
			t.Errorf("%+v.Caller() = %+v, want %+v", tc.p, got, tc.want)
		}
		if !tc.p.Caller().Valid() {
			t.Errorf("%+v.Caller() not valid", tc.p)
		}
	}
}

func TestCallerValid(t *testing.T) {
	bad := []Caller{
		{},
		{Seat: "ada"},
		{Seat: "ada", Kind: "robot"},
		{Seat: "token:x", Kind: KindHuman},
		{Seat: "ada", Kind: KindOperator},
		{Seat: "  ", Kind: KindAgent},
	}
	for _, c := range bad {
		if c.Valid() {
			t.Errorf("%+v reported valid", c)
		}
	}
}

func TestTokensVerifyRevokeReplace(t *testing.T) {
	ts := NewTokens(TokenEntry{ID: "a", Secret: "secret-a", Seat: "ada", Admin: true}, TokenEntry{ID: "b", Secret: "secret-b"})
	if p, ok := ts.Verify("secret-a"); !ok || p.Seat != "ada" || !p.Admin || p.TokenID != "a" {
		t.Fatalf("Verify(a) = %+v %v", p, ok)
	}
	for _, bad := range []string{"", "secret-", "secret-c", "SECRET-A"} {
		if _, ok := ts.Verify(bad); ok {
			t.Errorf("Verify(%q) accepted", bad)
		}
	}
	if !ts.Revoke("b") || ts.Revoke("b") {
		t.Fatal("Revoke should report once")
	}
	if _, ok := ts.Verify("secret-b"); ok {
		t.Fatal("revoked token still verifies")
	}
	ts.Replace([]TokenEntry{{ID: "c", Secret: "secret-c"}})
	if _, ok := ts.Verify("secret-a"); ok {
		t.Fatal("replaced token still verifies")
	}
	if ts.Len() != 1 {
		t.Fatalf("Len = %d", ts.Len())
	}
}

// Tokens are stored hashed: no plaintext survives in the store's printed form.
func TestTokensHoldNoPlaintext(t *testing.T) {
	ts := NewTokens(TokenEntry{ID: "a", Secret: "plaintext-credential-123"})
	if s := fmt.Sprintf("%+v %#v", ts, ts.tokens); strings.Contains(s, "plaintext-credential-123") {
		t.Fatal("token store holds the plaintext secret")
	}
}

// Replace swaps the whole set at once: a caller verifying a token held by
// both the old and the new set is never refused, and never handed another
// token's principal, while the set changes under it.
func TestTokensConcurrent(t *testing.T) {
	steady := TokenEntry{ID: "a", Secret: "s", Seat: "ada"}
	ts := NewTokens(steady)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if i == 0 {
					// Alternate between sets of different sizes that
					// all hold the steady token.
					next := []TokenEntry{steady}
					if j%2 == 0 {
						next = append([]TokenEntry{{ID: "b", Secret: fmt.Sprint("other-", j)}}, next...)
					}
					ts.Replace(next)
					continue
				}
				if p, ok := ts.Verify("s"); !ok || p != (Principal{TokenID: "a", Seat: "ada"}) {
					errs <- fmt.Sprintf("Verify during Replace = %+v, %v", p, ok)
					return
				}
				if n := ts.Len(); n != 1 && n != 2 {
					errs <- fmt.Sprintf("Len during Replace = %d", n)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if p, ok := ts.Verify("s"); !ok || p.TokenID != "a" || ts.Len() != 1 {
		t.Fatalf("after the last Replace: %+v %v, Len %d", p, ok, ts.Len())
	}
}

func TestDirectoryLookupCaseInsensitive(t *testing.T) {
	d := NewDirectory([]Unit{{ID: "core", Name: "Core"}}, []Seat{{Handle: "Ada", Kind: SeatHuman, Unit: "core"}})
	if s, ok := d.Seat("@ada"); !ok || s.Handle != "Ada" {
		t.Fatalf("Seat(@ada) = %+v %v", s, ok)
	}
	if _, ok := d.Seat("bob"); ok {
		t.Fatal("found a seat that is not there")
	}
	if u, ok := d.Unit("core"); !ok || u.Name != "Core" {
		t.Fatal("unit lookup failed")
	}
}

// OPS-3/OPS-4: who may do what the company gives its administrators. An
// unbound administrator's credential is one; an agent seat never is, even
// with a credential that says so.
func TestIsAdmin(t *testing.T) {
	d := NewDirectory(nil, []Seat{
		{Handle: "ada", Kind: SeatHuman, Admin: true},
		{Handle: "bob", Kind: SeatHuman},
		{Handle: "helper", Kind: SeatAgent, Admin: true},
	})
	for _, tc := range []struct {
		name string
		c    Caller
		want bool
	}{
		{"admin person", Caller{Seat: "ada", Kind: KindHuman}, true},
		{"plain person", Caller{Seat: "bob", Kind: KindHuman}, false},
		{"plain person's admin credential", Caller{Seat: "bob", Kind: KindHuman, Admin: true}, true},
		{"unbound admin credential", Caller{Seat: "token:ci", Kind: KindOperator, Admin: true}, true},
		{"unbound plain credential", Caller{Seat: "token:ro", Kind: KindOperator}, false},
		{"agent seat marked admin", Caller{Seat: "helper", Kind: KindAgent}, false},
		{"agent seat with an admin flag", Caller{Seat: "helper", Kind: KindAgent, Admin: true}, false},
		{"nobody the directory knows", Caller{Seat: "zed", Kind: KindHuman}, false},
	} {
		if got := IsAdmin(tc.c, d); got != tc.want {
			t.Errorf("%s: IsAdmin = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := (Principal{TokenID: "ci", Admin: true}).Caller(); !got.Admin || !IsAdmin(got, d) {
		t.Errorf("an unbound admin token's caller %+v is not an administrator", got)
	}
	if got := (Principal{TokenID: "ro"}).Caller(); got.Admin || IsAdmin(got, d) {
		t.Errorf("a plain unbound token's caller %+v is an administrator", got)
	}
}

// A session keeps a token's id and digest, never the token: the digest
// names the token while it is held, and nothing once it is revoked or
// replaced under the same id.
func TestCurrentByDigest(t *testing.T) {
	ts := NewTokens(TokenEntry{ID: "a", Secret: "secret-a", Seat: "ada", Admin: true}, TokenEntry{ID: "b", Secret: "secret-b"})
	if p, ok := ts.Current("a", Digest("secret-a")); !ok || p.Seat != "ada" || !p.Admin {
		t.Fatalf("a held token: %+v %v", p, ok)
	}
	if _, ok := ts.Current("a", Digest("secret-b")); ok {
		t.Fatal("another token's digest names a")
	}
	if _, ok := ts.Current("b", Digest("secret-a")); ok {
		t.Fatal("a's digest names b")
	}
	ts.Replace([]TokenEntry{{ID: "a", Secret: "rotated-a", Seat: "ada"}})
	if _, ok := ts.Current("a", Digest("secret-a")); ok {
		t.Fatal("a replaced token's digest still names it")
	}
	ts.Revoke("a")
	if _, ok := ts.Current("a", Digest("rotated-a")); ok {
		t.Fatal("a revoked token's digest still names it")
	}
}
