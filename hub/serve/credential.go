package serve

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crewlet/hub/hub/config"
)

// TokenFile is the file in the data directory that keeps the generated
// operator token.
const TokenFile = "operator-token"

// operatorToken returns the generated operator credential: the
// environment's CREWLET_OPERATOR_TOKEN if set, else the one kept in the data
// directory, else a new one written there readable by the owner only. It
// says where the token is, never the token itself.
func operatorToken(dir string, env config.Lookup) (token, where string, err error) {
	if v, ok := env(config.OperatorTokenVar); ok && strings.TrimSpace(v) != "" {
		return v, "from $" + config.OperatorTokenVar, nil
	}
	path := filepath.Join(dir, TokenFile)
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), path, nil
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", err
	}
	token = "crw_" + base64.RawURLEncoding.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("write operator token: %w", err)
	}
	return token, path, nil
}
