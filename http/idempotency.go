package http

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// keyLocks serialises requests that carry the same idempotency key, so the
// second waits for the first's stored reply instead of running twice.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	users int
}

func (k *keyLocks) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{}
		k.m[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// recorder keeps a copy of what a handler writes.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// idempotent runs h at most once per (account, Idempotency-Key): the same
// key with the same request replays the stored reply; with another request
// it is a conflict. Keys are kept at least 24 hours. Requests without the
// header run as usual.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request) error) error {
	key := r.Header.Get("Idempotency-Key")
	p := suanli.PrincipalFromContext(r.Context())
	if key == "" || p == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return h(w, r)
	}
	if len(key) > 255 {
		return suanli.FieldErrorf("Idempotency-Key", "longer than 255 characters")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err != nil {
		return decodeError(err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	unlock := s.keys.lock(key)
	defer unlock()
	ctx := r.Context()
	// The key is claimed in the store before the request runs: the same key
	// sent to another replica meanwhile (a client's retry through a load
	// balancer) waits for this reply instead of running again.
	this := sqlstore.Idempotent{Method: r.Method, Path: r.URL.Path, BodyHash: hash}
	var prev *sqlstore.Idempotent
	for waited := time.Duration(0); ; waited += idemPoll {
		var claimed bool
		if prev, claimed, err = s.Service.Store.ClaimIdempotent(ctx, p.AccountID, key, this, s.Service.Now(), idemStale); err != nil {
			return err
		}
		if claimed || prev.Status != 0 {
			break
		}
		if waited >= idemWait {
			e := suanli.Errorf(suanli.EUNAVAILABLE, "a request with Idempotency-Key %q is still running on another replica: retry in a few seconds for its reply", key)
			e.RetryAfterS = 2
			return e
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(idemPoll):
		}
	}
	// The handler sees the key: a create stores it with what it creates
	// (a claim taken over from a try that died finds that try's instance).
	r = r.WithContext(suanli.NewContextWithRequestKey(r.Context(), key))
	if prev != nil {
		if prev.Method != r.Method || prev.Path != r.URL.Path || prev.BodyHash != hash {
			return suanli.Errorf(suanli.ECONFLICT, "Idempotency-Key %q was used for another request (%s %s): use a new key for a new request", key, prev.Method, prev.Path)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(prev.Status)
		w.Write(prev.Response)
		return nil
	}
	rec := &recorder{ResponseWriter: w, status: 200}
	err = h(rec, r)
	if err != nil || rec.status >= 500 {
		// Errors are not stored: the client may retry them.
		if rerr := s.Service.Store.ReleaseIdempotent(context.WithoutCancel(ctx), p.AccountID, key); rerr != nil {
			s.Logger.Error("release idempotency key", "err", rerr)
		}
		return err
	}
	this.Status, this.Response = rec.status, rec.body.Bytes()
	if err := s.Service.Store.PutIdempotent(context.WithoutCancel(ctx), p.AccountID, key, this, s.Service.Now()); err != nil {
		s.Logger.Error("store idempotency key", "err", err)
	}
	return nil
}

// How a request waits for the same key's request running on another
// replica: it polls the store every idemPoll for up to idemWait, then asks
// the client to retry. A claim older than idemStale belonged to a replica
// that died mid-request, and is taken over.
const (
	idemPoll  = 100 * time.Millisecond
	idemWait  = 30 * time.Second
	idemStale = 2 * time.Minute
)
