package registry

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var varName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// check rejects entries that would make Launch forward a secret, print an
// unquotable name, or set one variable twice. Register panics on them: they
// are programming errors in an entry's data.
func (e Entry) check() error {
	seen := map[string]bool{e.Name: true}
	for _, a := range e.Aliases {
		if a == "" || a != strings.ToLower(strings.TrimSpace(a)) || seen[a] {
			return fmt.Errorf("invalid or repeated alias %q", a)
		}
		seen[a] = true
	}
	c := e.Credential
	if !c.None() {
		if c.FileVar == "" || c.DefaultPath == "" || c.ProvisionHint == "" {
			return errors.New("a credential needs a file variable, a default path and a provision hint")
		}
	} else if c.FileVar != "" || c.DefaultPath != "" || c.Flag != "" || c.ParseFile != nil {
		return errors.New("credential fields set without key variables")
	}
	vars := map[string]string{BackendVar: "reserved", HarborVar: "reserved", StrictKeyFilesVar: "reserved"}
	add := func(name, role string) error {
		if !varName.MatchString(name) {
			return fmt.Errorf("invalid variable name %q (%s)", name, role)
		}
		if prev, dup := vars[name]; dup {
			return fmt.Errorf("variable %s is both %s and %s", name, prev, role)
		}
		vars[name] = role
		return nil
	}
	for _, k := range c.KeyVars {
		if err := add(k, "a key variable"); err != nil {
			return err
		}
	}
	if c.FileVar != "" {
		if err := add(c.FileVar, "the file variable"); err != nil {
			return err
		}
	}
	for _, k := range e.Forward {
		if err := add(k, "forwarded"); err != nil {
			return err
		}
	}
	for _, d := range e.EnvDefaults {
		if err := add(d.Name, "an env default"); err != nil {
			return err
		}
	}
	if e.Target != nil && slices.Contains(c.KeyVars, e.Target.Var) {
		return fmt.Errorf("target variable %s is a key variable", e.Target.Var)
	}
	if e.Probe != nil && slices.Contains(c.KeyVars, e.Probe.URLVar) {
		return fmt.Errorf("probe variable %s is a key variable", e.Probe.URLVar)
	}
	return nil
}
