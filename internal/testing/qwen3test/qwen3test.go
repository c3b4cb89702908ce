// Package qwen3test loads Qwen3's real tokenizer and chat template (the
// npm reference package that .ci/run installs) as a TITO codec, once per
// test process, for the tests of the session server and the rollouts.
// It lives apart from internal/testing/hfref because the tokenizer's and the chat
// template's own tests import hfref, and tito imports both.
package qwen3test

import (
	"sync"
	"testing"

	"github.com/berth-sh/berth/internal/testing/hfref"
	"github.com/berth-sh/berth/session/tito"
)

var (
	once  sync.Once
	codec *tito.Codec
	err   error
)

// Codec returns the Qwen3 codec; it skips the test when the reference
// package is not installed (see hfref.RequireQwen3) and fails it when the
// files do not load.
func Codec(t testing.TB) *tito.Codec {
	t.Helper()
	dir := hfref.RequireQwen3(t)
	once.Do(func() { codec, err = tito.LoadCodec(dir, "qwen3", "") })
	if err != nil {
		t.Fatal(err)
	}
	return codec
}
