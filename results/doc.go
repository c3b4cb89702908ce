// Package results reads what berth writes about jobs, read-only: Harbor's
// results layout (jobs/<job>/config.json, result.json, job.log and one
// directory per trial with config.json, result.json, trial.log,
// exception.txt, agent/ and verifier/), agent trajectories in Harbor's
// ATIF (agent/trajectory.json), and the samples of rollouts
// (<trial>/samples.jsonl). It flattens them into what the viewer shows:
// trial rows with rewards, exit statuses, error types and phase durations;
// per-task pass@k; phase latency percentiles; job-to-job comparisons.
// The files' types and names are package results/layout's, the one
// definition the runner writes: the reader imports neither the runner nor
// the sandbox API.
//
// Everything under a jobs directory may come from a sandbox (agent/ and
// verifier/ are downloaded from it; names, links, sizes are the task's
// choice), so every read is confined and bounded: paths are one
// directory tree opened with os.Root, no symbolic link is followed at any
// component (one is listed as a link, never read), only regular files are
// opened (a FIFO would hang), and each read stops at a limit
// (MaxResultBytes, MaxTextBytes, MaxRawBytes) with Text.Truncated set.
// A trial whose result.json does not parse is a row with a Problem, never
// a failed page. Parsed trial results are cached by the size and
// modification time of their result.json, so a page of a 10,000-trial job
// rereads only what changed.
//
// # Samples: <trial>/samples.jsonl
//
// `berth rollout` writes the samples of each trial next to its Harbor
// trial directory, as JSON lines: one JSON object per line, one line per
// sample, UTF-8, in the order the session produced them. The reader takes
// these fields (unknown fields are ignored):
//
//	tokens             []int     required: every token id of the sample,
//	                             prompt and response (Miles: prompt+response)
//	loss_mask          []int     0 or 1 for each token of the response: the
//	                             LAST len(loss_mask) tokens (1 = trained on;
//	                             observation spans inside the response are 0).
//	                             Equal to len(tokens) when it covers all.
//	rollout_log_probs  []float   the policy's logprob of each token of the
//	                             response, aligned like loss_mask (the last
//	                             len(rollout_log_probs) tokens; 0.0 on
//	                             observation spans)
//	response_length    int       optional; len(loss_mask) when absent
//	token_texts        []string  optional: the decoded text of every token,
//	                             len(tokens) entries; without it tokens are
//	                             shown as ids (the viewer has no tokenizer)
//	turn_starts        []int     optional: token positions where each turn
//	                             begins (its prompt or observation first);
//	                             without it a turn starts at token 0 and
//	                             wherever the loss mask falls from 1 to 0
//	status             string    COMPLETED | TRUNCATED | ABORTED
//	reward             number or object, optional (the verifier's reward)
//	response           string    optional: the response text
//	index              int       optional: the sample's index in its session
//	session_id         string    optional
//	metadata           object    optional, free-form; the viewer reads
//	                             metadata.tito_mismatch, an object of
//	                             counters {"special_token_count": 0,
//	                             "special_token_type": 0,
//	                             "non_assistant_text": 0, ...}; each
//	                             non-zero counter is flagged
//
// Example line (wrapped here; one line in the file):
//
//	{"index":0,"tokens":[151644,872,198,9707,151645,198,151644,77091,198,13048,0,151645],
//	 "token_texts":["<|im_start|>","user","\n","Hi","<|im_end|>","\n","<|im_start|>","assistant","\n","Hello","!","<|im_end|>"],
//	 "loss_mask":[1,1,1],"rollout_log_probs":[-0.11,-0.52,-0.01],"response_length":3,
//	 "status":"COMPLETED","reward":1.0,
//	 "metadata":{"tito_mismatch":{"special_token_count":0,"special_token_type":0,"non_assistant_text":0}}}
//
// A line of more than MaxSampleLine bytes, or one that is not a JSON
// object, is reported with its line number and skipped; lengths that do
// not line up are reported on the sample (Sample.Problems). At most
// MaxSamples samples are read from one file.
//
// Import it from the viewer (package view) and from tools that summarise
// jobs; it writes nothing.
package results
