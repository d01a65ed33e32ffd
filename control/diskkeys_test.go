package control_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// TestDiskKeys: a machine that encrypts at rest gets a key per instance
// disk and per volume, the same one on every sync; a machine that does not
// gets none; destroying, deleting and moving destroy the stored key; the
// agent's release reports reach the owner's audit log.
func TestDiskKeys(t *testing.T) {
	f := newFixture(t, suanli.Dollars(100), control.Config{})
	ctx := context.Background()
	hw := suanli.Hardware{Hostname: "rig", CPUArch: "amd64", CPUCores: 8, RAMMB: 32 << 10, DiskFreeGB: 500, DiskEncryption: "fscrypt v2 (test)",
		GPUs: []suanli.GPU{{Index: 0, UUID: "GPU-0", Name: "RTX 4090", MemoryMB: 24564}, {Index: 1, UUID: "GPU-1", Name: "RTX 4090", MemoryMB: 24564}}}
	sync := func(agent context.Context, r *suanli.SyncRequest) *suanli.SyncResponse {
		t.Helper()
		resp, err := f.svc.Sync(agent, r)
		if err != nil {
			t.Fatalf("sync: %v", err)
		}
		return resp
	}
	sync(f.agent, &suanli.SyncRequest{Hardware: &hw})
	in := f.create(t, suanli.InstanceCreate{GPUCount: 1})
	vol, err := f.svc.CreateVolume(f.renter, suanli.VolumeCreate{MachineID: f.machine, Name: "data", SizeGB: 10})
	if err != nil {
		t.Fatal(err)
	}
	first := sync(f.agent, &suanli.SyncRequest{})
	if len(first.Instances) != 1 || len(first.Instances[0].DiskKey) != 64 {
		t.Fatalf("instance specs %+v: want one with a 64-byte disk key", first.Instances)
	}
	if len(first.Volumes) != 1 || len(first.Volumes[0].Key) != 64 || bytes.Equal(first.Volumes[0].Key, first.Instances[0].DiskKey) {
		t.Fatalf("volume specs %+v: want one with its own 64-byte key", first.Volumes)
	}
	again := sync(f.agent, &suanli.SyncRequest{})
	if !bytes.Equal(again.Instances[0].DiskKey, first.Instances[0].DiskKey) || !bytes.Equal(again.Volumes[0].Key, first.Volumes[0].Key) {
		t.Errorf("keys changed between syncs: the disk written under the first would be unreadable")
	}

	// A machine that does not encrypt gets no keys.
	_, bAgent := f.addMachine(t, 900_000)
	if resp := sync(bAgent, &suanli.SyncRequest{}); len(resp.Volumes) != 0 || len(resp.Instances) != 0 {
		t.Fatalf("machine B holds %+v", resp)
	}

	// Stored keys are sealed: the plaintext is nowhere in the database rows.
	noMint := func(int64) ([]byte, error) { return nil, errors.New("minted a key for an object that is gone") }
	stored, err := f.svc.Store.DiskKeys(ctx, suanli.ReleaseInstance, []int64{in.ID}, noMint, f.clk.Now())
	if err != nil || len(stored[in.ID]) == 0 || bytes.Contains(stored[in.ID], first.Instances[0].DiskKey) {
		t.Fatalf("stored key %x (%v): want a sealed key that does not contain the plain one", stored[in.ID], err)
	}

	// Destroy and delete: the stored keys go in the same transaction.
	if _, err := f.svc.DestroyInstance(f.renter, in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.DeleteVolume(f.renter, vol.Name); err != nil {
		t.Fatal(err)
	}
	for kind, id := range map[string]int64{suanli.ReleaseInstance: in.ID, suanli.ReleaseVolume: vol.ID} {
		got, err := f.svc.Store.DiskKeys(ctx, kind, []int64{id}, noMint, f.clk.Now())
		if err != nil || len(got) != 0 {
			t.Errorf("%s %d after release: keys %v (%v), want none and none minted", kind, id, got, err)
		}
	}
	if resp := sync(f.agent, &suanli.SyncRequest{}); len(resp.Instances) != 0 || len(resp.Volumes) != 0 {
		t.Errorf("after release the machine still holds %+v %+v", resp.Instances, resp.Volumes)
	}

	// The agent reports what it did; the renter reads it in the audit log.
	// A report about an object that was never on this machine is dropped.
	other := f.create(t, suanli.InstanceCreate{GPUCount: 1})
	if _, err := f.svc.DestroyInstance(f.renter, other.ID); err != nil {
		t.Fatal(err)
	}
	sync(bAgent, &suanli.SyncRequest{Releases: []suanli.Release{{Kind: suanli.ReleaseInstance, ID: other.ID, Method: suanli.ReleaseDelete, Detail: "forged", At: f.clk.Now()}}})
	sync(f.agent, &suanli.SyncRequest{Releases: []suanli.Release{
		{Kind: suanli.ReleaseInstance, ID: in.ID, Method: suanli.ReleaseCryptoErase, Detail: "key removed; 3 files deleted", At: f.clk.Now()},
		{Kind: suanli.ReleaseVolume, ID: vol.ID, Method: suanli.ReleaseCryptoErase, Detail: "key removed; 1 file deleted", At: f.clk.Now()},
	}})
	evs, err := f.svc.FindAuditEvents(f.renter, suanli.AuditFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, e := range evs {
		if strings.HasSuffix(e.Action, ".released") {
			found[e.Target] = e.Detail
		}
	}
	if d := found["instance "+strconv.FormatInt(in.ID, 10)]; !strings.Contains(d, "crypto-erase") || !strings.Contains(d, "3 files deleted") {
		t.Errorf("instance release in the audit log: %q", d)
	}
	if d := found["volume "+strconv.FormatInt(vol.ID, 10)]; !strings.Contains(d, "crypto-erase") {
		t.Errorf("volume release in the audit log: %q", d)
	}
	if d, ok := found["instance "+strconv.FormatInt(other.ID, 10)]; ok {
		t.Errorf("another machine's report was recorded: %q", d)
	}
}
