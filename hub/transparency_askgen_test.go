package hub

import "strconv"

// The requests of the client a scripted server makes (FuzzTransparency),
// derived from the fuzz input as its answers are: params of every field
// the protocol has, holding the generators' texts (secrets the hub
// redacts, control characters, JSON-RPC look-alikes), the hub's _meta
// words, JSON-RPC members among the params, and at times params no
// client decodes, so the refusal of a request is compared too.

// ask is a request of the client.
func (d *draw) ask() note {
	switch d.n(3) {
	case 0:
		return note{method: "sampling/createMessage", params: d.samplingParams()}
	case 1:
		return note{method: "elicitation/create", params: d.elicitParams()}
	}
	return note{method: "roots/list", params: d.rootsParams()}
}

// undecodable is one in eight requests: params of a member's wrong type.
func (d *draw) undecodable() bool { return d.n(8) == 0 }

// lookAlikes writes, at times, JSON-RPC members among a request's params:
// a client reads the params as the request's, never as the message's.
func (d *draw) lookAlikes(b []byte, first *bool) []byte {
	if d.n(4) == 0 {
		for _, k := range []string{"jsonrpc", "id", "method", "result", "error"}[:1+d.n(5)] {
			b = d.value(member(b, first, k), 2)
		}
	}
	return b
}

func (d *draw) samplingParams() []byte {
	first := true
	b := []byte{'{'}
	if d.undecodable() {
		wrong := []string{"5", `"text"`, `[{"role":"user","content":7}]`, `[{"role":"user","content":{"type":"nonesuch"}}]`}
		b = append(member(b, &first, "messages"), wrong[d.n(len(wrong))]...)
	} else {
		b = append(member(b, &first, "messages"), '[')
		for i := range 1 + d.n(3) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = append(b, []string{`"user"`, `"assistant"`}[d.n(2)]...)
			b = d.samplingContent(append(b, `,"content":`...))
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = strconv.AppendInt(member(b, &first, "maxTokens"), int64(1+d.n(250)), 10)
	if d.n(2) == 0 {
		b = appendString(member(b, &first, "systemPrompt"), d.text())
	}
	if d.n(3) == 0 {
		b = append(member(b, &first, "stopSequences"), '[')
		b = append(appendString(b, d.text()), ']')
	}
	if d.n(3) == 0 {
		b = append(member(b, &first, "modelPreferences"), `{"hints":[{"name":`...)
		b = append(appendString(b, d.text()), `}],"speedPriority":0.5}`...)
	}
	if d.n(4) == 0 {
		b = append(member(b, &first, "includeContext"), []string{`"none"`, `"thisServer"`, `"allServers"`}[d.n(3)]...)
	}
	if d.n(3) == 0 {
		b = d.object(member(b, &first, "metadata"), 3)
	}
	if d.n(3) == 0 {
		b = d.metaObject(member(b, &first, "_meta"))
	}
	b = d.lookAlikes(b, &first)
	return append(b, '}')
}

// samplingContent is a sampling message's one content item: text, an
// image or audio.
func (d *draw) samplingContent(b []byte) []byte {
	first := true
	b = append(b, '{')
	switch d.n(4) {
	case 0:
		b = d.media(b, &first)
	default:
		b = append(member(b, &first, "type"), `"text"`...)
		b = appendString(member(b, &first, "text"), d.text())
	}
	if d.n(4) == 0 {
		b = d.metaObject(member(b, &first, "_meta"))
	}
	return append(b, '}')
}

// elicitParams is a form (at times one whose "answer" the client fills
// in), now and then a URL elicitation, which the rig's clients do not
// take.
func (d *draw) elicitParams() []byte {
	first := true
	b := []byte{'{'}
	switch {
	case d.undecodable():
		wrong := []string{`"message":5`, `"mode":["form"]`, `"url":{}`, `"message":"x","requestedSchema":"a schema"`}
		b = append(b, wrong[d.n(len(wrong))]...)
		first = false
	case d.n(8) == 0:
		b = append(member(b, &first, "mode"), `"url"`...)
		b = appendString(member(b, &first, "message"), d.text())
		b = appendString(member(b, &first, "url"), "https://example.com/"+uriPath(d.text()))
		b = appendString(member(b, &first, "elicitationId"), "e-"+uriPath(d.text()))
	default:
		b = appendString(member(b, &first, "message"), d.text())
		b = append(member(b, &first, "requestedSchema"), `{"type":"object","properties":{`...)
		field := []string{"answer", "other"}[d.n(2)]
		b = append(appendString(b, field), `:{"type":"string"`...)
		if d.n(2) == 0 {
			b = appendString(append(b, `,"title":`...), d.text())
		}
		if d.n(2) == 0 {
			b = appendString(append(b, `,"description":`...), d.text())
		}
		b = append(b, '}')
		if d.n(3) == 0 {
			b = append(b, `,"n":{"type":"number","default":3}`...)
		}
		b = append(b, '}')
		if d.n(4) == 0 {
			b = append(append(append(b, `,"required":[`...), strconv.Quote(field)...), ']')
		}
		b = append(b, '}')
	}
	if d.n(3) == 0 {
		b = d.metaObject(member(b, &first, "_meta"))
	}
	b = d.lookAlikes(b, &first)
	return append(b, '}')
}

// rootsParams are none, an empty object or one with _meta.
func (d *draw) rootsParams() []byte {
	switch {
	case d.undecodable():
		return []byte(`{"_meta":5}`)
	case d.n(4) == 0:
		return nil
	case d.n(3) == 0:
		return []byte(`{}`)
	}
	first := true
	return append(d.metaObject(member([]byte{'{'}, &first, "_meta")), '}')
}
