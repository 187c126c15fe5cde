package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The handshake (MCP-3). The hub tries server/discover first, bounded by the
// probe timeout, so a legacy server that never answers an unknown method
// cannot hang a start. What it learns decides the session:
//   - a server that also speaks a session revision (2025-11-25) gets an
//     initialize handshake, because only a session carries what the hub
//     forwards to its own clients while a call runs: log lines, progress,
//     and the server's own sampling and elicitation requests;
//   - a server that speaks only 2026-07-28 or later gets that;
//   - a server that refuses or ignores the probe gets initialize.

const (
	modernVersion  = "2026-07-28"
	sessionVersion = "2025-11-25"
	probeID        = "crewlet-discover"
)

// probeResult is what server/discover said, if anything.
type probeResult struct {
	answered  bool
	supported []string
	err       string // why the probe told nothing
}

// version picks the revision to connect with: "" lets the SDK negotiate the
// stateless protocol.
func (p probeResult) version() string {
	if !p.answered {
		return sessionVersion
	}
	if slices.Contains(p.supported, sessionVersion) || slices.ContainsFunc(p.supported, func(v string) bool { return v < modernVersion }) {
		return sessionVersion
	}
	return ""
}

func probeRequest(client *mcp.Implementation) []byte {
	req := map[string]any{
		"jsonrpc": "2.0", "id": probeID, "method": "server/discover",
		"params": map[string]any{"_meta": map[string]any{
			mcp.MetaKeyProtocolVersion:    modernVersion,
			mcp.MetaKeyClientInfo:         map[string]string{"name": client.Name, "version": client.Version},
			mcp.MetaKeyClientCapabilities: map[string]any{},
		}},
	}
	b, _ := json.Marshal(req)
	return b
}

// readProbeAnswer decodes a JSON-RPC answer to the probe.
func readProbeAnswer(b []byte) (probeResult, bool) {
	var msg struct {
		ID     any `json:"id"`
		Result *struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &msg) != nil || msg.ID != probeID {
		return probeResult{}, false
	}
	if msg.Error != nil {
		return probeResult{err: "it refused server/discover: " + msg.Error.Message}, true
	}
	if msg.Result == nil {
		return probeResult{err: "its answer to server/discover had no result"}, true
	}
	return probeResult{answered: true, supported: msg.Result.SupportedVersions}, true
}

// probeStdio writes the probe on a child's stdin and reads its stdout until
// the answer or the deadline. It returns the reader the SDK must continue
// from: whatever was read past the answer is not lost.
func probeStdio(stdin io.Writer, stdout *os.File, client *mcp.Implementation, timeout time.Duration) (probeResult, io.Reader) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	if _, err := stdin.Write(append(probeRequest(client), '\n')); err != nil {
		return probeResult{err: "writing the probe: " + err.Error()}, br
	}
	// A pipe from os.Pipe is pollable, so a deadline bounds the read.
	if err := stdout.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return probeResult{err: "the child's output takes no deadline"}, br
	}
	defer stdout.SetReadDeadline(time.Time{})
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if res, ok := readProbeAnswer(line); ok {
				return res, br
			}
			// Another message before the answer (a log notification):
			// the SDK never sees it, which costs nothing at this point.
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return probeResult{err: "it did not answer server/discover within " + timeout.String()}, br
			}
			return probeResult{err: "reading its answer: " + err.Error()}, br
		}
	}
}

// probeHTTP posts the probe to an http server and reads a JSON or SSE answer.
func probeHTTP(ctx context.Context, hc *http.Client, url string, client *mcp.Implementation, timeout time.Duration) probeResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(probeRequest(client)))
	if err != nil {
		return probeResult{err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", modernVersion)
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := hc.Do(req)
	if err != nil {
		return probeResult{err: "the probe failed: " + err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return probeResult{err: "reading its answer: " + err.Error()}
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(body), "\n") {
			if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data:"); ok {
				if res, ok := readProbeAnswer([]byte(strings.TrimSpace(data))); ok {
					return res
				}
			}
		}
		return probeResult{err: "no answer to server/discover in its event stream"}
	}
	if res, ok := readProbeAnswer(body); ok {
		return res
	}
	return probeResult{err: fmt.Sprintf("it answered server/discover with HTTP %d", resp.StatusCode)}
}

// readCloser joins the probe's buffered reader with the pipe it reads.
type readCloser struct {
	io.Reader
	io.Closer
}
