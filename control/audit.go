package control

import (
	"context"

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
