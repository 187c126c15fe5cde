package upstream

import "testing"

// The stdio guard tells a call's answer past the bound from its top-level
// members alone, read in pieces: an id of the hub's, at the top and not
// inside the result, in a message that is not a request.
func TestTopMembersTellsACallsAnswer(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want string // the call's id; "" for no call's answer
	}{
		{`{"jsonrpc":"2.0","id":"crewlet-call-7","result":{}}`, "crewlet-call-7"},
		{`{"result":{"id":"x","text":"\"id\":\"crewlet-call-1\""},"id":"crewlet-call-8"}`, "crewlet-call-8"},
		{`{"\u0069d":"crewlet-call-9","result":[1,{"method":"m"}]}`, "crewlet-call-9"},
		{`{"id":"crewlet-call-\u0031\"","result":{}}`, `crewlet-call-1"`},
		{`{"result":{"id":"crewlet-call-1"},"id":3}`, ""},
		{`{"id":"crewlet-call-1","method":"sampling/createMessage","params":{}}`, ""},
		{`{"id":"other-1","result":{}}`, ""},
		{`{"id":["crewlet-call-1"],"result":{}}`, ""},
		{`[{"id":"crewlet-call-1","result":{}}]`, ""},
		{`{"method":"notifications/message","params":{"id":"crewlet-call-1"}}`, ""},
	} {
		for _, piece := range []int{1, 3, len(c.msg)} {
			var top topMembers
			for rest := c.msg; len(rest) > 0; {
				n := min(piece, len(rest))
				top.feed([]byte(rest[:n]))
				rest = rest[n:]
			}
			id, ok := top.callAnswered()
			if ok != (c.want != "") || (ok && id != c.want) {
				t.Errorf("%s in pieces of %d: %q %v; want %q", c.msg, piece, id, ok, c.want)
			}
		}
	}
}
