package layout

// Names of the files and directories of a job and of its trials.
const (
	// ConfigFile is a job's JobConfig and a trial's TrialConfig.
	ConfigFile = "config.json"
	// ResultFile is a job's JobResult and a trial's TrialResult.
	ResultFile    = "result.json"
	JobLogFile    = "job.log"
	TrialLogFile  = "trial.log"
	ExceptionFile = "exception.txt"
	// AgentDir and VerifierDir hold what the trial downloaded from its
	// sandbox: written by the task, never trusted.
	AgentDir    = "agent"
	VerifierDir = "verifier"
	// TrajectoryFile is the agent's trajectory in Harbor's ATIF, relative
	// to the trial directory.
	TrajectoryFile = AgentDir + "/trajectory.json"
	// SamplesFile is a rollout's samples as JSON lines, in the trial
	// directory.
	SamplesFile = "samples.jsonl"
)
