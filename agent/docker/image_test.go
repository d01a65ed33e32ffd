package docker_test

import (
	"errors"
	"regexp"
	"runtime"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/docker"
)

// An image that cannot be pulled is refused, by Preflight (before anything
// is billed) and by Ensure (which pulls), with the cause and what to do: no
// such repository, no such tag, credentials missing or refused, registry
// unreachable; and the right credentials pass both.
func TestUnpullable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runtime()
	ctx := t.Context()
	pub := NewRegistry(t)
	pub.AddImage("suanli-test/pub-"+e.ns, "v1", "linux", runtime.GOARCH, 1000, false)
	priv := NewRegistry(t)
	privRef := priv.AddImage("suanli-test/priv-"+e.ns, "v1", "linux", runtime.GOARCH, 1000, false)
	priv.RequireAuth("suanli-test/priv-"+e.ns, "alice", "s3cret")
	trackImage(privRef)
	host := regexp.QuoteMeta

	tests := []struct {
		name  string
		image string
		auth  *suanli.RegistryAuth
		code  string
		msg   string // regexp of the whole message
	}{
		{"no repository", pub.Host + "/suanli-test/absent:v1", nil, suanli.EINVALID,
			`^image ` + host(pub.Host) + `/suanli-test/absent:v1: registry ` + host(pub.Host) + ` has no repository suanli-test/absent \(.+\): ` +
				`check the image name \(docker manifest inspect ` + host(pub.Host) + `/suanli-test/absent:v1 shows whether the registry has it\)$`},
		{"no tag", pub.Host + "/suanli-test/pub-" + e.ns + ":v9", nil, suanli.EINVALID,
			`^image ` + host(pub.Host) + `/suanli-test/pub-\w+:v9: repository suanli-test/pub-\w+ on ` + host(pub.Host) + ` has no tag v9 \(.+\): ` +
				`check the tag \(docker manifest inspect .+:v9 shows whether the registry has it\)$`},
		{"no credentials", privRef, nil, suanli.EINVALID,
			`^image ` + host(privRef) + `: registry ` + host(priv.Host) + ` refused the pull without credentials \(.+\): ` +
				`for a private image give --registry-user and set SUANLI_REGISTRY_PASSWORD; else check the name`},
		{"wrong password", privRef, &suanli.RegistryAuth{Server: priv.Host, Username: "alice", Password: "wrong"}, suanli.EINVALID,
			`^image ` + host(privRef) + `: registry ` + host(priv.Host) + ` refused the credentials of user alice \(.+\): ` +
				`check --registry-user and SUANLI_REGISTRY_PASSWORD \(a token needs pull access to suanli-test/priv-\w+\)$`},
		{"unreachable", "127.0.0.1:1/suanli-test/x:v1", nil, suanli.EUNAVAILABLE,
			`^image 127\.0\.0\.1:1/suanli-test/x:v1: registry 127\.0\.0\.1:1 cannot be reached from this host \(.*connection refused.*\): ` +
				`check the registry's address, and the host's DNS and network$`},
	}
	for i, tt := range tests {
		spec := e.spec(int64(20 + i))
		spec.Image, spec.RegistryAuth = tt.image, tt.auth
		for _, step := range []struct {
			name string
			call func() error
		}{
			{"Preflight", func() error { return r.Preflight(ctx, spec) }},
			{"Ensure", func() error { return r.Ensure(ctx, spec) }},
		} {
			err := step.call()
			if suanli.ErrorCode(err) != tt.code || !regexp.MustCompile(tt.msg).MatchString(suanli.ErrorMessage(err)) {
				t.Errorf("%s: %s = %v (%s),\nwant %s matching %s", tt.name, step.name, err, suanli.ErrorCode(err), tt.code, tt.msg)
			}
		}
	}
	if reps, _ := r.Status(ctx); len(reps) != 0 {
		t.Errorf("refused instances left %+v", reps)
	}

	// The right credentials pass the pre-flight and the pull (desired
	// stopped: the layer is data, not a program to start).
	spec := e.spec(30)
	spec.Image, spec.Desired = privRef, suanli.DesiredStopped
	spec.RegistryAuth = &suanli.RegistryAuth{Server: priv.Host, Username: "alice", Password: "s3cret"}
	if err := r.Preflight(ctx, spec); err != nil {
		t.Errorf("Preflight with the right credentials: %v", err)
	}
	MustEnsure(t, r, spec)
}

// The daemon's wording of registry failures, as seen from the Engine API,
// is classified whatever the daemon's version or registry.
func TestPullFailure(t *testing.T) {
	tests := []struct{ msg, want string }{
		{`Error response from daemon: manifest for ghcr.io/a/b:v9 not found: manifest unknown: manifest unknown`, "no tag"},
		{`Error response from daemon: manifest unknown`, "no tag"},
		{`Error response from daemon: name unknown`, "no repository"},
		{`Error response from daemon: pull access denied for nope/nope, repository does not exist or may require 'docker login': denied: requested access to the resource is denied`, "refused"},
		{`Error response from daemon: Head "https://ghcr.io/v2/a/b/manifests/v1": unauthorized`, "refused"},
		{`Error response from daemon: Head "http://127.0.0.1:5000/v2/a/manifests/v1": no basic auth credentials`, "refused"},
		{`Error response from daemon: Get "https://nosuch.invalid/v2/": dial tcp: lookup nosuch.invalid on 10.0.0.53:53: no such host`, "unreachable"},
		{`Error response from daemon: Get "https://r.example/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)`, "unreachable"},
		{`Error response from daemon: Get "https://r.example/v2/": x509: certificate signed by unknown authority`, "unreachable"},
		{`Error response from daemon: Get "https://r.example/v2/": tls: failed to verify certificate`, "unreachable"},
		{`Error response from daemon: image r.example/a:v1 not found`, "not found"},
		{`failed to register layer: no space left on device`, "other"},
	}
	for _, tt := range tests {
		if got := docker.PullFailure(errors.New(tt.msg)); got != tt.want {
			t.Errorf("PullFailure(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

func TestSplitRef(t *testing.T) {
	tests := []struct{ ref, host, repo, tag string }{
		{"ubuntu", "docker.io", "ubuntu", "latest"},
		{"nvidia/cuda:12.4.1-base", "docker.io", "nvidia/cuda", "12.4.1-base"},
		{"ghcr.io/a/b:v1", "ghcr.io", "a/b", "v1"},
		{"localhost/a", "localhost", "a", "latest"},
		{"127.0.0.1:5000/a/b", "127.0.0.1:5000", "a/b", "latest"},
		{"127.0.0.1:5000/a/b:v2", "127.0.0.1:5000", "a/b", "v2"},
		{"r.example/a@sha256:abcd", "r.example", "a", "sha256:abcd"},
		{"r.example:443/a:v1@sha256:abcd", "r.example:443", "a", "sha256:abcd"},
	}
	for _, tt := range tests {
		host, repo, tag := docker.SplitRef(tt.ref)
		if host != tt.host || repo != tt.repo || tag != tt.tag {
			t.Errorf("SplitRef(%q) = %q, %q, %q, want %q, %q, %q", tt.ref, host, repo, tag, tt.host, tt.repo, tt.tag)
		}
	}
}
