package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth/chattemplate/jinja"
)

// Template is a compiled chat template and the special-token variables it
// renders with. It is safe for concurrent use.
type Template struct {
	tpl     *jinja.Template
	toolUse *jinja.Template // a separate "tool_use" template, when the model names one
	vars    map[string]jinja.Value
}

// Input is one rendering's variables.
type Input struct {
	Messages            []jinja.Value
	Tools               []jinja.Value // nil: the template sees tools = none
	AddGenerationPrompt bool
	// Kwargs are extra template variables (chat_template_kwargs such as
	// enable_thinking).
	Kwargs map[string]jinja.Value
}

// specialTokenVars are the variables transformers passes from
// tokenizer_config.json.
var specialTokenVars = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// MaxConfigBytes bounds tokenizer_config.json and chat_template.jinja.
const MaxConfigBytes = 16 << 20

// Load reads the chat template of a model directory: chat_template.jinja
// when present, else tokenizer_config.json's chat_template (a string, or a
// list of named templates of which "default" and "tool_use" are used).
func Load(dir string) (*Template, error) { return load(dir, "") }

// LoadWithTemplate is Load with the template read from templatePath
// instead (the special-token variables still come from dir).
func LoadWithTemplate(dir, templatePath string) (*Template, error) { return load(dir, templatePath) }

func load(dir, templatePath string) (*Template, error) {
	cfg, err := readBounded(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, fmt.Errorf("chattemplate: %w", err)
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, fmt.Errorf("chattemplate: tokenizer_config.json: %w", err)
	}
	special := map[string]string{}
	for _, k := range specialTokenVars {
		if s, ok := tokenString(c[k]); ok {
			special[k] = s
		}
	}
	if templatePath != "" {
		src, err := readBounded(templatePath)
		if err != nil {
			return nil, fmt.Errorf("chattemplate: %w", err)
		}
		return New(string(src), special)
	}
	if src, err := readBounded(filepath.Join(dir, "chat_template.jinja")); err == nil {
		return New(string(src), special)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("chattemplate: %w", err)
	}
	raw, ok := c["chat_template"]
	if !ok {
		return nil, fmt.Errorf("chattemplate: %s has no chat_template", dir)
	}
	var single string
	if err := json.Unmarshal(raw, &single); err == nil {
		return New(single, special)
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &named); err != nil {
		return nil, fmt.Errorf("chattemplate: chat_template is neither a string nor a list of named templates")
	}
	byName := map[string]string{}
	for _, n := range named {
		byName[n.Name] = n.Template
	}
	def, ok := byName["default"]
	if !ok {
		return nil, fmt.Errorf("chattemplate: the chat templates name no default")
	}
	t, err := New(def, special)
	if err != nil {
		return nil, err
	}
	if tu, ok := byName["tool_use"]; ok {
		if t.toolUse, err = jinja.Compile(tu); err != nil {
			return nil, fmt.Errorf("chattemplate: tool_use template: %w", err)
		}
	}
	return t, nil
}

// New compiles a template source with the given special-token variables.
func New(source string, special map[string]string) (*Template, error) {
	tpl, err := jinja.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("chattemplate: %w", err)
	}
	vars := map[string]jinja.Value{}
	for k, v := range special {
		vars[k] = jinja.StringValue(v)
	}
	return &Template{tpl: tpl, vars: vars}, nil
}

// tokenString reads a special token that is a string or {"content": ...}.
func tokenString(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return s, true
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != "" {
		return obj.Content, true
	}
	return "", false
}

func readBounded(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxConfigBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than %d", path, st.Size(), MaxConfigBytes)
	}
	return os.ReadFile(path)
}

// SpecialToken returns a special-token variable (e.g. "eos_token").
func (t *Template) SpecialToken(name string) (string, bool) {
	v, ok := t.vars[name]
	return v.Str(), ok
}

// Render renders in. A template error (raise_exception included) is
// returned, wrapped.
func (t *Template) Render(in Input) (string, error) {
	// As transformers' apply_chat_template: the conversation, then
	// template_kwargs = {**special_tokens_map, **kwargs} (a kwarg naming a
	// conversation variable is an error there and wins here).
	vars := make(map[string]jinja.Value, len(t.vars)+len(in.Kwargs)+4)
	vars["messages"] = jinja.ListValue(in.Messages)
	vars["add_generation_prompt"] = jinja.BoolValue(in.AddGenerationPrompt)
	vars["tools"] = jinja.NullValue
	vars["documents"] = jinja.NullValue
	tpl := t.tpl
	if in.Tools != nil {
		vars["tools"] = jinja.ListValue(in.Tools)
		if t.toolUse != nil {
			tpl = t.toolUse
		}
	}
	for k, v := range t.vars {
		vars[k] = v
	}
	for k, v := range in.Kwargs {
		vars[k] = v
	}
	out, err := tpl.Render(vars)
	if err != nil {
		return "", fmt.Errorf("chattemplate: %w", err)
	}
	return out, nil
}

// ParseJSON decodes a message, a tool or a kwarg value from its JSON, as
// the trainer sees a value json.loads produced.
func ParseJSON(raw []byte) (jinja.Value, error) { return jinja.FromJSON(raw) }
