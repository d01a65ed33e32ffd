package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/internal/units"
)

// Preflighter is implemented by runtimes that can tell, before anything is
// reserved or billed, whether a spec can run on this machine. The control
// plane (through the agent) asks before it bills; Ensure runs the same
// checks again.
type Preflighter interface {
	// Preflight returns nil when spec can run here, else an *suanli.Error
	// whose message names the cause and the fix.
	Preflight(ctx context.Context, spec suanli.InstanceSpec) error
}

// Preflight checks, without creating anything: the spec's fields (image
// named, ports well-formed), that the image's platform matches the host's
// (the local image if present, else the registry's manifest, which costs one
// registry round trip and no download), and that the daemon's disk has
// spec.DiskGB free. Errors: EINVALID for a bad spec or an unusable image
// (wrong platform, no such repository or tag, credentials missing or
// refused), ECONFLICT when the disk is short, EUNAVAILABLE when the daemon
// or the image's registry cannot be reached.
func (r *Runtime) Preflight(ctx context.Context, spec suanli.InstanceSpec) error {
	if err := r.checkSpec(spec); err != nil {
		return err
	}
	img, err := r.cli.ImageInspect(ctx, spec.Image)
	switch {
	case err == nil:
		if err := r.checkPlatform(spec.Image, img.Os, img.Architecture); err != nil {
			return err
		}
	case cerrdefs.IsNotFound(err):
		dist, err := r.cli.DistributionInspect(ctx, spec.Image,
			client.DistributionInspectOptions{EncodedRegistryAuth: registryAuth(spec.RegistryAuth)})
		if err != nil {
			return r.unpullable(spec, err)
		}
		if len(dist.Platforms) > 0 {
			var names []string
			for _, p := range dist.Platforms {
				if p.OS == r.hostOS && normalizeArch(p.Architecture) == r.hostArch {
					names = nil
					break
				}
				names = append(names, p.OS+"/"+normalizeArch(p.Architecture))
			}
			if names != nil {
				return suanli.Errorf(suanli.EINVALID, "image %s is %s, host is %s: choose an %s or multi-arch image",
					spec.Image, strings.Join(slices.Compact(names), ", "), r.HostPlatform(), r.hostArch)
			}
		}
	default:
		return r.daemonErr("inspect image "+spec.Image, err)
	}
	return r.checkDisk(ctx, spec)
}

// checkSpec validates what Ensure needs from the spec itself.
func (r *Runtime) checkSpec(spec suanli.InstanceSpec) error {
	if strings.TrimSpace(spec.Image) == "" {
		return suanli.FieldErrorf("image", "instance %d names no image", spec.ID)
	}
	if spec.CPUCores < 0 || spec.RAMMB < 0 || spec.DiskGB < 0 {
		return suanli.Errorf(suanli.EINVALID, "instance %d: negative cpu_cores, ram_mb or disk_gb", spec.ID)
	}
	if _, err := requestedPorts(spec); err != nil {
		return err
	}
	return nil
}

// checkPlatform refuses an image built for another OS or architecture, which
// would otherwise start and die with "exec format error".
func (r *Runtime) checkPlatform(ref, os, arch string) error {
	if os == "" {
		os = "linux"
	}
	if os == r.hostOS && normalizeArch(arch) == r.hostArch {
		return nil
	}
	return suanli.Errorf(suanli.EINVALID, "image %s is %s/%s, host is %s: choose an %s or multi-arch image",
		ref, os, normalizeArch(arch), r.HostPlatform(), r.hostArch)
}

// checkDisk compares spec.DiskGB with the free space under the daemon's root
// directory, when that directory is on this machine (a remote daemon's disk
// cannot be seen and is not checked).
func (r *Runtime) checkDisk(ctx context.Context, spec suanli.InstanceSpec) error {
	if spec.DiskGB <= 0 {
		return nil
	}
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return r.daemonErr("docker info", err)
	}
	var fs syscall.Statfs_t
	if info.Info.DockerRootDir == "" || syscall.Statfs(info.Info.DockerRootDir, &fs) != nil {
		return nil
	}
	free := int64(fs.Bavail) * int64(fs.Bsize)
	if free < spec.DiskGB<<30 {
		return suanli.Errorf(suanli.ECONFLICT, "instance %d asks %d GB of disk, the host has %s free under %s: choose a smaller disk or another machine",
			spec.ID, spec.DiskGB, units.Bytes(free), info.Info.DockerRootDir)
	}
	return nil
}

// ensureImage makes spec.Image local, pulling it when needed (progress in
// r.pulls for Status), and checks its platform.
func (r *Runtime) ensureImage(ctx context.Context, spec suanli.InstanceSpec) error {
	img, err := r.cli.ImageInspect(ctx, spec.Image)
	if cerrdefs.IsNotFound(err) {
		if err := r.pull(ctx, spec); err != nil {
			return err
		}
		img, err = r.cli.ImageInspect(ctx, spec.Image)
	}
	if err != nil {
		return r.daemonErr("inspect image "+spec.Image, err)
	}
	return r.checkPlatform(spec.Image, img.Os, img.Architecture)
}

