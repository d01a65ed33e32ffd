package sshd

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth/sshca"
)

// handshakeTimeout bounds the SSH handshake and authentication.
const handshakeTimeout = 30 * time.Second

// Server accepts SSH connections for one machine's instances. Set its
// fields, then call Serve; it is safe for concurrent use once serving. The
// zero value is not usable: HostKey, Verifier and Target are required.
type Server struct {
	// HostKey is the machine's host key, pinned by `suanli ssh` through the
	// control plane (LoadOrCreateHostKey).
	HostKey ssh.Signer
	// Verifier holds the trusted CA keys and checks certificates.
	Verifier *sshca.Verifier
	// Target runs sessions in instances.
	Target Target
	// Logger receives connection and session events; nil discards them.
	Logger *slog.Logger
	// CheckEvery is how often a session checks that its instance still runs
	// (and ends when it does not); 5s when 0.
	CheckEvery time.Duration

	wg sync.WaitGroup
}

// grantKey is the key of the grant in ssh.Permissions.ExtraData.
type grantKey struct{}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) config() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		// The callback decides from the offered key alone and remembers
		// nothing: the grant travels in the returned Permissions, which the
		// library hands to the connection only for the key that signed.
		PublicKeyCallback: func(c ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			g, err := s.Verifier.Verify(c.User(), c.RemoteAddr(), key)
			if err != nil {
				s.logger().Info("ssh key refused", "remote", c.RemoteAddr().String(), "user", c.User(), "err", err)
				return nil, err
			}
			cert := key.(*ssh.Certificate)
			opts := make(map[string]string, len(cert.CriticalOptions))
			for k, v := range cert.CriticalOptions {
				opts[k] = v
			}
			// CriticalOptions: the library checks source-address once more.
			return &ssh.Permissions{CriticalOptions: opts, ExtraData: map[any]any{grantKey{}: g}}, nil
		},
		MaxAuthTries:  6,
		ServerVersion: "SSH-2.0-Suanli",
	}
	cfg.AddHostKey(s.HostKey)
	return cfg
}

// Serve accepts connections on ln until ctx ends, then closes ln, ends every
// session (their commands are killed) and returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.HostKey == nil || s.Verifier == nil || s.Target == nil {
		return errors.New("sshd: HostKey, Verifier and Target are required")
	}
	cfg := s.config()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var conns sync.Map
	defer func() {
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		s.wg.Wait()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("sshd: accept: %w", err)
		}
		conns.Store(c, true)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conns.Delete(c)
			s.handleConn(ctx, c, cfg)
		}()
	}
}

func (s *Server) handleConn(ctx context.Context, c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		s.logger().Debug("ssh handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	defer sc.Close()
	c.SetDeadline(time.Time{})
	// Authorise from the permissions of the key that authenticated, and
	// nothing else.
	g, _ := sc.Permissions.ExtraData[grantKey{}].(*sshca.Grant)
	if g == nil || sshca.User(g.InstanceID) != sc.User() {
		s.logger().Error("ssh connection without a grant", "remote", c.RemoteAddr().String())
		return
	}
	log := s.logger().With("instance_id", g.InstanceID, "remote", c.RemoteAddr().String(), "key_id", g.KeyID)
	log.Info("ssh login")
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go ssh.DiscardRequests(reqs) // global requests (tcpip-forward, …) are refused
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.Prohibited, "only sessions: port forwarding is off on Suanli hosts")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.session(connCtx, g, ch, creqs, log)
		}()
	}
	log.Info("ssh logout")
}

// LoadOrCreateHostKey reads the agent's ed25519 host key from path (OpenSSH
// format), creating it (mode 0600) when it does not exist.
func LoadOrCreateHostKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := ssh.MarshalPrivateKey(priv, "suanli agent host key")
		if err != nil {
			return nil, err
		}
		if err := sshca.WriteFileAtomic(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, fmt.Errorf("write SSH host key: %w", err)
		}
		return ssh.NewSignerFromKey(priv)
	} else if err != nil {
		return nil, fmt.Errorf("read SSH host key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, suanli.Errorf(suanli.EINVALID, "SSH host key %s: %v: move it away to make a new one (renters' ssh pins the new one at their next login)", path, err)
	}
	return signer, nil
}

// AuthorizedKey returns a public key in authorized_keys format without the
// trailing newline.
func AuthorizedKey(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}
