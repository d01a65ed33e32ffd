package http

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// Server serves the API, health and metrics for one control.Service. The
// web console (package console) mounts its pages on Mux.
type Server struct {
	Service *control.Service
	Logger  *slog.Logger
	// Extra mounts more handlers on the mux before it is built (the console,
	// the Vast compatibility layer).
	Extra func(mux *http.ServeMux)

	mux     *http.ServeMux
	keys    keyLocks
	reg     *prometheus.Registry
	latency *prometheus.HistogramVec
}

// NewServer builds a server with all routes registered.
func NewServer(svc *control.Service, logger *slog.Logger) *Server {
	s := &Server{Service: svc, Logger: logger, mux: http.NewServeMux(), reg: prometheus.NewRegistry()}
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "suanli_api_request_duration_seconds", Help: "API request latency by route and status.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"route", "code"})
	s.reg.MustRegister(s.latency, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	s.registerMetrics()
	s.mux.HandleFunc("GET /healthz", s.handleHealth)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /v1/openapi.json", s.handleOpenAPI)
	s.registerAccountRoutes()
	s.registerOfferRoutes()
	s.registerInstanceRoutes()
	s.registerMachineRoutes()
	s.registerBillingRoutes()
	s.registerAgentRoutes()
	s.registerSSHRoutes()
	s.registerCostRoutes()
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

// route wraps an API handler: request id, authentication, latency metric,
// error mapping.
func (s *Server) route(pattern string, public bool, h func(w http.ResponseWriter, r *http.Request) error) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rid := newRequestID()
		w.Header().Set("X-Request-Id", rid)
		rw := &statusWriter{ResponseWriter: w, status: 200}
		r, err := s.authenticate(r, public)
		if err == nil {
			err = s.idempotent(rw, r, h)
		}
		if err != nil {
			s.writeError(rw, r, rid, err)
		}
		s.latency.WithLabelValues(pattern, strconv.Itoa(rw.status)).Observe(time.Since(start).Seconds())
	})
}

// authenticate returns r with the caller in its context. A public route
// accepts requests without a credential.
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
	writeJSON(w, StatusOf(code), ErrorBody{Error: e, RequestID: rid})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
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

func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
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
