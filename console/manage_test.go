package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// TestManageFormErrors checks the budget, volume, SSH key, allowlist and
// payout forms: a refused submission comes back as the page with the
// service's message and the input marked, and changes nothing; a budget's
// webhook secret is never shown back; deletes without confirmed=yes ask on
// a page of their own.
func TestManageFormErrors(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	mid, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:2", price: 400_000, minBid: 200_000})
	b := m.browser()
	tok := b.signIn(m.renterKey)
	machine := strconv.FormatInt(mid, 10)

	invalid := func(field string) string { return `name="` + field + `"` }
	for _, c := range []struct {
		path   string
		form   url.Values
		status int
		msg    string
		field  string // the input marked aria-invalid
	}{
		{"/billing/budgets", url.Values{"name": {"x"}, "amount": {"lots"}, "webhook_secret": {"hunter2-secret"}}, 400, "amount: ", "amount"},
		{"/billing/budgets", url.Values{"name": {"x"}, "amount": {"5"}, "scope": {"team"}}, 400, "use account, project:NAME or tag:KEY=VALUE", "scope"},
		{"/billing/budgets", url.Values{"name": {"x"}, "amount": {"5"}, "webhook_url": {"ftp://x"}, "webhook_secret": {"hunter2-secret"}}, 400, "is not an http(s) URL", "webhook_url"},
		{"/billing/budgets", url.Values{"name": {"x"}, "amount": {"5"}, "thresholds": {"50, lots"}}, 400, "is not a percentage", "thresholds"},
		{"/billing/budgets", url.Values{"name": {"x"}, "amount": {"5"}, "period": {"custom"}, "start": {"2026-12-01"}}, 400, "a custom period needs a start and an end", "end"},
		{"/billing/budgets", url.Values{"name": {"x"}, "amount": {"5"}, "action": {"explode"}}, 400, "use alert, block or stop", "action"},
		{"/volumes", url.Values{"name": {"Bad Name"}, "machine_id": {machine}, "size_gb": {"5"}}, 400, "use 1-63 lowercase letters", "name"},
		{"/volumes", url.Values{"name": {"data"}, "machine_id": {machine}, "size_gb": {"0"}}, 400, "give a size in GB", "size_gb"},
		{"/volumes", url.Values{"name": {"data"}, "size_gb": {"5"}}, 400, "choose the machine", "machine_id"},
		{"/volumes", url.Values{"name": {"data"}, "machine_id": {machine}, "size_gb": {"5000"}}, 409, "GB of free disk", ""},
		{"/volumes", url.Values{"name": {"data"}, "machine_id": {machine}, "size_gb": {"5"}, "tags": {"team"}}, 400, "is not NAME=value", "tags"},
		{"/volumes", url.Values{"name": {"data"}, "machine_id": {machine}, "size_gb": {"5"}, "tags": {"my team=ml"}}, 400, "keys are 1-64 characters", "tags"},
		{"/account/ssh-keys", url.Values{"public_key": {"not a key"}}, 400, "not an SSH public key", "public_key"},
		{"/account/allowlist", url.Values{"cidr": {"nowhere"}}, 400, "give an address", "cidr"},
	} {
		c.form.Set("csrf", tok)
		p := b.post(c.path, c.form)
		if p.status != c.status || !strings.Contains(p.body, c.msg) {
			t.Errorf("POST %s %v: %d, want %d with %q\n%s", c.path, c.form, p.status, c.status, c.msg, p.body)
			continue
		}
		if c.field != "" && !strings.Contains(p.body, invalid(c.field)+` `) {
			t.Errorf("POST %s %v: the form is not shown again", c.path, c.form)
		}
		if c.field != "" && !marked(p.body, c.field) {
			t.Errorf("POST %s %v: input %s is not marked invalid", c.path, c.form, c.field)
		}
		if strings.Contains(p.body, "hunter2-secret") {
			t.Errorf("POST %s: the webhook secret is on the page", c.path)
		}
	}
	if bs, _ := m.svc.FindBudgets(as(m.renterID)); len(bs) != 0 {
		t.Errorf("refused budgets created %d", len(bs))
	}
	if vs, _ := m.svc.FindVolumes(as(m.renterID), true); len(vs) != 0 {
		t.Errorf("refused volumes created %d", len(vs))
	}

	// A budget with a secret: editing shows the URL, never the secret, and
	// a save without one keeps it.
	if _, err := m.svc.SetBudget(as(m.renterID), suanli.Budget{Name: "ml", Scope: "project:ml", Amount: suanli.Dollars(50),
		WebhookURL: "https://hooks.example/x", WebhookSecret: "hunter2-secret"}); err != nil {
		t.Fatal(err)
	}
	p := b.get("/billing?edit=ml")
	contains(t, p, `value="ml"`, `value="project:ml"`, `value="50.00"`, "https://hooks.example/x", "leave it empty to keep the current one")
	if strings.Contains(p.body, "hunter2-secret") {
		t.Errorf("the budget's webhook secret is on the billing page")
	}

	// Deletes without confirmed=yes ask first and change nothing.
	key, err := m.svc.AddSSHKey(as(m.renterID), "laptop", newPublicKey(t))
	if err != nil {
		t.Fatal(err)
	}
	nw, err := m.svc.AddAllowedNetwork(as(m.renterID), "203.0.113.0/24", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.svc.CreateVolume(as(m.renterID), suanli.VolumeCreate{MachineID: mid, Name: "data", SizeGB: 5}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		form url.Values
		text string
	}{
		{"/billing/budgets/delete", url.Values{"name": {"ml"}}, `Delete budget &#34;ml&#34;?`},
		{"/volumes/delete", url.Values{"name": {"data"}}, "overwrites and removes its data. This cannot be undone."},
		{"/account/ssh-keys/" + strconv.FormatInt(key.ID, 10) + "/delete", nil, "No new certificates are issued for it"},
		{"/account/allowlist/" + strconv.FormatInt(nw.ID, 10) + "/delete", nil, "It is the last entry"},
	} {
		form := url.Values{"csrf": {tok}}
		for k, v := range c.form {
			form[k] = v
		}
		p := b.post(c.path, form)
		if p.status != 200 || !strings.Contains(p.body, `name="confirmed" value="yes"`) || !strings.Contains(p.body, c.text) ||
			!strings.Contains(p.body, `action="`+c.path+`"`) {
			t.Errorf("unconfirmed POST %s: %d\n%s", c.path, p.status, p.body)
		}
		for k := range c.form {
			if !strings.Contains(p.body, `name="`+k+`" value="`+c.form.Get(k)+`"`) {
				t.Errorf("unconfirmed POST %s: the confirmation does not carry %s", c.path, k)
			}
		}
	}
	if bs, _ := m.svc.FindBudgets(as(m.renterID)); len(bs) != 1 {
		t.Errorf("an unconfirmed delete deleted the budget")
	}
	if vs, _ := m.svc.FindVolumes(as(m.renterID), false); len(vs) != 1 {
		t.Errorf("an unconfirmed delete deleted the volume")
	}
	if ks, _ := m.svc.FindSSHKeys(as(m.renterID)); len(ks) != 1 {
		t.Errorf("an unconfirmed remove removed the key")
	}
	if ns, _ := m.svc.FindAllowedNetworks(as(m.renterID)); len(ns) != 1 {
		t.Errorf("an unconfirmed remove removed the network")
	}

	// Payouts: nothing earned yet, then a malformed amount.
	pv := m.browser()
	ptok := pv.signIn(m.providerKey)
	for _, c := range []struct {
		amount, msg string
		status      int
	}{{"", "no earnings to pay out", 402}, {"5", "earnings available are $0.00", 402}, {"-1", "give a positive amount", 400}, {"lots", "amount: ", 400}} {
		p := pv.post("/hosts/payout", url.Values{"csrf": {ptok}, "amount": {c.amount}})
		if p.status != c.status || !strings.Contains(p.body, c.msg) || !strings.Contains(p.body, `id="payout-error"`) {
			t.Errorf("payout %q: %d, want %d with %q\n%s", c.amount, p.status, c.status, c.msg, p.body)
		}
	}
}

// TestRentWithVolume checks the create form's volume picker: the renter's
// volumes on the offer's machine are offered, a ticked one is mounted where
// the form says, and a bad path comes back naming the picker.
func TestRentWithVolume(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true}})
	mid, _, _ := m.addMachine(machineSpec{host: "rig", gpus: "RTX 4090:2", price: 400_000, minBid: 200_000})
	other, _, _ := m.addMachine(machineSpec{host: "other", gpus: "RTX 4090:1", price: 400_000, minBid: 200_000})
	for _, v := range []suanli.VolumeCreate{{MachineID: mid, Name: "data", SizeGB: 5}, {MachineID: other, Name: "elsewhere", SizeGB: 5}} {
		if _, err := m.svc.CreateVolume(as(m.renterID), v); err != nil {
			t.Fatal(err)
		}
	}
	b := m.browser()
	tok := b.signIn(m.renterKey)
	rent := "/offers/" + strconv.FormatInt(mid, 10) + "/rent"
	form := b.get(rent + "?volume=data")
	contains(t, form, `name="volume" value="data" checked`, `name="path.data" value="/data"`, "/volumes?machine="+strconv.FormatInt(mid, 10))
	if strings.Contains(form.body, `name="path.elsewhere"`) {
		t.Errorf("the picker offers a volume on another machine")
	}

	base := url.Values{"csrf": {tok}, "image": {"busybox"}, "cmd": {"sleep 600"}, "num_gpus": {"1"}, "volume": {"data"}}
	bad := url.Values{"path.data": {"relative/dir"}}
	for k, v := range base {
		bad[k] = v
	}
	p := b.post(rent, bad)
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "mount at an absolute path") ||
		!strings.Contains(p.body, `class="volumes-pick" aria-invalid="true"`) || !strings.Contains(p.body, `value="relative/dir"`) {
		t.Errorf("rent with a relative mount path: %d\n%s", p.status, p.body)
	}
	good := url.Values{"path.data": {"/workspace"}}
	for k, v := range base {
		good[k] = v
	}
	p = b.post(rent, good)
	if p.status != http.StatusSeeOther {
		t.Fatalf("rent with a volume: %d\n%s", p.status, p.body)
	}
	ins, _, err := m.svc.FindInstances(as(m.renterID), suanli.InstanceFilter{})
	if err != nil || len(ins) != 1 {
		t.Fatalf("instances %v %v", ins, err)
	}
	if vs := ins[0].Volumes; len(vs) != 1 || vs[0].Name != "data" || vs[0].Path != "/workspace" {
		t.Errorf("instance volumes = %+v, want data at /workspace", vs)
	}
	// The volumes page shows it attached, without a delete button.
	vp := b.get("/volumes")
	contains(t, vp, "instance "+strconv.FormatInt(ins[0].ID, 10), "destroy the instance to delete it")
}
