package gctune_test

import (
	"runtime/debug"
	"testing"

	"github.com/suanli/suanli/internal/gctune"
)

func TestApply(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	if got := gctune.Apply(250); got != 250 || debug.SetGCPercent(250) != 250 {
		t.Errorf("without GOGC: Apply(250) = %d, want the target set to 250", got)
	}
	// The operator's GOGC wins (the runtime read it at start; here it is
	// stood in for by the target already in force).
	debug.SetGCPercent(150)
	t.Setenv("GOGC", "150")
	if got := gctune.Apply(400); got != 150 || debug.SetGCPercent(150) != 150 {
		t.Errorf("with GOGC=150: Apply(400) = %d, want 150 kept", got)
	}
}
