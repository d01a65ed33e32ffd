package control

import (
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// keyCacheTTL is how long a verified API key is trusted without reading it
// again. Revoking or rotating a key on this replica clears the cache at
// once; a key revoked through another replica stops working here when the
// change feed says so (within about FeedInterval), and within this time at
// the latest.
const keyCacheTTL = 2 * time.Second

// keyCache remembers API keys (and their accounts' roles) recently read
// from the store, by the key's hash, so that an API call does not cost two
// database reads. Expiry is still checked on every call against the cached
// key's ExpiresAt; only revocation and rotation are cached for up to
// keyCacheTTL. The zero value is ready.
type keyCache struct {
	mu sync.Mutex
	m  map[string]cachedKey
}

type cachedKey struct {
	key    suanli.APIKey
	parent *suanli.APIKey // a temporary token's parent key
	role   string
	read   time.Time // when it was read from the store
}

// get returns the entry for hash read within keyCacheTTL of now.
func (c *keyCache) get(hash string, now time.Time) (cachedKey, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	if !ok || now.Sub(e.read) >= keyCacheTTL || now.Before(e.read) {
		return cachedKey{}, false
	}
	return e, true
}

func (c *keyCache) put(hash string, e cachedKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= 100_000 {
		c.m = make(map[string]cachedKey) // bounded: start over rather than grow without end
	}
	c.m[hash] = e
}

// touched records that the key was touched at at from addr.
func (c *keyCache) touched(hash string, at time.Time, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[hash]; ok {
		t := at
		e.key.LastUsedAt, e.key.LastUsedAddr = &t, addr
		c.m[hash] = e
	}
}

// clear forgets every key: after a revocation or rotation.
func (c *keyCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}
