package view_test

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// checkDOM parses a page as a browser would and fails on anything a
// task's text could have turned into: a script other than the allowed
// sources, an event-handler attribute, a javascript: URL, an image or
// frame from elsewhere, a style element or attribute.
func checkDOM(t *testing.T, name, page string, scripts []string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script":
				src := attr(n, "src")
				ok := false
				for _, s := range scripts {
					ok = ok || src == s
				}
				if !ok || n.FirstChild != nil {
					t.Errorf("%s: script element src=%q", name, src)
				}
			case "iframe", "object", "embed", "frame", "base":
				t.Errorf("%s: <%s> element", name, n.Data)
			case "img":
				if src := attr(n, "src"); !strings.HasPrefix(src, "/jobs/") && !strings.HasPrefix(src, "data:image/svg+xml;base64,") {
					t.Errorf("%s: image from %q", name, src)
				}
			}
			for _, a := range n.Attr {
				k := strings.ToLower(a.Key)
				v := strings.ToLower(strings.TrimSpace(a.Val))
				switch {
				case strings.HasPrefix(k, "on"):
					t.Errorf("%s: <%s %s=%q>", name, n.Data, a.Key, a.Val)
				case k == "style":
					t.Errorf("%s: inline style on <%s>", name, n.Data)
				case (k == "href" || k == "src" || k == "action" || k == "formaction") && strings.HasPrefix(v, "javascript:"):
					t.Errorf("%s: <%s %s=%q>", name, n.Data, a.Key, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
