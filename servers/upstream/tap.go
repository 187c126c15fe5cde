package upstream

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tapTransport keeps the raw annotations of every tools/list answer. The SDK
// decodes annotations into booleans, which turns an absent readOnlyHint into
// false; the hub must tell "the server said no" from "the server said
// nothing" (CAT-7), so it reads the wire.
type tapTransport struct {
	inner mcp.Transport
	raw   *rawAnnotations
}

type rawAnnotations struct {
	mu      sync.Mutex
	pending map[jsonrpc.ID]bool
	byTool  map[string]json.RawMessage
}

func newRawAnnotations() *rawAnnotations {
	return &rawAnnotations{pending: map[jsonrpc.ID]bool{}, byTool: map[string]json.RawMessage{}}
}

// get returns the annotations the server sent for a tool, raw; nil when it
// sent none.
func (r *rawAnnotations) get(tool string) json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byTool[tool]
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, raw: t.raw}, nil
}

type tapConn struct {
	mcp.Connection
	raw *rawAnnotations
}

func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.IsCall() {
		c.raw.mu.Lock()
		c.raw.pending[req.ID] = true
		c.raw.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.raw.mu.Lock()
		if c.raw.pending[resp.ID] {
			delete(c.raw.pending, resp.ID)
			var page struct {
				Tools []struct {
					Name        string          `json:"name"`
					Annotations json.RawMessage `json:"annotations"`
				} `json:"tools"`
			}
			if json.Unmarshal(resp.Result, &page) == nil {
				for _, tl := range page.Tools {
					c.raw.byTool[tl.Name] = tl.Annotations
				}
			}
		}
		c.raw.mu.Unlock()
	}
	return msg, err
}
