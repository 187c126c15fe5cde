package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/time/rate"
)

// The provider's key set is read again when a token names a key the hub
// does not hold (a key rotation), at most KeyFetchBurst times at once and
// then once every KeyFetchEvery per issuer, however many tokens ask: a
// flood of tokens naming unknown keys costs the provider a few requests,
// not one each. A token whose key the hub holds but whose signature does
// not verify was altered; it never causes a fetch.
const (
	KeyFetchBurst = 3
	KeyFetchEvery = 10 * time.Second
)

// maxKeySetBytes bounds the key set document read.
const maxKeySetBytes = 1 << 20

// errKeyFetchesSpent is why an unknown key was not looked for.
var errKeyFetchesSpent = errors.New("the token names a key the provider does not publish, and its keys were read again moments ago")

// keySet is the provider's published keys, as go-oidc's KeySet: it
// verifies a token's signature with the key the token names.
type keySet struct {
	client *http.Client
	url    string
	algs   []jose.SignatureAlgorithm
	now    func() time.Time

	// fetching serialises reads of the key set: tokens that name the
	// same new key wait for the one read.
	fetching sync.Mutex
	fetches  *rate.Limiter

	mu   sync.Mutex
	keys []jose.JSONWebKey
	gen  int
}

func newKeySet(client *http.Client, url string, algs []jose.SignatureAlgorithm, now func() time.Time) *keySet {
	return &keySet{client: client, url: url, algs: algs, now: now, fetches: rate.NewLimiter(rate.Every(KeyFetchEvery), KeyFetchBurst)}
}

// VerifySignature implements oidc.KeySet.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, k.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token carries exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, gen, known := k.lookup(kid)
	if !known {
		if err := k.refresh(ctx, gen); err != nil {
			return nil, err
		}
		if keys, _, known = k.lookup(kid); !known {
			return nil, fmt.Errorf("the token names the key %q, which the provider does not publish", kid)
		}
	}
	for _, key := range keys {
		if payload, err := jws.Verify(&key); err == nil {
			return payload, nil
		}
	}
	return nil, errors.New("the signature does not verify")
}

// lookup answers the keys a token naming kid may be signed with, and
// whether the hub holds any: a token without a kid may be signed with
// any key held.
func (k *keySet) lookup(kid string) ([]jose.JSONWebKey, int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []jose.JSONWebKey
	for _, key := range k.keys {
		if kid == "" || key.KeyID == kid {
			out = append(out, key)
		}
	}
	return out, k.gen, len(out) > 0
}

// published reports whether the hub still holds the key kid, as the
// provider published it at the last read.
func (k *keySet) published(kid string) bool {
	_, _, ok := k.lookup(kid)
	return ok
}

// refresh reads the key set again, unless it was read since the caller
// looked (generation seen), or the reads are spent.
func (k *keySet) refresh(ctx context.Context, seen int) error {
	k.fetching.Lock()
	defer k.fetching.Unlock()
	k.mu.Lock()
	fresh := k.gen != seen
	k.mu.Unlock()
	if fresh {
		return nil
	}
	if !k.fetches.AllowN(k.now(), 1) {
		return errKeyFetchesSpent
	}
	keys, err := k.fetch(ctx)
	if err != nil {
		return fmt.Errorf("reading the provider's keys: %w", err)
	}
	k.mu.Lock()
	k.keys = keys
	k.gen++
	k.mu.Unlock()
	return nil
}

func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	// Not the request's context alone: a caller that gives up must not
	// cut the read other tokens wait for.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", k.url, resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%s: %v", k.url, err)
	}
	return set.Keys, nil
}
