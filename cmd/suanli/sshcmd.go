package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth/sshca"
	shttp "github.com/suanli/suanli/http"
)

// sshFiles are what `suanli ssh` writes for one instance under
// HOME/ssh/instances/ID: the certificate, a known_hosts file pinning the
// agent's host key, and an ssh_config for scp, sftp and rsync.
type sshFiles struct {
	Dir, Key, Cert, KnownHosts, Config, Alias string
}

func newSSHCmd(a *app) *cobra.Command {
	var keyPath, sshBin string
	var ttl time.Duration
	var configOnly bool
	var opts []string
	cmd := &cobra.Command{
		Use:   "ssh ID [-- COMMAND [ARGS…]]",
		Short: "Open a shell (or run a command) in an instance over SSH",
		Long: `Get a short-lived SSH certificate for your key, bound to the instance, and
run the system ssh with it.

The key is --key, else ~/.ssh/id_ed25519, else a key Suanli generates once in
HOME/ssh/id_ed25519. A key not yet on your account is added to it (see
'suanli ssh-keys'). The certificate (default 5 minutes) is valid only for
this instance and only from your account's IP allowlist ('suanli allowlist');
with no allowlist, only from the address the server sees this command come
from. The host's key is pinned from what its agent reported to the server.

A command of several words is quoted for the remote shell word by word; a
single word is given to the remote shell as it is ('ls | wc -l' works).
ssh's exit status is this command's exit status.

For scp, sftp and rsync, --config writes an ssh_config with the host alias
suanli-ID and prints its path.`,
		Example: `  suanli ssh 42
  suanli ssh 42 -- nvidia-smi
  scp -F "$(suanli ssh 42 --config)" model.bin suanli-42:
  rsync -a -e "ssh -F $(suanli ssh 42 --config)" data/ suanli-42:data/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("instance", args[0])
			if err != nil {
				return err
			}
			if cmd.ArgsLenAtDash() > 1 || (cmd.ArgsLenAtDash() < 0 && len(args) > 1) {
				return suanli.Errorf(suanli.EINVALID, "put the remote command after --: suanli ssh %d -- COMMAND", id)
			}
			c := a.client()
			files, cert, err := a.prepareSSH(cmd.Context(), c, cmd.ErrOrStderr(), id, keyPath, ttl)
			if err != nil {
				return err
			}
			if configOnly {
				fmt.Fprintln(cmd.OutOrStdout(), files.Config)
				return nil
			}
			bin, err := exec.LookPath(sshBin)
			if err != nil {
				return suanli.Errorf(suanli.EUNAVAILABLE, "no %s on this machine: install the OpenSSH client (apt-get install openssh-client)", sshBin)
			}
			argv := []string{"ssh", "-i", files.Key, "-o", "CertificateFile=" + files.Cert, "-o", "IdentitiesOnly=yes",
				"-o", "UserKnownHostsFile=" + files.KnownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
				"-o", "StrictHostKeyChecking=yes", "-o", "HostKeyAlias=" + files.Alias, "-p", strconv.Itoa(cert.Port)}
			for _, o := range opts {
				argv = append(argv, "-o", o)
			}
			argv = append(argv, "-l", cert.User, cert.Host)
			if rest := args[1:]; len(rest) == 1 {
				argv = append(argv, "--", rest[0])
			} else if len(rest) > 1 {
				q := make([]string, len(rest))
				for i, r := range rest {
					q[i] = shellQuote(r)
				}
				argv = append(argv, "--", strings.Join(q, " "))
			}
			return syscall.Exec(bin, argv, os.Environ())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&keyPath, "key", "i", "", "private key to use (its public half in KEY.pub); default ~/.ssh/id_ed25519 or HOME/ssh/id_ed25519")
	f.DurationVar(&ttl, "ttl", suanli.DefaultSSHCertTTL, "how long the certificate is valid (1m to 1h); open sessions outlive it")
	f.BoolVar(&configOnly, "config", false, "write an ssh_config (host alias suanli-ID) for scp, sftp, rsync and print its path instead of connecting")
	f.StringVar(&sshBin, "ssh-bin", envOr("SUANLI_SSH", "ssh"), "the ssh client to run; env SUANLI_SSH")
	f.StringArrayVarP(&opts, "option", "o", nil, "extra ssh -o option (repeatable)")
	return cmd
}

// prepareSSH picks the key, makes sure it is on the account, gets a
// certificate and writes the files ssh needs.
func (a *app) prepareSSH(ctx context.Context, c *shttp.Client, stderr io.Writer, id int64, keyPath string, ttl time.Duration) (*sshFiles, *suanli.SSHCertificate, error) {
	keyPath, pub, err := a.sshKey(keyPath)
	if err != nil {
		return nil, nil, err
	}
	key, _, err := sshca.ParseAuthorizedKey(pub)
	if err != nil {
		return nil, nil, suanli.Errorf(suanli.EINVALID, "%s.pub: %s", keyPath, suanli.ErrorMessage(err))
	}
	fp := ssh.FingerprintSHA256(key)
	keys, err := c.FindSSHKeys(ctx)
	if err != nil {
		return nil, nil, err
	}
	known := false
	for _, k := range keys {
		known = known || k.Fingerprint == fp
	}
	if !known {
		host, _ := os.Hostname()
		if _, err := c.AddSSHKey(ctx, "suanli ssh on "+host+" ("+keyPath+")", pub); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(stderr, "added SSH key %s (%s.pub) to your account (`suanli ssh-keys` lists and removes keys)\n", fp, keyPath)
	}
	cert, err := c.SignSSHCertificate(ctx, suanli.SSHCertRequest{InstanceID: id, PublicKey: pub, TTLSeconds: int64(ttl / time.Second)})
	if err != nil {
		return nil, nil, err
	}
	if cert.Host == "" || cert.Port == 0 || cert.HostKey == "" {
		return nil, nil, suanli.Errorf(suanli.EUNAVAILABLE, "instance %d: the server gave no SSH address or host key for its machine", id)
	}
	dir := filepath.Join(a.home, "ssh", "instances", strconv.FormatInt(id, 10))
	files := &sshFiles{Dir: dir, Key: keyPath, Cert: filepath.Join(dir, "id-cert.pub"), KnownHosts: filepath.Join(dir, "known_hosts"),
		Config: filepath.Join(dir, "ssh_config"), Alias: fmt.Sprintf("suanli-machine-%d", cert.MachineID)}
	config := fmt.Sprintf(`# Written by suanli ssh %[1]d --config; the certificate expires at %[2]s.
Host suanli-%[1]d
  HostName %[3]s
  Port %[4]d
  User %[5]s
  IdentityFile "%[6]s"
  CertificateFile "%[7]s"
  IdentitiesOnly yes
  UserKnownHostsFile "%[8]s"
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  HostKeyAlias %[9]s
`, id, cert.ValidBefore.Local().Format(time.DateTime), cert.Host, cert.Port, cert.User, files.Key, files.Cert, files.KnownHosts, files.Alias)
	for path, data := range map[string]string{
		files.Cert:       cert.Certificate + "\n",
		files.KnownHosts: files.Alias + " " + cert.HostKey + "\n",
		files.Config:     config,
	} {
		if err := sshca.WriteFileAtomic(path, []byte(data), 0o600); err != nil {
			return nil, nil, err
		}
	}
	return files, cert, nil
}

// sshKey returns the private key path to use and its public key line.
func (a *app) sshKey(keyPath string) (string, string, error) {
	if keyPath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			p := filepath.Join(home, ".ssh", "id_ed25519")
			if fileExists(p) && fileExists(p+".pub") {
				keyPath = p
			}
		}
	}
	if keyPath == "" {
		keyPath = filepath.Join(a.home, "ssh", "id_ed25519")
		if !fileExists(keyPath) {
			if err := generateKey(keyPath); err != nil {
				return "", "", fmt.Errorf("generate an SSH key: %w", err)
			}
		}
	}
	b, err := os.ReadFile(keyPath + ".pub")
	if err != nil {
		return "", "", suanli.Errorf(suanli.EINVALID, "SSH key %s: its public half %s.pub is missing (ssh-keygen -y -f %s > %s.pub)", keyPath, keyPath, keyPath, keyPath)
	}
	return keyPath, strings.TrimSpace(string(b)), nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, fs.ErrNotExist)
}

// generateKey writes a new ed25519 key pair without a passphrase: path
// (0600) and path.pub.
func generateKey(path string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	block, err := ssh.MarshalPrivateKey(priv, "suanli@"+host)
	if err != nil {
		return err
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		return err
	}
	if err := sshca.WriteFileAtomic(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " suanli@" + host + "\n"
	return sshca.WriteFileAtomic(path+".pub", []byte(line), 0o644)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func newSSHKeysCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "ssh-keys",
		Short: "Manage the SSH public keys your account may get certificates for",
		Long: `Only keys on this list are certified by 'suanli ssh'. Removing a key stops
new certificates for it at once; certificates already issued expire within
minutes.`,
	}
	var name string
	var jsonOut bool
	add := &cobra.Command{
		Use:     "add [FILE.pub|-]",
		Short:   "Add a public key (default ~/.ssh/id_ed25519.pub; - reads standard input)",
		Example: "  suanli ssh-keys add ~/.ssh/id_ed25519.pub --name laptop",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			} else if home, err := os.UserHomeDir(); err == nil {
				path = filepath.Join(home, ".ssh", "id_ed25519.pub")
			}
			var b []byte
			var err error
			if path == "-" {
				b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<10))
			} else {
				b, err = os.ReadFile(path)
			}
			if err != nil {
				return suanli.Errorf(suanli.EINVALID, "read the public key: %v: give a .pub file (ssh-keygen -t ed25519 makes one)", err)
			}
			k, err := a.client().AddSSHKey(cmd.Context(), name, strings.TrimSpace(string(b)))
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, k)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "SSH key %d added: %s %s\n", k.ID, k.Fingerprint, k.Name)
			return nil
		},
	}
	add.Flags().StringVar(&name, "name", "", "a name for the key (default: the key's comment)")
	add.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	var lsJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List your SSH keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			keys, err := a.client().FindSSHKeys(cmd.Context())
			if err != nil {
				return err
			}
			if lsJSON {
				if keys == nil {
					keys = []*suanli.SSHKey{}
				}
				return a.printJSON(cmd, keys)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tFINGERPRINT\tTYPE\tNAME\tADDED")
			for _, k := range keys {
				typ, _, _ := strings.Cut(k.PublicKey, " ")
				fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s\n", k.ID, k.Fingerprint, typ, k.Name, k.CreatedAt.Local().Format(time.DateTime))
			}
			return t.Flush()
		},
	}
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")
	rm := &cobra.Command{
		Use:   "rm ID|FINGERPRINT…",
		Short: "Remove SSH keys",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			keys, err := c.FindSSHKeys(cmd.Context())
			if err != nil {
				return err
			}
			for _, arg := range args {
				var id int64
				for _, k := range keys {
					if strconv.FormatInt(k.ID, 10) == arg || k.Fingerprint == arg {
						id = k.ID
					}
				}
				if id == 0 {
					return suanli.Errorf(suanli.ENOTFOUND, "no SSH key %q on your account: `suanli ssh-keys ls` lists them", arg)
				}
				if err := c.RemoveSSHKey(cmd.Context(), id); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "SSH key %s removed\n", arg)
			}
			return nil
		},
	}
	root.AddCommand(add, ls, rm)
	return root
}

func newAllowlistCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "allowlist",
		Short: "Manage the networks your SSH certificates are valid from",
		Long: `Certificates from 'suanli ssh' carry your allowlist as their source-address:
the host refuses a connection from anywhere else. With an empty allowlist a
certificate is valid only from the address the server saw the request come
from (behind NAT: your public address; on one machine: 127.0.0.1).`,
	}
	var note string
	var jsonOut bool
	add := &cobra.Command{
		Use:     "add CIDR…",
		Short:   "Allow a network (203.0.113.0/24) or an address (203.0.113.7)",
		Example: "  suanli allowlist add 203.0.113.0/24 --note office",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			for _, cidr := range args {
				n, err := c.AddAllowedNetwork(cmd.Context(), cidr, note)
				if err != nil {
					return err
				}
				if jsonOut {
					if err := a.printJSON(cmd, n); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "allowed %s\n", n.CIDR)
			}
			return nil
		},
	}
	add.Flags().StringVar(&note, "note", "", "a note to remember the entry by")
	add.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	var lsJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List your allowlist",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := a.client().FindAllowedNetworks(cmd.Context())
			if err != nil {
				return err
			}
			if lsJSON {
				if ns == nil {
					ns = []*suanli.AllowedNetwork{}
				}
				return a.printJSON(cmd, ns)
			}
			if len(ns) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no allowlist: certificates are valid only from the address each request comes from")
				return nil
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tCIDR\tNOTE\tADDED")
			for _, n := range ns {
				fmt.Fprintf(t, "%d\t%s\t%s\t%s\n", n.ID, n.CIDR, n.Note, n.CreatedAt.Local().Format(time.DateTime))
			}
			return t.Flush()
		},
	}
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")
	rm := &cobra.Command{
		Use:   "rm CIDR|ID…",
		Short: "Remove allowlist entries",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			ns, err := c.FindAllowedNetworks(cmd.Context())
			if err != nil {
				return err
			}
			for _, arg := range args {
				want := arg
				if p, err := sshca.ParseNetwork(arg); err == nil {
					want = p.String()
				}
				var id int64
				for _, n := range ns {
					if n.CIDR == want || strconv.FormatInt(n.ID, 10) == arg {
						id = n.ID
					}
				}
				if id == 0 {
					return suanli.Errorf(suanli.ENOTFOUND, "%s is not on your allowlist: `suanli allowlist ls` lists it", arg)
				}
				if err := c.RemoveAllowedNetwork(cmd.Context(), id); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", want)
			}
			return nil
		},
	}
	root.AddCommand(add, ls, rm)
	return root
}
