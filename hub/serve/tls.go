package serve

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/crewlet/hub/hub/config"
)

// TLSFiles name the certificate (PEM, the leaf first, then any
// intermediates) and private key the hub serves HTTPS with.
type TLSFiles struct {
	CertFile, KeyFile string
}

// set reports whether a pair is named.
func (f TLSFiles) set() bool { return f.CertFile != "" || f.KeyFile != "" }

// validate refuses half a pair: a certificate without its key (or the
// reverse) would otherwise serve plain HTTP where HTTPS was meant.
func (f TLSFiles) validate() error {
	switch {
	case f.CertFile == "" && f.KeyFile != "":
		return errors.New("a TLS key is given without its certificate: name both (--tls-cert and --tls-key, or api.tls.cert_file and api.tls.key_file)")
	case f.CertFile != "" && f.KeyFile == "":
		return errors.New("a TLS certificate is given without its key: name both (--tls-cert and --tls-key, or api.tls.cert_file and api.tls.key_file)")
	}
	return nil
}

// tlsFiles picks the pair to serve: the command line's when given, else
// the company file's, whose relative paths are read from the file's own
// directory (as a person writing the file next to its certificate means).
func tlsFiles(flags TLSFiles, c *config.Company, configFile string) TLSFiles {
	if flags.set() {
		return flags
	}
	f := TLSFiles{CertFile: c.API.TLS.CertFile, KeyFile: c.API.TLS.KeyFile}
	if configFile != "" {
		dir := filepath.Dir(configFile)
		for _, p := range []*string{&f.CertFile, &f.KeyFile} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(dir, *p)
			}
		}
	}
	return f
}

// keyPair is the certificate the listener hands each TLS handshake. It is
// read again on reload (SIGHUP), so a renewed certificate is served
// without a restart; a pair that fails to load leaves the one in force.
type keyPair struct {
	mu    sync.Mutex
	files TLSFiles
	cert  *tls.Certificate
}

func loadKeyPair(f TLSFiles) (*keyPair, error) {
	k := &keyPair{}
	if err := k.reload(f); err != nil {
		return nil, err
	}
	return k, nil
}

// reload reads the pair f names; on failure nothing changes.
func (k *keyPair) reload(f TLSFiles) error {
	if err := f.validate(); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", f.CertFile, f.KeyFile, err)
	}
	k.mu.Lock()
	k.files, k.cert = f, &cert
	k.mu.Unlock()
	return nil
}

func (k *keyPair) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cert, nil
}

// config is the listener's TLS configuration. HTTP/2 is offered by the
// HTTP server itself (ServeTLS adds it to the protocols offered).
func (k *keyPair) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: k.certificate}
}

// reloadKeyPair reads the pair again on a reload. A listener cannot turn
// from plain HTTP to HTTPS, or back, while it runs: that waits for a
// restart, and says so.
func reloadKeyPair(k *keyPair, f TLSFiles, log *slog.Logger) {
	switch {
	case k == nil:
		if f.set() {
			log.Warn("tls_needs_restart", "reason", "the company file now names a TLS pair, but this node serves plain HTTP; restart it to serve HTTPS")
		}
		return
	case !f.set():
		log.Warn("tls_kept", "reason", "the company file no longer names a TLS pair; this node serves HTTPS with the pair it has until it restarts")
		k.mu.Lock()
		f = k.files
		k.mu.Unlock()
	}
	if err := k.reload(f); err != nil {
		log.Error("tls_reload_failed", "error", err.Error(), "kept", "the pair in force")
		return
	}
	log.Info("tls_reloaded", "cert_file", f.CertFile)
}

// HSTSMaxAge is how long a browser that reached the hub over HTTPS keeps
// to HTTPS for its name: one year, the figure browsers' preload lists
// ask of a site. Subdomains are not named: they may be other services.
const HSTSMaxAge = 365 * 24 * time.Hour

// hsts marks every answer served over TLS Strict-Transport-Security, so
// a browser that met the hub over HTTPS never sends its session cookie or
// a token over plain HTTP to that name again, whatever link it follows.
func hsts(next http.Handler) http.Handler {
	value := "max-age=" + strconv.Itoa(int(HSTSMaxAge/time.Second))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", value)
		}
		next.ServeHTTP(w, r)
	})
}
