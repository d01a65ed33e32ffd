package sshd

import (
	"context"
	"io"
)

// Target runs sessions in instances: the runtime's side of the SSH
// endpoint. Its methods are called concurrently, for any instance.
type Target interface {
	// Check returns nil when the instance runs on this machine and can take
	// a session: ENOTFOUND when it is not here, ECONFLICT when not running.
	Check(ctx context.Context, id int64) error
	// Exec runs p in the instance and returns its exit status (128+N for a
	// death by signal N). Everything it wrote to p.Stdout and p.Stderr is
	// written when it returns. When ctx ends the command is killed.
	Exec(ctx context.Context, id int64, p *Proc) (int, error)
	// SFTP serves the SFTP subsystem for the instance on rw until the client
	// ends it; stderr reaches the client's terminal.
	SFTP(ctx context.Context, id int64, rw io.ReadWriter, stderr io.Writer) error
	// SupportsTTY reports whether Exec can give a command a terminal.
	SupportsTTY() bool
}

// Proc is one command a session runs.
type Proc struct {
	// Command is run by the instance's shell (sh -c); "" starts an
	// interactive login shell.
	Command string
	// Env holds KEY=value pairs the client sent (LANG, LC_*), added to the
	// instance's environment.
	Env []string
	// TTY, when set, gives the command a terminal; Stderr is then unused.
	TTY            *TTY
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// TTY is the terminal a session asked for.
type TTY struct {
	Term   string
	Size   WindowSize
	Resize <-chan WindowSize // new sizes, as the client's window changes
}

// WindowSize is a terminal's size in characters.
type WindowSize struct {
	Cols, Rows uint16
}
