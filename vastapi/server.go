package vastapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/control"
	shttp "github.com/suanli/suanli/http"
)

// Config tunes the layer. The zero value of each field means its default.
type Config struct {
	// PublicURL is the base of the result URLs that logs and execute hand
	// out ("https://market.example"); "" builds it from each request's
	// scheme and Host.
	PublicURL string
	// ResultTTL is how long a result URL answers; default DefaultResultTTL.
	ResultTTL time.Duration
	// HonorVerified makes a search's verified=true condition filter. The
	// vastai CLI adds verified=true to every search by default, and no
	// Suanli machine is verified until the marketplace runs a verification
	// programme, so by default the condition is dropped (each offer still
	// reports its "verification"). verified=false always filters.
	HonorVerified bool
	// RebootWait bounds how long a reboot waits for the stop to be
	// confirmed before it starts the instance again; default 2 minutes.
	RebootWait time.Duration
	// PollInterval is how often a reboot looks at the instance while it
	// waits; default 200ms.
	PollInterval time.Duration
	// Lockout and Limiter are the native API server's (shttp.Server's), so
	// that an address locked out after failed authentications is locked
	// out of both APIs, and key routes share one rate limit. nil: the
	// layer keeps its own.
	Lockout *auth.Lockout
	Limiter *auth.RateLimiter
}

// DefaultResultTTL is how long a result URL answers by default: the CLI
// polls for 9 seconds; scripts get a few minutes.
const DefaultResultTTL = 5 * time.Minute

// Handler serves the Vast.ai API over one control.Service. Create it with
// New, mount it with Register, and Close it when the server stops (it ends
// the background work of execute and reboot). It is safe for concurrent use.
type Handler struct {
	svc     *control.Service
	log     *slog.Logger
	cfg     Config
	routes  []*route
	results *resultStore

	ctx    context.Context // background work ends with it
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a handler for svc. The logger receives internal errors and
// background failures, never query strings.
func New(svc *control.Service, logger *slog.Logger, cfg Config) *Handler {
	if cfg.ResultTTL <= 0 {
		cfg.ResultTTL = DefaultResultTTL
	}
	if cfg.RebootWait <= 0 {
		cfg.RebootWait = 2 * time.Minute
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.Lockout == nil {
		cfg.Lockout = &auth.Lockout{}
	}
	if cfg.Limiter == nil {
		cfg.Limiter = &auth.RateLimiter{Rate: 1.0 / 6, Burst: 10}
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	ctx, cancel := context.WithCancel(context.Background())
	h := &Handler{svc: svc, log: logger, cfg: cfg, ctx: ctx, cancel: cancel}
	h.results = newResultStore(h.now)
	h.registerOfferRoutes()
	h.registerInstanceRoutes()
	h.registerResultRoutes()
	h.registerAccountRoutes()
	h.registerMachineRoutes()
	h.registerBillingRoutes()
	return h
}

// Register mounts the handler on mux under /api/v0/ and /api/v1/, beside the
// native API.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("/api/v0/", h)
	mux.Handle("/api/v1/", h)
}

// Close cancels background work (executions and reboots in flight) and
// waits for it to end.
func (h *Handler) Close() {
	h.cancel()
	h.wg.Wait()
}

func (h *Handler) now() time.Time { return h.svc.Now().UTC() }

// go runs fn in the background, with a context that carries the caller but
// not the request's cancellation, and ends when the handler closes.
func (h *Handler) goBackground(r *http.Request, timeout time.Duration, fn func(ctx context.Context)) {
	p := suanli.PrincipalFromContext(r.Context())
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		ctx, cancel := context.WithTimeout(h.ctx, timeout)
		defer cancel()
		fn(suanli.NewContextWithPrincipal(ctx, p))
	}()
}

// route is one endpoint. Its path is matched segment by segment, with or
// without a trailing slash; "{name}" captures a segment.
type route struct {
	method   string
	pattern  string
	segs     []string
	category string // Vast permission category, "" for public routes
	read     bool   // a read sent as POST or PUT (search, logs): not audited
	limited  bool   // rate-limited per client address (key routes)
	h        func(w http.ResponseWriter, r *http.Request, a args) error
}

// routeOpt marks a route.
type routeOpt func(*route)

// asRead marks a POST or PUT that only reads (Vast searches with POST).
func asRead(rt *route) { rt.read = true }

// limited marks a key route: rate-limited per client address.
func limited(rt *route) { rt.limited = true }

// args are a route's captured path segments.
type args map[string]string

// id returns the captured segment name as a positive id, or an EINVALID
// error naming it.
func (a args) id(name string) (int64, error) {
	v := a[name]
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, suanli.FieldErrorf(name, "%q is not an id: give a positive number", v)
	}
	return n, nil
}

