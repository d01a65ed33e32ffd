package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// Every form the console posts is a mutation, or an attempt at one, and
// goes into the control plane's audit log as the API's mutations do (who,
// which form, to what, from where, the result, the request id), with the
// detail "web console".

// auditNote is what a console request's audit entry says beyond the
// request itself; handlers fill it through the request's context.
type auditNote struct {
	rid       string
	principal *suanli.Principal // the caller, once known
	target    string            // the object acted on; the path when empty
	err       error             // the error the request ended with, if any
	asked     bool              // only a confirmation was shown: nothing changed
}

type auditNoteKey struct{}

func noteOf(r *http.Request) *auditNote {
	n, _ := r.Context().Value(auditNoteKey{}).(*auditNote)
	return n
}

// auditTarget names the object a form acts on ("budget ml"), for its audit
// entry.
func auditTarget(r *http.Request, target string) {
	if n := noteOf(r); n != nil {
		n.target = target
	}
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// audited wraps a POST handler: the request gets an id (X-Request-Id, also
// in any internal error it shows) and, when it is done, an audit entry.
func (c *Console) audited(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := &auditNote{rid: newRequestID()}
		w.Header().Set("X-Request-Id", n.rid)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		r = r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, n))
		next(sw, r)
		c.svc.RecordAudit(r.Context(), auditEntry(r, sw.status, n))
	}
}

// auditEntry is the audit log's entry for a console request.
func auditEntry(r *http.Request, status int, n *auditNote) suanli.AuditEvent {
	e := suanli.AuditEvent{Action: r.Pattern, Target: cmpOr(n.target, r.URL.Path), Source: clientIP(r), RequestID: n.rid,
		Result: strconv.Itoa(status), Detail: "web console"}
	if e.Action == "" {
		e.Action = r.Method + " " + r.URL.Path
	}
	if len(e.Target) > 200 {
		e.Target = e.Target[:200]
	}
	if n.err != nil {
		e.Result += " " + suanli.ErrorCode(n.err)
	}
	if n.asked {
		e.Detail += "; asked for confirmation, nothing changed"
	}
	if p := n.principal; p != nil {
		e.ActorID, e.AccountID, e.KeyID = p.UserID, p.AccountID, p.KeyID
		if p.Temporary {
			e.Detail += "; temporary token"
		}
	}
	return e
}

// auditScan bounds how many entries one audit page looks through for
// entries that match its filter.
const auditScan = 5000

// auditPage is the audit template's data: entries, newest first, that
// match the filter, the next page, and the chain's verification (for
// operators, when asked).
type auditPage struct {
	Operator bool
	Account  string // operators: only entries by or about this account
	Action   string // only entries whose action contains this
	Target   string // only entries whose target contains this
	Limit    int
	Events   []*suanli.AuditEvent
	Scanned  int    // entries looked through
	Older    string // the next page's URL; "" at the end
	Report   *suanli.AuditReport
	Status   *control.AuditStatus // the chain's verification, as any account may see it
	Error    *fieldError
}

func (c *Console) registerAuditRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /audit", c.page(c.handleAudit))
}

// handleAudit lists the audit log (the caller's entries; every entry for
// operators), filtered by account, action and target, a page at a time,
// with the chain's verification status as every account may see it
// (control's AuditStatus: intact or not, when, the newest checkpoint), and
// with ?verify=1 (operators) verifies the whole chain and its signed
// checkpoints in full.
func (c *Console) handleAudit(w http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	p := &auditPage{Operator: suanli.PrincipalFromContext(r.Context()).Role == suanli.RoleOperator,
		Account: strings.TrimSpace(q.Get("account")), Action: strings.TrimSpace(q.Get("action")), Target: strings.TrimSpace(q.Get("target")), Limit: 50}
	status := http.StatusOK
	if err := c.auditEvents(r, p); err != nil {
		if p.Error = formError(err); p.Error == nil {
			return err
		}
		status = statusOf(err)
	}
	st, err := c.svc.AuditStatus(r.Context())
	if err != nil {
		if fe := formError(err); fe == nil {
			return err
		} else if p.Error == nil {
			p.Error, status = fe, statusOf(err)
		}
	}
	p.Status = st
	if q.Get("verify") == "1" {
		rep, err := c.svc.VerifyAudit(r.Context())
		if err != nil {
			if p.Error = formError(err); p.Error == nil {
				return err
			}
			status = statusOf(err)
		}
		p.Report = rep
	}
	c.render(w, r, status, "audit.html", &view{Title: "Audit log", Nav: "audit", sess: s, Page: p})
	return nil
}

// auditEvents fills p with up to p.Limit matching entries, looking through
// at most auditScan entries from ?before on.
func (c *Console) auditEvents(r *http.Request, p *auditPage) error {
	q := r.URL.Query()
	var f suanli.AuditFilter
	if p.Account != "" {
		id, err := strconv.ParseInt(p.Account, 10, 64)
		if err != nil || id <= 0 {
			return suanli.FieldErrorf("account", "%q is not an account id: give a number such as 3", p.Account)
		}
		f.AccountID = &id
	}
	if b := q.Get("before"); b != "" {
		seq, err := strconv.ParseInt(b, 10, 64)
		if err != nil || seq <= 0 {
			return suanli.FieldErrorf("before", "%q is not an entry number", b)
		}
		f.BeforeSeq = &seq
	}
	action, target := strings.ToLower(p.Action), strings.ToLower(p.Target)
	filtered := action != "" || target != ""
	f.Limit = p.Limit
	if filtered {
		f.Limit = 500
	}
	var last int64
	for p.Scanned < auditScan && len(p.Events) < p.Limit {
		es, err := c.svc.FindAuditEvents(r.Context(), f)
		if err != nil {
			return err
		}
		for _, e := range es {
			p.Scanned++
			last = e.Seq
			if strings.Contains(strings.ToLower(e.Action), action) && strings.Contains(strings.ToLower(e.Target), target) {
				p.Events = append(p.Events, e)
				if len(p.Events) == p.Limit {
					break
				}
			}
		}
		if len(es) < f.Limit || !filtered {
			if len(es) < f.Limit && len(p.Events) < p.Limit {
				last = 0 // the log's beginning: no older page
			}
			break
		}
		f.BeforeSeq = &last
	}
	if last > 1 {
		older := q
		older.Del("verify")
		older.Set("before", strconv.FormatInt(last, 10))
		p.Older = "/audit?" + older.Encode()
	}
	return nil
}
