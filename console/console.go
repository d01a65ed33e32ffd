package console

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/control"
	shttp "github.com/suanli/suanli/http"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// contentSecurityPolicy allows only the console's own script, styles and
// images: no inline script or style, no other origin, no framing, and forms
// that post only back to the console.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Config is what a Console needs. Service is required; the zero value of
// every other field means its default.
type Config struct {
	// Service is the control plane the console calls, with the signed-in
	// caller's principal in the context.
	Service *control.Service
	// Logger receives internal errors (once each, with a request id); nil
	// discards them.
	Logger *slog.Logger
	// Now returns the current time; time.Now by default. It drives session
	// expiry and the billing page's date range.
	Now func() time.Time
	// IdleTimeout ends a session unused this long (DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxAge ends a session this long after sign-in (DefaultMaxAge).
	MaxAge time.Duration
	// MaxSessions bounds sessions held in memory (DefaultMaxSessions).
	MaxSessions int
	// SecureCookies marks cookies Secure even on plain-HTTP requests, for
	// a console behind a TLS-terminating proxy. Requests that arrive over
	// TLS always get Secure cookies.
	SecureCookies bool
	// Catalog returns the public-cloud prices the advisor's comparison
	// uses, read on each comparison (so that a `suanli catalog import`
	// shows at once); nil means advisor.BuiltinCatalog.
	Catalog func() ([]advisor.CatalogRow, error)
	// Limiter and Lockout guard sign-in as they guard the API's login and
	// key routes (share the API server's, so that failures count across
	// both); nil: none.
	Limiter *auth.RateLimiter
	Lockout *auth.Lockout
}

// Console serves the web console. Build it with New and mount it with
// Register. It is safe for concurrent use; its sessions live in its memory,
// so a restart signs everyone out.
type Console struct {
	cfg      Config
	svc      *control.Service
	log      *slog.Logger
	now      func() time.Time
	sessions *sessions
	key      []byte // HMAC key for sign-in form tokens; random per process
	pages    map[string]*template.Template
	assets   map[string]string // file name → URL with a content-hash version
}

// New returns a console over cfg.Service. It fails only when the embedded
// templates do not parse, which a test catches.
func New(cfg Config) (*Console, error) {
	if cfg.Service == nil {
		return nil, errors.New("console: Config.Service is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	c := &Console{cfg: cfg, svc: cfg.Service, log: cfg.Logger, now: cfg.Now, key: make([]byte, 32)}
	rand.Read(c.key)
	c.sessions = newSessions(cfg.IdleTimeout, cfg.MaxAge, cfg.MaxSessions, cfg.Now)
	var err error
	if c.assets, err = assetURLs(); err != nil {
		return nil, err
	}
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	return c, nil
}

// Register mounts the console's routes on mux: pages at /, /offers/…,
// /instances/…, /volumes, /billing, /hosts, /account, /advisor/…, /audit, /windows,
// /bookings/…, /signin,
// /signout; assets under /assets/;
// JSON for the live-refresh script under /console/api/. It leaves /v1,
// /healthz and /metrics to the API server.
func (c *Console) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /assets/{name}", c.handleAsset)
	mux.HandleFunc("GET /signin", c.handleSignInForm)
	mux.HandleFunc("POST /signin", c.audited(c.handleSignIn))
	mux.HandleFunc("POST /signout", c.form(c.handleSignOut))
	c.registerOfferRoutes(mux)
	c.registerInstanceRoutes(mux)
	c.registerBillingRoutes(mux)
	c.registerHostRoutes(mux)
	c.registerVolumeRoutes(mux)
	c.registerAccountRoutes(mux)
	c.registerAdvisorRoutes(mux)
	c.registerAuditRoutes(mux)
	c.registerForwardRoutes(mux)
}

// handler is a console page or form handler: r's context carries the
// signed-in principal, s is the session. A returned error is shown as an
// error page with the status its code maps to.
type handler func(w http.ResponseWriter, r *http.Request, s *session) error

// page wraps a GET handler that needs a signed-in user: without a session
// it redirects to the sign-in page, which comes back here afterwards.
func (c *Console) page(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w)
		r, s, ok := c.signedIn(w, r)
		if !ok {
			return
		}
		if err := h(w, r, s); err != nil {
			c.renderError(w, r, s, err)
		}
	}
}

// form wraps a POST handler: it needs a session (else a redirect to
// sign-in) and the session's CSRF token in the form (else 403, and nothing
// changes). Every submission, refused or not, gets an audit entry.
func (c *Console) form(h handler) http.HandlerFunc {
	return c.audited(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w)
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		r, s, ok := c.signedIn(w, r)
		if !ok {
			return
		}
		if !equalToken(r.PostFormValue("csrf"), s.csrf) {
			c.renderError(w, r, s, errCSRF)
			return
		}
		if err := h(w, r, s); err != nil {
			c.renderError(w, r, s, err)
		}
	})
}