// handle adds a route. pattern is written without a trailing slash.
func (h *Handler) handle(method, pattern, category string, fn func(w http.ResponseWriter, r *http.Request, a args) error, opts ...routeOpt) {
	rt := &route{method: method, pattern: pattern, segs: splitPath(pattern), category: category, h: fn}
	for _, o := range opts {
		o(rt)
	}
	h.routes = append(h.routes, rt)
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// match finds the route for r. ENOTFOUND for an unknown path; a known path
// with another method is errMethod.
func (h *Handler) match(r *http.Request) (*route, args, error) {
	segs := splitPath(r.URL.Path)
	pathKnown := false
	for _, rt := range h.routes {
		a, ok := matchSegs(rt.segs, segs)
		if !ok {
			continue
		}
		if rt.method == r.Method || (rt.method == http.MethodGet && r.Method == http.MethodHead) {
			return rt, a, nil
		}
		pathKnown = true
	}
	if pathKnown {
		return nil, nil, errMethod
	}
	return nil, nil, suanli.Errorf(suanli.ENOTFOUND, "no such endpoint: %s %s (this Suanli marketplace serves the Vast.ai API subset the vastai CLI uses)", r.Method, r.URL.Path)
}

// matchSegs matches a route's segments against a path's; a literal segment
// beats nothing, so routes must not overlap (they are tried in order).
func matchSegs(pat, segs []string) (args, bool) {
	if len(pat) != len(segs) {
		return nil, false
	}
	var a args
	for i, p := range pat {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if segs[i] == "" {
				return nil, false
			}
			if a == nil {
				a = args{}
			}
			a[p[1:len(p)-1]] = segs[i]
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return a, true
}

var errMethod = errors.New("method not allowed")

// ServeHTTP implements http.Handler: route, lockout and rate limit (shared
// with the native API), authentication, the handler, Vast's error shape, and
// an audit entry for every mutation, as the native API writes them.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := newRequestID()
	w.Header().Set("X-Request-Id", rid)
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	ip := clientIP(r)
	rt, a, err := h.match(r)
	if err == nil && rt.category != "" {
		if locked, d := h.cfg.Lockout.Locked(ip); locked {
			err = rateLimited(d, "too many failed authentications from %s: wait %s, then check the key you use", ip, roundUp(d))
		} else if rt.limited {
			if allowed, d := h.cfg.Limiter.Allow(ip); !allowed {
				err = rateLimited(d, "too many key requests from %s: wait %s", ip, roundUp(d))
			}
		}
		if err == nil {
			if r, err = h.authenticate(r, rt.category); suanli.ErrorCode(err) == suanli.EUNAUTHORIZED && secretOf(r) != "" {
				if locked, d := h.cfg.Lockout.Fail(ip); locked {
					h.log.Warn("address locked out", "addr", ip, "for", d)
				}
			}
		}
	}
	if err == nil {
		err = rt.h(sw, r, a)
	}
	if err != nil {
		h.writeError(sw, r, rid, err)
	}
	if rt != nil && rt.category != "" && !rt.read && r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.svc.RecordAudit(r.Context(), h.auditEvent(r, rt, sw.status, err, ip, rid))
	}
}

// auditEvent is a mutation's audit entry, in the native API's form; the
// action names the Vast route ("PUT /api/v0/asks/{id}"), the target is the
// path (never the query string).
func (h *Handler) auditEvent(r *http.Request, rt *route, status int, err error, ip, rid string) suanli.AuditEvent {
	e := suanli.AuditEvent{Action: rt.method + " " + rt.pattern, Target: r.URL.Path, Source: ip, RequestID: rid,
		Result: strconv.Itoa(status), Detail: "vast api"}
	if len(e.Target) > 200 {
		e.Target = e.Target[:200]
	}
	if err != nil {
		e.Result += " " + suanli.ErrorCode(err)
	}
	if p := suanli.PrincipalFromContext(r.Context()); p != nil {
		e.ActorID, e.AccountID, e.KeyID = p.UserID, p.AccountID, p.KeyID
		if p.TeamRole != "" {
			e.Detail += ", as " + p.TeamRole + " of the team"
		}
	}
	return e
}

func rateLimited(d time.Duration, format string, args ...any) error {
	e := suanli.Errorf(suanli.ERATELIMITED, format, args...)
	e.RetryAfterS = max(1, int(roundUp(d)/time.Second))
	return e
}

