package market

import (
	"sync"

	"github.com/suanli/suanli"
)

// Index is the in-memory offer index the control plane searches. It holds
// its own copies of offers: callers may reuse what they Put, and what Get and
// Search return are copies too. All methods are safe for concurrent use;
// searches run in parallel with each other and wait only for writers. The
// zero value is not usable; call NewIndex.
type Index struct {
	mu     sync.RWMutex
	offers map[int64]*suanli.Offer
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{offers: map[int64]*suanli.Offer{}}
}

// Put inserts o, or replaces the offer with the same ID. o.Rentable means
// "rentable ignoring simulation"; DPHTotal and the per-dollar ratios of o are
// ignored (searches derive them for their storage size).
func (x *Index) Put(o *suanli.Offer) {
	c := cloneOffer(o)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.offers[o.ID] = c
}

// Delete removes the offer with that ID; removing a missing one is a no-op.
func (x *Index) Delete(id int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.offers, id)
}

// Get returns a copy of the offer with that ID as Put stored it.
func (x *Index) Get(id int64) (*suanli.Offer, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	o, ok := x.offers[id]
	if !ok {
		return nil, false
	}
	return cloneOffer(o), true
}

// Len returns the number of offers in the index.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.offers)
}

// Search runs q for viewer v: the effective conditions (DefaultQuery unless
// replaced or dropped, then q.Query), ordered by q.Order (DefaultOrder when
// empty; ties by id ascending), q.Offset and q.Limit (0 → DefaultLimit, at
// most MaxLimit). dph_total and the per-dollar ratios are computed for
// q.StorageGB (0 → suanli.DefaultStorageGB) and rentable for v; the returned
// offers are copies carrying those values. Total counts all matches. With
// q.Explain set, Explain says which condition removed how many offers.
// Errors are EINVALID naming the field at fault.
func (x *Index) Search(q suanli.OfferQuery, v Viewer) (*suanli.OfferResult, error) {
	x.mu.RLock()
	all := make([]*suanli.Offer, 0, len(x.offers))
	for _, o := range x.offers {
		all = append(all, o)
	}
	x.mu.RUnlock()
	// Stored offers are never modified in place (Put replaces them), so
	// reading them after the lock is released is safe.
	return Scan(all, q, v)
}

func cloneOffer(o *suanli.Offer) *suanli.Offer {
	c := *o
	if o.EndDate != nil {
		t := *o.EndDate
		c.EndDate = &t
	}
	return &c
}
