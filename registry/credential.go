package registry

// Supply is the launcher-side outcome of credential supply.
type Supply struct {
	// Source is "file", "environment" or "none" (no credential needed).
	Source string
	// Path is the key file, for Source "file".
	Path string
	// Vars are forwarded to workers (FILE_VAR=<path>); never a secret.
	Vars []Var
	// Message is the line printed at launch
	// ("credential supply: file <path> (readable here; ...)").
	Message string
}

// Supply runs the launcher-side rules (see the package doc). keyFile is the
// explicit path from the entry's flag, or "".
func (e Entry) Supply(env Environ, keyFile string) (Supply, error) {
	panic("unimplemented")
}

// Resolve runs the worker-side rules and returns the secrets keyed by the
// entry's key variables. A provider without a credential returns nil, nil.
func (e Entry) Resolve(env Environ) (map[string]Secret, error) {
	panic("unimplemented")
}

// Available reports whether the worker-side credential resolves, and from
// where ("environment", "file <path>"), for the golden test's skip and for
// `berth providers`.
func (e Entry) Available(env Environ) (ok bool, source string) {
	panic("unimplemented")
}

// workerEnv is env with the entry's env defaults applied where unset.
func (e Entry) workerEnv(env Environ) Environ {
	panic("unimplemented")
}
