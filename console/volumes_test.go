package console_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/suanli/suanli/control"
)

// TestVolumeFormTags: the volume form's tags (one KEY=value a line) reach
// the volume, and the volumes page shows them with its project.
func TestVolumeFormTags(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	mid, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:2", price: 400_000, minBid: 200_000})
	b := m.browser()
	tok := b.signIn(m.renterKey)
	p := b.post("/volumes", url.Values{"csrf": {tok}, "name": {"data"}, "machine_id": {strconv.FormatInt(mid, 10)}, "size_gb": {"5"},
		"project": {"vision"}, "tags": {"team=ml\r\n\r\nenv=prod\r\n"}})
	if p.status >= 400 {
		t.Fatalf("POST /volumes: %d\n%s", p.status, p.body)
	}
	vs, err := m.svc.FindVolumes(as(m.renterID), false)
	if err != nil || len(vs) != 1 {
		t.Fatalf("volumes %v (%v), want one", vs, err)
	}
	if diff := cmp.Diff(map[string]string{"team": "ml", "env": "prod"}, vs[0].Tags); diff != "" || vs[0].Project != "vision" {
		t.Errorf("volume project %q, tags (-want +got):\n%s", vs[0].Project, diff)
	}
	page := b.get("/volumes")
	for _, want := range []string{">vision<", ">team=ml<", ">env=prod<"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("volumes page lacks %s", want)
		}
	}
}
