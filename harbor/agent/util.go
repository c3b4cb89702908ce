package agent

import "path/filepath"

func dirOf(p string) string { return filepath.Dir(p) }

// RunScript runs a script already in the sandbox the way agents and the
// verifier do: made executable, output to logFile, in the task's working
// directory, cut off at ctx's deadline (reported as context.DeadlineExceeded).
var RunScript = runScript
