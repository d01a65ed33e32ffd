package docker

import "github.com/moby/moby/api/types/jsonstream"

// Internals exposed to the external tests.
var (
	GPURequests    = gpuRequests
	RequestedPorts = requestedPorts
	FormatBytes    = formatBytes
	NormalizeArch  = normalizeArch
)

// PullMessage folds pull progress messages and returns the Status message.
func PullMessage(msgs []jsonstream.Message) string {
	var p pullProgress
	for _, m := range msgs {
		p.update(m)
	}
	return p.String()
}
