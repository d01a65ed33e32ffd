package http

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/control"
)

// TeamHeader selects the team a request acts on (its id or name); the CLI
// sets it from --team or SUANLI_TEAM.
const TeamHeader = "X-Suanli-Team"

// Server serves the API, health and metrics for one control.Service. The
// web console (package console) mounts its pages on Mux.
type Server struct {
	Service *control.Service
	Logger  *slog.Logger
	// Extra mounts more handlers on the mux before it is built (the console,
	// the Vast compatibility layer).
	Extra func(mux *http.ServeMux)
	// Limiter rate-limits the login and key routes per client address.
	Limiter *auth.RateLimiter
	// Lockout refuses every request from an address after repeated failed
	// authentications.
	Lockout *auth.Lockout

	mux     *http.ServeMux
	keys    keyLocks
	reg     *prometheus.Registry
	latency *prometheus.HistogramVec
	routes  []Route
}

// Route is one entry of the server's route table, as Routes reports it.
type Route struct {
	Method  string
	Path    string // the pattern's path, with {name} wildcards
	Public  bool   // answers without a credential
	Limited bool   // rate-limited per address: login and key routes
	Audited bool   // recorded in the audit log (every mutation)
}

// Pattern returns the ServeMux pattern: "METHOD /path".
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// routeOpt modifies a route as it is registered.
type routeOpt func(*Route)

// limited marks a login or key route: rate-limited per client address.
func limited(r *Route) { r.Limited = true }

// unaudited marks a POST route that is not recorded: the agent's heartbeat
// (it would flood the log; what it changes is recorded in instance
// events), and reads sent with POST (searches, quotes).
func unaudited(r *Route) { r.Audited = false }

// Routes returns the route table: every pattern the server answers, in
// registration order.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// NewServer builds a server with all routes registered. Its limiter allows
// a burst of 10 login or key requests per address, then one every 6 s; 10
// failed authentications from one address within 10 minutes lock it out
// for 15 minutes.
func NewServer(svc *control.Service, logger *slog.Logger) *Server {
	s := &Server{Service: svc, Logger: logger, mux: http.NewServeMux(), reg: prometheus.NewRegistry(),
		Limiter: &auth.RateLimiter{Rate: 1.0 / 6, Burst: 10}, Lockout: &auth.Lockout{}}
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "suanli_api_request_duration_seconds", Help: "API request latency by route and status.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"route", "code"})
	s.reg.MustRegister(s.latency, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	s.registerMetrics()
	s.handle("GET /healthz", http.HandlerFunc(s.handleHealth))
	s.handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.handle("GET /v1/openapi.json", http.HandlerFunc(s.handleOpenAPI))
	s.registerAccountRoutes()
	s.registerKeyRoutes()
	s.registerTeamRoutes()
	s.registerAuditRoutes()
	s.registerOfferRoutes()
	s.registerInstanceRoutes()
	s.registerMachineRoutes()
	s.registerBillingRoutes()
	s.registerAgentRoutes()
	s.registerSSHRoutes()
	s.registerCostRoutes()
	s.registerMarketRoutes()
	s.registerForwardRoutes()
	s.registerDeferredRoutes()
	s.registerClusterRoutes()
	return s
}

// Mux returns the router, so that other packages can mount routes on it.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// Registry returns the Prometheus registry served at /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// Health is the reply of GET /healthz. Time lets agents and `suanli doctor`
// measure clock skew.
type Health struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, Health{Status: "ok", Time: s.Service.Now().UTC()})
}

// handle registers a public, unauthenticated page (health, metrics, the
// overview) in the route table.
func (s *Server) handle(pattern string, h http.Handler) {
	method, path, _ := strings.Cut(pattern, " ")
	s.routes = append(s.routes, Route{Method: method, Path: path, Public: true})
	s.mux.Handle(pattern, h)
}

// auditInfo is what a handler can add to its audit entry.
type auditInfo struct {
	target string
}

type auditInfoKey struct{}

// setAuditTarget names the object a request created ("instance 12") for
// its audit entry; by default the entry names the request path.
func setAuditTarget(r *http.Request, format string, args ...any) {
	if info, ok := r.Context().Value(auditInfoKey{}).(*auditInfo); ok {
		info.target = fmt.Sprintf(format, args...)
	}
}

