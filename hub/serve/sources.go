package serve

import (
	"sync"
	"sync/atomic"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/secrets"
)

// sources is where a node reads its company and its ${VAR} values: the
// company file (or the embedded company), the sealed secret store, the
// generated operator token, then the process environment.
type sources struct {
	opts  Options
	store atomic.Pointer[secrets.Store]

	mu sync.Mutex
	// token is the generated operator credential, once a revision in
	// force has needed it; where says where it is kept.
	token, where string
}

// company reads the company file (or takes the embedded company), and
// nothing else: what a start checks before it writes anything.
func (s *sources) company() (*config.Company, error) {
	if s.opts.ConfigFile == "" {
		return config.Default(), nil
	}
	return config.Load(s.opts.ConfigFile)
}

// openStore re-reads the secret store, so `crewlet secrets set` followed
// by a reload reaches the servers that reference the secret.
func (s *sources) openStore() error {
	st, err := secrets.Open(s.opts.DataDir)
	if err != nil {
		return err
	}
	s.store.Store(st)
	return nil
}

// load re-reads the store and the company. A company whose credentials
// read the generated token gets it made (or read back) first, so it is
// never applied without a way in.
func (s *sources) load() (*config.Company, error) {
	if err := s.openStore(); err != nil {
		return nil, err
	}
	c, err := s.company()
	if err != nil {
		return nil, err
	}
	if c.UsesGeneratedToken() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.token == "" {
			tok, where, err := operatorToken(s.opts.DataDir, s.opts.LookupEnv)
			if err != nil {
				return nil, err
			}
			s.token, s.where = tok, where
		}
	}
	return c, nil
}

// env resolves a ${VAR}: the secret store first, then the generated
// operator token, then the process environment.
func (s *sources) env(name string) (string, bool) {
	// Before a new data directory is made there is no store to read.
	if st := s.store.Load(); st != nil {
		if v, ok := st.Lookup(name); ok {
			return v, true
		}
	}
	if name == config.OperatorTokenVar {
		s.mu.Lock()
		tok := s.token
		s.mu.Unlock()
		if tok != "" {
			return tok, true
		}
	}
	return s.opts.LookupEnv(name)
}

// storedValues is every sealed value, redacted from every tool result.
func (s *sources) storedValues() []string { return s.store.Load().Values() }

// secretNames lists the sealed names, never a value, for the screen's
// form to offer as ${NAME} pointers: the store as the revision in force
// read it, so a name offered is one a server added now can resolve.
func (s *sources) secretNames() []string { return s.store.Load().Names() }

// tokenNote says where the generated token is, for the banner; empty when
// the company brought its own credentials.
func (s *sources) tokenNote() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.where
}
