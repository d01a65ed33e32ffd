// Package sshd is the host agent's SSH endpoint (DESIGN §7): an SSH server
// (golang.org/x/crypto/ssh) that lets the real OpenSSH client into running
// instances with short-lived certificates from the control plane's CA.
//
// Who may log in is decided only by the certificate that authenticated:
// the server trusts only the CA keys it got through sync (sshca.Verifier),
// refuses plain keys, and every critical option is enforced (the instance
// binding against the login name, source-address against the TCP peer;
// unknown options are refused). Its authentication callback has no side
// effects and the session reads the grant from the permissions of the key
// that actually authenticated (ssh.ServerConn.Permissions), so a client that
// offers several keys cannot borrow one key's grant for another
// (CVE-2024-45337).
//
// Sessions run in the instance through a Target: the process runtime
// (commands in the instance's work directory with its environment, with a
// PTY, window changes and the exit status; SFTP served in-process, rooted
// at the work directory) or the Docker runtime (docker exec, on a terminal
// when the client asks for one — size, TERM and window changes; SFTP
// through the image's sftp-server). `scp` (SFTP or -O), `sftp` and
// `rsync -e ssh` (when rsync exists in the instance) work through these.
// Port forwarding, agent forwarding and X11 are refused.
//
// It must not talk to the control plane itself: the agent loop passes it
// the CA keys and reports its endpoint.
package sshd
