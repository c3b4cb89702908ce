package tokenizer

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// The fidelity corpus: deterministic (seeded), generated here so that no
// text is committed, and wide on purpose: source code, CJK, emoji, runs of
// every kind of whitespace, special and added tokens (whole, partial,
// adjacent), tool-call JSON, combining marks that NFC composes, numbers
// and contractions, and a few long strings.
//
// Code points are drawn from blocks assigned before Unicode 15 so that the
// corpus measures the tokenizer, not which Unicode version a regex engine
// ships (see the package doc).

type category struct {
	name string
	gen  func(r *rand.Rand) string
	n    int
}

var categories = []category{
	{"code", codeSample, 400},
	{"cjk", cjkSample, 300},
	{"emoji", emojiSample, 250},
	{"whitespace", whitespaceSample, 300},
	{"special", specialSample, 300},
	{"tooljson", toolJSONSample, 250},
	{"unicode", unicodeSample, 300},
	{"words", wordsSample, 250},
	{"long", longSample, 12},
}

// corpus returns the strings and the category of each.
func corpus() ([]string, []string) {
	r := rand.New(rand.NewPCG(14, 2026))
	var texts, cats []string
	for _, c := range categories {
		for i := 0; i < c.n; i++ {
			texts = append(texts, c.gen(r))
			cats = append(cats, c.name)
		}
	}
	return texts, cats
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// sources are this repository's own files, read at test time.
var sources = func() []string {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..")
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || (d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git")) {
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(p)
		if ext != ".go" && ext != ".md" && ext != ".mjs" && !strings.HasSuffix(p, ".ci/run") {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			out = append(out, string(b))
		}
		return nil
	})
	sort.Strings(out)
	return out
}()

func window(r *rand.Rand, s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	start := r.IntN(len(s) - maxLen)
	end := start + 1 + r.IntN(maxLen)
	return strings.ToValidUTF8(s[start:end], "")
}

var pySnippets = []string{
	"def fib(n: int) -> int:\n    return n if n < 2 else fib(n-1) + fib(n-2)\n",
	"for i in range(10):\n\tprint(f\"{i:>4d} {i**2}\")\n",
	"class A(B):\n    \"\"\"Doc.\"\"\"\n    x: list[str] = []\n",
	"if (a && b) || !c { return nil, fmt.Errorf(\"%w\", err) }",
	"SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC;",
	"#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }\n",
	"const x = async () => { await fetch(`/api/${id}?q=${encodeURIComponent(q)}`); };",
	"$ ls -la /tmp && echo $HOME | tr a-z A-Z > out.txt 2>&1",
	"<div class=\"a\"><p>Hello &amp; welcome</p></div>",
	"    \n    return {'a': [1, 2.5, -3e10], \"b\": None}\n\n\n",
}

func codeSample(r *rand.Rand) string {
	if r.IntN(4) == 0 || len(sources) == 0 {
		return pick(r, pySnippets)
	}
	return window(r, pick(r, sources), 40+r.IntN(900))
}

func runesFrom(r *rand.Rand, ranges [][2]rune, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		rg := pick(r, ranges)
		b.WriteRune(rg[0] + rune(r.IntN(int(rg[1]-rg[0]+1))))
	}
	return b.String()
}

var cjkRanges = [][2]rune{
	{0x4e00, 0x9fa5}, {0x3041, 0x3096}, {0x30a1, 0x30fa}, {0xac00, 0xd7a3}, {0x3000, 0x3003},
	{0xff01, 0xff5e}, {0x3400, 0x4db5},
}

func cjkSample(r *rand.Rand) string {
	var parts []string
	for i := 0; i < 1+r.IntN(6); i++ {
		switch r.IntN(4) {
		case 0:
			parts = append(parts, pick(r, []string{"Hello", "API", "GPT-4", "2024年", "v1.2", "OK!", "。", "，"}))
		default:
			parts = append(parts, runesFrom(r, cjkRanges, 1+r.IntN(20)))
		}
	}
	return strings.Join(parts, pick(r, []string{"", " ", "\n", "、"}))
}

var emojis = []string{
	"😀", "🤖", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸", "❤️", "✨", "🔥", "🧪", "👩🏿‍💻", "☕", "🎉", "🚀",
	"1️⃣", "©️", "🫠", "🥲", "🐍", "🦀", "🌍", "⚠️", "✅", "❌", "🙏🏻", "😂😂😂", "🤷‍♂️",
}

func emojiSample(r *rand.Rand) string {
	var b strings.Builder
	for i := 0; i < 1+r.IntN(12); i++ {
		switch r.IntN(3) {
		case 0:
			b.WriteString(pick(r, []string{"hi", " ok", " 好", "done.", "\n", " ", "test "}))
		default:
			b.WriteString(pick(r, emojis))
		}
	}
	return b.String()
}

var spaces = []string{" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n\n", "\u00a0", "\u3000", "\u2028", "\u2029",
	"\ufeff", "\u0085", "\v", "\f", "\u2003", "\u200b", "\u202f", "    ", "\t\t", " \n ", "\n \n"}

