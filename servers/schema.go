package servers

import (
	"github.com/google/jsonschema-go/jsonschema"
)

// portableSchema is the input schema a typed tool advertises: the schema
// inferred from its Go struct, rewritten into the spelling every client can
// map, and accepting exactly the values the inferred one accepts.
//
// The inference writes two things that clients mapping tool schemas onto a
// single-type dialect (the OpenAPI subset Gemini's function declarations
// use, among others) reject or silently drop, and that the MCP Inspector's
// --strict check reports:
//
//   - a pointer, slice or map field as a type array, ["null","array"], so
//     that an explicit null is accepted. It becomes anyOf branches of one
//     type each: the field's own type first, carrying the keywords that
//     only apply to that type (items, properties, minimum...), then
//     {"type":"null"}. Keywords for every type (enum, allOf...) and the
//     field's description stay beside the anyOf, so they still apply to
//     both branches.
//   - an interface field (any, []any's items) as a schema with no keyword,
//     a bare true: any JSON value. It becomes the same contract said
//     type by type, anyOf null, boolean, number, string, array and object,
//     which a client can read, rather than a narrower type the tool does
//     not ask for.
//
// The rewrite is a copy; the inferred schema is what arguments are checked
// against, so what is refused and the words it is refused in stay the
// inference's (one line naming the types wanted, where anyOf would report
// every branch).
func portableSchema(inferred *jsonschema.Schema) *jsonschema.Schema {
	s := inferred.CloneSchemas()
	makePortable(s, "")
	return s
}

// makePortable rewrites s in place, children first. keyword is the one s
// sits under in its parent ("" at the root or in a map of schemas such as
// properties).
func makePortable(s *jsonschema.Schema, keyword string) {
	if s == nil {
		return
	}
	eachChild(s, makePortable)
	switch {
	case len(s.Types) > 0:
		splitTypes(s)
	case !constrains(s):
		// Under not, {} is the false schema's other half ({"not": {}});
		// where a boolean is the keyword's own value (additionalProperties
		// of map[string]any), a bare true is the ordinary spelling. Neither
		// is a schema a client has to map.
		if keyword == "not" || (booleanPosition[keyword] && !annotated(s)) {
			return
		}
		s.AnyOf = anyJSON()
	}
}

// booleanPosition lists the keywords whose value JSON Schema spells as a
// boolean as often as a schema.
var booleanPosition = map[string]bool{
	"additionalProperties": true, "unevaluatedProperties": true,
	"additionalItems": true, "unevaluatedItems": true,
}

// anyJSON is every JSON value, one type a branch ("number" takes integers).
func anyJSON() []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, t := range []string{"null", "boolean", "number", "string", "array", "object"} {
		out = append(out, &jsonschema.Schema{Type: t})
	}
	return out
}

// splitTypes turns a type array into anyOf branches of one type each. The
// keywords only one type reads move into that type's branch; the rest stay.
func splitTypes(s *jsonschema.Schema) {
	types := s.Types
	s.Types = nil
	if len(types) == 1 {
		s.Type = types[0]
		return
	}
	specific := takeTypeSpecific(s)
	var nonNull, null []*jsonschema.Schema
	for _, t := range types {
		if t == "null" {
			null = append(null, &jsonschema.Schema{Type: "null"})
			continue
		}
		b := specific.CloneSchemas()
		b.Type = t
		nonNull = append(nonNull, b)
	}
	// The field's own type first: a reader (a model among them) sees what
	// to send before it sees that null is also taken.
	branches := append(nonNull, null...)
	if s.AnyOf != nil {
		// Both must hold: the union and the anyOf already there.
		s.AllOf = append(s.AllOf, &jsonschema.Schema{AnyOf: s.AnyOf})
	}
	s.AnyOf = branches
}

