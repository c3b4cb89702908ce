package osbserve

import (
	"maps"
	"math"
	"strings"
	"time"

	"github.com/berth-sh/berth/sandbox"
	"github.com/berth-sh/berth/serve/internal/core"
	"github.com/berth-sh/berth/serve/opensandbox"
)

// keepAlive reports whether argv only keeps a container running (the SDKs'
// default entrypoint): a berth sandbox stays up without it.
func keepAlive(argv []string) bool {
	switch strings.Join(argv, " ") {
	case "", "tail -f /dev/null", "sleep infinity":
		return true
	}
	return false
}

// image maps a create's image reference to the provider's image, and
// the policy its pull is under: a template's image is the operator's; any
// other the client named, and is pulled only as far as ClientPull allows.
func (o *Server) image(uri string) (string, *sandbox.PullPolicy, error) {
	if uri == "" {
		return "", nil, sandbox.Errorf(sandbox.InvalidArgument, "image.uri is required (snapshots are not supported by berth serve)")
	}
	if img, ok := o.opts.Templates[uri]; ok {
		return img, nil, nil
	}
	for _, p := range o.opts.OpenSandbox.Images {
		if imagePrefixMatches(p, uri) {
			return uri, o.opts.ClientPull(), nil
		}
	}
	return "", nil, sandbox.Errorf(sandbox.InvalidArgument, "image %q is not served here: name a template (%s) or an image the server allows (berth serve --opensandbox-image PREFIX)", uri, o.opts.TemplateNames())
}

// imagePrefixMatches reports whether an --opensandbox-image prefix allows
// the reference uri. A prefix ends on a boundary of the reference (a
// registry, a path element, a tag or a digest), so "registry.example"
// allows "registry.example/app:1" but not "registry.example.evil.com/app"
// and "docker.io/library/python" allows ":3.12" but not "pythonevil".
func imagePrefixMatches(prefix, uri string) bool {
	if prefix == "*" || prefix == uri {
		return true
	}
	if prefix == "" || !strings.HasPrefix(uri, prefix) {
		return false
	}
	if strings.ContainsAny(prefix[len(prefix)-1:], "/:@") {
		return true
	}
	return strings.ContainsAny(uri[len(prefix):len(prefix)+1], "/:@")
}

// network maps an egress policy onto a sandbox network: none given is
// the internet where the provider has it (upstream's allow-all), deny with
// allow rules an allowlist; deny rules cannot be honoured.
func (o *Server) network(np *opensandbox.NetworkPolicy) (sandbox.Network, opensandbox.NetworkPolicy, string, error) {
	public := !o.opts.DenyInternet && o.caps.Supports(sandbox.NetworkPublic)
	if np == nil || (len(np.Egress) == 0 && np.DefaultAction == "allow") {
		if public {
			return sandbox.Network{Mode: sandbox.NetworkPublic}, opensandbox.NetworkPolicy{DefaultAction: "allow"}, "allow_all", nil
		}
		return sandbox.Network{Mode: sandbox.NetworkNone}, opensandbox.NetworkPolicy{DefaultAction: "deny"}, "deny_all", nil
	}
	if np.DefaultAction != "" && np.DefaultAction != "deny" {
		return sandbox.Network{}, opensandbox.NetworkPolicy{}, "", sandbox.Errorf(sandbox.NotSupported, "networkPolicy: default action %q with deny rules is not supported: use defaultAction deny with allow rules", np.DefaultAction)
	}
	var allow []string
	for _, r := range np.Egress {
		if r.Action != "allow" {
			return sandbox.Network{}, opensandbox.NetworkPolicy{}, "", sandbox.Errorf(sandbox.NotSupported, "networkPolicy: %q rules are not supported under defaultAction deny (only allow)", r.Action)
		}
		allow = append(allow, r.Target)
	}
	policy := opensandbox.NetworkPolicy{DefaultAction: "deny", Egress: np.Egress}
	if len(allow) == 0 {
		return sandbox.Network{Mode: sandbox.NetworkNone}, policy, "deny_all", nil
	}
	if o.opts.DenyInternet || !o.caps.Supports(sandbox.NetworkAllowlist) {
		return sandbox.Network{}, opensandbox.NetworkPolicy{}, "", sandbox.Errorf(sandbox.NotSupported, "networkPolicy: allow rules need an allowlist network, which this server (provider %s) does not give", o.p.Name())
	}
	return sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: allow}, policy, "allowlist", nil
}

