package vastapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/suanli/suanli"
)

// Logs: how many lines come back when the request names no tail, the most
// it may name, and how much of the log end is kept while reading it.
const (
	defaultTail = 1000
	maxTail     = 100_000
	maxLogKeep  = 8 << 20
)

// execTimeout bounds a command run through execute.
const execTimeout = time.Minute

// handleLogs is PUT /api/v0/instances/request_logs/{id}/ {"tail": "100",
// "filter": "text"}: the reply's result_url serves the last tail lines (that
// contain filter).
func (h *Handler) handleLogs(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	tail := defaultTail
	if n, has, err := body.num("tail"); err != nil {
		return err
	} else if has {
		t, err := n.int("tail")
		if err != nil || t < 0 || t > maxTail {
			return suanli.FieldErrorf("tail", "%s: give a number of lines between 0 and %d", n, maxTail)
		}
		tail = int(t)
	}
	filter, _, err := body.str("filter")
	if err != nil {
		return err
	}
	if d, has, err := body.boolean("daemon_logs"); err != nil {
		return err
	} else if has && d {
		return suanli.FieldErrorf("daemon_logs", "host daemon logs are the provider's; ask for the instance's own log")
	}
	p := suanli.PrincipalFromContext(r.Context())
	text, err := h.readLog(r.Context(), id, tail, filter)
	if err != nil {
		return err
	}
	tok, err := h.results.add(p.AccountID, h.cfg.ResultTTL)
	if err != nil {
		return err
	}
	h.results.finish(tok, text, nil)
	return writeJSON(w, http.StatusOK, map[string]any{"success": true, "result_url": h.resultURL(r, tok),
		"msg": "the log is at result_url for " + h.cfg.ResultTTL.String()})
}

// readLog reads an instance's whole log (as much as the control plane
// keeps) and returns its last tail lines containing filter.
func (h *Handler) readLog(ctx context.Context, id int64, tail int, filter string) ([]byte, error) {
	var buf []byte
	var off int64
	for {
		c, err := h.svc.InstanceLogs(ctx, id, off)
		if err != nil {
			return nil, err
		}
		if len(c.Data) == 0 || c.Next <= off {
			break
		}
		buf = append(buf, c.Data...)
		if len(buf) > maxLogKeep {
			buf = buf[len(buf)-maxLogKeep:]
		}
		off = c.Next
	}
	lines := bytes.SplitAfter(buf, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	var kept [][]byte
	for _, l := range lines {
		if filter == "" || bytes.Contains(l, []byte(filter)) {
			kept = append(kept, l)
		}
	}
	if len(kept) > tail {
		kept = kept[len(kept)-tail:]
	}
	return bytes.Join(kept, nil), nil
}

// handleExecute is PUT /api/v0/instances/command/{id}/ {"command": "ls -l"}:
// the command runs in the instance through the shell (Suanli's exec, not
// Vast's short list of commands: the instance is the caller's own); the
// result_url answers with its output once it has finished, and carries the
// exit status in the X-Exit-Code header.
func (h *Handler) handleExecute(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	command, has, err := body.str("command")
	if err != nil {
		return err
	}
	if !has || command == "" {
		return suanli.FieldErrorf("command", "give the command to run, e.g. \"ls -l\"")
	}
	in, err := h.svc.FindInstanceByID(r.Context(), id)
	if err != nil {
		return err
	}
	if in.Status != suanli.StatusRunning {
		return suanli.Errorf(suanli.ECONFLICT, "instance %d is %s: execute needs it running", id, in.Status)
	}
	p := suanli.PrincipalFromContext(r.Context())
	tok, err := h.results.add(p.AccountID, h.cfg.ResultTTL)
	if err != nil {
		return err
	}
	h.goBackground(r, execTimeout+time.Minute, func(ctx context.Context) {
		res, err := h.svc.Exec(ctx, id, []string{"sh", "-c", command}, execTimeout)
		if err != nil {
			h.results.finish(tok, []byte("error: "+suanli.ErrorMessage(err)+"\n"), map[string]string{"X-Exit-Code": "-1"})
			if suanli.ErrorCode(err) == suanli.EINTERNAL {
				h.log.Error("execute", "instance_id", id, "err", err)
			}
			return
		}
		out := res.Output
		if res.Truncated {
			out = append(out, []byte(fmt.Sprintf("\n[output truncated at %d bytes]\n", len(res.Output)))...)
		}
		h.results.finish(tok, out, map[string]string{"X-Exit-Code": strconv.Itoa(res.ExitCode)})
	})
	return writeJSON(w, http.StatusOK, map[string]any{"success": true, "result_url": h.resultURL(r, tok), "writeable_path": ""})
}

// newTicker is time.NewTicker; one place for the reboot poll.
func newTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }
