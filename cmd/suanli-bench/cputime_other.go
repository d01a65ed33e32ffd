//go:build !linux

package main

import "time"

// threadCPU is not available here: the report shows wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
