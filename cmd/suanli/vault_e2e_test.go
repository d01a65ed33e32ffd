package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/agent/vault/vaulttest"
)

// TestEncryptedDiskEndToEnd runs `suanli up --disk-encryption on` (a real
// loop image and the kernel's fscrypt): the offer says encrypted_disk, a
// workload's disk and volume hold no plaintext on the host's image, and
// destroy and volume delete are crypto-erases that the renter reads in the
// audit log.
func TestEncryptedDiskEndToEnd(t *testing.T) {
	vaulttest.Require(t)
	home := t.TempDir()
	t.Cleanup(func() { vaulttest.Unmount(t, filepath.Join(home, "agent", "vault")) }) // after up is stopped
	m, _ := startUp(t, home, "--disk-encryption", "on", "--vault-size", "1")
	var offers suanli.OfferResult
	m.mustJSON(&offers, "search", "encrypted_disk=true")
	if len(offers.Offers) != 1 {
		t.Fatalf("search encrypted_disk=true found %d offers, want the local machine", len(offers.Offers))
	}
	if _, err := m.run("volume", "create", "data", "--machine", "1", "--size", "1"); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("plain-%d-text", time.Now().UnixNano())
	var in suanli.Instance
	m.mustJSON(&in, "create", "1", "--image", "x", "--gpus", "1", "-v", "data:/data", "--",
		"sh", "-c", "for i in $(seq 500); do echo "+marker+"; done > disk.txt; cp disk.txt data/; sync; echo wrote; sleep 600")
	waitLog(t, m, fmt.Sprint(in.ID), "wrote", 1)
	exec.Command("sync").Run()
	img, err := os.ReadFile(filepath.Join(home, "agent", "vault", "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(img), marker) {
		t.Fatalf("the workload's plaintext is on the host's image")
	}
	if _, err := m.run("destroy", fmt.Sprint(in.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.run("volume", "delete", "data"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var evs []suanli.AuditEvent
		m.mustJSON(&evs, "audit", "ls", "--limit", "100")
		got := map[string]string{}
		for _, e := range evs {
			if strings.HasSuffix(e.Action, ".released") {
				got[e.Action] = e.Detail
			}
		}
		inst, vol := got["instance.released"], got["volume.released"]
		if strings.HasPrefix(inst, "crypto-erase") && strings.HasPrefix(vol, "crypto-erase") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("release entries in the audit log: instance %q, volume %q; want crypto-erases", inst, vol)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if objs, _ := os.ReadDir(filepath.Join(home, "agent", "vault", "mnt", "objects")); len(objs) != 0 {
		t.Errorf("%d objects left in the vault after release", len(objs))
	}
}
