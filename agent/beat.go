package agent

import (
	"context"
	"time"

	"github.com/suanli/suanli/heartbeat"
)

// beatable reports whether the agent should go on light heartbeats now: a
// channel is advertised and open (it is opened here), it was not found
// blocked lately, and there is no news to sync.
func (a *Agent) beatable(ctx context.Context) bool {
	if a.cfg.DialBeats == nil || a.channel == nil || len(a.channel.Keys) == 0 || a.now().Before(a.beatsDown) || a.fenced {
		if a.channel == nil {
			a.closeBeater()
		}
		return false
	}
	if a.beater == nil || a.beaterTo != a.channel.Addr {
		a.closeBeater()
		b, err := a.cfg.DialBeats(a.channel.Addr)
		if err != nil {
			a.log.Warn("light heartbeat channel unavailable, long-polling", "addr", a.channel.Addr, "err", err)
			a.beatsDown = a.now().Add(beatRetry)
			return false
		}
		a.beater, a.beaterTo = b, a.channel.Addr
		a.log.Info("light heartbeats", "addr", a.channel.Addr)
	}
	a.beater.SetKeys(a.channel.Keys)
	return !a.news(ctx)
}

func (a *Agent) closeBeater() {
	if a.beater != nil {
		a.beater.Close()
		a.beater, a.beaterTo = nil, ""
	}
}

// fullSyncEvery is how long the agent may go on beats alone.
func (a *Agent) fullSyncEvery() time.Duration {
	if len(a.lastReports) == 0 {
		return 10 * a.cfg.FullSyncEvery
	}
	return a.cfg.FullSyncEvery
}

// ackAfter: the agent asks for an answer on the first beat after a sync
// (so a channel blocked from the start is found at once) and whenever its
// last answer is this old (sooner when its fence comes near): a channel
// blocked later is found within that, and the control plane sends one
// datagram per agent per ackAfter, whatever the interval.
const ackAfter = 30 * time.Second

// beat sends a light heartbeat every interval, one interval after the last
// contact, until a full sync is due: news, a changed desired state (an
// answer's version, a sync request or a poke), FullSyncEvery, or a beat
// that asked for an answer and had none when the next is due (then the
// sync stands in for it; a second miss in a row sends the agent back to
// long polls for beatRetry). Each answered beat moves lastSuccess, which
// fencing measures from.
func (a *Agent) beat(ctx context.Context) {
	b := a.beater
	for {
		select { // drop answers to earlier rounds
		case <-b.Replies():
			continue
		default:
		}
		break
	}
	due := a.lastSuccess.Add(a.heartbeat)
	fullDue := a.lastFull.Add(a.fullSyncEvery())
	var pending int64 // seq of the beat awaiting its answer; 0 none
	var pendingAt time.Time
	var first int64 // seq of this round's first beat
	timer := time.NewTimer(max(due.Sub(a.now()), 0))
	defer timer.Stop()
	tick := time.NewTicker(a.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			now := a.now()
			if pending != 0 {
				a.beatMiss++
				if a.beatMiss >= 2 {
					a.log.Warn("light heartbeats unanswered, long-polling", "misses", a.beatMiss, "retry_in", beatRetry)
					a.beatsDown, a.beatMiss = now.Add(beatRetry), 0
				}
				a.noWait = true
				return
			}
			if !now.Before(fullDue) {
				a.noWait = true
				return
			}
			a.beatSeq = max(a.beatSeq+1, now.UnixMicro())
			f, since := a.fenceAfter(), now.Sub(a.lastSuccess)
			ack := first == 0 || since+a.heartbeat > ackAfter || (f > 0 && since+a.heartbeat >= f/3)
			if err := b.Send(a.beatSeq, a.version, now.Add(a.clockOffset), ack); err != nil {
				a.log.Debug("send heartbeat", "err", err)
			}
			if first == 0 {
				first = a.beatSeq
			}
			if ack {
				pending, pendingAt = a.beatSeq, now
			}
			timer.Reset(a.heartbeat)
		case m := <-b.Replies():
			switch m.Kind {
			case heartbeat.KindAck, heartbeat.KindSync:
				if first == 0 || m.Seq < first || m.Seq > a.beatSeq {
					continue // an answer to a beat of an earlier round
				}
				if m.Seq == pending {
					pending, a.beatMiss = 0, 0
					a.lastSuccess = pendingAt
					a.renewLease()
				}
				if m.Kind == heartbeat.KindSync || m.Version != a.version {
					a.noWait = true
					return
				}
			case heartbeat.KindPoke:
				a.noWait = true
				return
			}
		case <-tick.C:
			a.checkFence(ctx)
			if a.fenced {
				return // only a sync lifts a fence
			}
		case <-a.wake:
		}
		if a.news(ctx) {
			return
		}
	}
}
