package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/sandbox"
)

func (a *app) providersCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "providers",
		Short: "List the registered providers, their credentials and capabilities",
		Long: `List every registered provider: its name and aliases, whether its credential
is available here (and from where), the endpoint or workspace it targets, and
what it can do.

A credential is looked up the way a worker would: the key variables in the
environment first, then the key file (its file variable, else the default
path). A missing credential comes with the one command that provisions it.`,
		Example: `  # A table for people
  berth providers

  # The same as a JSON array, for scripts
  berth providers --json | jq -r '.[] | select(.credential.state == "available") | .name'`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			rows := a.providerRows()
			if asJSON {
				return writeJSON(a.stdout, rows)
			}
			return writeProviderTable(a.stdout, rows)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	return cmd
}

// providerRow is one entry as `berth providers` shows it; its JSON form is
// the --json output.
type providerRow struct {
	Name         string                `json:"name"`
	Aliases      []string              `json:"aliases"`
	Summary      string                `json:"summary,omitempty"`
	Credential   providerCred          `json:"credential"`
	Target       *providerTarget       `json:"target,omitempty"`
	DefaultImage string                `json:"default_image,omitempty"`
	Library      string                `json:"library,omitempty"`
	MinVersion   string                `json:"min_version,omitempty"`
	Requires     []providerRequirement `json:"requires"`
	Capabilities sandbox.Capabilities  `json:"capabilities"`
}

type providerCred struct {
	State       string   `json:"state"` // "available", "missing", "not needed"
	Source      string   `json:"source,omitempty"`
	KeyVars     []string `json:"key_vars,omitempty"`
	FileVar     string   `json:"file_var,omitempty"`
	DefaultPath string   `json:"default_path,omitempty"`
	Hint        string   `json:"provision_hint,omitempty"`
}

type providerTarget struct {
	Var   string `json:"var"`
	Label string `json:"label"`
	Line  string `json:"line"` // "endpoint: E2B Cloud (default)"
}

type providerRequirement struct {
	Binary string `json:"binary,omitempty"`
	Root   bool   `json:"root,omitempty"`
	Hint   string `json:"hint,omitempty"`
}

func (a *app) providerRows() []providerRow {
	entries := a.reg.Entries()
	rows := make([]providerRow, 0, len(entries))
	for _, e := range entries {
		st := credentialStatus(e, a.env)
		row := providerRow{
			Name:    e.Name,
			Aliases: append([]string{}, e.Aliases...),
			Summary: e.Summary,
			Credential: providerCred{
				State:       st.State,
				Source:      st.Source,
				KeyVars:     e.Credential.KeyVars,
				FileVar:     e.Credential.FileVar,
				DefaultPath: e.Credential.DefaultPath,
				Hint:        e.Credential.ProvisionHint,
			},
			DefaultImage: e.DefaultImage,
			Library:      e.Library,
			MinVersion:   e.MinVersion,
			Requires:     []providerRequirement{},
			Capabilities: e.Capabilities(),
		}
		if e.Target != nil {
			row.Target = &providerTarget{
				Var:   e.Target.Var,
				Label: e.Target.Label,
				Line:  targetText(e, a.env),
			}
		}
		for _, r := range e.Requires {
			row.Requires = append(row.Requires, providerRequirement(r))
		}
		rows = append(rows, row)
	}
	return rows
}

func writeProviderTable(w io.Writer, rows []providerRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCREDENTIAL\tTARGET\tRESOURCES\tNETWORKS\tBUILD\tPAUSE\tSNAPSHOT\tGPUS\tTIMEOUT\tSIGNAL")
	for _, r := range rows {
		name := r.Name
		if len(r.Aliases) > 0 {
			name += " (" + strings.Join(r.Aliases, ", ") + ")"
		}
		target := "-"
		if r.Target != nil {
			target = r.Target.Line
		}
		cred := r.Credential.State
		if cred == credAvailable {
			cred = "via " + r.Credential.Source
		}
		c := r.Capabilities
		nets := make([]string, len(c.Networks))
		for i, n := range c.Networks {
			nets[i] = string(n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			name, cred, target, orDash(string(c.ResourceMode)), orDash(strings.Join(nets, ",")),
			yesNo(c.BuildImage), yesNo(c.Pause), yesNo(c.Snapshot), yesNo(c.GPUs), yesNo(c.SetTimeout), yesNo(c.Signal))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var missing []providerRow
	for _, r := range rows {
		if r.Credential.State == credMissing {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintln(w, "\nMissing credentials:")
		for _, r := range missing {
			fmt.Fprintf(w, "  %s: put the key in %s (%s overrides) or set %s; provision with: %s\n",
				r.Name, r.Credential.DefaultPath, r.Credential.FileVar,
				strings.Join(r.Credential.KeyVars, " + "), r.Credential.Hint)
		}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // provision hints hold && and >
	return enc.Encode(v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