// resources reads resourceLimits: names left out take the server's
// per-sandbox defaults; a sandbox that could never fit under one key's
// ceiling is refused here, the sum of a key's sandboxes at reserve.
func (o *Server) resources(limits map[string]string) (sandbox.Resources, error) {
	res, err := opensandbox.ParseResources(limits)
	if err != nil {
		return res, err
	}
	if res.GPUs > 0 {
		return res, sandbox.Errorf(sandbox.NotSupported, "resourceLimits: GPUs are not served by berth serve")
	}
	res = core.Defaulted(res, o.opts.Resources) // pids: the server's, never asked
	if over := core.OverCeiling(res, o.opts.KeyCeiling); over != "" {
		return res, sandbox.Errorf(sandbox.InvalidArgument, "resourceLimits: one sandbox would hold %s; ask for less", over)
	}
	return res, nil
}

// ttl is the sandbox's life: timeout seconds, rounded up; none asks for
// no expiry, which berth bounds by the server's maximum.
func (o *Server) ttl(sec *float64) (time.Duration, error) {
	if sec == nil {
		return o.opts.MaxTimeout, nil
	}
	if *sec <= 0 || math.IsNaN(*sec) {
		return 0, sandbox.Errorf(sandbox.InvalidArgument, "timeout must be positive, got %v", *sec)
	}
	if *sec > o.opts.MaxTimeout.Seconds() {
		return 0, sandbox.Errorf(sandbox.InvalidArgument, "timeout %v s is over this server's maximum of %d s", *sec, int64(o.opts.MaxTimeout/time.Second))
	}
	return time.Duration(math.Ceil(*sec)) * time.Second, nil
}

// osbCreate is what an accepted create becomes: the spec and what the API
// reports back.
type osbCreate struct {
	spec       sandbox.Spec
	image      string // as the client named it
	policy     opensandbox.NetworkPolicy
	policyMode string
}

// spec validates a create request into a spec. Fields berth cannot
// honour are refused by name; unknown fields were ignored when decoding.
func (o *Server) spec(req *opensandbox.CreateRequest, id string) (osbCreate, error) {
	var c osbCreate
	switch {
	case req.SnapshotID != "":
		return c, sandbox.Errorf(sandbox.NotSupported, "snapshotId: restoring snapshots is not supported by berth serve")
	case req.Image == nil:
		return c, sandbox.Errorf(sandbox.InvalidArgument, "image is required")
	case req.Image.Auth != nil:
		return c, sandbox.Errorf(sandbox.NotSupported, "image.auth: registry credentials per create are not supported; configure the provider's registry access")
	case len(req.Volumes) > 0:
		return c, sandbox.Errorf(sandbox.NotSupported, "volumes are not supported by berth serve")
	case req.Platform != nil && req.Platform.OS != "" && req.Platform.OS != "linux":
		return c, sandbox.Errorf(sandbox.NotSupported, "platform os %q: berth sandboxes are linux", req.Platform.OS)
	}
	image, pull, err := o.image(req.Image.URI)
	if err != nil {
		return c, err
	}
	ttl, err := o.ttl(req.Timeout)
	if err != nil {
		return c, err
	}
	res, err := o.resources(req.ResourceLimits)
	if err != nil {
		return c, err
	}
	network, policy, mode, err := o.network(req.NetworkPolicy)
	if err != nil {
		return c, err
	}
	labels := map[string]string{}
	for k, v := range req.Metadata {
		if strings.HasPrefix(k, core.ServeLabelPrefix) {
			return c, sandbox.Errorf(sandbox.InvalidArgument, "metadata key %q is reserved (%s*)", k, core.ServeLabelPrefix)
		}
		labels[k] = v
	}
	labels[core.IDLabel] = id
	if _, ok := labels[core.LauncherLabel]; !ok {
		labels[core.LauncherLabel] = core.LauncherValue
	}
	c = osbCreate{spec: sandbox.Spec{Image: image, Env: maps.Clone(req.Env), Labels: labels, TTL: ttl, Network: network, Resources: res, Pull: pull},
		image: req.Image.URI, policy: policy, policyMode: mode}
	if err := c.spec.Validate(); err != nil {
		return c, err
	}
	return c, nil
}