// route wraps an API handler: request id, lockout and rate limit,
// authentication (and team selection), the audit entry of a mutation,
// latency metric, error mapping.
func (s *Server) route(pattern string, public bool, h func(w http.ResponseWriter, r *http.Request) error, opts ...routeOpt) {
	method, path, _ := strings.Cut(pattern, " ")
	rt := Route{Method: method, Path: path, Public: public, Audited: method != http.MethodGet && method != http.MethodHead}
	for _, o := range opts {
		o(&rt)
	}
	s.routes = append(s.routes, rt)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rid := newRequestID()
		w.Header().Set("X-Request-Id", rid)
		rw := &statusWriter{ResponseWriter: w, status: 200, pretty: wantsPretty(r)}
		ip := clientIP(r)
		info := &auditInfo{}
		r = r.WithContext(context.WithValue(r.Context(), auditInfoKey{}, info))
		var err error
		presented := false
		if locked, d := s.Lockout.Locked(ip); locked {
			err = rateLimited(d, "too many failed authentications from %s: wait %s, then check the key you use", ip, roundUp(d))
		} else if rt.Limited {
			if ok, d := s.Limiter.Allow(ip); !ok {
				err = rateLimited(d, "too many login and key requests from %s: wait %s", ip, roundUp(d))
			}
		}
		if err == nil {
			presented = bearer(r) != ""
			r, err = s.authenticate(r, public)
		}
		if err == nil {
			err = s.idempotent(rw, r, h)
		}
		if err != nil {
			if suanli.ErrorCode(err) == suanli.EUNAUTHORIZED && (presented || public) {
				if locked, d := s.Lockout.Fail(ip); locked {
					s.Logger.Warn("address locked out", "addr", ip, "for", d)
				}
			}
			s.writeError(rw, r, rid, err)
		}
		if rt.Audited {
			s.Service.RecordAudit(r.Context(), auditEvent(r, rt, rw.status, err, info, ip, rid))
		}
		s.latency.WithLabelValues(pattern, strconv.Itoa(rw.status)).Observe(time.Since(start).Seconds())
	})
}

