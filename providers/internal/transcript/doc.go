// Package transcript records what a client said to a service and what the
// service answered, as shape only: per call the method, the route (IDs and
// names replaced by placeholders), the status, and the set of field names
// of the request and of the answer; never a value, so never a secret. The
// live tests of the daytona and modal drivers run one scenario against the
// real service and against its fake, write both transcripts, and fail on a
// difference: a field, a status or a call that the fake answers otherwise
// than the service does.
//
// Import it only from tests.
package transcript
