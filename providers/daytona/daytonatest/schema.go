package daytonatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// SDK returns node and the directory of the installed official Daytona
// TypeScript SDK (testdata/sdk, pinned by its package-lock.json), or skips
// the test, saying how to install what is missing.
func SDK(t testing.TB) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Daytona SDK needs Node.js >= 18")
	}
	_, file, _, _ := runtime.Caller(0)
	dir = filepath.Join(filepath.Dir(file), "testdata", "sdk")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@daytonaio", "sdk", "package.json")); err != nil {
		t.Skip("the Daytona SDK is not installed: run npm ci in providers/daytona/daytonatest/testdata/sdk")
	}
	return node, dir
}

// Schema is the wire schema of Daytona's generated OpenAPI clients
// (@daytona/api-client, @daytona/toolbox-api-client), read from the
// installed SDK's model files by testdata/sdk/schema.mjs.
type Schema struct {
	Operations []Operation                           `json:"operations"`
	Models     map[string]map[string]json.RawMessage `json:"models"` // by client, then name
	Enums      map[string][]string                   `json:"enums"`
	Versions   map[string]string                     `json:"versions"`
}

// Operation is one call of a client.
type Operation struct {
	Client string   `json:"client"` // "api" or "toolbox"
	Name   string   `json:"name"`   // the generated method's name
	Method string   `json:"method"`
	Path   string   `json:"path"` // "/sandbox/{sandboxIdOrName}/start"
	Query  []string `json:"query"`
	Body   *Type    `json:"body"`
	Answer Type     `json:"answer"`
}

// Type is a type of the schema.
type Type struct {
	Kind   string           `json:"kind"` // string number boolean null any literal array map object union ref
	Name   string           `json:"name"` // ref
	Value  string           `json:"value"`
	Format string           `json:"format"` // "date-time"
	Of     json.RawMessage  `json:"of"`     // a Type (array, map) or a list (union)
	Fields map[string]Field `json:"fields"` // object
}

// Field is a field of a model.
type Field struct {
	Type     Type `json:"type"`
	Required bool `json:"required"`
}

// LoadSchema runs schema.mjs on the installed SDK (skipping the test when
// it is not installed).
func LoadSchema(t testing.TB) *Schema {
	t.Helper()
	node, dir := SDK(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "schema.mjs")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("schema.mjs: %v\n%s", err, stderr.String())
	}
	var s Schema
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("schema.mjs printed no schema: %v", err)
	}
	if len(s.Operations) < 50 || len(s.Models["api"]) < 50 || len(s.Models["toolbox"]) < 50 {
		t.Fatalf("schema.mjs read only %d operations, %d + %d models: the generated clients' layout has changed", len(s.Operations), len(s.Models["api"]), len(s.Models["toolbox"]))
	}
	return &s
}

// Route finds the operation an exchange of the fake called: its client
// and the operation, or nil for a path that is no API call (the preview
// proxy) and for a call no client knows.
func (s *Schema) Route(e Exchange) (client string, op *Operation, api bool) {
	rest := ""
	switch {
	case strings.HasPrefix(e.Path, "/api/socket.io/"):
		// The SDKs' event stream (socket.io), which is no REST call: the
		// fake does not serve it, and the SDKs poll instead.
		return "", nil, false
	case strings.HasPrefix(e.Path, "/api/"):
		client, rest = "api", strings.TrimPrefix(e.Path, "/api")
	case strings.HasPrefix(e.Path, toolboxPrefix):
		client = "toolbox"
		_, after, _ := strings.Cut(strings.TrimPrefix(e.Path, toolboxPrefix), "/")
		rest = "/" + after
	default:
		return "", nil, false
	}
	var best *Operation
	for i := range s.Operations {
		o := &s.Operations[i]
		if o.Client != client || o.Method != e.Method || !pathPattern(o.Path).MatchString(rest) {
			continue
		}
		// The most literal template wins: /sandbox/for-runner over
		// /sandbox/{sandboxIdOrName}.
		if best == nil || strings.Count(o.Path, "{") < strings.Count(best.Path, "{") {
			best = o
		}
	}
	return client, best, true
}

var placeholder = regexp.MustCompile(`\{[^}]+\}`)

func pathPattern(p string) *regexp.Regexp {
	parts := placeholder.Split(p, -1)
	for i, s := range parts {
		parts[i] = regexp.QuoteMeta(s)
	}
	return regexp.MustCompile("^" + strings.Join(parts, "[^/]+") + "$")
}

