package suanli

import "time"

// AuditEvent is one entry of the tamper-evident audit log (DESIGN §7): who
// did what to which object, when, from where, with what result. Entries form
// a SHA-256 hash chain: Hash covers every other field and PrevHash, which is
// the Hash of entry Seq-1. Package audit computes and verifies them.
type AuditEvent struct {
	Seq       int64     `json:"seq"`
	At        time.Time `json:"at"`
	ActorID   int64     `json:"actor_id,omitempty"`   // the person; 0 for the system or an instance's token
	AccountID int64     `json:"account_id,omitempty"` // the account acted on (a team when selected)
	KeyID     int64     `json:"key_id,omitempty"`
	Action    string    `json:"action"` // "POST /v1/instances", "machine.offline", "audit.purge"
	Target    string    `json:"target,omitempty"`
	Source    string    `json:"source,omitempty"` // client address
	RequestID string    `json:"request_id,omitempty"`
	Result    string    `json:"result"` // "201", "404 not_found", "ok"
	Detail    string    `json:"detail,omitempty"`
	PrevHash  string    `json:"prev_hash"`
	Hash      string    `json:"hash"`
}

// AuditCheckpoint is a signed statement that the chain's entry Seq has Hash.
// PrevSeq is the Seq of the checkpoint before it (0 for the first), so that
// checkpoints chain too. Signature is ed25519 over the canonical text of
// Seq, Hash, PrevSeq and At; KeyID names the public key.
type AuditCheckpoint struct {
	Seq       int64     `json:"seq"`
	Hash      string    `json:"hash"`
	PrevSeq   int64     `json:"prev_seq"`
	At        time.Time `json:"at"`
	KeyID     string    `json:"key_id"`
	Signature string    `json:"signature"`
}

// AuditFilter selects audit entries; nil fields mean "any". Entries come
// newest first.
type AuditFilter struct {
	AccountID *int64
	BeforeSeq *int64 // only entries with a smaller Seq (paging)
	Limit     int
}

// AuditReport is the result of verifying the audit log. OK is true when no
// problem was found; each problem names the entry and the kind of tampering
// it points to.
type AuditReport struct {
	OK               bool      `json:"ok"`
	Entries          int       `json:"entries"`
	FirstSeq         int64     `json:"first_seq"`
	LastSeq          int64     `json:"last_seq"`
	Checkpoints      int       `json:"checkpoints"`
	LastCheckpoint   int64     `json:"last_checkpoint_seq"`
	LastCheckpointAt time.Time `json:"last_checkpoint_at"`
	Unanchored       int       `json:"unanchored"` // entries after the newest checkpoint
	PurgedThrough    int64     `json:"purged_through,omitempty"`
	PublicKey        string    `json:"public_key"` // ed25519, hex
	Problems         []string  `json:"problems,omitempty"`
}
