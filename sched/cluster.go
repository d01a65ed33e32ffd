package sched

import (
	"fmt"
	"slices"
)

// Cluster is the placement state of many GPU hosts held in memory and
// indexed so that one placement costs about the same for a hundred hosts
// or a hundred thousand: per GPU model, hosts sit in buckets by their number
// of free GPUs, and hosts where bids own GPUs are listed apart for
// preemption. Like Nomad's limit iterator, a placement ranks at most Limit
// feasible candidates (found best-fit first: the bucket with the fewest free
// GPUs that fits, starting at a seeded random offset) rather than every
// host; each candidate goes through the same pipeline and arbitration as
// Schedule. Place decides and applies in memory; making decisions durable
// is the caller's job (a decision log, a store).
//
// A Cluster holds owners only: the victims of a placement leave their host
// at once (their instances wait in the caller's queue; the control plane
// holds the new owner back while they run out their notice). It does no I/O
// and reads no clock. It is not safe for concurrent use. The zero value is
// not usable: use NewCluster.
type Cluster struct {
	// Limit is how many feasible candidates a placement ranks; 0 means 4.
	Limit int
	// MaxScan bounds the hosts one placement examines; 0 means 512.
	MaxScan int

	hosts []Host
	meta  []hostMeta
	byID  map[int64]int32
	pools map[string]*pool
	order []*pool    // pools in the order their models were added
	where claimIndex // claim id → host index
	rng   uint64
	a     arbiter
	out   outcome
	cands []candidate
}

type hostMeta struct {
	pool    *pool
	free    int   // GPUs no owner holds
	posFree int32 // index in pool.free[free]
	bids    int   // GPUs owned by bids
	posBid  int32 // index in pool.bid, -1 when not there
}

// pool indexes the hosts of one GPU model.
type pool struct {
	name string
	free [MaxGPUs + 1][]int32 // host indexes by their number of free GPUs
	bid  []int32              // hosts where bids own GPUs
}

// NewCluster returns an empty cluster whose candidate sampling is seeded.
func NewCluster(seed uint64) *Cluster {
	return &Cluster{byID: map[int64]int32{}, pools: map[string]*pool{}, where: claimIndex{sparse: map[int64]int32{}}, rng: seed*0x9E3779B97F4A7C15 + 1}
}