func whitespaceSample(r *rand.Rand) string {
	var b strings.Builder
	for i := 0; i < 1+r.IntN(10); i++ {
		if r.IntN(2) == 0 {
			b.WriteString(pick(r, []string{"a", "word", "x1", "(", "})", "。", "é", "-", "'s", "42"}))
		}
		for j := 0; j < 1+r.IntN(4); j++ {
			b.WriteString(pick(r, spaces))
		}
	}
	return b.String()
}

var specials = []string{
	"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<tool_response>",
	"</tool_response>", "<think>", "</think>", "<|vision_start|>", "<|fim_prefix|>", "<|file_sep|>",
	"<|im_start", "im_end|>", "<|im_end|", "<|", "|>", "<think", "</tool", "<|im_start|><|im_start|>",
}

func specialSample(r *rand.Rand) string {
	var b strings.Builder
	for i := 0; i < 1+r.IntN(8); i++ {
		switch r.IntN(3) {
		case 0:
			b.WriteString(pick(r, []string{"system\n", "user\n", "assistant\n", "Hello!", " ", "\n", "text<", ">", "a|b"}))
		default:
			b.WriteString(pick(r, specials))
		}
	}
	return b.String()
}

func randomJSON(r *rand.Rand, depth int) any {
	switch k := r.IntN(7); {
	case depth > 2 || k == 0:
		return pick(r, []any{"ls -la", "/tmp/x y", "naïve café", "日本語", "quote \" and \\ slash", "tab\tnew\nline", "😀", ""})
	case k == 1:
		return pick(r, []any{0, -1, 42, 3.14159, 1e-7, 2.5e10, 123456789})
	case k == 2:
		return pick(r, []any{true, false, nil})
	case k <= 4:
		m := map[string]any{}
		for i := 0; i < 1+r.IntN(4); i++ {
			m[pick(r, []string{"path", "command", "cwd", "timeout", "args", "env", "query", "k"})] = randomJSON(r, depth+1)
		}
		return m
	default:
		var l []any
		for i := 0; i < r.IntN(4); i++ {
			l = append(l, randomJSON(r, depth+1))
		}
		return l
	}
}

func toolJSONSample(r *rand.Rand) string {
	call := map[string]any{"name": pick(r, []string{"bash", "read_file", "search", "edit"}), "arguments": randomJSON(r, 1)}
	var body []byte
	if r.IntN(2) == 0 {
		body, _ = json.Marshal(call)
	} else {
		body, _ = json.MarshalIndent(call, "", pick(r, []string{"  ", "\t", "    "}))
	}
	switch r.IntN(3) {
	case 0:
		return "<tool_call>\n" + string(body) + "\n</tool_call>"
	case 1:
		return fmt.Sprintf("Let me check.\n<tool_call>\n%s\n</tool_call><|im_end|>", body)
	}
	return "<tool_response>\n" + string(body) + "\n</tool_response>"
}

var unicodeRanges = [][2]rune{
	{0x20, 0x7e}, {0xa1, 0xff}, {0x100, 0x17f}, {0x370, 0x3ff}, {0x400, 0x4ff}, {0x590, 0x5ff},
	{0x600, 0x6ff}, {0x900, 0x97f}, {0xe00, 0xe5b}, {0x1e00, 0x1eff}, {0x2000, 0x206f}, {0x2100, 0x214f},
	{0x2190, 0x21ff}, {0x2200, 0x22ff}, {0x2500, 0x257f}, {0x300, 0x36f}, {0x1100, 0x11ff},
	{0x1f300, 0x1f5ff}, {0x1d400, 0x1d4ff}, {0xfb00, 0xfb06}, {0xff61, 0xff9f},
}

func unicodeSample(r *rand.Rand) string {
	s := runesFrom(r, unicodeRanges, 1+r.IntN(40))
	if r.IntN(3) == 0 { // decomposed forms that NFC recomposes
		s += pick(r, []string{"e\u0301", "A\u030a", "n\u0303", "\u1100\u1161\u11a8", "o\u0308\u0304"})
	}
	return s
}

var words = []string{"I'm", "you're", "DON'T", "it'S", "we'll", "they've", "she'd", "O'Neil", "can't", "rock'n'roll",
	"1234567890", "3.14", "1,000,000", "0xFF", "v2.0.1", "x²", "٣٤٥", "½", "Ⅻ", "CamelCase", "snake_case",
	"kebab-case", "e-mail", "https://example.com/a?b=c&d=e", "user@example.org", "C++", "A.I.", "--flag=value"}

func wordsSample(r *rand.Rand) string {
	var parts []string
	for i := 0; i < 1+r.IntN(10); i++ {
		parts = append(parts, pick(r, words))
	}
	return strings.Join(parts, pick(r, []string{" ", "", "  ", ", ", "\n"}))
}

func longSample(r *rand.Rand) string {
	var b strings.Builder
	for b.Len() < 8000+r.IntN(8000) {
		switch r.IntN(5) {
		case 0:
			b.WriteString(cjkSample(r))
		case 1:
			b.WriteString(emojiSample(r))
		case 2:
			b.WriteString(whitespaceSample(r))
		default:
			b.WriteString(codeSample(r))
		}
	}
	return b.String()
}
