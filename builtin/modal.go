package builtin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/berth-sh/berth/registry"
)

// parseModalConfig reads the token pair from a Modal config file
// (~/.modal.toml): the profile named by MODAL_PROFILE, else the first profile
// with active = true, else "default". Its errors name lines, keys and
// profiles, never values: the TOML library's own messages may quote the
// text around a syntax error, which can be the token.
func parseModalConfig(data []byte, env registry.Environ) (map[string]string, error) {
	var profiles map[string]map[string]any
	md, err := toml.Decode(string(data), &profiles)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("not valid TOML (line %d)", pe.Position.Line)
		}
		return nil, errors.New("not a TOML file of [profile] tables")
	}
	name, why := strings.TrimSpace(env.Get("MODAL_PROFILE")), "MODAL_PROFILE"
	if name == "" {
		name, why = activeProfile(md, profiles), "active = true"
	}
	if name == "" {
		name, why = "default", "no profile has active = true"
	}
	p, ok := profiles[name]
	if !ok {
		return nil, fmt.Errorf("no profile %q (%s)", shorten(name), why)
	}
	out := map[string]string{}
	for key, v := range map[string]string{"token_id": "MODAL_TOKEN_ID", "token_secret": "MODAL_TOKEN_SECRET"} {
		s, _ := p[key].(string)
		if strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("profile %q (%s) has no %s", shorten(name), why, key)
		}
		out[v] = s
	}
	return out, nil
}

// activeProfile is the first profile in file order with active = true, as
// Modal's own clients pick it, or "".
func activeProfile(md toml.MetaData, profiles map[string]map[string]any) string {
	for _, k := range md.Keys() {
		if len(k) != 1 {
			continue
		}
		if active, _ := profiles[k[0]]["active"].(bool); active {
			return k[0]
		}
	}
	return ""
}

// shorten bounds a user-supplied name echoed in an error.
func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
