package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/registry"
)

// Credential states as `berth providers` and `berth doctor` report them.
const (
	credAvailable = "available"
	credMissing   = "missing"
	credNotNeeded = "not needed"
)

// credStatus is what the worker side would find for an entry's credential.
type credStatus struct {
	State  string // credAvailable, credMissing or credNotNeeded
	Source string // "environment" or "file <path>", when available
	Hint   string // the provision hint, when missing
}

func credentialStatus(e registry.Entry, env registry.Environ) credStatus {
	if e.Credential.None() {
		return credStatus{State: credNotNeeded}
	}
	if ok, src := e.Available(env); ok {
		return credStatus{State: credAvailable, Source: src}
	}
	return credStatus{State: credMissing, Hint: e.Credential.ProvisionHint}
}

// String is the one-phrase form used in tables and doctor lines.
func (c credStatus) String() string {
	switch c.State {
	case credAvailable:
		return "available via " + c.Source
	default:
		return c.State
	}
}

// targetText is the entry's target line without the leading provider name
// ("endpoint: E2B Cloud (default)"), "-" without a target, or a short
// refusal when the target variable would not be forwarded (its value is
// never echoed then).
func targetText(e registry.Entry, env registry.Environ) string {
	line, err := e.TargetLine(env)
	switch {
	case err != nil:
		return "(" + e.Target.Var + " refused)"
	case line == "":
		return "-"
	default:
		return strings.TrimPrefix(line, e.Name+" ")
	}
}

func displayName(e registry.Entry) string {
	if len(e.Aliases) == 0 {
		return e.Name
	}
	return e.Name + " (" + strings.Join(e.Aliases, ", ") + ")"
}

// completeBackend offers the registered names and aliases for --backend.
func (a *app) completeBackend(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var names []cobra.Completion
	for _, e := range a.reg.Entries() {
		names = append(names, e.Name)
		names = append(names, e.Aliases...)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
