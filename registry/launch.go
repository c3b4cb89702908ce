package registry

// LaunchEnv is the environment a launcher hands its workers: paths,
// addresses, selectors and the backend name; never a secret.
type LaunchEnv struct {
	Vars  []Var    // in a stable order: backend, credential path, forwards, defaults
	Notes []string // lines for the user: credential supply, target
}

// Launch builds the workers' environment for the named provider: Supply's
// variables, BERTH_BACKEND and HARBOR_ENV_TYPE (the canonical name), the
// forwarded addresses set in env (refusing a value with '@'), and the env
// defaults unless set.
func (r *Registry) Launch(name string, env Environ, keyFile string) (*LaunchEnv, error) {
	panic("unimplemented")
}

// Shell renders the variables as POSIX shell export lines, quoted.
func (l *LaunchEnv) Shell() string { panic("unimplemented") }

// JSON renders the variables as one flat JSON object (a Ray runtime env's
// env_vars).
func (l *LaunchEnv) JSON() ([]byte, error) { panic("unimplemented") }
