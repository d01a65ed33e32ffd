package vastapi

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// Vast answers logs and execute with a result_url that the CLI fetches
// without credentials, polling until it answers 200. Here each such URL is
// /api/v0/results/TOKEN: TOKEN is 256 random bits (unguessable), names one
// result (one log read or one command's output, nothing else), and expires
// after Config.ResultTTL. Until the result is ready the URL answers 404, as
// Vast's storage does before the upload lands, so that clients that stop on
// the first 200 — or on the first non-error — see only the finished text.

// Result store bounds: at most this many live results per account and in
// all, so that polling clients cannot grow memory without limit.
const (
	maxResultsPerAccount = 64
	maxResults           = 10_000
)

// result is one result URL's content.
type result struct {
	account int64
	expires time.Time
	ready   bool
	body    []byte
	header  map[string]string
}

// resultStore holds results in memory. It is safe for concurrent use.
type resultStore struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*result
}

func newResultStore(now func() time.Time) *resultStore {
	return &resultStore{now: now, m: map[string]*result{}}
}

// add reserves a result for account and returns its token. EUNAVAILABLE
// when the account (or everyone) holds too many live results.
func (s *resultStore) add(account int64, ttl time.Duration) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	mine := 0
	for k, r := range s.m {
		if !now.Before(r.expires) {
			delete(s.m, k)
		} else if r.account == account {
			mine++
		}
	}
	if mine >= maxResultsPerAccount || len(s.m) >= maxResults {
		return "", suanli.Errorf(suanli.EUNAVAILABLE, "too many result URLs waiting (%d for this account): fetch or let them expire (%s), then retry", mine, ttl)
	}
	s.m[tok] = &result{account: account, expires: now.Add(ttl)}
	return tok, nil
}

// finish stores the result's content; it is served from then on.
func (s *resultStore) finish(tok string, body []byte, header map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[tok]; ok {
		r.ready, r.body, r.header = true, body, header
	}
}

// get returns a live result, ready or not.
func (s *resultStore) get(tok string) (*result, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[tok]
	if !ok || !s.now().Before(r.expires) {
		delete(s.m, tok)
		return nil, false
	}
	return r, true
}

func (h *Handler) registerResultRoutes() {
	h.handle(http.MethodGet, "/api/v0/results/{token}", "", h.handleResult)
}

// handleResult serves a result URL: the text once ready; 404 before, after
// expiry, and for any token never handed out.
func (h *Handler) handleResult(w http.ResponseWriter, r *http.Request, a args) error {
	res, found := h.results.get(a["token"])
	w.Header().Set("Cache-Control", "no-store")
	if !found || !res.ready {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if found {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(http.StatusNotFound)
		if found {
			w.Write([]byte("not ready yet: retry in a moment\n"))
		} else {
			w.Write([]byte("no such result: it expired or never existed\n"))
		}
		return nil
	}
	for k, v := range res.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(res.body)
	return err
}

// resultURL is the absolute URL of a result token, from Config.PublicURL or
// the request's own scheme and host.
func (h *Handler) resultURL(r *http.Request, tok string) string {
	base := h.cfg.PublicURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + "/api/v0/results/" + tok
}
