package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/registry"
)

func (a *app) doctorCmd() *cobra.Command {
	var backend string
	var timeout time.Duration
	var offline bool
	cmd := &cobra.Command{
		Use:   "doctor [--backend NAME]",
		Short: "Check credentials, host pieces and endpoints of the providers",
		Long: `Check, for every provider or the named one, what it needs to work here:

  - its credential (looked up as a worker would: environment, then key file);
  - the host pieces it requires (binaries in PATH, running as root);
  - for providers with an HTTP endpoint, that the endpoint answers: any HTTP
    answer below 500, 401 included, counts as reachable.

Each check prints an ok, warn or fail line. With --backend the exit status is
1 when that provider is unusable here; without it doctor reports and exits 0.`,
		Example: `  # Everything at a glance
  berth doctor

  # Is AgentENV at this address usable? (exit 1 if not)
  E2B_API_URL=http://10.0.0.5:3000 berth doctor --backend agentenv

  # Skip the network
  berth doctor --offline`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usageError(fmt.Errorf("--timeout %v: want a positive duration", timeout))
			}
			entries := a.reg.Entries()
			if backend != "" {
				e, err := a.reg.Lookup(backend)
				if err != nil {
					return usageError(err)
				}
				entries = []registry.Entry{e}
			}
			d := doctor{app: a, timeout: timeout, offline: offline}
			usable := 0
			for i, e := range entries {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				if d.check(cmd.Context(), e) {
					usable++
				}
			}
			if backend != "" && usable == 0 {
				return failure(fmt.Errorf("%s is not usable here (see the fail lines above)", entries[0].Name))
			}
			if backend == "" {
				fmt.Fprintf(a.stdout, "\n%d of %d providers usable here\n", usable, len(entries))
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&backend, "backend", "", "check only this provider (name or alias); exit 1 if unusable")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "time limit of each endpoint probe")
	f.BoolVar(&offline, "offline", false, "skip the endpoint probes")
	_ = cmd.RegisterFlagCompletionFunc("backend", a.completeBackend)
	return cmd
}

type doctor struct {
	*app
	timeout time.Duration
	offline bool
}

// check prints one provider's report and says whether it is usable.
func (d doctor) check(ctx context.Context, e registry.Entry) bool {
	fmt.Fprintln(d.stdout, displayName(e))
	ok := true
	line := func(level, format string, args ...any) {
		if level == "fail" {
			ok = false
		}
		fmt.Fprintf(d.stdout, "  %-4s  %s\n", level, fmt.Sprintf(format, args...))
	}

	switch st := credentialStatus(e, d.env); st.State {
	case credNotNeeded:
		line("ok", "credential: not needed")
	case credAvailable:
		line("ok", "credential: available via %s", st.Source)
	default:
		line("fail", "credential: %s", d.missingCredential(e))
	}

	for _, r := range e.Requires {
		switch {
		case r.Binary != "":
			if p, err := d.lookPath(r.Binary); err == nil {
				line("ok", "%s: %s", r.Binary, p)
			} else {
				line("fail", "%s: not found in PATH; %s", r.Binary, r.Hint)
			}
		case r.Root:
			if d.euid() == 0 {
				line("ok", "running as root")
			} else {
				line("fail", "needs root (running as uid %d); %s", d.euid(), r.Hint)
			}
		}
	}

	if t, err := e.TargetLine(d.env); err != nil {
		line("fail", "target: %v", err)
	} else if t != "" {
		line("ok", "target: %s", t)
	}

	if p := e.Probe; p != nil {
		base := strings.TrimSpace(d.env.Get(p.URLVar))
		if base == "" {
			base = p.Default
		}
		switch {
		case d.offline:
			line("warn", "endpoint: not probed (--offline)")
		case strings.Contains(base, "@"):
			line("fail", "endpoint: %s refused: it contains '@' (it may embed a credential)", p.URLVar)
		default:
			shown, code, err := d.probe(ctx, base, p.Path)
			switch {
			case err != nil:
				line("fail", "endpoint: %s unreachable: %v", shown, err)
			case code >= 500:
				line("fail", "endpoint: %s answered HTTP %d", shown, code)
			default:
				line("ok", "endpoint: %s reachable (HTTP %d)", shown, code)
			}
		}
	}

	if ok {
		fmt.Fprintln(d.stdout, "  => usable")
	} else {
		fmt.Fprintln(d.stdout, "  => unusable")
	}
	return ok
}

// missingCredential explains a credential that does not resolve: the
// launcher's message when supply fails (it carries the provision hint), else
// the worker's.
func (d doctor) missingCredential(e registry.Entry) string {
	if _, err := e.Supply(d.env, ""); err != nil {
		return err.Error()
	}
	if _, err := e.Resolve(d.env); err != nil {
		return err.Error() + "; provision with: " + e.Credential.ProvisionHint
	}
	return "missing; provision with: " + e.Credential.ProvisionHint
}

// probe GETs base+path and returns the address as shown to the user
// (scheme, host and path only: no query, no user info), the status code, and
// a transport error.
func (d doctor) probe(ctx context.Context, base, path string) (shown string, code int, err error) {
	u, err := url.Parse(strings.TrimRight(base, "/") + path)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "(invalid URL)", 0, errors.New("not an http(s) URL")
	}
	shown = u.Scheme + "://" + u.Host + u.Path
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return shown, 0, err
	}
	client := &http.Client{
		// A redirect is an answer; do not follow it somewhere else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is already shown
		}
		return shown, 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return shown, resp.StatusCode, nil
}

// lookPath finds an executable in the PATH of the app's environment.
func (d doctor) lookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(d.env.Get("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", name)
}