// pull downloads spec.Image for the host's platform, keeping a progress
// message ("pulling 45% of 1.2 GB") in r.pulls while it runs.
func (r *Runtime) pull(ctx context.Context, spec suanli.InstanceSpec) error {
	start := r.now()
	r.setPull(spec.ID, "pulling "+spec.Image)
	defer func() {
		r.mu.Lock()
		delete(r.pulls, spec.ID)
		r.mu.Unlock()
	}()
	r.log.Info("image pull started", "instance_id", spec.ID, "image", spec.Image)
	resp, err := r.cli.ImagePull(ctx, spec.Image, client.ImagePullOptions{RegistryAuth: registryAuth(spec.RegistryAuth)})
	if err != nil {
		return r.unpullable(spec, err)
	}
	defer resp.Close()
	var p pullProgress
	for msg, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return r.unpullable(spec, err)
		}
		if msg.Error != nil {
			return r.unpullable(spec, msg.Error)
		}
		if p.update(msg) {
			r.setPull(spec.ID, p.String())
		}
	}
	r.log.Info("image pulled", "instance_id", spec.ID, "image", spec.Image,
		"bytes", p.total(), "duration", r.now().Sub(start).Round(time.Millisecond))
	return nil
}

func (r *Runtime) setPull(id int64, msg string) {
	r.mu.Lock()
	r.pulls[id] = msg
	r.mu.Unlock()
}

// unpullable explains an image that is not here and cannot be fetched:
// not in the registry (which part: the repository or the tag), refused by
// the registry (with or without the spec's credentials), or a registry this
// host cannot reach; each with what to do. Not found and refused are
// EINVALID (the spec must change), unreachable is EUNAVAILABLE (the host's
// network or the registry must).
func (r *Runtime) unpullable(spec suanli.InstanceSpec, err error) error {
	ref := spec.Image
	if client.IsErrConnectionFailed(err) {
		return r.daemonErr("pull "+ref, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	cause := strings.TrimSpace(strings.TrimPrefix(err.Error(), "Error response from daemon: "))
	host, repo, tag := splitRef(ref)
	switch pullFailureOf(err) {
	case pullNoRepo:
		return suanli.Errorf(suanli.EINVALID, "image %s: registry %s has no repository %s (%s): check the image name (docker manifest inspect %s shows whether the registry has it)",
			ref, host, repo, cause, ref)
	case pullNoTag:
		what := "tag"
		if strings.Contains(tag, ":") {
			what = "manifest"
		}
		return suanli.Errorf(suanli.EINVALID, "image %s: repository %s on %s has no %s %s (%s): check the tag (docker manifest inspect %s shows whether the registry has it)",
			ref, repo, host, what, tag, cause, ref)
	case pullNotFound:
		return suanli.Errorf(suanli.EINVALID, "image %s not found on registry %s (%s): check the name and tag (docker manifest inspect %s shows whether the registry has it)",
			ref, host, cause, ref)
	case pullRefused:
		if a := spec.RegistryAuth; a != nil && a.Username != "" {
			return suanli.Errorf(suanli.EINVALID, "image %s: registry %s refused the credentials of user %s (%s): check --registry-user and SUANLI_REGISTRY_PASSWORD (a token needs pull access to %s)",
				ref, host, a.Username, cause, repo)
		}
		return suanli.Errorf(suanli.EINVALID, "image %s: registry %s refused the pull without credentials (%s): for a private image give --registry-user and set SUANLI_REGISTRY_PASSWORD; else check the name (some registries answer so for a repository that does not exist)",
			ref, host, cause)
	case pullUnreachable:
		return suanli.Errorf(suanli.EUNAVAILABLE, "image %s: registry %s cannot be reached from this host (%s): check the registry's address, and the host's DNS and network",
			ref, host, cause)
	}
	return suanli.Errorf(suanli.EINVALID, "image %s is not on this host and cannot be pulled (%s): check the name and tag, the registry credentials, or load the image on the host",
		ref, cause)
}

// pullFailure is why a registry would not give an image.
type pullFailure int

const (
	pullOther       pullFailure = iota
	pullNoRepo                  // the registry has no such repository
	pullNoTag                   // the repository has no such tag or digest
	pullNotFound                // not found, the registry did not say which part
	pullRefused                 // credentials missing, wrong, or without access
	pullUnreachable             // DNS, connection, TLS
)

// pullFailureOf classifies a failed pull or distribution inspect. The
// daemon passes the registry's error on only as text (its HTTP status
// differs by daemon version and is lost inside a pull's progress stream), so
// after the error type the text decides: the registry API's error messages
// (MANIFEST_UNKNOWN, NAME_UNKNOWN, UNAUTHORIZED, DENIED) and Go's network
// errors, as the daemon words them.
func pullFailureOf(err error) pullFailure {
	msg := strings.ToLower(err.Error())
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(msg, s) })
	}
	switch {
	case cerrdefs.IsUnauthorized(err) || cerrdefs.IsPermissionDenied(err),
		has("no basic auth credentials", "unauthorized", "authentication required", "access denied",
			"access to the resource is denied", "incorrect username or password", "403 forbidden"):
		return pullRefused
	case has("name unknown", "repository name not known", "repository does not exist"):
		return pullNoRepo
	case has("manifest unknown"):
		return pullNoTag
	case cerrdefs.IsNotFound(err), has("not found"):
		return pullNotFound
	case has("no such host", "connection refused", "i/o timeout", "network is unreachable", "no route to host",
		"connection reset", "tls:", "x509:", "http response to https client", "timeout exceeded"):
		return pullUnreachable
	}
	return pullOther
}

