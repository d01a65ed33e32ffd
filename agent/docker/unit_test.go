package docker_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/jsonstream"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/docker"
)

// These tests need no daemon.

func TestGPURequests(t *testing.T) {
	tests := []struct {
		name string
		spec suanli.InstanceSpec
		want []container.DeviceRequest
	}{
		{"none", suanli.InstanceSpec{}, nil},
		{"simulated", suanli.InstanceSpec{Simulated: true, GPUIndexes: []int{0, 1}}, nil},
		{"by index", suanli.InstanceSpec{GPUIndexes: []int{0, 3}},
			[]container.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"0", "3"}, Capabilities: [][]string{{"gpu"}}}}},
		{"uuid wins", suanli.InstanceSpec{GPUIndexes: []int{1}, GPUUUIDs: []string{"GPU-abc"}},
			[]container.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"GPU-abc"}, Capabilities: [][]string{{"gpu"}}}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, docker.GPURequests(tt.spec)); diff != "" {
			t.Errorf("%s: GPURequests mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestRequestedPorts(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", nil, false},
		{"8080", []int{8080}, false},
		{"8080, 22,22/tcp", []int{22, 8080}, false},
		{"22 80", []int{22, 80}, false},
		{"0", nil, true},
		{"70000", nil, true},
		{"ssh", nil, true},
		{"53/udp", nil, true},
	}
	for _, tt := range tests {
		got, err := docker.RequestedPorts(suanli.InstanceSpec{Env: map[string]string{docker.EnvPorts: tt.in}})
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("RequestedPorts(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && suanli.ErrorCode(err) != suanli.EINVALID {
			t.Errorf("RequestedPorts(%q): error code %s, want invalid", tt.in, suanli.ErrorCode(err))
		}
	}
}

func TestPullMessage(t *testing.T) {
	dl := func(id string, cur, total int64) jsonstream.Message {
		return jsonstream.Message{ID: id, Status: "Downloading", Progress: &jsonstream.Progress{Current: cur, Total: total}}
	}
	st := func(id, s string) jsonstream.Message { return jsonstream.Message{ID: id, Status: s} }
	tests := []struct {
		name string
		msgs []jsonstream.Message
		want string
	}{
		{"layers known", []jsonstream.Message{st("a", "Pulling fs layer"), st("b", "Pulling fs layer")}, "pulling 2 layers"},
		{"partial", []jsonstream.Message{dl("a", 450e6, 900e6), dl("b", 90e6, 300e6)}, "pulling 45% of 1.2 GB"},
		{"size unknown for one", []jsonstream.Message{st("b", "Waiting"), dl("a", 5e6, 10e6)}, "pulling 50% of 10 MB (+1 layers of unknown size)"},
		{"cached layer not counted", []jsonstream.Message{st("c", "Already exists"), dl("a", 1e6, 4e6)}, "pulling 25% of 4.0 MB"},
		{"extracting", []jsonstream.Message{dl("a", 1e6, 2e6), st("a", "Download complete"), st("c", "Already exists")}, "extracting 2.0 MB"},
	}
	for _, tt := range tests {
		if got := docker.PullMessage(tt.msgs); got != tt.want {
			t.Errorf("%s: PullMessage = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNormalizeArch(t *testing.T) {
	for in, want := range map[string]string{"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "s390x": "s390x"} {
		if got := docker.NormalizeArch(in); got != want {
			t.Errorf("NormalizeArch(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTelemetryOf(t *testing.T) {
	for _, tt := range []struct {
		name string
		ops  []container.BlkioStatEntry
		want suanli.Telemetry
	}{
		{"cgroup v1", []container.BlkioStatEntry{
			{Major: 254, Op: "Read", Value: 4096}, {Major: 254, Op: "Write", Value: 1 << 20},
			{Major: 254, Op: "Sync", Value: 1 << 20}, {Major: 254, Op: "Total", Value: 1<<20 + 4096},
			{Major: 8, Op: "Write", Value: 10},
		}, suanli.Telemetry{DiskReadBytes: 4096, DiskWriteBytes: 1<<20 + 10, NetRxBytes: 300, NetTxBytes: 5000}},
		{"cgroup v2", []container.BlkioStatEntry{
			{Major: 254, Op: "read", Value: 7}, {Major: 254, Op: "write", Value: 9},
		}, suanli.Telemetry{DiskReadBytes: 7, DiskWriteBytes: 9, NetRxBytes: 300, NetTxBytes: 5000}},
		{"none reported", nil, suanli.Telemetry{NetRxBytes: 300, NetTxBytes: 5000}},
	} {
		s := &container.StatsResponse{
			BlkioStats: container.BlkioStats{IoServiceBytesRecursive: tt.ops},
			Networks: map[string]container.NetworkStats{
				"eth0": {RxBytes: 100, TxBytes: 4000}, "eth1": {RxBytes: 200, TxBytes: 1000},
			},
		}
		if got := docker.TelemetryOf(s); got != tt.want {
			t.Errorf("%s: TelemetryOf = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
