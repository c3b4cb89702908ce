// Package layout is Harbor's results layout, the files a job leaves on
// disk, as types and names: the runner (harbor/job, harbor/trial, the
// rollouts) writes them and the reader (package results, the viewer)
// reads them, so both sides agree on one definition.
//
//	<jobs-dir>/<job>/config.json           JobConfig
//	<jobs-dir>/<job>/result.json           JobResult
//	<jobs-dir>/<job>/job.log
//	<jobs-dir>/<job>/<trial>/config.json   TrialConfig
//	<jobs-dir>/<job>/<trial>/result.json   TrialResult
//	<jobs-dir>/<job>/<trial>/trial.log     "<time> <phase>: start" lines
//	<jobs-dir>/<job>/<trial>/exception.txt "<exception type>: <message>"
//	<jobs-dir>/<job>/<trial>/agent/        the agent's logs (agent/trajectory.json: ATIF)
//	<jobs-dir>/<job>/<trial>/verifier/     the verifier's logs and reward files
//	<jobs-dir>/<job>/<trial>/samples.jsonl a rollout's samples (package results documents the lines)
//
// The JSON field names are Harbor's, so that tools written for Harbor
// read berth's results; berth's additions are marked where they are
// declared. A failure's exception type is a Kind; how an episode ended is
// one of the Exit statuses (TrialResult.ExitStatus).
//
// It imports only the standard library: anything may import it, the
// reader without pulling in the runner, the registry or the sandbox API.
package layout