// splitRef splits an image reference into its registry host (Docker Hub,
// "docker.io", when the first element does not name a host), repository
// and tag or digest ("latest" when none is given).
func splitRef(ref string) (host, repo, tag string) {
	name, tag, digest := ref, "latest", false
	if n, d, ok := strings.Cut(ref, "@"); ok {
		name, tag, digest = n, d, true
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		if !digest {
			tag = name[i+1:]
		}
		name = name[:i]
	}
	host, repo = "docker.io", name
	if h, rest, ok := strings.Cut(name, "/"); ok && (strings.ContainsAny(h, ".:") || h == "localhost") {
		host, repo = h, rest
	}
	return host, repo, tag
}

// pullProgress sums the per-layer progress of one pull.
type pullProgress struct {
	layers map[string]*layerProgress
	order  []string
}

type layerProgress struct {
	current, size int64
	downloaded    bool // all bytes here (size may be unknown: 0)
	done          bool // extracted, or already present
	present       bool // "Already exists": not downloaded, not counted
}

// update folds one message in and reports whether the summary may have
// changed.
func (p *pullProgress) update(m jsonstream.Message) bool {
	if m.ID == "" || strings.Contains(m.Status, "Pulling from") || strings.HasPrefix(m.Status, "Digest:") {
		return false
	}
	if p.layers == nil {
		p.layers = map[string]*layerProgress{}
	}
	l := p.layers[m.ID]
	if l == nil {
		l = &layerProgress{}
		p.layers[m.ID] = l
		p.order = append(p.order, m.ID)
	}
	switch {
	case m.Status == "Downloading" && m.Progress != nil:
		l.current = m.Progress.Current
		if m.Progress.Total > 0 {
			l.size = m.Progress.Total
		}
	case m.Status == "Verifying Checksum" || m.Status == "Download complete":
		l.downloaded = true
		l.current = l.size
	case m.Status == "Extracting":
		l.downloaded = true
		if m.Progress != nil && m.Progress.Total > 0 {
			l.size = m.Progress.Total
		}
		l.current = l.size
	case m.Status == "Pull complete":
		l.downloaded, l.done = true, true
		l.current = l.size
	case m.Status == "Already exists":
		l.present, l.downloaded, l.done = true, true, true
	default:
		return false
	}
	return true
}

// total is the bytes to download, as far as known.
func (p *pullProgress) total() int64 {
	var n int64
	for _, l := range p.layers {
		if !l.present {
			n += l.size
		}
	}
	return n
}

// String is the message for Status: "pulling 45% of 1.2 GB", then
// "extracting 1.2 GB" once every layer is downloaded.
func (p *pullProgress) String() string {
	var cur, total int64
	allDown, unknown := true, 0
	for _, id := range p.order {
		l := p.layers[id]
		if l.present {
			continue
		}
		cur += l.current
		total += l.size
		if !l.downloaded {
			allDown = false
			if l.size == 0 {
				unknown++
			}
		}
	}
	switch {
	case len(p.order) > 0 && allDown:
		return "extracting " + units.Bytes(total)
	case total == 0:
		return fmt.Sprintf("pulling %d layers", len(p.order))
	}
	s := fmt.Sprintf("pulling %d%% of %s", cur*100/total, units.Bytes(total))
	if unknown > 0 {
		s += fmt.Sprintf(" (+%d layers of unknown size)", unknown)
	}
	return s
}

// normalizeArch spells an architecture as GOARCH does.
func normalizeArch(a string) string {
	switch strings.ToLower(a) {
	case "x86_64", "x86-64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "i386", "i686", "386":
		return "386"
	case "armhf", "armv7l", "arm":
		return "arm"
	}
	return a
}

// registryAuth encodes a private registry's credential for the daemon's
// pull (base64url JSON, as the Engine API wants); "" when there is none.
func registryAuth(a *suanli.RegistryAuth) string {
	if a == nil {
		return ""
	}
	b, _ := json.Marshal(registry.AuthConfig{Username: a.Username, Password: a.Password, ServerAddress: a.Server})
	return base64.URLEncoding.EncodeToString(b)
}
