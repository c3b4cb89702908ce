package task

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// LoadDir loads every task under root: root itself when it holds a
// task.toml, else each directory below it that does (a task directory's own
// subdirectories are not searched). Tasks come back sorted by name; a bad
// task is returned with its Problems, never dropped. The error is only for a
// root that cannot be read.
func LoadDir(root string) ([]*Task, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("tasks path: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("tasks path %s is not a directory", root)
	}
	if isFile(filepath.Join(root, "task.toml")) {
		return []*Task{Load(root)}, nil
	}
	var tasks []*Task
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || p == root {
			return nil
		}
		if d.Name()[0] == '.' {
			return filepath.SkipDir
		}
		if isFile(filepath.Join(p, "task.toml")) {
			tasks = append(tasks, Load(p))
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tasks path: %w", err)
	}
	slices.SortFunc(tasks, func(a, b *Task) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Dir, b.Dir))
	})
	return tasks, nil
}
