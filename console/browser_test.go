package console_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
	"github.com/suanli/suanli/internal/testreq"
)

var updateDocs = flag.Bool("update-docs", false, "copy the browser test's screenshots of the main pages to docs/console-*.png")

// chromium finds a Chromium or Chrome binary, or ends the test through
// testreq (a skip here, a failure in CI).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SUANLI_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testreq.Missing(t, "chromium", "no chromium on PATH: apt-get install chromium (or set SUANLI_CHROMIUM)")
	return ""
}

// artifacts is where screenshots go: $SUANLI_TEST_ARTIFACTS/console when
// set (CI keeps it), else a temporary directory.
func artifacts(t *testing.T) string {
	dir := t.TempDir()
	if d := os.Getenv("SUANLI_TEST_ARTIFACTS"); d != "" {
		dir = filepath.Join(d, "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tab drives one headless Chromium page and records every console error,
// uncaught exception and browser log error (CSP violations among them).
type tab struct {
	t        *testing.T
	ctx      context.Context
	base     string
	shots    string
	mu       sync.Mutex
	problems []string
}

func newTab(t *testing.T, base string) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	tb := &tab{t: t, ctx: ctx, base: base, shots: artifacts(t)}
	t.Cleanup(func() {
		cancelC()
		cancelA()
	})
	// Start the browser, turn on the browser log (CSP violations and failed
	// loads arrive there), and collect every error the page or the browser
	// reports until the test ends.
	if err := chromedp.Do(ctx); err != nil { // starts the browser: no deadline on this first call
		t.Fatalf("start %s: %v", chromium(t), err)
	}
	tb.run(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cdplog.Enable, cdp.Empty{})
		return err
	}))
	messages := chromedp.Console(ctx)
	go func() {
		for msg, err := range messages {
			if err != nil {
				return
			}
			if msg.Type == chromedp.ConsoleError || msg.IsException() || msg.Type == chromedp.ConsoleWarning {
				tb.problem("%s at %s:%d", msg, msg.URL, msg.Line+1)
			}
		}
	}()
	t.Logf("screenshots in %s", tb.shots)
	return tb
}

// probe checks that the error collection works: an error the page logs
// must arrive, or the final "no errors" check would prove nothing.
func (tb *tab) probe() {
	tb.t.Helper()
	get(tb, chromedp.Evaluate[chromedp.Void](`console.error("suanli probe")`))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tb.mu.Lock()
		n := len(tb.problems)
		if n == 1 && strings.Contains(tb.problems[0], "suanli probe") {
			tb.problems = nil
			tb.mu.Unlock()
			return
		}
		tb.mu.Unlock()
		if time.Now().After(deadline) {
			tb.t.Fatalf("a console.error did not reach the test (problems: %q)", tb.problems)
		}
	}
}

func (tb *tab) problem(format string, args ...any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.problems = append(tb.problems, fmt.Sprintf(format, args...))
}

// run runs actions with a deadline, failing the test on error.
func (tb *tab) run(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	get(tb, chromedp.Steps(actions...))
}

// get runs one action with a deadline and returns its value, failing the
// test on error.
func get[T any](tb *tab, a chromedp.Action[T]) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		loc, _ := chromedp.Run(tb.ctx, chromedp.Location())
		tb.t.Fatalf("browser at %s: %v", loc, err)
	}
	return v
}

func (tb *tab) open(path string, waitFor string) {
	tb.t.Helper()
	tb.run(chromedp.Navigate(tb.base+path), chromedp.WaitVisible(chromedp.CSS(waitFor)))
}

// follow runs trigger (a click that submits a form or follows a link),
// waits for the page it leads to to load, then for waitFor on it. Waiting
// for the load first keeps waitFor from matching the page being left.
func (tb *tab) follow(trigger chromedp.Action[chromedp.Void], waitFor string) {
	tb.t.Helper()
	get(tb, chromedp.WaitEvent(cdppage.LoadEventFired, nil, trigger))
	tb.run(chromedp.WaitVisible(chromedp.CSS(waitFor)))
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return get(tb, chromedp.Text(chromedp.CSS(sel)))
}

