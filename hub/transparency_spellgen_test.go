package hub

// The spellings FuzzTransparency's raw client writes (the checks are in
// transparency_spell_test.go), derived from the fuzz input as its answers
// are (transparency_gen_test.go), but read from its end.

// A spelling is how a client writes what names its call: the JSON-RPC
// id, the progress token, and a notifications/cancelled of the call.
// Both paths must read each as the SDK reads it (issue 36, findings 7
// and 8): an id comes back as the SDK writes it, a token as the client
// wrote it, and a cancellation cancels the call exactly when the SDK's
// decoding (keys matched exactly, escapes resolved, a number made an
// int64 through float64) names the call by it.
type spelling struct {
	id     string // the call's id, as written
	token  string // its progress token as written; "" for none
	cancel string // a notifications/cancelled message, as written
	// cancels says the SDK reads cancel as cancelling the call.
	cancels bool
}

// spellIDs are ids a client writes, each with requestIds the SDK reads
// as naming the call (same) and requestIds it does not (other).
var spellIDs = []struct {
	id          string
	same, other []string
}{
	{`5`, []string{`5`, `5.0`, `5e0`, `50e-1`, `5.9`}, []string{`"5"`, `6`, `-5`, `null`, `true`}},
	{`-7`, []string{`-7`, `-7.0`, `-7e0`}, []string{`7`, `"-7"`}},
	{`9007199254740993`, []string{`9007199254740993`, `9007199254740992`, `9.007199254740993e15`}, []string{`9007199254740994`, `"9007199254740993"`}},
	{`123456789012345678`, []string{`123456789012345678`, `123456789012345680`, `1.2345678901234568e17`}, []string{`123456789012345700`, `"123456789012345678"`}},
	{`"ab"`, []string{`"ab"`, `"a\u0062"`, `"\u0061\u0062"`}, []string{`"AB"`, `"ab "`, `"a\\u0062"`}},
	{`"crewlet-7"`, []string{`"crewlet-7"`, `"crewlet\u002d7"`}, []string{`7`, `"crewlet-07"`}},
	{`"\u00e9t\u00e9"`, []string{`"été"`, `"\u00e9t\u00e9"`}, []string{`"ete"`}},
	{`1e2`, []string{`100`, `1e2`, `100.0`}, []string{`"1e2"`, `101`}},
	{`5.0`, []string{`5`, `5.0`}, []string{`"5.0"`}},
}

// spellTokens are progress tokens a client writes: strings plain and
// escaped, integers past 2^53, and numbers in other forms.
var spellTokens = []string{
	"", `"tok-1"`, `"a\u0062"`, `"\u00e9t\u00e9"`, `9007199254740993`, `123456789012345678`,
	`1e2`, `5.0`, `42`, `-0`, `1.5`, `-12`,
}

// Spellings of a cancellation's method and keys: the first of each is
// what the SDK reads, the rest what it does not (encoding/json would take
// the other cases; the SDK matches keys exactly).
var (
	spellMethods   = []string{`"notifications/cancelled"`, `"notifications\/cancelled"`, `"notifications/cancelle\u0064"`}
	spellNoMethods = []string{`"notifications/Cancelled"`, `"notifications/cancelled "`}
	spellMethodKey = []string{`"method"`, `"METHOD"`, `"Method"`}
	spellParamsKey = []string{`"params"`, `"Params"`}
	spellIDKey     = []string{`"requestId"`, `"RequestID"`, `"requestID"`, `"request_id"`}
)

// deriveSpelling makes a spelling of data read from its end, so an input
// keeps the answer it makes (deriveScript reads from its start).
func deriveSpelling(data []byte) spelling {
	rev := make([]byte, len(data))
	for i, c := range data {
		rev[len(data)-1-i] = c
	}
	return (&draw{b: rev}).spelling()
}

func (d *draw) spelling() spelling {
	id := spellIDs[d.n(len(spellIDs))]
	sp := spelling{id: id.id, token: spellTokens[d.n(len(spellTokens))], cancels: true}
	// pick takes the first choice, what the SDK reads, three times in
	// four (and for an input out of bytes); another otherwise, which
	// leaves the call running.
	pick := func(choices []string) string {
		if len(choices) > 1 && d.n(4) == 3 {
			sp.cancels = false
			return choices[1+d.n(len(choices)-1)]
		}
		return choices[0]
	}
	methodKey := pick(spellMethodKey)
	method := spellMethods[d.n(len(spellMethods))]
	if d.n(6) == 5 {
		method, sp.cancels = spellNoMethods[d.n(len(spellNoMethods))], false
	}
	paramsKey := pick(spellParamsKey)
	idKey := pick(spellIDKey)
	value := id.same[d.n(len(id.same))]
	if d.n(4) == 3 {
		value, sp.cancels = id.other[d.n(len(id.other))], false
	}
	reason := `,"reason":"spelled"`
	if d.n(8) == 7 {
		// A reason that is not a string: the SDK refuses the message.
		reason, sp.cancels = `,"reason":5`, false
	}
	sp.cancel = `{"jsonrpc":"2.0",` + methodKey + `:` + method + `,` + paramsKey + `:{` + idKey + `:` + value + reason + `}}`
	return sp
}
