package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notesURI and friends are what notesUpstream offers; keyedURI's address
// holds the configured secret itself.
const (
	notesURI  = "test://notes/leak"
	blobURI   = "test://notes/blob"
	brokenURI = "test://notes/broken"
	keyedURI  = "test://notes/keyed?k=" + upKey
)

// blobBytes are a blob resource's bytes: binary by type, never text.
var blobBytes = []byte{0, 0xff, 0xfe, 'k', 'e', 'y'}

// notesUpstream is a third-party server whose resources and prompts say
// what they should not: a configured secret and an operator token in a
// resource's text, description and _meta, a prompt's messages, a
// completion, a read's error and a resource update. It answers the
// subscribed channel once the hub has subscribed to notesURI for a client.
func notesUpstream(t *testing.T) (url string, s *mcp.Server, subscribed <-chan struct{}) {
	t.Helper()
	subs := make(chan struct{}, 1)
	s = mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "0"}, &mcp.ServerOptions{
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"topic " + leakTxt}}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if req.Params.URI == notesURI {
				subs <- struct{}{}
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	text := func(uri, body string) mcp.ResourceHandler {
		return func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Meta: mcp.Meta{servers.MetaRefusal: "forbidden"}, Contents: []*mcp.ResourceContents{
				{URI: uri, MIMEType: "text/plain", Text: body, Meta: mcp.Meta{"note": leakTxt}}}}, nil
		}
	}
	s.AddResource(&mcp.Resource{URI: notesURI, Name: "leak", Description: "holds " + leakTxt, MIMEType: "text/plain",
		Meta: mcp.Meta{"owner": adaTok}}, text(notesURI, "the note: "+leakTxt))
	s.AddResource(&mcp.Resource{URI: keyedURI, Name: "keyed"}, text(keyedURI, "keyed"))
	s.AddResource(&mcp.Resource{URI: blobURI, Name: "blob", MIMEType: "application/octet-stream"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: blobURI, MIMEType: "application/octet-stream", Blob: blobBytes}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: brokenURI, Name: "broken"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return nil, errors.New("cannot open it with " + leakTxt)
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://notes/by/{name}", Name: "by", Description: "by " + leakTxt},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return text(req.Params.URI, "by name: "+leakTxt)(nil, req)
		})
	s.AddPrompt(&mcp.Prompt{Name: "brief", Description: "brief " + leakTxt,
		Arguments: []*mcp.PromptArgument{{Name: "topic", Description: "about " + leakTxt}}},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "a brief " + leakTxt, Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "brief me: " + leakTxt}},
				{Role: "assistant", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: notesURI, Text: leakTxt}}},
			}}, nil
		})
	return hubtest.ServeMCP(t, s, nil), s, subs
}

// waitFeatures waits until the hub offers the named prompt: an upstream's
// resources and prompts are filed together when it has started.
func waitFeatures(t *testing.T, th *testHub, prompt string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		th.operator.mu.Lock()
		_, ok := th.operator.owned.prompts[prompt]
		th.operator.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prompt %q not offered", prompt)
		}
	}
}