func (tb *tab) location() string {
	tb.t.Helper()
	return strings.TrimPrefix(get(tb, chromedp.Location()), tb.base)
}

// emulate sends one Emulation command to the tab.
func emulate[P any](cmd cdp.Command[P, cdp.Empty], params P) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cmd, params)
		return err
	})
}

// waitText waits until the text of sel contains want. The page may reload
// while it waits (the script does on a status change), so each look is
// its own short evaluation and a failed one is simply retried.
func (tb *tab) waitText(sel, want string, within time.Duration) string {
	tb.t.Helper()
	deadline := time.Now().Add(within)
	var got string
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
		var err error
		got, err = chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
		cancel()
		if err == nil && strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("after %s, %s shows %q (err %v), want %q", within, sel, got, err, want)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// shot saves a full-page PNG screenshot as NAME.png in the artifacts.
func (tb *tab) shot(name string) {
	tb.t.Helper()
	png := get(tb, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(tb.shots, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// docsPages are the screenshots copied to docs/ with -update-docs.
var docsPages = []string{"offers", "offers-explain", "offer", "create", "instance", "instances", "billing", "hosts", "phone-offers",
	"volumes", "account", "advisor", "advisor-rent-vs-buy", "advisor-compare", "audit"}

// TestBrowser drives the console in headless Chromium against a real
// control plane and real host agents (process runtime, simulated GPUs):
// sign in, search with a filter, see why nothing matched, open an offer
// and its quote, rent it, watch it run and log, destroy it, find the charge
// on the billing page, then the provider's hosts page; the pages read with
// JavaScript off and fit a phone; the browser reports no error throughout.
func TestBrowser(t *testing.T) {
	m := newMarket(t, marketOptions{control: control.Config{AllowSimulated: true, HeartbeatInterval: 2 * time.Second, SettleInterval: time.Second}})
	tb := newTab(t, m.srv.URL)
	loopCtx, stopLoops := context.WithCancel(context.Background())
	loopsDone := make(chan struct{})
	go func() {
		defer close(loopsDone)
		m.svc.Run(loopCtx)
	}()
	t.Cleanup(func() {
		stopLoops()
		<-loopsDone
	})
	var rig int64
	for i, s := range []machineSpec{
		{host: "rig-4090", gpus: "RTX 4090:2", region: "eu-west", price: 400_000, minBid: 200_000},
		{host: "dc-a100", gpus: "A100:4", region: "us-east", price: 1_600_000, minBid: 900_000},
		{host: "lab-l40s", gpus: "L40S:2", region: "eu-central", price: 950_000, minBid: 500_000},
		{host: "home-3090", gpus: "RTX 3090:1", region: "ap-south", price: 250_000, minBid: 120_000},
	} {
		id, key, hw := m.addMachine(s)
		m.startAgent(id, key, hw)
		if i == 0 {
			rig = id
		}
	}

	// Sign in; the console comes back to where it was asked for.
	tb.open("/", "#api_key")
	tb.probe()
	if loc := tb.location(); loc != "/signin?next=%2F" {
		t.Errorf("signed out, / went to %s", loc)
	}
	tb.shot("signin")
	tb.run(chromedp.SendKeys(chromedp.CSS("#api_key"), m.renterKey))
	tb.follow(chromedp.Click(chromedp.CSS(`form[action="/signin"] button`)), "table.offers")
	if all := tb.text("table.offers tbody"); !strings.Contains(all, "A100") || !strings.Contains(all, "RTX 4090") {
		t.Errorf("the offers table lacks the market's offers:\n%s", all)
	}
	tb.shot("offers")

	// Search with a filter; sort by a column.
	tb.run(chromedp.SetValue(chromedp.CSS("#gpu"), "RTX 4090"))
	tb.follow(chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)), "table.offers")
	if got := tb.text("table.offers tbody"); !strings.Contains(got, "RTX 4090") || strings.Contains(got, "A100") || strings.Contains(got, "3090") {
		t.Errorf("filtered by gpu RTX 4090, the table shows:\n%s", got)
	}
	if q := tb.text("main"); !strings.Contains(q, `suanli search 'gpu_name="RTX 4090"'`) {
		t.Errorf("the page does not show the query it ran")
	}
	tb.open("/?order=dph", "table.offers")
	tb.follow(chromedp.Click(chromedp.CSS(`th[aria-sort="ascending"] a`)), `th[aria-sort="descending"]`)
	if first := tb.text("table.offers tbody tr:first-child td:nth-child(2)"); !strings.Contains(first, "A100") {
		t.Errorf("sorted by price descending, the first offer is %q, want the A100", first)
	}

	// Nothing matches: the page says which condition removed what.
	tb.open("/?vram=200&gpus=1", ".explain")
	if why := tb.text(".explain"); !strings.Contains(why, "gpu_ram>=200 removed") || !strings.Contains(why, "largest is 80 GB") {
		t.Errorf("why nothing matched:\n%s", why)
	}
	tb.shot("offers-explain")

	// Open the offer and price ten hours of one GPU.
	tb.open("/?gpu=RTX+4090", "table.offers")
	tb.follow(chromedp.Click(chromedp.CSS("table.offers tbody tr:first-child td:nth-child(2) a")), "#quote-total")
	tb.run(chromedp.SetValue(chromedp.CSS("#num_gpus"), "1"), chromedp.SetValue(chromedp.CSS("#hours"), "10"),
		chromedp.SetValue(chromedp.CSS("#egress_gb"), "5"))
	tb.follow(chromedp.Click(chromedp.CSS(`.quote-form button`)), "#quote-total")
	// The control plane's quote: compute, the disk while running, 5 GB sent.
	diskMonth := suanli.Money(100_000 * 10)
	want := suanli.Money(400_000)*10 + suanli.MulDiv(diskMonth, 10*suanli.MicrosPerHour, suanli.MicrosPerMonth) + 5*10_000
	if got := tb.text("#quote-total"); got != want.String() {
		t.Errorf("quote for 1 GPU × 10 h and 5 GB sent = %s, want %s", got, want)
	}
	if q := tb.text("table.quote"); !strings.Contains(q, "storage while stopped") || !strings.Contains(q, "platform fee") {
		t.Errorf("the quote lacks items:\n%s", q)
	}
	if c := tb.text("ul.checks"); !strings.Contains(c, "balance: $20.00 covers") {
		t.Errorf("the quote's checks: %q", c)
	}
	tb.shot("offer")

	// Rent it.
	tb.follow(chromedp.Click(chromedp.CSS(`a.button[href*="/rent"]`)), "#image")
	tb.run(chromedp.SetValue(chromedp.CSS("#image"), "busybox"),
		chromedp.SetValue(chromedp.CSS("#cmd"), `echo "hello from the console: $GREETING"; i=0; while true; do i=$((i+1)); echo "step $i"; sleep 0.5; done`),
		chromedp.SetValue(chromedp.CSS("#env"), "GREETING=hi"), chromedp.SetValue(chromedp.CSS("#label"), "console demo"),
		chromedp.SetValue(chromedp.CSS("#project"), "vision"), chromedp.SetValue(chromedp.CSS("#ttl"), "8h"))
	tb.shot("create")
	tb.follow(chromedp.Click(chromedp.CSS(`form.create button[type="submit"]`)), "[data-live-instance]")
	loc := tb.location()
	mm := regexp.MustCompile(`^/instances/(\d+)`).FindStringSubmatch(loc)
	if mm == nil {
		t.Fatalf("after renting, the browser is at %s", loc)
	}
	id, _ := strconv.ParseInt(mm[1], 10, 64)
	if in := m.instance(t, id); in.MachineID != rig || in.GPUCount != 1 || in.Env["GREETING"] != "hi" || in.Label != "console demo" ||
		in.Project != "vision" || time.Duration(in.Guards.MaxRuntime) != 8*time.Hour || in.Guards.IdleStopMinutes != suanli.DefaultIdleStopMinutes {
		t.Errorf("created %+v", in)
	}

	// It runs (the page updates itself) and its log arrives.
	tb.waitText(`.lead [data-field="status"]`, "running", 20*time.Second)
	tb.waitText("#logs", "hello from the console: hi", 15*time.Second)
	tb.waitText("#logs", "step 3", 15*time.Second)
	tb.shot("instance")

	tb.open("/instances", "table[data-live-instances]")
	if row := tb.text(fmt.Sprintf(`tr[data-id="%d"]`, id)); !strings.Contains(row, "running") || !strings.Contains(row, "console demo") {
		t.Errorf("instances row: %q", row)
	}
	// Let compute be settled into the ledger before destroying.
	for deadline := time.Now().Add(10 * time.Second); ; {
		sum, err := m.svc.FindCharges(as(m.renterID), suanli.ChargeFilter{InstanceID: &id})
		if err != nil {
			t.Fatal(err)
		}
		if sum.ByKind[suanli.MeterCompute] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no compute charge settled within 10s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	tb.waitText(`[data-live="updated"]`, "Updated", 10*time.Second) // the table refreshed itself
	tb.shot("instances")

	// Destroy it, through the confirmation dialog.
	tb.open(fmt.Sprintf("/instances/%d", id), "[data-live-instance]")
	tb.run(chromedp.Click(chromedp.CSS(`form[action$="/destroy"] button`)), chromedp.WaitVisible(chromedp.CSS("#confirm-dialog[open]")))
	if txt := tb.text("#confirm-text"); !strings.Contains(txt, "cannot be undone") {
		t.Errorf("the destroy dialog says %q", txt)
	}
	tb.shot("confirm")
	tb.follow(chromedp.Click(chromedp.CSS("#confirm-ok")), ".notice")
	tb.waitText(`.lead [data-field="status"]`, "destroyed", 10*time.Second)
	if in := m.instance(t, id); in.Status != suanli.StatusDestroyed {
		t.Fatalf("after the dialog, instance is %s", in.Status)
	}

	// The billing page shows the charge, as the ledger has it.
	var total suanli.Money
	for deadline := time.Now().Add(10 * time.Second); ; {
		sum, err := m.svc.FindCharges(as(m.renterID), suanli.ChargeFilter{InstanceID: &id})
		if err != nil {
			t.Fatal(err)
		}
		total = sum.Total
		tb.open("/billing", "svg.chart")
		if row := tb.text("table.by-instance"); strings.Contains(row, total.String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("billing by instance shows %q, want %s for instance %d", tb.text("table.by-instance"), total, id)
		}
		time.Sleep(500 * time.Millisecond)
	}
	bars := get(tb, chromedp.Evaluate[int](`[...document.querySelectorAll("svg.chart rect.bar")].filter(r => +r.getAttribute("height") > 0).length`))
	if bars != 1 {
		t.Errorf("spend chart has %d non-empty bars, want 1 (today)", bars)
	}
	if st := tb.text("table.statement"); !strings.Contains(st, "compute") || !strings.Contains(st, "storage") || !strings.Contains(st, "vision") {
		t.Errorf("this month's invoice lacks the instance's compute and storage:\n%s", st)
	}

	// Set a budget on the billing page; it shows as a bar with its thresholds.
	tb.run(chromedp.SetValue(chromedp.CSS("#b-name"), "monthly"), chromedp.SetValue(chromedp.CSS("#b-amount"), "25"),
		chromedp.SetValue(chromedp.CSS("#b-scope"), "project:vision"), chromedp.SetValue(chromedp.CSS("#b-action"), "block"),
		chromedp.SetValue(chromedp.CSS("#b-secret"), "hook-secret"))
	tb.follow(chromedp.Click(chromedp.CSS(`form.budget-form button[type="submit"]`)), `tr[data-budget="monthly"]`)
	if row := tb.text(`tr[data-budget="monthly"]`); !strings.Contains(row, "$25.00") || !strings.Contains(row, "project:vision") || !strings.Contains(row, "block") {
		t.Errorf("budget row: %q", row)
	}
	if bs, err := m.svc.FindBudgets(as(m.renterID)); err != nil || len(bs) != 1 || bs[0].Amount != suanli.Dollars(25) {
		t.Errorf("budgets after the form: %v %v", bs, err)
	}
	tb.run(chromedp.Click(chromedp.CSS("#budget-form summary")), chromedp.WaitVisible(chromedp.CSS("form.budget-form")))
	tb.shot("billing")

	// A volume on the rig, made on the volumes page.
	tb.open("/volumes?machine="+strconv.FormatInt(rig, 10), "form.volume-form")
	tb.run(chromedp.SetValue(chromedp.CSS("#v-name"), "datasets"), chromedp.SetValue(chromedp.CSS("#v-size"), "50"),
		chromedp.SetValue(chromedp.CSS("#v-project"), "vision"))
	tb.follow(chromedp.Click(chromedp.CSS(`form.volume-form button[type="submit"]`)), `tr[data-volume="datasets"]`)
	if row := tb.text(`tr[data-volume="datasets"]`); !strings.Contains(row, "50 GB") || !strings.Contains(row, "ready") {
		t.Errorf("volume row: %q", row)
	}
	tb.shot("volumes")

	// SSH keys and the IP allowlist on the account page.
	tb.open("/account", "form.key-form")
	tb.run(chromedp.SetValue(chromedp.CSS("#k-name"), "laptop"), chromedp.SetValue(chromedp.CSS("#k-key"), newPublicKey(t)))
	tb.follow(chromedp.Click(chromedp.CSS(`form.key-form button[type="submit"]`)), "table.ssh-keys")
	tb.run(chromedp.SetValue(chromedp.CSS("#n-cidr"), "203.0.113.0/24"), chromedp.SetValue(chromedp.CSS("#n-note"), "office"))
	tb.follow(chromedp.Click(chromedp.CSS(`form.net-form button[type="submit"]`)), "table.allowlist")
	if k, n := tb.text("table.ssh-keys"), tb.text("table.allowlist"); !strings.Contains(k, "SHA256:") || !strings.Contains(n, "203.0.113.0/24") {
		t.Errorf("account page: keys %q, allowlist %q", k, n)
	}
	tb.shot("account")

	// The advisor: GPU memory for a fine-tune, rent or buy, public clouds.
	tb.open("/advisor", "#vram-form")
	tb.run(chromedp.SetValue(chromedp.CSS("#model"), "llama-3.1-8b"), chromedp.SetValue(chromedp.CSS("#task"), "finetune"),
		chromedp.SetValue(chromedp.CSS("#lora"), "on"), chromedp.SetValue(chromedp.CSS("#batch"), "4"), chromedp.SetValue(chromedp.CSS("#seq"), "2048"))
	tb.follow(chromedp.Click(chromedp.CSS(`#vram-form button[type="submit"]`)), "#vram-result")
	if got := tb.text("#vram-total"); !strings.HasSuffix(got, "GiB") {
		t.Errorf("vram total %q", got)
	}
	if got := tb.text("table.vram-offers"); !strings.Contains(got, "A100") {
		t.Errorf("offers holding a LoRA fine-tune of Llama 3.1 8B: %q", got)
	}
	tb.shot("advisor")
	tb.open("/advisor/cpu-or-gpu?workload=rendering", "#cpu-result")
	tb.shot("advisor-cpu-or-gpu")
	tb.open("/advisor/rent-vs-buy", "#rent-form")
	tb.run(chromedp.SetValue(chromedp.CSS("#hourly"), "2.5"), chromedp.SetValue(chromedp.CSS("#hours"), "300"),
		chromedp.SetValue(chromedp.CSS("#hardware-price"), "30000"), chromedp.SetValue(chromedp.CSS("#power-watts"), "700"),
		chromedp.SetValue(chromedp.CSS("#kwh-price"), "0.15"))
	tb.follow(chromedp.Click(chromedp.CSS(`#rent-form button[type="submit"]`)), "#rent-result")
	if v := tb.text("#verdict"); !strings.Contains(v, "The rule of thumb") {
		t.Errorf("rent-vs-buy verdict %q", v)
	}
	tb.shot("advisor-rent-vs-buy")
	tb.open("/advisor/compare?q=gpu_name%3DA100", "#compare-result")
	if c := tb.text("#compare-result"); !strings.Contains(c, "A100") || !strings.Contains(c, "%") {
		t.Errorf("comparison: %q", c)
	}
	tb.shot("advisor-compare")

	// Sign out; the provider signs in and sees machines and earnings.
	tb.follow(chromedp.Click(chromedp.CSS(`form[action="/signout"] button`)), "#api_key")
	tb.open("/hosts", "#api_key")
	tb.run(chromedp.SendKeys(chromedp.CSS("#api_key"), m.providerKey))
	tb.follow(chromedp.Click(chromedp.CSS(`form[action="/signin"] button`)), "section.machine")
	if h := tb.text("main"); !strings.Contains(h, "rig-4090") || !strings.Contains(h, "dc-a100") {
		t.Errorf("hosts page lacks the machines")
	}
	if e := tb.text("#earnings"); e == "$0.00" || e == "" {
		t.Errorf("earnings = %q after a paid rental", e)
	}
	tb.shot("hosts")

	// The operator: the audit log, every console change in it, verified.
	_, opKey, err := m.svc.CreateAccountWithKey(context.Background(), "operator", suanli.RoleOperator, 0)
	if err != nil {
		t.Fatal(err)
	}
	tb.follow(chromedp.Click(chromedp.CSS(`form[action="/signout"] button`)), "#api_key")
	tb.open("/audit?verify=1", "#api_key")
	tb.run(chromedp.SendKeys(chromedp.CSS("#api_key"), opKey))
	tb.follow(chromedp.Click(chromedp.CSS(`form[action="/signin"] button`)), "#verify-status")
	if st := tb.text("#verify-status"); st != "intact" {
		t.Errorf("audit verification: %q", st)
	}
	if log := tb.text("table.audit"); !strings.Contains(log, "POST /billing/budgets") || !strings.Contains(log, "POST /offers/{id}/rent") {
		t.Errorf("the audit log lacks the console's changes:\n%s", log)
	}
	tb.shot("audit")

	// A phone: the layout fits its width (wide tables scroll in their box).
	tb.run(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.open("/", "table.offers")
	overflow := get(tb, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if overflow {
		t.Errorf("on a 390px-wide phone the page scrolls sideways")
	}
	tb.shot("phone-offers")
	tb.run(chromedp.ResetViewport())

	// JavaScript off: pages still read.
	tb.run(emulate(emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}))
	tb.open("/?gpu=A100", "table.offers")
	if got := tb.text("table.offers tbody"); !strings.Contains(got, "A100") {
		t.Errorf("with JavaScript off the offers table shows %q", got)
	}
	tb.open("/hosts", "section.machine")
	tb.open("/advisor/rent-vs-buy?hourly=2.5&hours=300&hardware-price=30000", "#verdict")
	tb.run(emulate(emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false}))

	tb.mu.Lock()
	for _, p := range tb.problems {
		t.Errorf("browser reported: %s", p)
	}
	tb.mu.Unlock()

	if *updateDocs && !t.Failed() {
		for _, name := range docsPages {
			b, err := os.ReadFile(filepath.Join(tb.shots, name+".png"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("..", "docs", "console-"+name+".png"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
