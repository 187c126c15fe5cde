package sanitize

// The shapes of what the hub passes on, as the go-sdk reads them. A
// result's parts (content items, resources, annotations, icons) name every
// member the SDK reads, and what they do not name is dropped, as a client
// drops it. A message the hub sanitises from Go values (a listing, a
// notification, a request) keeps the members its shape does not name, as
// free values.

var (
	freeShapeP      = &freeShape
	textShape       = &shape{kind: kText}
	stringShape     = &shape{kind: kString}
	boolShape       = &shape{kind: kBool}
	intShape        = &shape{kind: kInt}
	floatShape      = &shape{kind: kFloat}
	binaryShape     = &shape{kind: kBinary}
	metaShape       = &shape{kind: kMeta}
	freeObjectShape = &shape{kind: kFreeObject}
	textsShape      = &shape{kind: kArray, elem: textShape}
)

// fieldNouns are how an error names a text field of a part of a message.
var fieldNouns = map[string]string{
	"uri": "the URI", "uriTemplate": "the URI template", "mimeType": "the MIME type", "text": "the text",
	"name": "the name", "title": "the title", "description": "the description",
}

// texts are text fields of a part of a message, named as fieldNouns says.
func texts(keys ...string) []field {
	fields := make([]field, len(keys))
	for i, k := range keys {
		fields[i] = field{key: k, sh: textShape, where: fieldNouns[k] + " of {}"}
	}
	return fields
}

// metaField is a message's own _meta.
var metaField = field{key: "_meta", sh: metaShape, where: "its _meta"}

// itemMeta is the _meta of a part of a message.
var itemMeta = field{key: "_meta", sh: metaShape, where: "the _meta of {}"}

var annotationsShape = &shape{kind: kObject, fields: []field{
	{key: "audience", sh: textsShape},
	{key: "lastModified", sh: textShape},
	{key: "priority", sh: floatShape},
}}

var iconsShape = &shape{kind: kArray, elem: &shape{kind: kObject, fields: []field{
	{key: "src", sh: textShape},
	{key: "mimeType", sh: textShape},
	{key: "sizes", sh: textsShape},
	{key: "theme", sh: textShape},
}}}

// resourceShape is a resource's contents, embedded in a result or answered
// to a read: one rule, so a resource reads the same either way. Its blob
// is binary by type and passes as it came.
var resourceShape = &shape{kind: kObject, fields: append(texts("uri", "mimeType", "text"),
	field{key: "blob", sh: binaryShape},
	field{key: "_meta", sh: metaShape, where: "the resource _meta of {}"})}

const (
	// ctResult are the content types a tool's result may pass on.
	ctResult = ctText | ctImage | ctAudio | ctLink | ctResource
	ctAll    = ctResult | ctToolUse | ctToolResult
)

// contentFields are the members the SDK reads of a content item, each
// kept for the types that have it.
func contentFields(nested *shape) []field {
	return []field{
		{key: "text", sh: textShape, types: ctText},
		{key: "mimeType", sh: textShape, where: "the MIME type of {}", types: ctImage | ctAudio | ctLink},
		{key: "data", sh: binaryShape, types: ctImage | ctAudio},
		{key: "resource", sh: resourceShape, types: ctResource},
		{key: "uri", sh: textShape, where: "the URI of {}", types: ctLink},
		{key: "name", sh: textShape, where: "the name of {}", types: ctLink | ctToolUse},
		{key: "title", sh: textShape, where: "the title of {}", types: ctLink},
		{key: "description", sh: textShape, where: "the description of {}", types: ctLink},
		{key: "size", sh: intShape, types: ctLink},
		{key: "_meta", sh: metaShape, where: "the _meta of {}", types: ctAll},
		{key: "annotations", sh: annotationsShape, where: "the annotations of {}", types: ctResult},
		{key: "icons", sh: iconsShape, where: "the icons of {}", types: ctLink},
		{key: "id", sh: stringShape, types: ctToolUse},
		{key: "input", sh: freeObjectShape, where: "the input of {}", types: ctToolUse},
		{key: "toolUseId", sh: stringShape, types: ctToolResult},
		{key: "content", sh: nested, types: ctToolResult},
		{key: "structuredContent", sh: freeShapeP, where: "the structured content of {}", types: ctToolResult},
		{key: "isError", sh: boolShape, types: ctToolResult},
	}
}

var (
	// nestedContents is a tool result's content inside a sampling
	// message: what a tool's result may hold.
	nestedContents = &shape{kind: kContents, allow: ctResult, naming: itemOf}
	// resultContents is a tool result's content array: a tool use or a
	// tool result there is read by the SDK, but the hub does not check
	// it, so it is refused.
	resultContents = &shape{kind: kContents, allow: ctResult}
	// promptContent is a prompt message's one item of content.
	promptContent = &shape{kind: kContent, allow: ctResult}
	// samplingContent is a sampling message's content: one item or a
	// list, tool uses and results among them.
	samplingContent = &shape{kind: kContentOrList, allow: ctAll, naming: itemOf}
)

