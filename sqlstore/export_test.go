package sqlstore

import "context"

// SetWarmSlice makes WarmBook read n meters per transaction until the
// returned func restores it.
func SetWarmSlice(n int) func() {
	old := warmSlice
	warmSlice = n
	return func() { warmSlice = old }
}

// SetCopyTamper makes Copy run fn in the target's transaction after the
// rows are copied and before they are verified, until the returned func
// restores it.
func SetCopyTamper(fn func(ctx context.Context, exec func(query string, args ...any) error) error) func() {
	copyTamper = func(ctx context.Context, tx *Tx) error {
		return fn(ctx, func(q string, args ...any) error { _, err := tx.exec(ctx, q, args...); return err })
	}
	return func() { copyTamper = nil }
}
