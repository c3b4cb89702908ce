package tito

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Family is a model family's boundary rules, as data. The rules exist
// because a model stops generating at a token that its chat template
// renders differently when the conversation continues.
type Family struct {
	Name string
	// AppendAfter: when the stored ids end with the key token, the text of
	// the value is appended before the next increment (Qwen3's template
	// writes "\n" after <|im_end|>, which the model never generates).
	AppendAfter map[string]string
	// StripTrailing: when the stored ids end with one of these tokens it is
	// dropped before the next increment (GLM-4.7 stops at <|observation|>
	// or <|user|>, which the template then renders itself).
	StripTrailing []string
	// EndOfTurn is the token the template ends every assistant turn with.
	// Stored ids that end without it (a turn cut at max_tokens, or stopped
	// by a stop string) get it before the next increment, as a rendering
	// of the transcript has it; the comparison with a rendering closes a
	// cut last turn the same way. Empty: the template writes nothing after
	// a turn that the model does not write itself (GLM-4.7).
	EndOfTurn string
	// MaxTrimTokens is how many trailing stored ids a commit may replace
	// (1 for GLM-4.7, 0 elsewhere).
	MaxTrimTokens int
	// TrailingTokens are ignored at the tail of both sequences when the
	// accumulated ids are compared with a fresh rendering.
	TrailingTokens []string
	// AssistantStart is the rendered text that opens an assistant turn;
	// empty means: derive it from the template's generation prompt.
	AssistantStart string
	// TemplateKwargs are chat_template_kwargs the family fixes; a request
	// that sets one to another value is refused.
	TemplateKwargs map[string]json.RawMessage
}

// Families are the known families by name.
var Families = map[string]Family{
	"default": {Name: "default"},
	"qwen3": {
		Name:           "qwen3",
		EndOfTurn:      "<|im_end|>",
		AppendAfter:    map[string]string{"<|im_end|>": "\n"},
		TrailingTokens: []string{"\n"},
		AssistantStart: "<|im_start|>assistant",
		TemplateKwargs: map[string]json.RawMessage{"clear_thinking": json.RawMessage("false")},
	},
	"glm47": {
		Name:           "glm47",
		StripTrailing:  []string{"<|observation|>", "<|user|>"},
		MaxTrimTokens:  1,
		TrailingTokens: []string{"<|observation|>", "<|user|>"},
		AssistantStart: "<|assistant|>",
		TemplateKwargs: map[string]json.RawMessage{"clear_thinking": json.RawMessage("false")},
	},
}

// FamilyNames lists the families, sorted.
func FamilyNames() []string {
	out := make([]string, 0, len(Families))
	for n := range Families {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LookupFamily returns the named family.
func LookupFamily(name string) (Family, error) {
	f, ok := Families[name]
	if !ok {
		return Family{}, fmt.Errorf("unknown model family %q (known: %v)", name, FamilyNames())
	}
	return f, nil
}