// errNoSession is what a form posted without a session meets (it is
// redirected to sign-in); its audit entry says so.
var errNoSession = suanli.Errorf(suanli.EUNAUTHORIZED, "not signed in")

// errCSRF is what a form without the right token gets.
var errCSRF = suanli.Errorf(suanli.EFORBIDDEN, "this form has expired or did not come from this console: reload the page and submit it again")

// signedIn authenticates r through its session. It returns r with the
// principal in its context, or writes a redirect to the sign-in page (or,
// when the key no longer works, the sign-in page with the reason) and
// returns ok false.
func (c *Console) signedIn(w http.ResponseWriter, r *http.Request) (*http.Request, *session, bool) {
	s, id := c.currentSession(r)
	if s == nil {
		next := r.URL.RequestURI()
		if r.Method != http.MethodGet {
			next = r.Referer()
			if u, err := url.Parse(next); err == nil {
				next = u.RequestURI()
			}
		}
		if n := noteOf(r); n != nil {
			n.err = errNoSession
		}
		http.Redirect(w, r, "/signin?next="+url.QueryEscape(safeNext(next)), http.StatusSeeOther)
		return r, nil, false
	}
	p, err := c.svc.Authenticate(r.Context(), s.secret, clientIP(r))
	if err != nil {
		c.sessions.delete(id)
		c.setCookie(w, r, c.sessionCookieName(r), "", -1)
		if suanli.ErrorCode(err) != suanli.EUNAUTHORIZED {
			c.renderError(w, r, nil, err)
			return r, nil, false
		}
		c.renderSignIn(w, r, http.StatusUnauthorized, safeNext(r.URL.RequestURI()), "Signed out: "+suanli.ErrorMessage(err))
		return r, nil, false
	}
	if n := noteOf(r); n != nil {
		n.principal = p
	}
	return r.WithContext(suanli.NewContextWithPrincipal(r.Context(), p)), s, true
}

// safeNext returns next when it is a path on this site, else "/": the
// sign-in redirect must not send anyone elsewhere.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") ||
		strings.HasPrefix(next, "/signin") || strings.HasPrefix(next, "/signout") || strings.ContainsAny(next, "\r\n") {
		return "/"
	}
	return next
}

func clientIP(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}

func setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// view is what every page template gets: the layout's fields and the
// page's own data in Page.
type view struct {
	Title   string
	Nav     string // the active navigation item
	User    *user  // nil when signed out
	CSRF    string // the session's form token
	CSS, JS string
	Refresh int    // seconds between reloads when JavaScript is off; 0: none
	Notice  string // a confirmation to show once ("Instance 3 is stopping")
	Page    any

	sess *session
}

// user is the signed-in account as the layout shows it.
type user struct {
	ID   int64
	Name string
	Role string
}

// render writes page name with data as the reply, with status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	t, ok := c.pages[name]
	if !ok {
		panic("console: no page " + name)
	}
	v.CSS, v.JS = c.assets["console.css"], c.assets["console.js"]
	if v.sess != nil {
		v.User = &user{ID: v.sess.accountID, Name: v.sess.accountName, Role: v.sess.role}
		v.CSRF = v.sess.csrf
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		rid := newRequestID()
		c.log.Error("render page", "page", name, "path", r.URL.Path, "request_id", rid, "err", err)
		http.Error(w, "internal error (request "+rid+")", http.StatusInternalServerError)
		return
	}
	setHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// errorPage is the error template's data.
type errorPage struct {
	Status  int
	Heading string
	Message string
}

// renderError shows err: a suanli.Error's message, or "internal error"
// with a request id (the error itself is logged once, here).
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, s *session, err error) {
	code := suanli.ErrorCode(err)
	status := shttp.StatusOf(code)
	msg := suanli.ErrorMessage(err)
	n := noteOf(r)
	if n != nil {
		n.err = err
	}
	if code == suanli.EINTERNAL {
		rid := newRequestID()
		if n != nil {
			rid = n.rid
		}
		c.log.Error("console request failed", "method", r.Method, "path", r.URL.Path, "request_id", rid, "err", err)
		msg = "internal error (request " + rid + ")"
	}
	heading := http.StatusText(status)
	if code == suanli.ENOTFOUND {
		heading = "Not found"
	}
	c.render(w, r, status, "error.html", &view{Title: heading, sess: s, Page: errorPage{Status: status, Heading: heading, Message: msg}})
}

// fieldError is a form's error: the message, and the field it names (for
// marking the input).
type fieldError struct {
	Message string
	Field   string
}

// formError turns a service error into what a form shows, or writes the
// error page and returns nil for an internal error.
func formError(err error) *fieldError {
	var e *suanli.Error
	if errors.As(err, &e) {
		return &fieldError{Message: e.Message, Field: e.Field}
	}
	return nil
}

// statusOf is the HTTP status for err's code (the mapping lives in package http).
func statusOf(err error) int { return shttp.StatusOf(suanli.ErrorCode(err)) }

func newRequestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// writeJSON writes v for the live-refresh script.
func writeJSON(w http.ResponseWriter, status int, v any) {
	setHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// api wraps a JSON handler for the script: no session is a 401 (the
// script then stops polling), errors are {"error": message}.
func (c *Console) api(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, id := c.currentSession(r)
		if s == nil {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "signed out"})
			return
		}
		p, err := c.svc.Authenticate(r.Context(), s.secret, clientIP(r))
		if err != nil {
			c.sessions.delete(id)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": suanli.ErrorMessage(err)})
			return
		}
		if err := h(w, r.WithContext(suanli.NewContextWithPrincipal(r.Context(), p))); err != nil {
			msg := suanli.ErrorMessage(err)
			if suanli.ErrorCode(err) == suanli.EINTERNAL {
				rid := newRequestID()
				c.log.Error("console api failed", "path", r.URL.Path, "request_id", rid, "err", err)
				msg = "internal error (request " + rid + ")"
			}
			writeJSON(w, shttp.StatusOf(suanli.ErrorCode(err)), map[string]string{"error": msg})
		}
	}
}

// assetURLs versions each static file's URL with a hash of its content, so
// browsers may cache them for long and still see every change.
func assetURLs() (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(staticFS, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(path)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path, "static/")
		out[name] = "/assets/" + name + "?v=" + shortHash(b)
		return nil
	})
	return out, err
}

func (c *Console) handleAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	w.Write(b)
}

// pathID reads the positive {id} of the path; what names the kind of
// object in the ENOTFOUND for anything else.
func pathID(r *http.Request, what string) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, suanli.Errorf(suanli.ENOTFOUND, "%s %q not found: ids are positive numbers", what, v)
	}
	return id, nil
}

// redirect answers a successful form with 303 See Other to path.
func redirect(w http.ResponseWriter, r *http.Request, path string) {
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// confirmPage is the confirmation template's data: the page a destructive
// form without confirmed=yes gets (JavaScript off; with it, a dialog asks
// first). Its own form posts Fields back to Post with confirmed=yes.
type confirmPage struct {
	Heading string // "Destroy instance 3?"
	Text    string // what the action does, in full
	Post    string // the form's action
	Back    string // where Cancel goes
	Label   string // the button's text
	Danger  bool
	Fields  []hiddenField // the original form's inputs, csrf and confirmed aside
}

// hiddenField is one input a confirmation page carries over.
type hiddenField struct{ Name, Value string }

// confirm shows a confirmation page for a form that was not confirmed.
func (c *Console) confirm(w http.ResponseWriter, r *http.Request, s *session, nav string, p confirmPage) {
	if n := noteOf(r); n != nil {
		n.asked = true
	}
	c.render(w, r, http.StatusOK, "confirm.html", &view{Title: strings.TrimSuffix(p.Heading, "?"), Nav: nav, sess: s, Page: p})
}

// confirmed reports whether a form carries confirmed=yes (set by the
// dialog, or by the confirmation page's own form).
func confirmed(r *http.Request) bool { return r.PostFormValue("confirmed") == "yes" }

// notices are the confirmations a redirect can ask the next page to show.
// Only these fixed texts are shown, so a crafted link cannot put words of
// its own on a console page.
var notices = map[string]string{
	"created":   "Instance created: it starts as soon as the host's agent picks it up.",
	"stopping":  "Stop requested: compute billing has ended; the disk stays, and storage is still billed.",
	"starting":  "Start requested: compute billing resumes when it is running.",
	"destroyed": "Destroyed: all billing has stopped and the instance's data is deleted on the host.",
	"listed":    "Listing saved: new rentals get these terms; running ones keep theirs.",
	"unlisted":  "Taken off the market: running rentals continue.",
	"signedout": "Signed out.",

	"budgetset":     "Budget saved: its alerts fire once per threshold per period, here and at its webhook.",
	"budgetdeleted": "Budget deleted.",
	"volumecreated": "Volume created: it is billed per GB-month until you delete it; attach it when you rent on its machine.",
	"volumedeleted": "Volume deleted: billing has stopped, and the host overwrites and removes its data.",
	"keyadded":      "SSH key added: suanli ssh can now get certificates for it.",
	"keyremoved":    "SSH key removed: no new certificates are issued for it; issued ones expire within minutes.",
	"netadded":      "Network added: new SSH certificates are valid only from your allowlist.",
	"netremoved":    "Network removed from the allowlist: new certificates leave it out.",
	"paidout":       "Payout requested: the amount has left your earnings balance.",

	"booked":           "Booked: the price is locked and the cost is held in escrow; the instance launches by itself at the start.",
	"bookingcancelled": "Booking cancelled: the refund is back in your balance.",
}

// withNotice adds a notice code (a key of notices) to a redirect target.
func withNotice(path, code string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "notice=" + url.QueryEscape(code)
}

// notice returns the text of the request's notice code, or "".
func notice(r *http.Request) string { return notices[r.URL.Query().Get("notice")] }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
