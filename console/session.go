package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"sync"
	"time"
)

// Session lifetimes used when Config leaves them zero.
const (
	DefaultIdleTimeout = 2 * time.Hour
	DefaultMaxAge      = 12 * time.Hour
	// DefaultMaxSessions bounds the sessions held in memory; past it the
	// least recently used one is dropped.
	DefaultMaxSessions = 10000
)

// Cookie names. Over TLS the session cookie takes the __Host- prefix, which
// browsers accept only with Secure, Path=/ and no Domain: a sibling
// subdomain cannot plant or overwrite it.
const (
	cookieSession    = "suanli_session"
	cookieSessionTLS = "__Host-suanli_session"
	cookiePre        = "suanli_signin"
	cookiePreTLS     = "__Host-suanli_signin"
)

// session is one signed-in browser. secret is the API key the user signed
// in with: it stays in server memory so that every request re-authenticates
// (a revoked or expired key ends the session at once) and is never written
// to a cookie, a page or a log.
type session struct {
	secret      string
	csrf        string // per-session form token
	accountID   int64
	accountName string
	role        string
	created     time.Time
	lastSeen    time.Time
}

// sessions is the in-memory session table, keyed by the SHA-256 of the
// cookie's session id (so the table itself holds no usable cookie). It is
// safe for concurrent use.
type sessions struct {
	mu      sync.Mutex
	byHash  map[string]*session
	idle    time.Duration
	maxAge  time.Duration
	maxSize int
	now     func() time.Time
}

func newSessions(idle, maxAge time.Duration, maxSize int, now func() time.Time) *sessions {
	return &sessions{byHash: map[string]*session{}, idle: idle, maxAge: maxAge, maxSize: maxSize, now: now}
}

func hashID(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// randomToken returns n random bytes, base64url-encoded.
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create stores s under a new random id and returns the id.
func (t *sessions) create(s *session) string {
	id := randomToken(32)
	now := t.now()
	s.created, s.lastSeen = now, now
	s.csrf = randomToken(32)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked(now)
	for len(t.byHash) >= t.maxSize {
		t.evictOldestLocked()
	}
	t.byHash[hashID(id)] = s
	return id
}

// get returns the live session for id and marks it used, or nil.
func (t *sessions) get(id string) *session {
	if id == "" {
		return nil
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	h := hashID(id)
	s, ok := t.byHash[h]
	if !ok {
		return nil
	}
	if t.expired(s, now) {
		delete(t.byHash, h)
		return nil
	}
	s.lastSeen = now
	return s
}

// delete ends the session for id.
func (t *sessions) delete(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byHash, hashID(id))
}

// len returns how many sessions are held (expired ones included until swept).
func (t *sessions) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byHash)
}

func (t *sessions) expired(s *session, now time.Time) bool {
	return now.Sub(s.lastSeen) > t.idle || now.Sub(s.created) > t.maxAge
}

func (t *sessions) sweepLocked(now time.Time) {
	for h, s := range t.byHash {
		if t.expired(s, now) {
			delete(t.byHash, h)
		}
	}
}

func (t *sessions) evictOldestLocked() {
	var oldest string
	var at time.Time
	for h, s := range t.byHash {
		if oldest == "" || s.lastSeen.Before(at) {
			oldest, at = h, s.lastSeen
		}
	}
	delete(t.byHash, oldest)
}

// secure reports whether cookies for r must be Secure: the request came
// over TLS, or the console is configured to sit behind a TLS proxy.
func (c *Console) secure(r *http.Request) bool { return r.TLS != nil || c.cfg.SecureCookies }

func (c *Console) sessionCookieName(r *http.Request) string {
	if c.secure(r) {
		return cookieSessionTLS
	}
	return cookieSession
}

func (c *Console) preCookieName(r *http.Request) string {
	if c.secure(r) {
		return cookiePreTLS
	}
	return cookiePre
}

// setCookie writes a console cookie with the fixed attributes: Path=/,
// HttpOnly, SameSite=Strict, Secure over TLS. maxAge 0 makes a browser
// session cookie; -1 deletes it.
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
}

// currentSession returns the caller's session and its id, or nil.
func (c *Console) currentSession(r *http.Request) (*session, string) {
	ck, err := r.Cookie(c.sessionCookieName(r))
	if err != nil {
		return nil, ""
	}
	return c.sessions.get(ck.Value), ck.Value
}

// preToken returns the sign-in form's CSRF token for r, setting the
// double-submit cookie it is checked against when r has none. The token is
// an HMAC of the cookie's nonce under the console's key, so a site that can
// set a cookie still cannot forge a matching token.
func (c *Console) preToken(w http.ResponseWriter, r *http.Request) string {
	nonce := ""
	if ck, err := r.Cookie(c.preCookieName(r)); err == nil && len(ck.Value) >= 32 {
		nonce = ck.Value
	} else {
		nonce = randomToken(24)
		c.setCookie(w, r, c.preCookieName(r), nonce, 3600)
	}
	return c.signNonce(nonce)
}

func (c *Console) signNonce(nonce string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("signin:" + nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkPreToken verifies the sign-in form's token against its cookie.
func (c *Console) checkPreToken(r *http.Request) bool {
	ck, err := r.Cookie(c.preCookieName(r))
	if err != nil || ck.Value == "" {
		return false
	}
	return equalToken(r.PostFormValue("csrf"), c.signNonce(ck.Value))
}

// equalToken compares tokens in constant time; an empty token never matches.
func equalToken(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
