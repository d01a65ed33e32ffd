package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
)

// TestVolumeEndToEnd: a volume outlives the instance that wrote to it, is
// attached to the next one, is billed per GB-month, and is wiped on delete.
func TestVolumeEndToEnd(t *testing.T) {
	home := t.TempDir()
	m, _ := startUp(t, home)
	// A steep disk price, so that seconds of a 5 GB volume cost micro-dollars.
	if _, err := m.run("host", "list", "1", "--price-disk", "100"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.run("volume", "create", "data", "--machine", "1", "--size", "5"); err != nil {
		t.Fatal(err)
	}
	var in suanli.Instance
	m.mustJSON(&in, "create", "1", "--image", "x", "--gpus", "1", "-v", "data:/data", "--", "sh", "-c", "echo precious > data/result.txt; echo wrote")
	waitStatus(t, m, fmt.Sprint(in.ID), suanli.StatusExited, 20*time.Second)
	if _, err := m.run("destroy", fmt.Sprint(in.ID)); err != nil {
		t.Fatal(err)
	}
	var in2 suanli.Instance
	m.mustJSON(&in2, "create", "1", "--image", "x", "--gpus", "1", "-v", "data:/data", "--", "cat", "data/result.txt")
	waitStatus(t, m, fmt.Sprint(in2.ID), suanli.StatusExited, 20*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := m.run("logs", fmt.Sprint(in2.ID))
		if out == "precious\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second instance's log = %q, want the first one's file", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := m.run("volume", "delete", "data"); err == nil {
		t.Fatalf("deleting an attached volume succeeded")
	}
	if _, err := m.run("destroy", fmt.Sprint(in2.ID)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a settlement passes: the volume meter posts
	var vs []suanli.Volume
	m.mustJSON(&vs, "volume", "ls")
	if len(vs) != 1 || vs[0].CostSoFar <= 0 {
		t.Fatalf("volumes = %+v, want one with a cost", vs)
	}
	if _, err := m.run("volume", "delete", "data"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "agent", "volumes", fmt.Sprint(vs[0].ID))
	deadline = time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("volume directory %s still exists after delete", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var charges suanli.ChargeSummary
	m.mustJSON(&charges, "billing", "charges")
	if charges.ByKind[suanli.MeterVolume] <= 0 {
		t.Errorf("no volume charges: %+v", charges.ByKind)
	}
	out, _ := m.run("volume", "ls", "--all")
	if !strings.Contains(out, "deleted") {
		t.Errorf("volume ls --all = %q", out)
	}
}

// TestVolumeTagsThroughTheBinary: volume create takes --project and
// repeated --tag, volume ls shows them, and the volume's storage is
// reported under its tag by cost report --by tag:KEY.
func TestVolumeTagsThroughTheBinary(t *testing.T) {
	m, _ := startUp(t, t.TempDir())
	if _, err := m.run("host", "list", "1", "--price-disk", "100"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.run("volume", "create", "bad", "--machine", "1", "--size", "5", "--tag", "team"); err == nil || !strings.Contains(err.Error(), "write KEY=VALUE") {
		t.Errorf("volume create --tag team: %v, want a usage error", err)
	}
	if _, err := m.run("volume", "create", "data", "--machine", "1", "--size", "5", "--project", "vision", "--tag", "team=ml", "--tag", "env=prod"); err != nil {
		t.Fatal(err)
	}
	out, err := m.run("volume", "ls")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "PROJECT") || !strings.Contains(lines[0], "TAGS") ||
		!strings.Contains(lines[1], "vision") || !strings.Contains(lines[1], "env=prod team=ml") {
		t.Errorf("volume ls =\n%s\nwant a PROJECT and a TAGS column with vision and env=prod team=ml", out)
	}
	var vs []suanli.Volume
	m.mustJSON(&vs, "volume", "ls")
	if len(vs) != 1 || vs[0].Tags["team"] != "ml" || vs[0].Tags["env"] != "prod" || vs[0].Project != "vision" {
		t.Fatalf("volume ls --json = %+v", vs)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var rep suanli.CostReport
		m.mustJSON(&rep, "cost", "report", "--by", "tag:team")
		if len(rep.Rows) == 1 && rep.Rows[0].Key == "ml" && rep.Rows[0].Amount > 0 && rep.Rows[0].Amount == rep.Total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cost report --by tag:team = %+v, want all of it under ml", rep)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
