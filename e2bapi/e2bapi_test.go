package e2bapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Each message, filled, encodes exactly the spec's property names
// (e2b-dev/infra spec/openapi.yml) that berth speaks: a misspelt tag is a
// field both the driver and the server would agree on and E2B would not.
func TestFieldNamesAreTheSpecs(t *testing.T) {
	now := time.Unix(1700000000, 0).UTC()
	for _, c := range []struct {
		v    any
		want []string
	}{
		{Error{Code: 404, Message: "m"}, []string{"code", "message"}},
		{NewSandbox{TemplateID: "t", Timeout: Int64(1), AutoPause: Bool(false), Secure: Bool(true), AllowInternetAccess: Bool(true),
			Network: &SandboxNetworkConfig{AllowPublicTraffic: Bool(false)}, Metadata: map[string]string{"k": "v"},
			EnvVars: map[string]string{"E": "1"}, VolumeMounts: []SandboxVolumeMount{{Name: "n", Path: "/p"}}},
			[]string{"templateID", "timeout", "autoPause", "secure", "allow_internet_access", "network", "metadata", "envVars", "volumeMounts"}},
		{SandboxNetworkConfig{AllowPublicTraffic: Bool(true)}, []string{"allowPublicTraffic"}},
		{SandboxVolumeMount{}, []string{"name", "path"}},
		{Sandbox{TemplateID: "t", SandboxID: "s", Alias: "a", EnvdAccessToken: "x", TrafficAccessToken: String("y"), Domain: String("d")},
			[]string{"templateID", "sandboxID", "alias", "clientID", "envdVersion", "envdAccessToken", "trafficAccessToken", "domain"}},
		{listed(now), []string{"templateID", "alias", "sandboxID", "clientID", "startedAt", "endAt", "cpuCount", "memoryMB", "diskSizeMB", "metadata", "state", "envdVersion"}},
		{SandboxDetail{ListedSandbox: listed(now), EnvdAccessToken: "x", Domain: String("d"), AllowInternetAccess: Bool(true)},
			[]string{"templateID", "alias", "sandboxID", "clientID", "startedAt", "endAt", "cpuCount", "memoryMB", "diskSizeMB", "metadata", "state", "envdVersion",
				"envdAccessToken", "domain", "allowInternetAccess"}},
		{ConnectSandbox{Timeout: Int64(1)}, []string{"timeout"}},
		{ResumedSandbox{Timeout: Int64(1), AutoPause: Bool(false)}, []string{"timeout", "autoPause"}},
		{SandboxTimeout{Timeout: Int64(1)}, []string{"timeout"}},
		{SandboxRefresh{Duration: Int64(1)}, []string{"duration"}},
		{SandboxLogs{}, []string{"logs", "logEntries"}},
		{SandboxLog{}, []string{"timestamp", "line"}},
		{SandboxLogEntry{}, []string{"timestamp", "message", "level", "fields"}},
		{TemplateBuildRequestV3{Name: "n", Alias: "a", Tags: []string{"t"}}, []string{"name", "alias", "tags"}},
		{TemplateRequestResponseV3{}, []string{"templateID", "buildID", "public", "names", "tags", "aliases"}},
		{TemplateBuildStartV2{FromImage: "i", FromTemplate: "t", FromImageRegistry: json.RawMessage(`{}`), StartCmd: "s", ReadyCmd: "r"},
			[]string{"fromImage", "fromTemplate", "fromImageRegistry", "force", "steps", "startCmd", "readyCmd"}},
		{TemplateStep{FilesHash: "h"}, []string{"type", "args", "filesHash", "force"}},
		{TemplateBuildFileUpload{URL: "u"}, []string{"present", "url"}},
		{TemplateBuildInfo{Reason: &BuildStatusReason{}}, []string{"logs", "logEntries", "templateID", "buildID", "status", "reason"}},
		{BuildLogEntry{Step: "1"}, []string{"timestamp", "message", "level", "step"}},
		{BuildStatusReason{Step: "1"}, []string{"message", "step", "logEntries"}},
		{TemplateAliasResponse{}, []string{"templateID", "public"}},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var got []string
		for k := range m {
			got = append(got, k)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s encodes %v, want the spec's %v", reflect.TypeOf(c.v).Name(), got, want)
		}
	}
}

func listed(now time.Time) ListedSandbox {
	return ListedSandbox{TemplateID: "t", Alias: "a", SandboxID: "s", StartedAt: now, EndAt: now, State: StateRunning}
}

// The optional fields stay off the wire when unset, and the nullable ones
// are null: a v2 create without a timeout takes the server's default, and
// a null domain sends the SDKs to E2B_DOMAIN.
func TestOptionalAndNullable(t *testing.T) {
	b, _ := json.Marshal(NewSandbox{TemplateID: "base"})
	if string(b) != `{"templateID":"base"}` {
		t.Errorf("a bare create: %s", b)
	}
	b, _ = json.Marshal(Sandbox{SandboxID: "s"})
	if string(b) != `{"templateID":"","sandboxID":"s","clientID":"","envdVersion":"","trafficAccessToken":null,"domain":null}` {
		t.Errorf("a bare sandbox: %s", b)
	}
	var c ConnectSandbox
	if err := json.Unmarshal([]byte(`{}`), &c); err != nil || c.Timeout != nil {
		t.Errorf("an empty connect: %+v %v", c, err)
	}
}

func TestPath(t *testing.T) {
	for _, c := range []struct {
		route  string
		params []string
		want   string
	}{
		{RouteSandboxes, nil, "/sandboxes"},
		{RouteConnectV2, []string{"abc"}, "/v2/sandboxes/abc/connect"},
		{RouteSandbox, []string{"a/b?c"}, "/sandboxes/a%2Fb%3Fc"},
		{RouteBuildStatus, []string{"t1", "b1"}, "/templates/t1/builds/b1/status"},
		{RouteBuildStatus, []string{"t1"}, "/templates/t1/builds/{buildID}/status"},
	} {
		if got := Path(c.route, c.params...); got != c.want {
			t.Errorf("Path(%q, %q) = %q, want %q", c.route, c.params, got, c.want)
		}
	}
}