func roundUp(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

func rateLimited(d time.Duration, format string, args ...any) error {
	e := suanli.Errorf(suanli.ERATELIMITED, format, args...)
	e.RetryAfterS = int(roundUp(d) / time.Second)
	if e.RetryAfterS < 1 {
		e.RetryAfterS = 1
	}
	return e
}

// auditEvent is the audit entry of one request: who (the principal, or
// nobody when authentication failed), what (the route), to what (the
// target the handler named, or the path), from where, and the result.
func auditEvent(r *http.Request, rt Route, status int, err error, info *auditInfo, ip, rid string) suanli.AuditEvent {
	e := suanli.AuditEvent{Action: rt.Pattern(), Target: info.target, Source: ip, RequestID: rid, Result: strconv.Itoa(status)}
	if e.Target == "" {
		e.Target = r.URL.Path
	}
	if len(e.Target) > 200 {
		e.Target = e.Target[:200]
	}
	if err != nil {
		e.Result += " " + suanli.ErrorCode(err)
	}
	if p := suanli.PrincipalFromContext(r.Context()); p != nil {
		e.ActorID, e.AccountID, e.KeyID = p.UserID, p.AccountID, p.KeyID
		switch {
		case p.InstanceID != 0:
			e.Detail = fmt.Sprintf("instance token of instance %d", p.InstanceID)
		case p.MachineID != 0:
			e.Detail = fmt.Sprintf("agent of machine %d", p.MachineID)
		case p.TeamRole != "":
			e.Detail = "as " + p.TeamRole + " of the team"
		case p.Temporary:
			e.Detail = "temporary token"
		}
	}
	return e
}

// authenticate returns r with the caller in its context, acting on the team
// the TeamHeader names, if any. A public route accepts requests without a
// credential.
func (s *Server) authenticate(r *http.Request, public bool) (*http.Request, error) {
	secret := bearer(r)
	if secret == "" {
		if public {
			return r, nil
		}
		return r, suanli.Errorf(suanli.EUNAUTHORIZED, "no credential: send Authorization: Bearer sl_live_… (the CLI reads SUANLI_API_KEY or its config)")
	}
	p, err := s.Service.Authenticate(r.Context(), secret, clientIP(r))
	if err != nil {
		return r, err
	}
	if team := strings.TrimSpace(r.Header.Get(TeamHeader)); team != "" {
		if p, err = s.Service.SelectTeam(r.Context(), p, team); err != nil {
			return r, err
		}
	}
	return r.WithContext(suanli.NewContextWithPrincipal(r.Context(), p)), nil
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if v, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return ""
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

type statusWriter struct {
	http.ResponseWriter
	status int
	pretty bool // indent JSON replies (wantsPretty)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wantsPretty reports whether r's reply should be indented JSON: asked for
// with ?pretty (or ?pretty=true), or sent by a person's tool (curl, wget,
// HTTPie, a browser). Programs — the CLI, SDKs, agents — get compact JSON,
// which is several times cheaper to write and read: a search page of 64
// offers costs about 2 ms of CPU to indent and 0.4 ms to write compact.
func wantsPretty(r *http.Request) bool {
	if v, ok := r.URL.Query()["pretty"]; ok {
		return len(v) == 0 || v[0] == "" || v[0] == "1" || v[0] == "true"
	}
	ua := r.UserAgent()
	for _, p := range []string{"curl/", "Wget/", "HTTPie/", "Mozilla/"} {
		if strings.HasPrefix(ua, p) {
			return true
		}
	}
	return false
}

// isPretty finds the route's statusWriter under w's wrappers.
func isPretty(w http.ResponseWriter) bool {
	for {
		switch v := w.(type) {
		case *statusWriter:
			return v.pretty
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return false
		}
	}
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, rid string, err error) {
	code := suanli.ErrorCode(err)
	var e suanli.Error
	var se *suanli.Error
	if errors.As(err, &se) {
		e = *se
	} else {
		e = suanli.Error{Code: code, Message: "internal error (request " + rid + ")"}
	}
	if r.Context().Err() != nil {
		// The client went away (an agent ending its long poll): nothing to say.
		s.Logger.Debug("request canceled", "method", r.Method, "path", r.URL.Path, "request_id", rid)
		return
	}
	if code == suanli.EINTERNAL {
		s.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "request_id", rid, "err", err)
	}
	if e.RetryAfterS > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfterS))
	}
	writeJSON(w, StatusOf(code), ErrorBody{Error: e, RequestID: rid})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if isPretty(w) {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// decode reads a JSON body strictly: unknown fields and wrong types are
// EINVALID errors that name the field.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return suanli.Errorf(suanli.EINVALID, "body: more than one JSON value")
	}
	return nil
}

// decodeRental decodes a body that holds an instance request (v is
// c itself, or a request that embeds it) and sets c.DiskGiven when the body
// names disk_gb, so that an explicit 0 is refused rather than defaulted.
func decodeRental(r *http.Request, v any, c *suanli.InstanceCreate) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err != nil {
		return decodeError(err)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err := decode(r, v); err != nil {
		return err
	}
	var probe struct {
		DiskGB json.RawMessage `json:"disk_gb"`
	}
	if json.Unmarshal(b, &probe) == nil && probe.DiskGB != nil {
		c.DiskGiven = true
	}
	return nil
}

func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return suanli.Errorf(suanli.EINVALID, "body: expected a JSON object, got a JSON %s", te.Value)
	case errors.As(err, &te):
		return suanli.FieldErrorf(te.Field, "expected %s, got a JSON %s", te.Type, te.Value)
	case errors.As(err, &se):
		return suanli.Errorf(suanli.EINVALID, "body: malformed JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.EOF):
		return suanli.Errorf(suanli.EINVALID, "body: empty; send a JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return suanli.FieldErrorf(f, "unknown field: check the spelling against /v1/openapi.json")
	}
	var me *http.MaxBytesError
	if errors.As(err, &me) {
		return suanli.Errorf(suanli.EINVALID, "body: larger than %d bytes", me.Limit)
	}
	var e *suanli.Error
	if errors.As(err, &e) {
		return e
	}
	return suanli.Errorf(suanli.EINVALID, "body: %v", err)
}

func pathID(r *http.Request, name string) (int64, error) {
	v := r.PathValue(name)
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, suanli.FieldErrorf(name, "%q is not an id: give a positive number", v)
	}
	return id, nil
}

func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, suanli.FieldErrorf(name, "%q is not a number", v)
	}
	return n, nil
}