func init() {
	fields := contentFields(nestedContents)
	for _, sh := range []*shape{nestedContents, resultContents, promptContent, samplingContent} {
		sh.fields = fields
	}
}

// linkFields are what a resource link in a result and a listed resource
// share: what a client reads of a resource before reading it.
func linkFields(uri string) []field {
	return append(texts(uri, "name", "title", "description", "mimeType"),
		field{key: "annotations", sh: annotationsShape, where: "the annotations of {}"},
		iconsField, itemMeta)
}

var iconsField = field{key: "icons", sh: iconsShape, where: "the icons of {}"}

// resultState is what a result of a request, beside a tool's, carries of
// the protocol: its _meta, requests for input, and state the client
// echoes.
var resultState = []field{
	metaField,
	{key: "inputRequests", sh: inputRequestsShape, where: "its input requests"},
	{key: "requestState", sh: stringShape},
}

// message is the shape of a message the hub sanitises from Go values.
func message(noun string, fields ...field) *shape {
	return &shape{kind: kObject, keepUnknown: true, noun: noun, fields: fields}
}

func arrayOf(noun string, elem *shape) *shape {
	return &shape{kind: kArray, noun: noun, elem: elem}
}

var (
	elicitShape = message("",
		field{key: "mode", sh: textShape, where: "its mode"},
		field{key: "message", sh: textShape, where: "its message"},
		field{key: "url", sh: textShape, where: "its URL"},
		field{key: "requestedSchema", sh: freeShapeP, where: "its requested schema"},
		// The id is protocol state the client echoes.
		field{key: "elicitationId", sh: stringShape},
		metaField)
	createMessageShape = message("",
		field{key: "messages", sh: arrayOf("message %d", message("",
			field{key: "role", sh: textShape, where: "the role of {}"},
			field{key: "content", sh: samplingContent}))},
		field{key: "systemPrompt", sh: textShape, where: "its system prompt"},
		field{key: "stopSequences", sh: arrayOf("a stop sequence", textShape)},
		field{key: "modelPreferences", sh: message("",
			field{key: "hints", sh: arrayOf("a model hint", message("",
				field{key: "name", sh: textShape}))})},
		field{key: "metadata", sh: freeShapeP, where: "its metadata"},
		metaField)
	logShape = message("",
		field{key: "level", sh: textShape, where: "its level"},
		field{key: "logger", sh: textShape, where: "its logger name"},
		field{key: "data", sh: freeShapeP, where: "its data"},
		metaField)
	progressShape = message("",
		// The token is the client's own.
		field{key: "progressToken", sh: &shape{kind: kAny}},
		field{key: "message", sh: textShape, where: "its message"},
		metaField)
	// inputRequestsShape is the requests for input a result carries,
	// each sanitised as the request it stands for.
	inputRequestsShape = &shape{kind: kMap, elem: &shape{kind: kInputRequest, methods: map[string]*shape{
		"elicitation/create":     elicitShape,
		"sampling/createMessage": createMessageShape,
		"roots/list":             listRootsShape,
	}}}
	listRootsShape    = message("", metaField)
	readResourceShape = message("", append([]field{
		{key: "contents", sh: arrayOf("resource contents item %d", resourceShape)}}, resultState...)...)
	getPromptShape = message("", append([]field{
		{key: "description", sh: textShape, where: "its description"},
		{key: "messages", sh: arrayOf("message %d", message("",
			field{key: "role", sh: textShape, where: "the role of {}"},
			field{key: "content", sh: promptContent}))}}, resultState...)...)
	listedResourceShape = message("its resource", linkFields("uri")...)
	templateShape       = message("its template", linkFields("uriTemplate")...)
	listedPromptShape   = message("its prompt", append(texts("name", "title", "description"),
		field{key: "arguments", sh: arrayOf("argument %d of its prompt", message("", texts("name", "title", "description")...))},
		iconsField, itemMeta)...)
	completeShape = message("",
		field{key: "completion", sh: message("",
			field{key: "values", sh: arrayOf("value %d", textShape)})},
		metaField)
	resourceUpdatedShape = message("",
		field{key: "uri", sh: textShape, where: "its URI"},
		metaField)
	listedToolShape = message("its tool", append(texts("name", "title", "description"),
		field{key: "annotations", sh: message("",
			field{key: "title", sh: textShape, where: "the title of its tool's annotations"})},
		field{key: "inputSchema", sh: freeShapeP, where: "the input schema of {}"},
		field{key: "outputSchema", sh: freeShapeP, where: "the output schema of {}"},
		iconsField, itemMeta)...)
)
