package heartbeat

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Size is the length of every datagram of the protocol, in bytes.
const Size = 76

// macAt is where the MAC starts: it covers every byte before it.
const macAt = Size - sha256.Size

// protoVersion is the wire format's version byte.
const protoVersion = 1

var magic = [4]byte{'S', 'L', 'H', 'B'}

// Kind says what a datagram is.
type Kind uint8

// The kinds of datagram.
const (
	// KindBeat goes from agent to control plane: "machine M is alive, has
	// desired-state version V".
	KindBeat Kind = 1
	// KindAck answers a beat that changed nothing: Version is the desired
	// state's current version, the one the agent has.
	KindAck Kind = 2
	// KindSync answers a beat whose agent must do a full sync (HTTP) now:
	// the desired state changed, the control plane does not know the
	// machine yet, or the key is about to expire. Flags says why.
	KindSync Kind = 3
	// KindPoke is sent by the control plane unasked, to the address of the
	// machine's last beat, when its desired state changes: do a full sync
	// now. A lost poke costs at most one interval: the next beat's answer
	// says the same.
	KindPoke Kind = 4
)

func (k Kind) String() string {
	switch k {
	case KindBeat:
		return "beat"
	case KindAck:
		return "ack"
	case KindSync:
		return "sync"
	case KindPoke:
		return "poke"
	}
	return "unknown"
}

// Reasons for a KindSync answer, in Flags.
const (
	FlagDesired uint16 = 1 << iota // the desired state changed (or may have)
	FlagUnknown                    // this control plane does not know the machine (yet)
	FlagRekey                      // the beat's key is old: fetch the current one
)

// FlagAck, on a beat, asks for a KindAck even when nothing changed. Agents
// set it every 30 s (and on the first beat after a sync): enough to learn
// that the channel works and to keep their fence away, while the control
// plane sends one datagram for several it receives. A KindSync is sent
// whenever one is due, asked or not.
const FlagAck uint16 = 1 << 15

// Message is one datagram, decoded. Every kind has the same layout
// (big-endian):
//
//	off len field
//	  0   4 magic "SLHB"
//	  4   1 format version (1)
//	  5   1 kind (Kind)
//	  6   2 flags: FlagAck on a beat; the reasons of a KindSync answer
//	  8   8 machine id
//	 16   8 seq: a beat's sequence number, strictly increasing per machine;
//	        an answer echoes its beat's; a poke carries the server's clock (µs)
//	 24   8 desired-state version: the one the agent has (beat), the current
//	        one (ack)
//	 32   8 time, µs since the Unix epoch on the control plane's clock: when
//	        the agent sent the beat (as the agent reckons it), when the
//	        server received it (answers)
//	 40   4 key epoch: which of the machine's keys signs it (Keys.Epoch)
//	 44  32 HMAC-SHA256 of bytes 0–43 under the machine's key for that epoch
//
// The zero value is not a valid message.
type Message struct {
	Kind      Kind
	Flags     uint16
	MachineID int64
	Seq       int64
	Version   int64
	TimeUS    int64
	Epoch     uint32
}

// Decoding errors, counted by reason.
type decodeError string

func (e decodeError) Error() string { return string(e) }

const (
	errTruncated = decodeError("truncated")
	errMalformed = decodeError("malformed")
)

// header writes m's fields (not the MAC) into b[:macAt].
func (m *Message) header(b []byte) {
	copy(b[0:4], magic[:])
	b[4] = protoVersion
	b[5] = byte(m.Kind)
	binary.BigEndian.PutUint16(b[6:8], m.Flags)
	binary.BigEndian.PutUint64(b[8:16], uint64(m.MachineID))
	binary.BigEndian.PutUint64(b[16:24], uint64(m.Seq))
	binary.BigEndian.PutUint64(b[24:32], uint64(m.Version))
	binary.BigEndian.PutUint64(b[32:40], uint64(m.TimeUS))
	binary.BigEndian.PutUint32(b[40:44], m.Epoch)
}

