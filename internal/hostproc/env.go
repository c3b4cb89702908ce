package hostproc

import (
	"maps"
	"slices"
	"strings"
)

// DefaultPath is the PATH of a process whose environment sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Environ builds a process's environment: base (KEY=VALUE entries), then
// each layer in turn, a later value replacing an earlier one; PATH gets
// DefaultPath when nothing set it. An entry whose key is empty or holds
// '=' or NUL, or whose value holds NUL, is dropped: "A=B" as a key would
// set A, and a NUL would cut the entry or fail the exec. The result keeps
// base's order and adds the layers' new keys sorted, so it is the same for
// the same input.
func Environ(base []string, layers ...map[string]string) []string {
	n := len(base) + 1
	for _, l := range layers {
		n += len(l)
	}
	env := make([]string, 0, n)
	index := make(map[string]int, n)
	set := func(k, v string) {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return
		}
		kv := k + "=" + v
		if i, ok := index[k]; ok {
			env[i] = kv
			return
		}
		index[k] = len(env)
		env = append(env, kv)
	}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok {
			set(k, v)
		}
	}
	for _, l := range layers {
		for _, k := range slices.Sorted(maps.Keys(l)) {
			set(k, l[k])
		}
	}
	if _, ok := index["PATH"]; !ok {
		set("PATH", DefaultPath)
	}
	return env
}

// Getenv is key's value in env (the last entry wins, as in a process), or "".
func Getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
