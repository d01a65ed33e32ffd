package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"path"
	"time"

	"github.com/moby/moby/client"
)

// TokenFile is where a container finds its instance token
// (SUANLI_TOKEN_FILE). The agent replaces it when the control plane hands
// out a fresh one, so a long-running workload never holds an expired token.
const TokenFile = "/run/suanli/token"

// WriteToken replaces the instance's token file inside its container
// (agent.TokenWriter). Ensure writes it when it starts the container; an
// instance without a container yet is an error. With a read-only root
// filesystem the container must be running (its token volume is mounted
// then); otherwise the next start writes it.
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
// API (no exec, no bind mount) onto the container's token volume. The file
// is readable by any user in the container, which is one tenant's.
func (r *Runtime) copyToken(ctx context.Context, containerID, token string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte(token + "\n")
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Base(TokenFile), Mode: 0o644, Size: int64(len(body)), ModTime: time.Now()}); err != nil {
		return err
	}
	if _, err := tw.Write(body); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err := r.cli.CopyToContainer(ctx, containerID, client.CopyToContainerOptions{DestinationPath: path.Dir(TokenFile), Content: &buf})
	return err
}
