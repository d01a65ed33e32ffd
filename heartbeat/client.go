package heartbeat

import (
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// Client is an agent's end of the light channel: it sends one machine's
// beats and hands over the control plane's verified answers and pokes.
// Send and SetKeys may be called from any goroutine; Replies is read by
// one.
type Client struct {
	conn    *net.UDPConn
	id      int64
	replies chan Message
	done    chan struct{}

	mu   sync.Mutex // guards keys, sig and buf
	keys []suanli.HeartbeatKey
	sig  signer
	buf  [Size]byte
}

// Dial opens a UDP socket connected to addr (HOST:PORT) for machine id's
// beats and starts reading answers.
func Dial(addr string, id int64) (*Client, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil, err
	}
	c := &Client{conn: conn, id: id, replies: make(chan Message, 16), done: make(chan struct{})}
	c.sig.init()
	go c.read()
	return c, nil
}

// SetKeys replaces the keys beats are signed with (a sync response's
// HeartbeatChannel.Keys).
func (c *Client) SetKeys(keys []suanli.HeartbeatKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = slices.Clone(keys)
	slices.SortFunc(c.keys, func(a, b suanli.HeartbeatKey) int { return a.From.Compare(b.From) })
}

// keyLocked returns the key current at now (the latest whose From is not
// after it; the earliest when all are later).
func (c *Client) keyLocked(now time.Time) (suanli.HeartbeatKey, bool) {
	if len(c.keys) == 0 {
		return suanli.HeartbeatKey{}, false
	}
	k := c.keys[0]
	for _, x := range c.keys[1:] {
		if !x.From.After(now) {
			k = x
		}
	}
	return k, len(k.Key) == 32
}

// ErrNoKey is returned by Send before SetKeys gave a usable key.
var ErrNoKey = errors.New("heartbeat: no key")

// Send sends one beat: seq (strictly increasing), the desired-state version
// the agent has, now on the control plane's clock, and whether it asks for
// an answer when nothing changed (FlagAck).
func (c *Client) Send(seq, version int64, now time.Time, ack bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.keyLocked(now)
	if !ok {
		return ErrNoKey
	}
	m := Message{Kind: KindBeat, MachineID: c.id, Seq: seq, Version: version, TimeUS: now.UnixMicro(), Epoch: k.Epoch}
	if ack {
		m.Flags = FlagAck
	}
	key := [32]byte(k.Key)
	c.sig.seal(&m, &key, c.buf[:])
	_, err := c.conn.Write(c.buf[:])
	return err
}

// Replies delivers the answers and pokes that carry this machine's id and
// a valid MAC under one of its keys. Anything else is dropped.
func (c *Client) Replies() <-chan Message { return c.replies }

// Close closes the socket and stops the reader.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

func (c *Client) read() {
	defer close(c.done)
	var sig signer
	sig.init()
	buf := make([]byte, 512)
	for {
		n, err := c.conn.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// An ICMP "port unreachable" from an earlier send: no server
			// there. The agent notices the missing answers.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		m, err := parse(buf[:n])
		if err != nil || m.MachineID != c.id || m.Kind == KindBeat {
			continue
		}
		c.mu.Lock()
		var key []byte
		for _, k := range c.keys {
			if k.Epoch == m.Epoch {
				key = k.Key
			}
		}
		c.mu.Unlock()
		if len(key) != 32 || !sig.verify(buf[:n], (*[32]byte)(key)) {
			continue
		}
		select {
		case c.replies <- m:
		default: // the agent is behind: it asks again next interval
		}
	}
}
