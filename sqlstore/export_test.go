package sqlstore

// SetWarmSlice makes WarmBook read n meters per transaction until the
// returned func restores it.
func SetWarmSlice(n int) func() {
	old := warmSlice
	warmSlice = n
	return func() { warmSlice = old }
}
