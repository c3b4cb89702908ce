package core

import (
	"fmt"
	"net/url"
)

// ParseMetadata reads a list's metadata filter, as both APIs take it: an
// urlencoded "k=v&k2=v2" whose keys and values the SDKs have URI-encoded
// once more.
func ParseMetadata(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("metadata %q is not k=v&...: %v", raw, err)
	}
	out := map[string]string{}
	unesc := func(s string) string {
		if u, err := url.PathUnescape(s); err == nil {
			return u
		}
		return s
	}
	for k, vs := range q {
		out[unesc(k)] = unesc(vs[len(vs)-1])
	}
	return out, nil
}
