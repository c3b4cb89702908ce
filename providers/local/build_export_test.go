package local

// BuildSandboxes is how many build sandboxes this process has started: a
// cache hit starts none.
func BuildSandboxes() int64 { return buildSandboxes.Load() }
