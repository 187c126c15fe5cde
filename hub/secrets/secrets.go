// Package secrets is the hub's secret store: named values sealed at rest
// with AES-256-GCM under a key kept beside them, readable by the hub's user
// only. ${VAR} references resolve from here before the engine's environment,
// so a credential can be rotated with `crewlet secrets set` and a reload,
// without restarting the engine or putting it in anybody's shell history.
//
// A Store is a snapshot: Open reads the file once. Set and Delete write the
// file atomically and update the snapshot. A Store is safe for concurrent use.
package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"

	"github.com/crewlet/hub/servers/atomicfile"
	"github.com/crewlet/hub/servers/seal"
)

// MaxValueBytes bounds one secret. A value is stored whole or refused, never
// cut: half a credential is a lasting half-fact.
const MaxValueBytes = 64 << 10

var nameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

const (
	keyFile    = "secrets.key"
	sealedFile = "secrets.sealed"
	grantsFile = "grants.sealed"
)

// Store holds the sealed values of one data directory.
type Store struct {
	dir  string
	file string
	box  *seal.Box

	mu     sync.RWMutex
	sealed map[string]string // name -> base64(nonce || ciphertext)
}

// Open reads the store in dir, creating its key on first use.
func Open(dir string) (*Store, error) { return open(dir, sealedFile) }

// OpenGrants reads the store of seats' OAuth grants in dir: sealed under the
// same key, in a file of its own, because the hub writes it while running
// and must never write back a stale copy of what `crewlet secrets set`
// wrote meanwhile (each store writes its whole file).
func OpenGrants(dir string) (*Store, error) { return open(dir, grantsFile) }

func open(dir, file string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := loadKey(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, err
	}
	box, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, file: file, box: box, sealed: map[string]string{}}
	b, err := os.ReadFile(filepath.Join(dir, file))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &s.sealed); err != nil {
			return nil, fmt.Errorf("secrets: %s is damaged: %w", file, err)
		}
	}
	return s, nil
}

func loadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) != 32 {
			return nil, fmt.Errorf("secrets: %s is not a 32-byte key", path)
		}
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(path, key, 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

// CheckName reports whether name can be referenced as ${NAME}.
func CheckName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%q is not a variable name (letters, digits and _, not starting with a digit)", name)
	}
	return nil
}

// Set seals value under name and writes the store.
func (s *Store) Set(name, value string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if value == "" {
		return errors.New("the value is empty; an empty credential is never stored")
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("the value is %d bytes; a secret holds at most %d", len(value), MaxValueBytes)
	}
	// The name is bound in as additional data, so a sealed value cannot be
	// moved under another name.
	sealed, err := s.box.Seal([]byte(value), []byte(name))
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]string, len(s.sealed)+1)
	for k, v := range s.sealed {
		next[k] = v
	}
	next[name] = base64.StdEncoding.EncodeToString(sealed)
	if err := s.write(next); err != nil {
		return err
	}
	s.sealed = next
	return nil
}

// Delete removes a secret; it reports whether one was held.
func (s *Store) Delete(name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sealed[name]; !ok {
		return false, nil
	}
	next := make(map[string]string, len(s.sealed))
	for k, v := range s.sealed {
		if k != name {
			next[k] = v
		}
	}
	if err := s.write(next); err != nil {
		return false, err
	}
	s.sealed = next
	return true, nil
}

func (s *Store) write(m map[string]string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(s.dir, s.file), b, 0o600)
}

// Lookup opens one secret. A value that fails to open (a damaged file, a
// key that does not match) is reported as absent rather than handed on.
func (s *Store) Lookup(name string) (string, bool) {
	s.mu.RLock()
	enc, ok := s.sealed[name]
	s.mu.RUnlock()
	if !ok {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	plain, err := s.box.Open(raw, []byte(name))
	if err != nil {
		return "", false
	}
	return string(plain), true
}

// Names lists the stored names, sorted; never the values.
func (s *Store) Names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.sealed))
	for k := range s.sealed {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Values opens every secret, for redaction from tool results.
func (s *Store) Values() []string {
	var out []string
	for _, n := range s.Names() {
		if v, ok := s.Lookup(n); ok {
			out = append(out, v)
		}
	}
	return out
}
