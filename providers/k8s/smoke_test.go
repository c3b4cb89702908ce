package k8s_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/providers/local"
	"github.com/berth-sh/berth/sandbox"
)

// One sandbox end to end: create, exec, delete.
func TestOneSandbox(t *testing.T) {
	ns := namespace(t)
	p := sandbox.NewProvider("k8s", openDriver(t, options(ns)))
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := p.Create(ctx, sandbox.Spec{Image: local.DefaultImage})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", "echo hi"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "hi" {
		t.Fatalf("run: %+v %v", res, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}