// OUT-1, issue 25: an upstream's resources and prompts re-exported through
// /operator/mcp pass the sanitiser its tool results pass. A client on
// either revision lists, reads, gets a prompt, completes and (on a
// session) hears of an update; the bytes it receives hold neither a
// configured ${VAR} secret nor the operator's token, and hold what was
// redacted in their place. A blob passes byte for byte, the server's
// crewlet/ _meta key is renamed, and a resource whose address holds the
// secret is not offered at all.
func TestReexportedResourcesAndPromptsAreSanitised_OUT1(t *testing.T) {
	url, up, subscribed := notesUpstream(t)
	th := keyedHub(t, "notes", url)
	waitFeatures(t, th, "brief")
	ctx := context.Background()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			rec := &wireRecorder{}
			updated := make(chan *mcp.ResourceUpdatedNotificationParams, 1)
			client := mcp.NewClient(&mcp.Implementation{Name: "careful", Version: "0"}, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params },
			})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: th.url + "/operator/mcp",
				HTTPClient: &http.Client{Transport: hubtest.Bearer{Token: adaTok, Base: rec}}},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			redacted := func(what, s string) {
				t.Helper()
				if !strings.Contains(s, sanitize.Redacted) {
					t.Errorf("%s reached the client unredacted: %q", what, s)
				}
			}

			lr, err := cs.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var uris []string
			for _, r := range lr.Resources {
				uris = append(uris, r.URI)
				if r.URI == notesURI {
					redacted("a listed resource's description", r.Description)
					redacted("a listed resource's _meta", fmt.Sprint(r.Meta))
				}
			}
			if !slices.Contains(uris, notesURI) || slices.ContainsFunc(uris, func(u string) bool { return strings.HasPrefix(u, "test://notes/keyed") }) {
				t.Errorf("listed %v: want %s offered and the keyed resource left out", uris, notesURI)
			}
			lt, err := cs.ListResourceTemplates(ctx, nil)
			if err != nil || len(lt.ResourceTemplates) != 1 {
				t.Fatalf("templates %+v: %v", lt, err)
			}
			redacted("a template's description", lt.ResourceTemplates[0].Description)
			lp, err := cs.ListPrompts(ctx, nil)
			if err != nil || len(lp.Prompts) != 1 || len(lp.Prompts[0].Arguments) != 1 {
				t.Fatalf("prompts %+v: %v", lp, err)
			}
			redacted("a prompt's description", lp.Prompts[0].Description)
			redacted("a prompt argument's description", lp.Prompts[0].Arguments[0].Description)

			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: notesURI})
			if err != nil || len(rr.Contents) != 1 {
				t.Fatalf("read %+v: %v", rr, err)
			}
			redacted("a resource's text", rr.Contents[0].Text)
			redacted("a resource's _meta", fmt.Sprint(rr.Contents[0].Meta))
			if rr.Meta[servers.MetaRefusal] != nil || rr.Meta[sanitize.ForeignMetaKey(servers.MetaRefusal)] != "forbidden" {
				t.Errorf("the server's crewlet/ key was not renamed: %v", rr.Meta)
			}
			rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://notes/by/x"})
			if err != nil || len(rr.Contents) != 1 {
				t.Fatalf("read by template %+v: %v", rr, err)
			}
			redacted("a templated resource's text", rr.Contents[0].Text)
			rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: blobURI})
			if err != nil || len(rr.Contents) != 1 || string(rr.Contents[0].Blob) != string(blobBytes) {
				t.Fatalf("a blob did not pass as it came: %+v: %v", rr, err)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: brokenURI}); err == nil {
				t.Error("a failing read answered")
			} else {
				redacted("a read's error", err.Error())
			}

			gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "brief", Arguments: map[string]string{"topic": "x"}})
			if err != nil || len(gp.Messages) != 2 {
				t.Fatalf("prompt %+v: %v", gp, err)
			}
			redacted("a prompt's description", gp.Description)
			redacted("a prompt's message", gp.Messages[0].Content.(*mcp.TextContent).Text)
			redacted("a prompt's embedded resource", gp.Messages[1].Content.(*mcp.EmbeddedResource).Resource.Text)

			cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "brief"},
				Argument: mcp.CompleteParamsArgument{Name: "topic", Value: "t"}})
			if err != nil || len(cr.Completion.Values) != 1 {
				t.Fatalf("complete %+v: %v", cr, err)
			}
			redacted("a completion", cr.Completion.Values[0])

			// Only a session subscribes: a 2026-07-28 request is its
			// whole exchange.
			if version != "2026-07-28" {
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: notesURI}); err != nil {
					t.Fatal(err)
				}
				<-subscribed
				if err := up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: notesURI, Meta: mcp.Meta{"why": leakTxt}}); err != nil {
					t.Fatal(err)
				}
				select {
				case p := <-updated:
					redacted("a resource update's _meta", fmt.Sprint(p.Meta))
				case <-time.After(10 * time.Second):
					t.Error("the resource update never reached the client")
				}
				if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: notesURI}); err != nil {
					t.Fatal(err)
				}
			}

			raw := rec.take()
			for _, leak := range []string{upKey, adaTok} {
				if i := strings.Index(raw, leak); i >= 0 {
					t.Errorf("the client received %q: ...%s...", leak, raw[max(0, i-120):min(len(raw), i+40)])
				}
			}
			if !strings.Contains(raw, sanitize.Redacted) {
				t.Error("nothing redacted reached the client")
			}
		})
	}
}
