package control

import (
	"context"
	"sync"
	"time"

	"github.com/suanli/suanli"
)

// FindAuditEvents lists audit entries, newest first: an operator sees every
// entry (or one account's, with f.AccountID); anyone else sees the entries
// by or about the account they act as.
func (s *Service) FindAuditEvents(ctx context.Context, f suanli.AuditFilter) ([]*suanli.AuditEvent, error) {
	p, err := principal(ctx, suanli.ScopeAuditRead)
	if err != nil {
		return nil, err
	}
	if p.Role != suanli.RoleOperator || !p.Can(suanli.ScopeAdmin) {
		f.AccountID = &p.AccountID
	}
	return s.Store.FindAuditEvents(ctx, f)
}

// VerifyAudit checks the audit chain and its checkpoints. Operators only.
func (s *Service) VerifyAudit(ctx context.Context) (*suanli.AuditReport, error) {
	if _, err := operator(ctx, "verify the audit log"); err != nil {
		return nil, err
	}
	return s.Audit.Verify(ctx)
}

// RecordAudit appends e to the audit log. A failure is logged, not
// returned: the mutation it records has already happened.
func (s *Service) RecordAudit(ctx context.Context, e suanli.AuditEvent) {
	if _, err := s.Audit.Record(context.WithoutCancel(ctx), e); err != nil {
		s.Logger.Error("audit record", "action", e.Action, "target", e.Target, "request_id", e.RequestID, "err", err)
	}
}

// AuditStatusTTL is how long AuditStatus reuses a verification: each one
// reads the whole log, so callers share one a minute.
const AuditStatusTTL = time.Minute

// AuditStatus is what any account may know of the audit chain's
// integrity: whether the whole chain (every account's entries and the
// signed checkpoints) verified, when, and the newest checkpoint's time and
// key. It leaves out what names other accounts' activity: the entries, how
// many there are, and the problems found (each names an entry).
type AuditStatus struct {
	OK               bool      `json:"ok"`
	VerifiedAt       time.Time `json:"verified_at"`
	LastCheckpointAt time.Time `json:"last_checkpoint_at"` // zero: no checkpoint signed yet
	PublicKey        string    `json:"public_key"`         // the checkpoints' ed25519 key, hex
}

// auditStatusCache holds the last AuditStatus for AuditStatusTTL.
type auditStatusCache struct {
	mu sync.Mutex
	st *AuditStatus
}

// AuditStatus verifies the whole audit chain for any caller who may read
// the audit log, reporting only AuditStatus; a verification is reused for
// AuditStatusTTL (callers meanwhile wait for the one running). Operators
// get the full report from VerifyAudit.
func (s *Service) AuditStatus(ctx context.Context) (*AuditStatus, error) {
	if _, err := principal(ctx, suanli.ScopeAuditRead); err != nil {
		return nil, err
	}
	c := &s.auditStatus
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.now()
	if c.st != nil && now.Sub(c.st.VerifiedAt) < AuditStatusTTL && !now.Before(c.st.VerifiedAt) {
		st := *c.st
		return &st, nil
	}
	rep, err := s.Audit.Verify(ctx)
	if err != nil {
		return nil, err
	}
	c.st = &AuditStatus{OK: rep.OK, VerifiedAt: now, LastCheckpointAt: rep.LastCheckpointAt, PublicKey: rep.PublicKey}
	st := *c.st
	return &st, nil
}