// next is splitmix64: the seeded sampling of candidate offsets.
func (c *Cluster) next() uint64 {
	c.rng += 0x9E3779B97F4A7C15
	z := c.rng
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// AddHost adds a GPU host with its owner claims (it keeps h.Claims; other
// states are dropped). Hosts without GPUs, with more than MaxGPUs, or with an
// id already added are refused.
func (c *Cluster) AddHost(h Host) error {
	if !h.IsGPU() || len(h.GPUIndex) > MaxGPUs {
		return fmt.Errorf("host %d: the cluster places on hosts with 1 to %d GPUs", h.ID, MaxGPUs)
	}
	if _, dup := c.byID[h.ID]; dup {
		return fmt.Errorf("host %d added twice", h.ID)
	}
	h.Claims = slices.DeleteFunc(slices.Clone(h.Claims), func(cl Claim) bool { return cl.State != Owner })
	p := c.pools[h.GPUName]
	if p == nil {
		p = &pool{name: h.GPUName}
		c.pools[h.GPUName] = p
		c.order = append(c.order, p)
	}
	i := int32(len(c.hosts))
	c.hosts = append(c.hosts, h)
	c.meta = append(c.meta, hostMeta{pool: p, free: -1, posBid: -1})
	c.byID[h.ID] = i
	for _, cl := range h.Claims {
		c.where.set(cl.ID, i)
	}
	c.reindex(i)
	return nil
}

// reindex moves host i to the buckets its claims put it in.
func (c *Cluster) reindex(i int32) {
	h, m := &c.hosts[i], &c.meta[i]
	var owned GPUSet
	bids := 0
	for k := range h.Claims {
		owned |= h.Claims[k].GPUs
		if h.Claims[k].Class == ClassBid {
			bids += h.Claims[k].Units
		}
	}
	free := len(h.GPUIndex) - owned.Count()
	if free != m.free {
		if m.free >= 0 {
			c.unbucket(&m.pool.free[m.free], m.posFree, func(j int32) { c.meta[j].posFree = m.posFree })
		}
		m.free, m.posFree = free, int32(len(m.pool.free[free]))
		m.pool.free[free] = append(m.pool.free[free], i)
	}
	switch {
	case bids > 0 && m.posBid < 0:
		m.posBid = int32(len(m.pool.bid))
		m.pool.bid = append(m.pool.bid, i)
	case bids == 0 && m.posBid >= 0:
		pos := m.posBid
		c.unbucket(&m.pool.bid, pos, func(j int32) { c.meta[j].posBid = pos })
		m.posBid = -1
	}
	m.bids = bids
}

// unbucket removes position pos of a bucket by moving its last host there
// (moved is told the host that moved).
func (c *Cluster) unbucket(b *[]int32, pos int32, moved func(j int32)) {
	last := int32(len(*b) - 1)
	if pos != last {
		j := (*b)[last]
		(*b)[pos] = j
		moved(j)
	}
	*b = (*b)[:last]
}

// Place places one instance of r (r.GPUCount GPUs, at least 1; r.Count is
// ignored) as claim id, and applies it: the newcomer owns its GPUs, its
// victims leave the host. It first looks for free GPUs, best fit first;
// only when no host has them does it rank hosts where bids it outranks own
// GPUs. ok is false when nothing fits; the Rejection then names the step
// that removed the most candidates (Host 0: it is a summary).
func (c *Cluster) Place(r Request, id int64) (p Placement, rj Rejection, ok bool) {
	limit, maxScan := c.Limit, c.MaxScan
	if limit <= 0 {
		limit = 4
	}
	if maxScan <= 0 {
		maxScan = 512
	}
	n := max(r.GPUCount, 1)
	r.GPUCount = n
	pools := c.order
	if len(r.GPUNames) > 0 {
		pools = pools[:0:0]
		for _, name := range r.GPUNames {
			for _, pl := range c.order {
				if sameName(name, pl.name) {
					pools = append(pools, pl)
				}
			}
		}
	}
	c.cands = c.cands[:0]
	var why [maxSteps]int // rejections per step, for the summary
	scanned := 0
	consider := func(hi int32) {
		scanned++
		if len(c.cands) == cap(c.cands) {
			c.cands = append(c.cands, candidate{})
		} else {
			c.cands = c.cands[:len(c.cands)+1]
		}
		cand := &c.cands[len(c.cands)-1]
		rej, ok := evaluate(&c.a, &c.out, &c.hosts[hi], &r, cand)
		if !ok {
			why[stepIndex(rej.Step)]++
			c.cands = c.cands[:len(c.cands)-1]
			return
		}
		cand.host = int(hi)
	}
	// Free GPUs, tightest bucket first.
	for _, pl := range pools {
		for k := n; k <= MaxGPUs && len(c.cands) == 0 && scanned < maxScan; k++ {
			b := pl.free[k]
			if len(b) == 0 {
				continue
			}
			start := int(c.next() % uint64(len(b)))
			for j := 0; j < len(b) && len(c.cands) < limit && scanned < maxScan; j++ {
				consider(b[(start+j)%len(b)])
			}
		}
	}
	// Otherwise GPUs that bids below the newcomer own.
	if len(c.cands) == 0 {
		for _, pl := range pools {
			b := pl.bid
			if len(b) == 0 {
				continue
			}
			start := int(c.next() % uint64(len(b)))
			for j := 0; j < len(b) && len(c.cands) < limit && scanned < 2*maxScan; j++ {
				consider(b[(start+j)%len(b)])
			}
		}
	}
	if len(c.cands) == 0 {
		top := 0
		for i := range why {
			if why[i] > why[top] {
				top = i
			}
		}
		return p, Rejection{Step: stepName(top), Reason: fmt.Sprintf("no host of %d examined can take %d GPUs: %d rejected at %s", scanned, n, why[top], stepName(top))}, false
	}
	best := &c.cands[0]
	for i := 1; i < len(c.cands); i++ {
		if better(&c.cands[i], best, &c.hosts[c.cands[i].host], &c.hosts[best.host]) {
			best = &c.cands[i]
		}
	}
	return c.apply(int32(best.host), best, &r, id), Rejection{}, true
}

// apply makes a candidate real on host hi.
func (c *Cluster) apply(hi int32, cand *candidate, r *Request, id int64) Placement {
	h := &c.hosts[hi]
	if len(cand.victims) > 0 {
		h.Claims = slices.DeleteFunc(h.Claims, func(cl Claim) bool { return victimOf(cand.victims, cl.ID) })
		for _, v := range cand.victims {
			c.where.del(v.ID)
		}
	}
	h.Claims = append(h.Claims, Claim{ID: id, Class: ClassOf(r.RentalType), Bid: cand.z.rates.ComputePerHour, Units: cand.z.units,
		State: Owner, GPUs: cand.gpus, RAMMB: cand.z.ramMB, Order: id})
	c.where.set(id, hi)
	c.reindex(hi)
	p := Placement{HostID: h.ID, GPUs: cand.gpus, CPUCores: cand.z.cores, RAMMB: cand.z.ramMB, Rates: cand.z.rates}
	if len(cand.victims) > 0 {
		p.Preempt = slices.Clone(cand.victims) // the candidate's buffer is reused
	}
	p.HourlyCost = p.Rates.ComputePerHour + p.Rates.StoragePerHour(r.DiskGB)
	return p
}

// Release removes claim id (a destroy, a stop) and returns what it held:
// its host and GPUs. ok is false when the claim is unknown.
func (c *Cluster) Release(id int64) (hostID int64, gpus GPUSet, ok bool) {
	hi, ok := c.where.get(id)
	if !ok {
		return 0, 0, false
	}
	h := &c.hosts[hi]
	for i := range h.Claims {
		if h.Claims[i].ID == id {
			gpus = h.Claims[i].GPUs
			h.Claims = slices.Delete(h.Claims, i, i+1)
			break
		}
	}
	c.where.del(id)
	c.reindex(hi)
	return h.ID, gpus, true
}

// Host returns host id as the cluster holds it now. The caller must not
// change it.
func (c *Cluster) Host(id int64) (*Host, bool) {
	i, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	return &c.hosts[i], true
}

// HostOf returns the host claim id is on.
func (c *Cluster) HostOf(id int64) (*Host, bool) {
	hi, ok := c.where.get(id)
	if !ok {
		return nil, false
	}
	return &c.hosts[hi], true
}

// Usage returns the GPUs in the cluster and how many owners hold.
func (c *Cluster) Usage() (total, used int) {
	for i := range c.hosts {
		total += len(c.hosts[i].GPUIndex)
		used += len(c.hosts[i].GPUIndex) - c.meta[i].free
	}
	return total, used
}

// PoolUsage is Usage for one GPU model.
func (c *Cluster) PoolUsage(model string) (total, used int) {
	for i := range c.hosts {
		if c.meta[i].pool.name == model {
			total += len(c.hosts[i].GPUIndex)
			used += len(c.hosts[i].GPUIndex) - c.meta[i].free
		}
	}
	return total, used
}

// Claims returns the number of claims the cluster holds.
func (c *Cluster) Claims() int { return c.where.n }

// Verify recounts everything from the claims: no GPU owned twice or beyond
// its host, every claim where the index says, every host in the right
// buckets. It returns the first inconsistency.
func (c *Cluster) Verify() error {
	seen := 0
	for i := range c.hosts {
		h, m := &c.hosts[i], &c.meta[i]
		var owned GPUSet
		bids := 0
		for _, cl := range h.Claims {
			if cl.GPUs&owned != 0 {
				return fmt.Errorf("host %d: GPUs %b owned twice (claim %d)", h.ID, cl.GPUs&owned, cl.ID)
			}
			if cl.GPUs&^All(len(h.GPUIndex)) != 0 || cl.GPUs.Count() != cl.Units {
				return fmt.Errorf("host %d: claim %d owns %b for %d GPUs", h.ID, cl.ID, cl.GPUs, cl.Units)
			}
			owned |= cl.GPUs
			if cl.Class == ClassBid {
				bids += cl.Units
			}
			if at, _ := c.where.get(cl.ID); at != int32(i) {
				return fmt.Errorf("claim %d is on host %d but indexed elsewhere", cl.ID, h.ID)
			}
			seen++
		}
		if free := len(h.GPUIndex) - owned.Count(); free != m.free || m.pool.free[free][m.posFree] != int32(i) {
			return fmt.Errorf("host %d: %d free but bucketed as %d", h.ID, free, m.free)
		}
		if (bids > 0) != (m.posBid >= 0) || (m.posBid >= 0 && m.pool.bid[m.posBid] != int32(i)) {
			return fmt.Errorf("host %d: bids own %d GPUs, bid index %d", h.ID, bids, m.posBid)
		}
	}
	if seen != c.where.n {
		return fmt.Errorf("%d claims on hosts, %d indexed", seen, c.where.n)
	}
	return nil
}

// stepIndex and stepName number the pipeline's steps for counting.
func stepIndex(step string) int {
	for i, c := range checks {
		if c.step == step {
			return i
		}
	}
	for i, s := range extraSteps {
		if s == step {
			return len(checks) + i
		}
	}
	return len(checks) + len(extraSteps) - 1
}

var extraSteps = [...]string{"capacity", "bid", "max_price", "cpu_cores", "cpu_ram", "rental_type", "other"}

// maxSteps bounds the steps counted per placement (checked at init).
const maxSteps = 32

func init() {
	if len(checks)+len(extraSteps) > maxSteps {
		panic("sched: more pipeline steps than maxSteps")
	}
}

func stepName(i int) string {
	if i < len(checks) {
		return checks[i].step
	}
	return extraSteps[i-len(checks)]
}

// claimIndex maps claim ids to host indexes: a slice for the dense ids the
// store hands out (instance ids count up from 1), a map for the rest, so
// that the hot path does not hash.
type claimIndex struct {
	dense  []int32 // host index + 1 by id; 0: none
	sparse map[int64]int32
	n      int
}

// maxDense is the largest id kept in the slice.
const maxDense = 1 << 26

func (x *claimIndex) get(id int64) (int32, bool) {
	if id >= 0 && id < int64(len(x.dense)) {
		v := x.dense[id]
		return v - 1, v != 0
	}
	v, ok := x.sparse[id]
	return v, ok
}

func (x *claimIndex) set(id int64, host int32) {
	if _, ok := x.get(id); !ok {
		x.n++
	}
	if id >= 0 && id < maxDense {
		if id >= int64(len(x.dense)) {
			n := min(max(int(id)+1, 2*len(x.dense)), maxDense)
			x.dense = append(x.dense, make([]int32, n-len(x.dense))...)
		}
		x.dense[id] = host + 1
		return
	}
	x.sparse[id] = host
}

func (x *claimIndex) del(id int64) {
	if _, ok := x.get(id); !ok {
		return
	}
	x.n--
	if id >= 0 && id < int64(len(x.dense)) {
		x.dense[id] = 0
		return
	}
	delete(x.sparse, id)
}
