package auth

import (
	"math"
	"sync"
	"time"
)

// maxTracked bounds the entries a limiter keeps; past it, stale entries are
// dropped first, so that a flood of addresses cannot grow memory without end.
const maxTracked = 100_000

// RateLimiter allows each key (an address, a key id) Burst requests at once
// and Rate per second after that: a token bucket per key. It is safe for
// concurrent use; the zero value allows 1 request per second with a burst
// of 10 and reads time.Now. It lives in one process: behind several
// replicas each limits on its own.
type RateLimiter struct {
	Rate  float64          // tokens per second; default 1
	Burst float64          // bucket size; default 10
	Now   func() time.Time // default time.Now

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func (l *RateLimiter) params() (rate, burst float64, now time.Time) {
	rate, burst = l.Rate, l.Burst
	if rate <= 0 {
		rate = 1
	}
	if burst <= 0 {
		burst = 10
	}
	if l.Now != nil {
		now = l.Now()
	} else {
		now = time.Now()
	}
	return rate, burst, now
}

// Allow takes one token from key's bucket. When the bucket is empty it
// returns false and how long until a token is there.
func (l *RateLimiter) Allow(key string) (bool, time.Duration) {
	rate, burst, now := l.params()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxTracked {
			for k, o := range l.buckets {
				if now.Sub(o.at).Seconds()*rate >= burst {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{tokens: burst, at: now}
		l.buckets[key] = b
	}
	if el := now.Sub(b.at).Seconds(); el > 0 {
		b.tokens = math.Min(burst, b.tokens+el*rate)
	}
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / rate * float64(time.Second))
	return false, wait
}

// Lockout counts failed authentications per key (a client address): after
// MaxFailures within Window the key is locked out for LockFor, during which
// every request from it is refused without looking at its credential. It is
// safe for concurrent use; the zero value means 10 failures in 10 minutes
// lock out for 15 minutes. Like RateLimiter it lives in one process.
type Lockout struct {
	MaxFailures int
	Window      time.Duration
	LockFor     time.Duration
	Now         func() time.Time

	mu sync.Mutex
	m  map[string]*failures
}

type failures struct {
	n     int
	first time.Time
	until time.Time
}

func (l *Lockout) params() (n int, window, lock time.Duration, now time.Time) {
	n, window, lock = l.MaxFailures, l.Window, l.LockFor
	if n <= 0 {
		n = 10
	}
	if window <= 0 {
		window = 10 * time.Minute
	}
	if lock <= 0 {
		lock = 15 * time.Minute
	}
	if l.Now != nil {
		now = l.Now()
	} else {
		now = time.Now()
	}
	return n, window, lock, now
}

// Locked reports whether key is locked out now, and for how much longer.
func (l *Lockout) Locked(key string) (bool, time.Duration) {
	_, _, _, now := l.params()
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.m[key]
	if f == nil || !now.Before(f.until) {
		return false, 0
	}
	return true, f.until.Sub(now)
}

// Fail records a failed authentication from key. It returns true (and the
// lockout's length) when this failure locked key out.
func (l *Lockout) Fail(key string) (bool, time.Duration) {
	max, window, lock, now := l.params()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*failures{}
	}
	f := l.m[key]
	if f == nil {
		if len(l.m) >= maxTracked {
			for k, o := range l.m {
				if now.Sub(o.first) > window && !now.Before(o.until) {
					delete(l.m, k)
				}
			}
		}
		f = &failures{}
		l.m[key] = f
	}
	if now.Sub(f.first) > window {
		f.n, f.first = 0, now
	}
	f.n++
	if f.n >= max {
		f.n, f.first, f.until = 0, now, now.Add(lock)
		return true, lock
	}
	return false, 0
}
