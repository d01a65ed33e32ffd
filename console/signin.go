package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// signInPage is the sign-in template's data.
type signInPage struct {
	Next  string
	Token string // the form's CSRF token
	Error string
}

func (c *Console) renderSignIn(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	v := &view{Title: "Sign in", Notice: notice(r), Page: signInPage{Next: next, Token: c.preToken(w, r), Error: msg}}
	c.render(w, r, status, "signin.html", v)
}

func (c *Console) handleSignInForm(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if s, _ := c.currentSession(r); s != nil {
		redirect(w, r, next)
		return
	}
	c.renderSignIn(w, r, http.StatusOK, next, "")
}

// handleSignIn exchanges an API key for a session. The key is checked by
// the control plane (Authenticate) exactly as the API checks a bearer
// token; the browser gets only a random session id.
func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request) {
	setHeaders(w)
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := safeNext(r.PostFormValue("next"))
	if !c.checkPreToken(r) {
		c.renderError(w, r, nil, errCSRF)
		return
	}
	ip := clientIP(r)
	if lo := c.cfg.Lockout; lo != nil {
		if locked, d := lo.Locked(ip); locked {
			w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
			c.renderSignIn(w, r, http.StatusTooManyRequests, next, fmt.Sprintf("too many failed sign-ins from %s: wait %s", ip, (d+time.Second-1).Truncate(time.Second)))
			return
		}
	}
	if l := c.cfg.Limiter; l != nil {
		if ok, d := l.Allow(ip); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
			c.renderSignIn(w, r, http.StatusTooManyRequests, next, fmt.Sprintf("too many sign-ins from %s: wait %s", ip, (d+time.Second-1).Truncate(time.Second)))
			return
		}
	}
	secret := strings.TrimSpace(r.PostFormValue("api_key"))
	if secret == "" {
		c.renderSignIn(w, r, http.StatusBadRequest, next, "api_key: paste your API key (sl_live_…); `suanli up` wrote the operator's to ~/.suanli/config.json")
		return
	}
	p, err := c.svc.Authenticate(r.Context(), secret, ip)
	if err != nil {
		if suanli.ErrorCode(err) == suanli.EINTERNAL {
			c.renderError(w, r, nil, err)
			return
		}
		if n := noteOf(r); n != nil {
			n.err = err
		}
		if c.cfg.Lockout != nil && suanli.ErrorCode(err) == suanli.EUNAUTHORIZED {
			c.cfg.Lockout.Fail(ip)
		}
		c.renderSignIn(w, r, http.StatusUnauthorized, next, suanli.ErrorMessage(err))
		return
	}
	if p.MachineID != 0 || p.InstanceID != 0 {
		c.renderSignIn(w, r, http.StatusUnauthorized, next, "this is a host agent's or an instance's credential: sign in with your own API key")
		return
	}
	if n := noteOf(r); n != nil {
		n.principal = p
	}
	acct, err := c.svc.Me(suanli.NewContextWithPrincipal(r.Context(), p))
	if err != nil {
		c.renderError(w, r, nil, err)
		return
	}
	if _, old := c.currentSession(r); old != "" {
		c.sessions.delete(old)
	}
	id := c.sessions.create(&session{secret: secret, accountID: acct.ID, accountName: acct.Name, role: acct.Role})
	c.setCookie(w, r, c.sessionCookieName(r), id, int(c.cfg.MaxAge.Seconds()))
	c.setCookie(w, r, c.preCookieName(r), "", -1)
	c.log.Info("console sign-in", "account_id", acct.ID, "key_id", p.KeyID)
	redirect(w, r, next)
}

func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request, s *session) error {
	if _, id := c.currentSession(r); id != "" {
		c.sessions.delete(id)
	}
	c.setCookie(w, r, c.sessionCookieName(r), "", -1)
	redirect(w, r, withNotice("/signin", "signedout"))
	return nil
}
