package control_test

import (
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// TestAuditStatusForEveryone: any account that may read the audit log
// learns whether the whole chain verifies and when it was last
// checkpointed, and nothing else; a verification is reused for
// AuditStatusTTL, so tampering shows after it at the latest.
func TestAuditStatusForEveryone(t *testing.T) {
	f := newFixture(t, suanli.Dollars(10), control.Config{})
	for _, a := range []string{"test.one", "test.two", "test.three"} {
		f.svc.RecordAudit(f.host, suanli.AuditEvent{AccountID: 1, Action: a, Result: "ok"})
	}
	if _, err := f.svc.Audit.Checkpoint(f.renter); err != nil {
		t.Fatal(err)
	}
	st, err := f.svc.AuditStatus(f.renter)
	if err != nil {
		t.Fatal(err)
	}
	now := f.clk.Now()
	if !st.OK || !st.VerifiedAt.Equal(now) || !st.LastCheckpointAt.Equal(now) || st.PublicKey == "" {
		t.Fatalf("AuditStatus = %+v, want OK verified and checkpointed at %s", st, now)
	}
	if _, err := f.svc.AuditStatus(principalCtx(f.renterID, suanli.RoleUser, suanli.ScopeInstanceRead)); suanli.ErrorCode(err) != suanli.EFORBIDDEN {
		t.Errorf("AuditStatus without the audit scope: %v, want forbidden", err)
	}

	if _, err := f.svc.Store.SQL().Exec(`UPDATE audit_events SET result = 'edited' WHERE action = 'test.two'`); err != nil {
		t.Fatal(err)
	}
	f.clk.Add(control.AuditStatusTTL / 2)
	if st, err := f.svc.AuditStatus(f.renter); err != nil || !st.OK || !st.VerifiedAt.Equal(now) {
		t.Errorf("within the TTL AuditStatus = %+v, %v, want the earlier verification reused", st, err)
	}
	f.clk.Add(control.AuditStatusTTL)
	st, err = f.svc.AuditStatus(f.renter)
	if err != nil {
		t.Fatal(err)
	}
	if st.OK || !st.VerifiedAt.Equal(f.clk.Now()) {
		t.Errorf("after an entry was edited AuditStatus = %+v, want not OK, verified now", st)
	}
}
