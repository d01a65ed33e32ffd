package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// TestBillingByTag: the billing page charts spend by the value of a tag
// key, the most used key first, another key on request; spend without the
// tag is (none), and each chart's rows add up to the period's spend.
func TestBillingByTag(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	mid, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:4", price: 400_000, minBid: 200_000})
	m.svc.SetClock(m.clock.now)
	now := m.clock.now()
	for _, tags := range []map[string]string{{"team": "ml", "env": "prod"}, {"team": "ml"}, {"team": "web"}} {
		in, err := m.svc.CreateInstance(as(m.renterID), suanli.InstanceCreate{OfferID: mid, Image: "busybox", GPUCount: 1, Cmd: []string{"sleep", "600"}, Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.svc.Store.UpdateInstance(context.Background(), in.ID, now.Add(-time.Hour), now, func(in *suanli.Instance) error {
			in.Status = suanli.StatusRunning
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	m.clock.advance(2 * time.Hour) // two hours of spend to settle
	now = m.clock.now()
	if _, err := m.svc.Store.Settle(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	team, err := m.svc.CostReport(as(m.renterID), "tag:team", now.AddDate(0, 0, -30))
	if err != nil {
		t.Fatal(err)
	}
	if len(team.Rows) == 0 || team.Total == 0 {
		t.Fatalf("no spend to chart: %+v", team)
	}
	b := m.browser()
	b.signIn(m.renterKey)
	p := b.get("/billing")
	i := strings.Index(p.body, `id="by-tag"`)
	if i < 0 {
		t.Fatalf("no by-tag section\n%s", p.body)
	}
	sec := p.body[i:]
	sec = sec[:strings.Index(sec, "</section>")]
	for _, want := range []string{"By tag <code>team</code>", `<option value="team" selected>`, `<option value="env">`, `<th scope="row">ml</th>`,
		`<th scope="row">web</th>`, `<svg class="share"`, "suanli cost report --by tag:team"} {
		if !strings.Contains(sec, want) {
			t.Errorf("by-tag section lacks %q\n%s", want, sec)
		}
	}
	for _, r := range team.Rows {
		if !strings.Contains(sec, r.Amount.String()) {
			t.Errorf("by-tag section lacks %s's %s", r.Key, r.Amount)
		}
	}
	p = b.get("/billing?tag=env")
	sec = p.body[strings.Index(p.body, `id="by-tag"`):]
	sec = sec[:strings.Index(sec, "</section>")]
	for _, want := range []string{"By tag <code>env</code>", `<option value="env" selected>`, `<th scope="row">prod</th>`, `<th scope="row">(none)</th>`} {
		if !strings.Contains(sec, want) {
			t.Errorf("?tag=env: by-tag section lacks %q\n%s", want, sec)
		}
	}

	// Without tags there is no chart, and the page says how to get one.
	pv := m.browser()
	pv.signIn(m.providerKey)
	contains(t, pv.get("/billing"), "None of your instances has tags")
}