// Check returns what in an exchange the generated clients would not have:
// a route they do not call, a query parameter they do not send, and, in a
// JSON request body or a 2xx JSON answer, a field that is unknown,
// misspelt, of the wrong type, or missing though required.
func (s *Schema) Check(e Exchange) []error {
	client, op, api := s.Route(e)
	if !api {
		return nil
	}
	if op == nil {
		return []error{fmt.Errorf("%s %s: no operation of the %s client", e.Method, e.Path, client)}
	}
	where := fmt.Sprintf("%s %s (%s)", e.Method, op.Path, op.Name)
	var errs []error
	for k := range e.Query {
		if !slices.Contains(op.Query, k) {
			errs = append(errs, fmt.Errorf("%s: query parameter %q is not one of %v", where, k, op.Query))
		}
	}
	if isJSON(e.RequestType) && len(bytes.TrimSpace(e.Request)) > 0 {
		if op.Body == nil {
			errs = append(errs, fmt.Errorf("%s: the operation takes no JSON body", where))
		} else {
			errs = append(errs, s.checkJSON(client, where+" request", *op.Body, e.Request)...)
		}
	}
	if e.Status >= 200 && e.Status < 300 && isJSON(e.ResponseType) && op.Answer.Kind != "any" {
		errs = append(errs, s.checkJSON(client, where+" answer", op.Answer, e.Response)...)
	}
	return errs
}

func isJSON(ctype string) bool {
	mt, _, _ := mime.ParseMediaType(ctype)
	return mt == "application/json"
}

func (s *Schema) checkJSON(client, where string, t Type, body []byte) []error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []error{fmt.Errorf("%s: not JSON: %v", where, err)}
	}
	return s.check(client, where, t, v)
}

// check validates v against t; path names the value in errors.
func (s *Schema) check(client, path string, t Type, v any) []error {
	bad := func(want string) []error {
		return []error{fmt.Errorf("%s: %s, want %s", path, describe(v), want)}
	}
	switch t.Kind {
	case "any":
		return nil
	case "null":
		if v != nil {
			return bad("null")
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return bad("a string")
		}
		if t.Format == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				return bad("an RFC 3339 time")
			}
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			return bad("a number")
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return bad("a boolean")
		}
	case "literal":
		if v != t.Value {
			return bad(fmt.Sprintf("%q", t.Value))
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return bad("an array")
		}
		el := sub(t.Of)
		var errs []error
		for i, x := range a {
			errs = append(errs, s.check(client, fmt.Sprintf("%s[%d]", path, i), el, x)...)
		}
		return errs
	case "map":
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		el := sub(t.Of)
		var errs []error
		for k, x := range m {
			errs = append(errs, s.check(client, path+"."+k, el, x)...)
		}
		return errs
	case "object":
		return s.checkFields(client, path, t.Fields, v)
	case "union":
		var alts []Type
		_ = json.Unmarshal(t.Of, &alts)
		for _, a := range alts {
			if len(s.check(client, path, a, v)) == 0 {
				return nil
			}
		}
		return bad("one of the union's types")
	case "ref":
		return s.checkRef(client, path, t.Name, v)
	default:
		return []error{fmt.Errorf("%s: the schema's type kind %q is unknown", path, t.Kind)}
	}
	return nil
}

func sub(raw json.RawMessage) Type {
	var t Type
	_ = json.Unmarshal(raw, &t)
	return t
}

func (s *Schema) checkRef(client, path, name string, v any) []error {
	if values, ok := s.Enums[name]; ok {
		str, isStr := v.(string)
		if !isStr || !slices.Contains(values, str) {
			return []error{fmt.Errorf("%s: %s is not a %s (%v)", path, describe(v), name, values)}
		}
		return nil
	}
	raw, ok := s.Models[client][name]
	if !ok {
		return []error{fmt.Errorf("%s: the %s client has no model %s", path, client, name)}
	}
	var alias struct {
		Alias *Type `json:"$alias"`
	}
	if json.Unmarshal(raw, &alias) == nil && alias.Alias != nil {
		return s.check(client, path, *alias.Alias, v)
	}
	var fields map[string]Field
	if err := json.Unmarshal(raw, &fields); err != nil {
		return []error{fmt.Errorf("%s: model %s: %v", path, name, err)}
	}
	return s.checkFields(client, path+" ("+name+")", fields, v)
}

// checkFields validates an object: every field known and well typed,
// every required one there. A field left null counts as left out, as the
// services write optional fields (Go's nil pointers).
func (s *Schema) checkFields(client, path string, fields map[string]Field, v any) []error {
	m, ok := v.(map[string]any)
	if !ok {
		return []error{fmt.Errorf("%s: %s, want an object", path, describe(v))}
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		f, known := fields[k]
		switch {
		case !known:
			errs = append(errs, fmt.Errorf("%s: unknown field %q", path, k))
		case m[k] == nil && !f.Required:
		default:
			errs = append(errs, s.check(client, path+"."+k, f.Type, m[k])...)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if _, there := m[k]; fields[k].Required && !there {
			errs = append(errs, fmt.Errorf("%s: required field %q is missing", path, k))
		}
	}
	return errs
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("string %q", x)
	case json.Number:
		return "number " + x.String()
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
