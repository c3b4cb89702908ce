package sandbox

// wrap attaches op, provider and sandbox ID to err, keeping its class.
func wrap(err error, op, provider, id string) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		switch {
		case e.Op == "" && e.Provider == "" && e.SandboxID == "":
			// A bare classed error from a driver: fill in the context in
			// place of stacking a second layer, so the message reads once.
			return &Error{Class: e.Class, Op: op, Provider: provider, SandboxID: id, Err: e.Err, RetryAfter: e.RetryAfter, Permanent: e.Permanent}
		case e.Op != "" && e.Provider == provider && e.SandboxID == id:
			// Already wrapped by this handle, e.g. an error read from a
			// download stream and returned again by DownloadDir.
			return err
		}
	}
	return &Error{Class: ClassOf(err), Op: op, Provider: provider, SandboxID: id, Err: err}
}
