package http_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
	"github.com/suanli/suanli/auth/sshca"
	"github.com/suanli/suanli/control"
	shttp "github.com/suanli/suanli/http"
	"github.com/suanli/suanli/internal/pgtest"
	"github.com/suanli/suanli/sqlstore"
	"golang.org/x/crypto/ssh"
)

// clock is a fake clock shared by the service, the audit log and the
// server's limits.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// logBuf captures every log line of a test's server.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }

func (l *logBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// world is a marketplace on a real SQLite file with a fake clock: an
// operator; a victim who provides a simulated machine, rents an instance on
// it (with secrets), owns a team with a mate in it, a named key and an open
// invitation; and an attacker, another tenant.
type world struct {
	t      *testing.T
	srv    *httptest.Server
	api    *shttp.Server
	svc    *control.Service
	db     *sqlstore.DB
	dbPath string
	clock  *clock
	logs   *logBuf

	op, victim, attacker, mate, agent  *shttp.Client
	opID, victimID, attackerID, mateID int64
	opKey, victimKey                   string

	machineID, instanceID, teamID, keyID, invitationID int64
	sshKeyID, allowID                                  int64
	windowID, bookingID, scheduleID                    int64
	sshPublicKey, volumeName                           string
	instanceToken                                      string

	// planted are strings only the victim's data holds: none may reach
	// another tenant. secrets are values that must never be stored in the
	// clear, logged, or returned by the API.
	planted, secrets []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	w := &world{t: t, dbPath: filepath.Join(dir, "s.db"), clock: &clock{t: time.Now().UTC().Truncate(time.Second)}, logs: &logBuf{}}
	db, err := sqlstore.Open(ctx, pgtest.StoreDSN(t, w.dbPath))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w.db = db
	logger := slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := control.New(ctx, db, control.Config{HeartbeatInterval: 50 * time.Millisecond, SecretKey: bytes.Repeat([]byte{9}, 32),
		AuditHeadFile: filepath.Join(dir, "audit.head")}, logger)
	if err != nil {
		t.Fatal(err)
	}
	svc.SetClock(w.clock.Now)
	if svc.SSHAuthority, err = sshca.LoadOrCreate(filepath.Join(dir, "ssh_ca")); err != nil {
		t.Fatal(err)
	}
	w.svc = svc
	w.api = shttp.NewServer(svc, logger)
	w.api.Limiter = &auth.RateLimiter{Rate: 1e6, Burst: 1e6, Now: w.clock.Now}
	w.api.Lockout = &auth.Lockout{MaxFailures: 1 << 30, Now: w.clock.Now}
	w.srv = httptest.NewServer(w.api)
	t.Cleanup(w.srv.Close)

	account := func(name string, role string, credit suanli.Money) (*shttp.Client, int64, string) {
		a, key, err := svc.CreateAccountWithKey(ctx, name, role, credit)
		if err != nil {
			t.Fatal(err)
		}
		w.secrets = append(w.secrets, key)
		return shttp.NewClient(w.srv.URL, key), a.ID, key
	}
	w.op, w.opID, w.opKey = account("operator", suanli.RoleOperator, 0)
	w.victim, w.victimID, w.victimKey = account("victim", suanli.RoleUser, suanli.Dollars(50))
	w.attacker, w.attackerID, _ = account("attacker", suanli.RoleUser, suanli.Dollars(50))
	w.mate, w.mateID, _ = account("mate", suanli.RoleUser, 0)

	tag := fmt.Sprint(time.Now().UnixNano() % 1e9)
	label, secretVal, regPass := "victim-label-"+tag, "planted-secret-"+tag, "planted-registry-password-"+tag
	teamName, keyName, invitee := "victimteam"+tag, "victim-key-"+tag, "invitee"+tag
	w.planted = []string{label, teamName, keyName, invitee, "VICTIM_SECRET_NAME", "victim-registry-user"}
	w.secrets = append(w.secrets, secretVal, regPass)

	jt, err := w.victim.CreateJoinToken(ctx, time.Hour)
	must(t, err)
	w.secrets = append(w.secrets, jt.Token)
	hw := suanli.Hardware{Hostname: "rig", CPUArch: "amd64", CPUCores: 8, RAMMB: 32 << 10, DiskFreeGB: 200,
		GPUs: []suanli.GPU{{Index: 0, UUID: "GPU-sim-0", Name: "RTX 4090", MemoryMB: 24564, Simulated: true},
			{Index: 1, UUID: "GPU-sim-1", Name: "RTX 4090", MemoryMB: 24564, Simulated: true}}}
	j, err := shttp.NewClient(w.srv.URL, "").Join(ctx, suanli.JoinRequest{Token: jt.Token, Hardware: hw, Runtime: "process"})
	must(t, err)
	w.secrets = append(w.secrets, j.APIKey)
	w.machineID, w.agent = j.MachineID, shttp.NewClient(w.srv.URL, j.APIKey)
	price := suanli.Money(400_000)
	_, err = w.victim.ListMachine(ctx, w.machineID, suanli.ListingUpdate{PriceGPU: &price})
	must(t, err)

	in, err := w.victim.CreateInstance(ctx, suanli.InstanceCreate{OfferID: w.machineID, Image: "busybox", GPUCount: 1, Label: label,
		Cmd: []string{"sleep", "600"}, SecretEnv: map[string]string{"VICTIM_SECRET_NAME": secretVal},
		RegistryAuth: &suanli.RegistryAuth{Username: "victim-registry-user", Password: regPass}})
	must(t, err)
	w.instanceID = in.ID
	w.instanceToken = w.tokenOf(in.ID)

	team, err := w.victim.CreateTeam(ctx, suanli.TeamCreate{Name: teamName})
	must(t, err)
	w.teamID = team.ID
	inv, err := w.victim.CreateInvitation(ctx, team.ID, suanli.InvitationCreate{Role: suanli.TeamRoleMember, Account: "mate"})
	must(t, err)
	_, err = w.mate.AcceptInvitation(ctx, suanli.InvitationAccept{Token: inv.Token})
	must(t, err)
	open, err := w.victim.CreateInvitation(ctx, team.ID, suanli.InvitationCreate{Role: suanli.TeamRoleManager, Account: invitee})
	must(t, err)
	w.invitationID = open.ID
	w.secrets = append(w.secrets, inv.Token, open.Token)

	k, err := w.victim.CreateAPIKey(ctx, suanli.KeyCreate{Name: keyName, Scopes: []string{suanli.ScopeInstanceRead}, TTLSeconds: 30 * 86400})
	must(t, err)
	w.keyID = k.ID
	tmp, err := w.victim.CreateToken(ctx, suanli.TokenCreate{Scopes: []string{suanli.ScopeBillingRead}})
	must(t, err)

	pub, _, err := ed25519.GenerateKey(nil)
	must(t, err)
	sp, err := ssh.NewPublicKey(pub)
	must(t, err)
	w.sshPublicKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
	sk, err := w.victim.AddSSHKey(ctx, "victim-ssh-"+tag, w.sshPublicKey)
	must(t, err)
	w.sshKeyID = sk.ID
	an, err := w.victim.AddAllowedNetwork(ctx, "192.0.2.0/24", "victim-net-"+tag)
	must(t, err)
	w.allowID = an.ID
	budgetSecret := "planted-webhook-secret-" + tag
	_, err = w.victim.SetBudget(ctx, suanli.Budget{Name: "victim-budget-" + tag, Amount: suanli.Dollars(40), WebhookURL: "http://127.0.0.1:1/hook", WebhookSecret: budgetSecret})
	must(t, err)
	w.volumeName = "victim-vol-" + tag
	_, err = w.victim.CreateVolume(ctx, suanli.VolumeCreate{MachineID: w.machineID, Name: w.volumeName, SizeGB: 1})
	must(t, err)
	win, err := w.victim.CreateWindow(ctx, suanli.WindowCreate{MachineID: w.machineID, GPUs: 1, Start: w.clock.Now().Add(24 * time.Hour),
		End: w.clock.Now().Add(30 * time.Hour), PriceGPU: suanli.Money(700_000)})
	must(t, err)
	w.windowID = win.ID
	bk, err := w.victim.CreateBooking(ctx, suanli.BookingCreate{WindowID: win.ID, Hours: 2, GPUs: 1, Image: "busybox"})
	must(t, err)
	w.bookingID = bk.ID
	// Cancelled, so that it keeps no GPU from the other tests' rentals.
	_, err = w.victim.CancelBooking(ctx, bk.ID)
	must(t, err)
	sc, err := w.victim.CreateSchedule(ctx, suanli.Schedule{Cron: "0 4 * * *", GPUs: 1, Hours: 1, Image: "busybox", MaxPrice: 1})
	must(t, err)
	w.scheduleID = sc.ID
	w.planted = append(w.planted, "victim-ssh-"+tag, "victim-net-"+tag, w.volumeName, "victim-budget-"+tag)
	w.secrets = append(w.secrets, budgetSecret)
	w.secrets = append(w.secrets, k.Secret, tmp.Secret, w.instanceToken)
	return w
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// account creates one more user with a key.
func (w *world) account(name string) (*shttp.Client, int64, string) {
	w.t.Helper()
	a, key, err := w.svc.CreateAccountWithKey(context.Background(), name, suanli.RoleUser, 0)
	must(w.t, err)
	return shttp.NewClient(w.srv.URL, key), a.ID, key
}

// tokenOf returns instance id's token as the agent receives it.
func (w *world) tokenOf(id int64) string {
	w.t.Helper()
	r, err := w.agent.Sync(context.Background(), &suanli.SyncRequest{})
	must(w.t, err)
	for _, s := range r.Instances {
		if s.ID == id {
			if s.Token == "" {
				w.t.Fatalf("sync gave instance %d no token", id)
			}
			return s.Token
		}
	}
	w.t.Fatalf("sync does not list instance %d", id)
	return ""
}

// client returns a client with another credential and, optionally, a team.
func (w *world) client(secret, team string) *shttp.Client {
	c := shttp.NewClient(w.srv.URL, secret)
	c.Team = team
	return c
}

// key creates a key for account directly in the store (no rate limits).
func (w *world) key(accountID int64, scopes ...string) string {
	w.t.Helper()
	secret, err := w.svc.CreateKey(context.Background(), accountID, "test", scopes, 24*time.Hour)
	must(w.t, err)
	return secret
}

type reply struct {
	status int
	body   string
	header http.Header
}

// do sends one raw request.
func (w *world) do(secret, team, method, path, body string) reply {
	w.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, w.srv.URL+path, rd)
	must(w.t, err)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if team != "" {
		req.Header.Set(shttp.TeamHeader, team)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	must(w.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, string(b), resp.Header}
}

// snapshot dumps every table but the audit log's (which records refused
// attempts too) and the keys' last-use columns, for before/after checks.
func (w *world) snapshot() string {
	w.t.Helper()
	db := w.db.SQL()
	q := `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
	if w.db.Dialect().Name == "postgres" {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`
	}
	rows, err := db.Query(q)
	must(w.t, err)
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		if !strings.HasPrefix(n, "audit_") {
			tables = append(tables, n)
		}
	}
	rows.Close()
	var b strings.Builder
	for _, tname := range tables {
		b.WriteString("== " + tname + "\n")
		dumpTable(w.t, db, tname, &b)
	}
	return b.String()
}