func roundUp(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

// statusWriter remembers the status written, for the audit entry.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// teamHeader selects a team to act on, as on the native API.
const teamHeader = shttp.TeamHeader

type keyPrefixKey struct{}

// authenticate puts the caller into r's context: the API key comes from the
// Authorization header (Bearer) or, for older CLIs, the api_key query
// parameter. The route's Vast permission category must map onto a scope
// the key holds.
func (h *Handler) authenticate(r *http.Request, category string) (*http.Request, error) {
	secret := secretOf(r)
	if secret == "" {
		return r, suanli.Errorf(suanli.EUNAUTHORIZED, "no API key: send Authorization: Bearer sl_live_… (vastai set api-key KEY), or ?api_key=")
	}
	p, err := h.svc.Authenticate(r.Context(), secret, clientIP(r))
	if err != nil {
		return r, err
	}
	if team := strings.TrimSpace(r.Header.Get(teamHeader)); team != "" {
		if p, err = h.svc.SelectTeam(r.Context(), p, team); err != nil {
			return r, err
		}
	}
	ctx := suanli.NewContextWithPrincipal(r.Context(), p)
	ctx = context.WithValue(ctx, keyPrefixKey{}, auth.DisplayPrefix(secret))
	r = r.WithContext(ctx)
	if scope := categoryScope[category]; scope != "" && !p.Can(scope) {
		return r, suanli.Errorf(suanli.EFORBIDDEN, "this API key lacks the %s permission (Suanli scope %s)", category, scope)
	}
	return r, nil
}

// secretOf is the credential a request presents: the Bearer header, else
// the api_key query parameter of older CLIs.
func secretOf(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return strings.TrimSpace(r.URL.Query().Get("api_key"))
}

// keyPrefix is the displayable prefix of the key the request came with.
func keyPrefix(ctx context.Context) string {
	s, _ := ctx.Value(keyPrefixKey{}).(string)
	return s
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func newRequestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// errorBody is Vast's error shape; Field is Suanli's addition, set when one
// request field is at fault.
type errorBody struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
	Msg     string `json:"msg"`
	Field   string `json:"field,omitempty"`
}

// vastCodes are the error codes Vast clients see for Suanli's.
var vastCodes = map[string]string{
	suanli.EINVALID:         "invalid_args",
	suanli.ENOTFOUND:        "not_found",
	suanli.ECONFLICT:        "conflict",
	suanli.EUNAUTHORIZED:    "invalid_api_key",
	suanli.EFORBIDDEN:       "permission_denied",
	suanli.EPAYMENTREQUIRED: "insufficient_credit",
	suanli.EUNAVAILABLE:     "unavailable",
	suanli.EINTERNAL:        "internal_error",
	suanli.ERATELIMITED:     "rate_limited",
}

// notImplemented is an error for a Vast feature this marketplace does not
// offer; it answers 501.
type notImplemented struct{ msg string }

func (e *notImplemented) Error() string { return e.msg }

func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, rid string, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	var ni *notImplemented
	switch {
	case errors.Is(err, errMethod):
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method_not_allowed", Msg: r.Method + " is not served on " + r.URL.Path})
		return
	case errors.As(err, &ni):
		writeJSON(w, http.StatusNotImplemented, errorBody{Error: "not_implemented", Msg: ni.msg})
		return
	}
	code := suanli.ErrorCode(err)
	body := errorBody{Error: vastCodes[code], Msg: suanli.ErrorMessage(err)}
	var se *suanli.Error
	if errors.As(err, &se) {
		body.Field = se.Field
		if se.RetryAfterS > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(se.RetryAfterS))
		}
	}
	if code == suanli.EINTERNAL {
		body.Msg = "internal error (request " + rid + ")"
		// The path only: older CLIs put the API key in the query string.
		h.log.Error("vast api request failed", "method", r.Method, "path", r.URL.Path, "request_id", rid, "err", err)
	}
	writeJSON(w, shttp.StatusOf(code), body)
}

// writeJSON writes v with Content-Type exactly application/json (the CLI
// compares the header to that string).
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

// ok is Vast's plain success reply.
var ok = map[string]any{"success": true}

// renameFields rewrites the field a native error names into the Vast
// request's own name for it (disk_gb → disk), message included.
func renameFields(err error, names map[string]string) error {
	var se *suanli.Error
	if !errors.As(err, &se) || se.Field == "" {
		return err
	}
	to, found := names[se.Field]
	if !found {
		return err
	}
	e := *se
	e.Field = to
	if rest, cut := strings.CutPrefix(e.Message, se.Field+":"); cut {
		e.Message = to + ":" + rest
	}
	return &e
}