// parse reads the fields of a datagram without checking its MAC.
func parse(b []byte) (Message, error) {
	if len(b) < Size {
		return Message{}, errTruncated
	}
	if len(b) != Size || [4]byte(b[0:4]) != magic || b[4] != protoVersion {
		return Message{}, errMalformed
	}
	m := Message{
		Kind:      Kind(b[5]),
		Flags:     binary.BigEndian.Uint16(b[6:8]),
		MachineID: int64(binary.BigEndian.Uint64(b[8:16])),
		Seq:       int64(binary.BigEndian.Uint64(b[16:24])),
		Version:   int64(binary.BigEndian.Uint64(b[24:32])),
		TimeUS:    int64(binary.BigEndian.Uint64(b[32:40])),
		Epoch:     binary.BigEndian.Uint32(b[40:44]),
	}
	if m.Kind < KindBeat || m.Kind > KindPoke || m.MachineID <= 0 {
		return Message{}, errMalformed
	}
	return m, nil
}

// Marshal returns m as a datagram signed with key (the machine's key for
// m.Epoch).
func (m *Message) Marshal(key *[32]byte) []byte {
	b := make([]byte, Size)
	var s signer
	s.init()
	s.seal(m, key, b)
	return b
}

// Unmarshal decodes a datagram signed with the key that keyFor returns for
// its machine and epoch. It checks the format and the MAC, nothing else.
func Unmarshal(b []byte, keyFor func(machineID int64, epoch uint32) [32]byte) (Message, error) {
	m, err := parse(b)
	if err != nil {
		return Message{}, err
	}
	var s signer
	s.init()
	key := keyFor(m.MachineID, m.Epoch)
	if !s.verify(b, &key) {
		return Message{}, errBadMAC
	}
	return m, nil
}

var errBadMAC = decodeError("bad_mac")

// signer computes HMAC-SHA256 without allocating: two SHA-256 states reused
// for every datagram, the pads built per key. A signer is not safe for
// concurrent use; each reading goroutine has its own.
type signer struct {
	inner, outer hash.Hash
	pad          [sha256.BlockSize]byte
	sum          [sha256.Size]byte
	mac          [sha256.Size]byte
}

func (s *signer) init() {
	s.inner, s.outer = sha256.New(), sha256.New()
}

// compute writes HMAC(key, msg) into s.mac.
func (s *signer) compute(key *[32]byte, msg []byte) {
	for i := range s.pad {
		s.pad[i] = 0x36
	}
	for i, k := range key {
		s.pad[i] ^= k
	}
	s.inner.Reset()
	s.inner.Write(s.pad[:])
	s.inner.Write(msg)
	s.inner.Sum(s.sum[:0])
	for i := range s.pad {
		s.pad[i] ^= 0x36 ^ 0x5c
	}
	s.outer.Reset()
	s.outer.Write(s.pad[:])
	s.outer.Write(s.sum[:])
	s.outer.Sum(s.mac[:0])
}

// seal encodes m into b (Size bytes) and signs it.
func (s *signer) seal(m *Message, key *[32]byte, b []byte) {
	m.header(b)
	s.compute(key, b[:macAt])
	copy(b[macAt:Size], s.mac[:])
}

// verify checks the MAC of datagram b under key, in constant time.
func (s *signer) verify(b []byte, key *[32]byte) bool {
	s.compute(key, b[:macAt])
	return hmac.Equal(s.mac[:], b[macAt:Size])
}

// Signer seals and opens datagrams without allocating: load generators
// and anything else that handles many. It is not safe for concurrent use.
type Signer struct{ s signer }

// NewSigner returns a Signer.
func NewSigner() *Signer {
	g := &Signer{}
	g.s.init()
	return g
}

// Seal encodes m into out[:Size], signed with key, and returns it.
func (g *Signer) Seal(m *Message, key *[32]byte, out []byte) []byte {
	out = out[:Size]
	g.s.seal(m, key, out)
	return out
}

// Open decodes a datagram and checks its MAC under key (the key of the
// machine and epoch that Peek reads from it).
func (g *Signer) Open(b []byte, key *[32]byte) (Message, error) {
	m, err := parse(b)
	if err != nil {
		return Message{}, err
	}
	if !g.s.verify(b, key) {
		return Message{}, errBadMAC
	}
	return m, nil
}

// Peek decodes a datagram's fields without checking its MAC: to find which
// key opens it. Nothing it returns is to be trusted before Open.
func Peek(b []byte) (Message, error) { return parse(b) }