// takeTypeSpecific moves out of s every keyword that only constrains one
// JSON type (a number's bounds, a string's length, an array's items, an
// object's properties) and returns them as a schema of their own.
func takeTypeSpecific(s *jsonschema.Schema) *jsonschema.Schema {
	t := &jsonschema.Schema{
		// numbers
		MultipleOf: s.MultipleOf, Minimum: s.Minimum, Maximum: s.Maximum,
		ExclusiveMinimum: s.ExclusiveMinimum, ExclusiveMaximum: s.ExclusiveMaximum,
		// strings
		MinLength: s.MinLength, MaxLength: s.MaxLength, Pattern: s.Pattern, Format: s.Format,
		ContentEncoding: s.ContentEncoding, ContentMediaType: s.ContentMediaType, ContentSchema: s.ContentSchema,
		// arrays
		PrefixItems: s.PrefixItems, Items: s.Items, ItemsArray: s.ItemsArray,
		MinItems: s.MinItems, MaxItems: s.MaxItems, AdditionalItems: s.AdditionalItems,
		UniqueItems: s.UniqueItems, Contains: s.Contains, MinContains: s.MinContains, MaxContains: s.MaxContains,
		UnevaluatedItems: s.UnevaluatedItems,
		// objects
		MinProperties: s.MinProperties, MaxProperties: s.MaxProperties, Required: s.Required,
		DependentRequired: s.DependentRequired, DependentSchemas: s.DependentSchemas,
		DependencySchemas: s.DependencySchemas, DependencyStrings: s.DependencyStrings,
		Properties: s.Properties, PatternProperties: s.PatternProperties,
		AdditionalProperties: s.AdditionalProperties, PropertyNames: s.PropertyNames,
		UnevaluatedProperties: s.UnevaluatedProperties, PropertyOrder: s.PropertyOrder,
	}
	s.MultipleOf, s.Minimum, s.Maximum, s.ExclusiveMinimum, s.ExclusiveMaximum = nil, nil, nil, nil, nil
	s.MinLength, s.MaxLength, s.Pattern, s.Format = nil, nil, "", ""
	s.ContentEncoding, s.ContentMediaType, s.ContentSchema = "", "", nil
	s.PrefixItems, s.Items, s.ItemsArray, s.MinItems, s.MaxItems, s.AdditionalItems = nil, nil, nil, nil, nil, nil
	s.UniqueItems, s.Contains, s.MinContains, s.MaxContains, s.UnevaluatedItems = false, nil, nil, nil, nil
	s.MinProperties, s.MaxProperties, s.Required, s.DependentRequired, s.DependentSchemas = nil, nil, nil, nil, nil
	s.DependencySchemas, s.DependencyStrings = nil, nil
	s.Properties, s.PatternProperties, s.AdditionalProperties, s.PropertyNames = nil, nil, nil, nil
	s.UnevaluatedProperties, s.PropertyOrder = nil, nil
	return t
}

// constrains reports whether s holds any keyword that a value can fail:
// without one it accepts everything, as a bare true does.
func constrains(s *jsonschema.Schema) bool {
	return s.Type != "" || len(s.Types) > 0 || s.Enum != nil || s.Const != nil ||
		s.Ref != "" || s.DynamicRef != "" ||
		s.MultipleOf != nil || s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil ||
		s.MinLength != nil || s.MaxLength != nil || s.Pattern != "" || s.Format != "" ||
		s.ContentEncoding != "" || s.ContentMediaType != "" || s.ContentSchema != nil ||
		s.PrefixItems != nil || s.Items != nil || s.ItemsArray != nil || s.MinItems != nil || s.MaxItems != nil ||
		s.AdditionalItems != nil || s.UniqueItems || s.Contains != nil || s.MinContains != nil || s.MaxContains != nil ||
		s.UnevaluatedItems != nil ||
		s.MinProperties != nil || s.MaxProperties != nil || s.Required != nil || s.DependentRequired != nil ||
		s.DependentSchemas != nil || s.DependencySchemas != nil || s.DependencyStrings != nil ||
		s.Properties != nil || s.PatternProperties != nil || s.AdditionalProperties != nil ||
		s.PropertyNames != nil || s.UnevaluatedProperties != nil ||
		s.AllOf != nil || s.AnyOf != nil || s.OneOf != nil || s.Not != nil ||
		// if alone asserts nothing: only with then or else does it.
		(s.If != nil && (s.Then != nil || s.Else != nil))
}

// annotated reports whether s says anything about its value (a title or
// description), which stops it being written as a bare true.
func annotated(s *jsonschema.Schema) bool {
	return s.Title != "" || s.Description != "" || s.Comment != "" || s.Default != nil ||
		s.Examples != nil || s.Deprecated || s.ReadOnly || s.WriteOnly
}

// eachChild calls f on every subschema of s with the keyword it sits under.
func eachChild(s *jsonschema.Schema, f func(*jsonschema.Schema, string)) {
	one := map[string]*jsonschema.Schema{
		"items": s.Items, "additionalItems": s.AdditionalItems, "unevaluatedItems": s.UnevaluatedItems,
		"contains": s.Contains, "additionalProperties": s.AdditionalProperties,
		"unevaluatedProperties": s.UnevaluatedProperties, "propertyNames": s.PropertyNames,
		"not": s.Not, "if": s.If, "then": s.Then, "else": s.Else, "contentSchema": s.ContentSchema,
	}
	for k, c := range one {
		f(c, k)
	}
	for _, list := range [][]*jsonschema.Schema{s.PrefixItems, s.ItemsArray, s.AllOf, s.AnyOf, s.OneOf} {
		for _, c := range list {
			f(c, "")
		}
	}
	for _, m := range []map[string]*jsonschema.Schema{s.Properties, s.PatternProperties, s.Defs, s.Definitions,
		s.DependentSchemas, s.DependencySchemas} {
		for _, c := range m {
			f(c, "")
		}
	}
}
