// Package job runs a Harbor job: every selected task times the number of
// attempts, as trials on one provider, many at once within the provider's
// quotas, with retries of infrastructure failures, and writes Harbor's
// results layout (jobs/<job>/config.json, job.log, result.json and one
// directory per trial; the types and names are package results/layout's,
// which the results reader reads). A job can be resumed: finished trials
// are kept.
//
// Cancelling the context stops new trials, tears down every sandbox, marks
// what did not run as cancelled and still writes result.json.
//
// Import it from the CLI (`berth run`) and from programs that drive jobs.
package job
