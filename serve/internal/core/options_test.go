package core_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/internal/apikeys"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/internal/servetest"
)

// TestAllowRegistriesValidated: an --allow-registry that is not HOST or
// HOST:PORT stops the server from starting, naming the entry.
func TestAllowRegistriesValidated(t *testing.T) {
	keys, err := apikeys.New(servetest.TestKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"http://registry.internal", "registry.internal/v2", "registry.internal:99999", ""} {
		_, err := core.New(core.Options{Provider: servetest.OpenFake(t, nil), Keys: keys, BaseImage: "host", AllowRegistries: []string{bad}})
		if sandbox.ClassOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("--allow-registry %q: %v", bad, err)
		}
	}
}
