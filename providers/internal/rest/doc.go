// Package rest is the one HTTP client of the REST drivers (e2b, daytona):
// JSON calls with the credential, retries with backoff decided on the error
// class alone, the server's Retry-After honoured, bounded bodies, and
// secrets redacted from every error. Import it only from provider packages.
//
// The credential never crosses to another origin. It is not set on the
// request a caller builds (net/http copies custom headers such as
// X-API-KEY onto every redirect, to any host); the client's transport adds
// it to each request, redirects included, only when the request goes to an
// origin the driver named (its API and, for Daytona, the toolbox proxy).
// A redirect to any other origin is refused outright.
//
// Errors are *errdefs.Error values: the class comes from the one HTTP
// mapping of package sandbox/errdefs (errdefs.ClassOfHTTPStatus), with
// RetryAfter from the answer's Retry-After (or, Daytona's way, the longest
// Retry-After-<throttler>) and Permanent for 507; the cause is an
// *APIError with the status, the route and the server's message, redacted
// and cut short.
package rest
