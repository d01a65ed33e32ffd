package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/client"
)

// TokenFile is where a container finds its instance token
// (SUANLI_TOKEN_FILE). The agent replaces it when the control plane hands
// out a fresh one, so a long-running workload never holds an expired token.
const TokenFile = "/run/suanli/token"

// WriteToken replaces the instance's token file inside its container
// (agent.TokenWriter). The container may be running or stopped; an
// instance without a container yet is an error (its create writes it).
func (r *Runtime) WriteToken(ctx context.Context, id int64, token string) error {
	c, err := r.inspect(ctx, id)
	if err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("instance %d: no container yet", id)
	}
	return r.copyToken(ctx, c.ID, token)
}

// copyToken writes TokenFile into a container through the Engine's archive
// API: no exec, no bind mount, so it works on a stopped container too. The
// file is readable by any user in the container, which is one tenant's.
func (r *Runtime) copyToken(ctx context.Context, containerID, token string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "run/suanli/", Mode: 0o755, ModTime: now}); err != nil {
		return err
	}
	body := []byte(token + "\n")
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "run/suanli/token", Mode: 0o644, Size: int64(len(body)), ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write(body); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err := r.cli.CopyToContainer(ctx, containerID, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf})
	return err
}