func dumpTable(t *testing.T, db *sql.DB, table string, b *strings.Builder) {
	rows, err := db.Query(`SELECT * FROM ` + table)
	must(t, err)
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		must(t, rows.Scan(ptrs...))
		var parts []string
		for i, c := range cols {
			if table == "api_keys" && (c == "last_used_at" || c == "last_used_addr") {
				continue
			}
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b) // as text, for scanForSecrets (PostgreSQL returns TEXT as string, BYTEA as bytes)
			}
			parts = append(parts, fmt.Sprintf("%s=%v", c, vals[i]))
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	sort.Strings(lines)
	b.WriteString(strings.Join(lines, "\n") + "\n")
}

// view is everything the victim can see through the API, as JSON.
func (w *world) view() string {
	w.t.Helper()
	ctx := context.Background()
	var parts []any
	add := func(v any, err error) {
		must(w.t, err)
		parts = append(parts, v)
	}
	no := false
	ins, _, err := w.victim.FindInstances(ctx, suanli.InstanceFilter{Live: &no})
	add(ins, err)
	add(w.victim.FindInstanceByID(ctx, w.instanceID))
	add(w.victim.InstanceEvents(ctx, w.instanceID))
	add(w.victim.InstanceLogs(ctx, w.instanceID, 0))
	ms, _, err := w.victim.FindMachines(ctx, suanli.MachineFilter{})
	add(ms, err)
	ks, err := w.victim.FindAPIKeys(ctx, true)
	ks = slices.DeleteFunc(ks, func(k *suanli.APIKey) bool { return k.Name == "test" }) // the proof's own keys
	add(ks, err)
	add(w.victim.FindTeams(ctx))
	add(w.victim.FindTeamMembers(ctx, w.teamID))
	add(w.victim.FindInvitations(ctx, w.teamID))
	add(w.victim.Balance(ctx))
	add(w.victim.FindCharges(ctx, suanli.ChargeFilter{}))
	add(w.victim.Me(ctx))
	add(w.victim.FindSSHKeys(ctx))
	add(w.victim.FindAllowedNetworks(ctx))
	add(w.victim.FindVolumes(ctx, true))
	add(w.victim.FindBudgets(ctx))
	return fmt.Sprintf("%+v", jsonOf(parts))
}
