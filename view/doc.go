// Package view is berth's results viewer: `berth view` serves jobs,
// trials, trajectories, samples and job comparisons to a browser, and
// `berth report` writes the same views of one job as one self-contained
// HTML file. It reads only through package results, never writes.
//
// Pages are rendered on the server with html/template, so every table
// works with JavaScript off: sorting, filtering and paging are query
// parameters (?sort=reward&dir=desc&error=AgentTimeoutError&page=2), and
// a 10,000-trial job sends one page of rows. The one script,
// static/live.js, is progressive: on a running job it polls a JSON
// endpoint and swaps in the re-rendered page when a trial lands.
//
// Everything from a job directory is untrusted (a task controls its
// output, reward file, trajectory, file names and links): templates
// escape it for its context, links are built from path-escaped names, and
// every response carries a strict Content-Security-Policy (scripts and
// styles from the server's own files only, no inline script or style, no
// framing), X-Content-Type-Options nosniff and X-Frame-Options DENY. Raw
// files are served as text/plain under a CSP sandbox. Only GET and HEAD
// are answered, and a Host header that is not localhost, an IP literal or
// an allowed name is refused (DNS rebinding). The server binds
// 127.0.0.1 unless told otherwise.
//
// Charts are SVG drawn on the server with gonum.org/v1/plot, a maintained
// Go plotting library compiled into the binary: no JavaScript charting
// bundle, no CDN, and the charts show with JavaScript off and inside the
// report (as data: images). Trial timelines are inline SVG rectangles
// coloured by class, so they need no inline style either.
//
// A report's CSP (a meta tag) allows only its own <style> block, by
// sha256 hash, and data: images; it has no script at all.
//
// Import it from the CLI (`berth view`, `berth report`).
package view
