package sanitize

import (
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result returns a sanitised copy of a third-party server's tool result:
// every piece of text in it (text content, text resources, resource link
// names, titles, descriptions, URIs and MIME types, structured content,
// _meta) has control characters stripped and secrets redacted, and every
// _meta key that would read as the hub's own is renamed (ForeignMetaKey):
// only the hub speaks as the hub.
//
// Image and audio content and blob resources are binary by type and pass
// as they are. If any text field holds binary data, or the result holds a
// content type that cannot be checked, Result returns an error whose
// message is a sentence saying which content item (indexed from 0) and why,
// and no result: the caller should refuse the result rather than pass on
// part of it.
//
// InputRequests and RequestState are passed on unchanged: they are the
// server's requests for client input and an opaque value the client must
// echo byte for byte, protocol state rather than tool output.
//
// r is never modified. The copy has its own content items, annotations and
// top-level maps (_meta, InputRequests); binary payloads, and structured
// content values that needed no change, are shared with r.
func (s *Sanitizer) Result(r *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	return s.result(r, nil, true)
}

// Rewrite is given each string of a result's structured content that the
// sanitiser changed, as it was and as sanitised, and answers the string to
// keep. A first-party server's fences are digests of the text they wrap,
// so the hub re-issues them over what the sanitiser made of that text.
type Rewrite func(raw, clean string) string

// ResultWith sanitises a first-party server's result as Result does, with
// rewrite (nil: none) applied to every string of the structured content the
// sanitiser changed. Its _meta keys are the hub's own words (a refusal's
// class among them) and are kept as they are.
func (s *Sanitizer) ResultWith(r *mcp.CallToolResult, rewrite Rewrite) (*mcp.CallToolResult, error) {
	return s.result(r, rewrite, false)
}

// result is Result (foreign set) and ResultWith.
func (s *Sanitizer) result(r *mcp.CallToolResult, rewrite Rewrite, foreign bool) (*mcp.CallToolResult, error) {
	if r == nil {
		return nil, nil
	}
	// One secret set for the whole result, so a concurrent SetSecrets
	// cannot leave it half redacted under the old set and half under the
	// new.
	w := &decWalker{s: s, set: s.loadSecrets(), foreign: foreign}
	out := *r
	if r.Content != nil {
		out.Content = make([]mcp.Content, len(r.Content))
		for i, c := range r.Content {
			nc, err := w.content(i, c)
			if err != nil {
				return nil, err
			}
			out.Content[i] = nc
		}
	}
	var err error
	w.rewrite = rewrite
	if out.StructuredContent, err = w.structured("its structured content", r.StructuredContent); err != nil {
		return nil, err
	}
	w.rewrite = nil
	if out.Meta, err = w.meta("its _meta", r.Meta); err != nil {
		return nil, err
	}
	out.InputRequests = maps.Clone(r.InputRequests)
	return &out, nil
}

// decWalker sanitises the parts of one result. path tracks where in a JSON
// value the walk is, for error messages only.
type decWalker struct {
	s       *Sanitizer
	set     *secretSet
	path    []decPathElem
	rewrite Rewrite // applied to strings str changed; nil: none
	// foreign: what is walked came from a third-party server, whose _meta
	// keys are renamed where they would read as the hub's.
	foreign bool
}

// decPathElem is one step into a JSON value: an object key or, when isIdx is
// set, an array index.
type decPathElem struct {
	key   string
	index int
	isIdx bool
}

func (w *decWalker) text(where, in string) (string, error) {
	out, berr := w.s.text(in, w.set)
	if berr != nil {
		berr.Where = where
		return "", berr
	}
	return out, nil
}

// textField is one text field of a content item, named for error messages.
type textField struct {
	name string
	p    *string
}

// texts sanitises several text fields of one item in place; where names
// the item.
func (w *decWalker) texts(where string, fields []textField) error {
	for _, f := range fields {
		if *f.p == "" {
			continue
		}
		out, err := w.text(f.name+" of "+where, *f.p)
		if err != nil {
			return err
		}
		*f.p = out
	}
	return nil
}

func copyAnnotations(a *mcp.Annotations) *mcp.Annotations {
	if a == nil {
		return nil
	}
	c := *a
	c.Audience = slices.Clone(a.Audience)
	return &c
}

// content sanitises content item i.
func (w *decWalker) content(i int, c mcp.Content) (mcp.Content, error) {
	var err error
	switch c := c.(type) {
	case nil:
		return nil, nil
	case *mcp.TextContent:
		if c == nil {
			return c, nil
		}
		where := fmt.Sprintf("text content item %d", i)
		n := *c
		n.Annotations = copyAnnotations(c.Annotations)
		if n.Text, err = w.text(where, c.Text); err != nil {
			return nil, err
		}
		if n.Meta, err = w.meta("the _meta of "+where, c.Meta); err != nil {
			return nil, err
		}
		return &n, nil
	case *mcp.ImageContent:
		if c == nil {
			return c, nil
		}
		// Data is base64 on the wire and binary by type: never text.
		n := *c
		n.Annotations = copyAnnotations(c.Annotations)
		if n.Meta, err = w.meta(fmt.Sprintf("the _meta of image content item %d", i), c.Meta); err != nil {
			return nil, err
		}
		return &n, nil
	case *mcp.AudioContent:
		if c == nil {
			return c, nil
		}
		n := *c
		n.Annotations = copyAnnotations(c.Annotations)
		if n.Meta, err = w.meta(fmt.Sprintf("the _meta of audio content item %d", i), c.Meta); err != nil {
			return nil, err
		}
		return &n, nil
	case *mcp.ResourceLink:
		if c == nil {
			return c, nil
		}
		where := fmt.Sprintf("resource link content item %d", i)
		n := *c
		n.Annotations = copyAnnotations(c.Annotations)
		n.Icons = slices.Clone(c.Icons)
		if err := w.texts(where, []textField{
			{"the URI", &n.URI}, {"the name", &n.Name}, {"the title", &n.Title},
			{"the description", &n.Description}, {"the MIME type", &n.MIMEType},
		}); err != nil {
			return nil, err
		}
		if n.Meta, err = w.meta("the _meta of "+where, c.Meta); err != nil {
			return nil, err
		}
		return &n, nil
	case *mcp.EmbeddedResource:
		if c == nil {
			return c, nil
		}
		where := fmt.Sprintf("embedded resource content item %d", i)
		n := *c
		n.Annotations = copyAnnotations(c.Annotations)
		if n.Resource, err = w.resource(where, "the resource _meta of "+where, c.Resource); err != nil {
			return nil, err
		}
		if n.Meta, err = w.meta("the _meta of "+where, c.Meta); err != nil {
			return nil, err
		}
		return &n, nil
	default:
		// Passing on what cannot be checked would defeat the point.
		return nil, fmt.Errorf("the tool's result held content item %d of type %T, which the hub cannot check for control characters and secrets; only text, image, audio, resource link and embedded resource content can be passed on", i, c)
	}
}

// resource sanitises one resource's contents, embedded in a result or
// answered to a read (ReadResource): one rule, so a resource reads the same
// either way. Its text, URI and MIME type are text; its blob is binary by
// type and passes as it came. where names it, metaWhere its _meta.
func (w *decWalker) resource(where, metaWhere string, r *mcp.ResourceContents) (*mcp.ResourceContents, error) {
	if r == nil {
		return nil, nil
	}
	res := *r
	if err := w.texts(where, []textField{
		{"the text", &res.Text}, {"the URI", &res.URI}, {"the MIME type", &res.MIMEType},
	}); err != nil {
		return nil, err
	}
	var err error
	if res.Meta, err = w.meta(metaWhere, r.Meta); err != nil {
		return nil, err
	}
	return &res, nil
}

// meta sanitises a _meta map. The top-level map is always a new one, so
// that whoever holds the copy can add keys without touching the original.
func (w *decWalker) meta(where string, m mcp.Meta) (mcp.Meta, error) {
	if m == nil {
		return nil, nil
	}
	out, changed, err := w.walkMap(where, m)
	if err != nil {
		return nil, err
	}
	if !changed {
		out = maps.Clone(m)
	}
	if w.foreign {
		renameForeign(out)
	}
	return out, nil
}
