package seed

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// BashPaths are where Debian installs bash.
var BashPaths = []string{"/bin/bash", "/usr/bin/bash"}

// libDirs are searched, in order, for a library bash needs: the places the
// dynamic loader looks without an ld.so.cache.
var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// hostFile is a file of the host to put in the image at Name (relative).
type hostFile struct {
	Name   string // path in the image, without the leading slash
	Source string // host path to read
}

// bashFiles lists the host's bash and everything it needs to run in an
// image without a libc: its program interpreter and, transitively, the
// shared libraries it names. The E2B SDKs run every command as
// /bin/bash -l -c, so a base image without bash is useless to them; this
// gives the offline seed a real bash. A host without bash returns nil.
func bashFiles() ([]hostFile, error) {
	var bash string
	for _, p := range BashPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			bash = p
			break
		}
	}
	if bash == "" {
		return nil, nil
	}
	files := []hostFile{{Name: "bin/bash", Source: bash}}
	seen := map[string]bool{}
	queue := []string{bash}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		interp, needed, err := elfDeps(p)
		if err != nil {
			return nil, fmt.Errorf("seed: bash: %s: %w", p, err)
		}
		if interp != "" && !seen[interp] {
			seen[interp] = true
			files = append(files, hostFile{Name: strings.TrimPrefix(interp, "/"), Source: interp})
		}
		for _, lib := range needed {
			if seen[lib] {
				continue
			}
			seen[lib] = true
			found := ""
			for _, d := range libDirs {
				if fi, err := os.Stat(filepath.Join(d, lib)); err == nil && fi.Mode().IsRegular() {
					found = filepath.Join(d, lib)
					break
				}
			}
			if found == "" {
				return nil, fmt.Errorf("seed: bash needs %s, which is in none of %s", lib, strings.Join(libDirs, ", "))
			}
			files = append(files, hostFile{Name: strings.TrimPrefix(found, "/"), Source: found})
			queue = append(queue, found)
		}
	}
	return files, nil
}

// elfDeps returns an ELF file's program interpreter and DT_NEEDED names.
func elfDeps(p string) (string, []string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	interp := ""
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err != nil {
				return "", nil, err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return "", nil, err
	}
	return interp, needed, nil
}

// parentDirs lists the directories above each name, shallowest first,
// once each, so a tar can create them before the files.
func parentDirs(names []string) []string {
	var dirs []string
	for _, n := range names {
		for d := path.Dir(n); d != "." && d != "/"; d = path.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}
