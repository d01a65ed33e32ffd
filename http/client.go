package http

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// Client speaks the API for the CLI and the agent. It implements the
// suanli service interfaces, so callers use the same Go API as in-process
// code. Errors from the server come back as *suanli.Error with their code.
// The zero value is not usable: use NewClient.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client // requests other than the agent's long poll
	// Long is used for the agent's long-poll sync (no overall timeout; the
	// caller's context bounds it).
	Long *http.Client
	// Team, when set, makes every request act on that team (id or name).
	Team string
}

var (
	_ suanli.OfferService    = (*Client)(nil)
	_ suanli.InstanceService = (*Client)(nil)
	_ suanli.MachineService  = (*Client)(nil)
	_ suanli.BillingService  = (*Client)(nil)
	_ suanli.AgentService    = (*Client)(nil)
	_ suanli.AccountService  = (*Client)(nil)
	_ suanli.KeyService      = (*Client)(nil)
	_ suanli.TeamService     = (*Client)(nil)
	_ suanli.AuditService    = (*Client)(nil)
)

// NewClient returns a client for the server at baseURL.
func NewClient(baseURL, apiKey string) *Client {
	return &Client{
		BaseURL: strings.TrimRight(baseURL, "/"),
		APIKey:  apiKey,
		HTTP:    &http.Client{Timeout: 60 * time.Second},
		Long:    &http.Client{},
	}
}

type idemKey struct{}

// WithIdempotencyKey returns ctx that makes the client send key as the
// Idempotency-Key header, so that retrying the request never repeats it.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idemKey{}, key)
}

func (c *Client) do(ctx context.Context, hc *http.Client, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	if c.Team != "" {
		req.Header.Set(TeamHeader, c.Team)
	}
	if k, ok := ctx.Value(idemKey{}).(string); ok && k != "" {
		req.Header.Set("Idempotency-Key", k)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return suanli.Errorf(suanli.EUNAVAILABLE, "cannot reach the Suanli server at %s: %v (is `suanli up` or `suanli server` running? set --server or SUANLI_SERVER)", c.BaseURL, rootCause(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return suanli.Errorf(suanli.EUNAVAILABLE, "reading the reply from %s: %v", c.BaseURL, err)
	}
	if resp.StatusCode >= 400 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			e := eb.Error
			return &e
		}
		return suanli.Errorf(codeOf(resp.StatusCode), "server replied %s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode reply of %s %s: %w", method, path, err)
		}
	}
	return nil
}

func rootCause(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, c.HTTP, http.MethodGet, path, nil, out)
}

// Me returns the caller's account.
func (c *Client) Me(ctx context.Context) (*suanli.Account, error) {
	var a suanli.Account
	return &a, c.get(ctx, "/v1/me", &a)
}

// SearchOffers runs a search.
func (c *Client) SearchOffers(ctx context.Context, q suanli.OfferQuery) (*suanli.OfferResult, error) {
	var r suanli.OfferResult
	return &r, c.do(ctx, c.HTTP, http.MethodPost, "/v1/offers/search", q, &r)
}

// FindOfferByID returns one offer.
func (c *Client) FindOfferByID(ctx context.Context, id int64) (*suanli.Offer, error) {
	var o suanli.Offer
	return &o, c.get(ctx, "/v1/offers/"+strconv.FormatInt(id, 10), &o)
}

// CreateInstance rents. It sends an idempotency key (the caller's, or a
// fresh one) and retries twice when the server cannot be reached, so a
// network failure never rents twice.
func (c *Client) CreateInstance(ctx context.Context, cr suanli.InstanceCreate) (*suanli.Instance, error) {
	if k, _ := ctx.Value(idemKey{}).(string); k == "" {
		b := make([]byte, 16)
		rand.Read(b)
		ctx = WithIdempotencyKey(ctx, "create-"+hex.EncodeToString(b))
	}
	var in suanli.Instance
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = c.do(ctx, c.HTTP, http.MethodPost, "/v1/instances", rentalBody(cr, cr), &in); suanli.ErrorCode(err) != suanli.EUNAVAILABLE {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 500 * time.Millisecond)
	}
	return &in, err
}

// FindInstanceByID returns one instance.
func (c *Client) FindInstanceByID(ctx context.Context, id int64) (*suanli.Instance, error) {
	var in suanli.Instance
	return &in, c.get(ctx, fmt.Sprintf("/v1/instances/%d", id), &in)
}

// FindInstances lists instances (live ones unless f.Live is false).
func (c *Client) FindInstances(ctx context.Context, f suanli.InstanceFilter) ([]*suanli.Instance, int, error) {
	v := url.Values{}
	if f.Live != nil && !*f.Live {
		v.Set("all", "true")
	}
	if f.Limit > 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	var l InstanceList
	err := c.get(ctx, "/v1/instances?"+v.Encode(), &l)
	return l.Instances, l.Total, err
}

func (c *Client) instanceAction(ctx context.Context, method, path string) (*suanli.Instance, error) {
	var in suanli.Instance
	return &in, c.do(ctx, c.HTTP, method, path, nil, &in)
}

// StopInstance stops an instance.
func (c *Client) StopInstance(ctx context.Context, id int64) (*suanli.Instance, error) {
	return c.instanceAction(ctx, http.MethodPost, fmt.Sprintf("/v1/instances/%d/stop", id))
}

// StartInstance starts an instance.
func (c *Client) StartInstance(ctx context.Context, id int64) (*suanli.Instance, error) {
	return c.instanceAction(ctx, http.MethodPost, fmt.Sprintf("/v1/instances/%d/start", id))
}

// DestroyInstance destroys an instance.
func (c *Client) DestroyInstance(ctx context.Context, id int64) (*suanli.Instance, error) {
	return c.instanceAction(ctx, http.MethodDelete, fmt.Sprintf("/v1/instances/%d", id))
}

// InstanceLogs reads an instance's log from offset.
func (c *Client) InstanceLogs(ctx context.Context, id int64, offset int64) (*suanli.LogChunk, error) {
	var l suanli.LogChunk
	return &l, c.get(ctx, fmt.Sprintf("/v1/instances/%d/logs?offset=%d", id, offset), &l)
}

// InstanceEvent is one status change, as the API returns it.
type InstanceEvent struct {
	At      time.Time `json:"at"`
	Status  string    `json:"status"`
	Message string    `json:"message,omitempty"`
}

// InstanceEvents returns an instance's status changes, oldest first.
func (c *Client) InstanceEvents(ctx context.Context, id int64) ([]InstanceEvent, error) {
	var r struct {
		Events []InstanceEvent `json:"events"`
	}
	err := c.get(ctx, fmt.Sprintf("/v1/instances/%d/events", id), &r)
	return r.Events, err
}

// FindMachines lists the caller's machines.
func (c *Client) FindMachines(ctx context.Context, f suanli.MachineFilter) ([]*suanli.Machine, int, error) {
	var l MachineList
	err := c.get(ctx, "/v1/machines", &l)
	return l.Machines, l.Total, err
}

// FindMachineByID returns one machine.
func (c *Client) FindMachineByID(ctx context.Context, id int64) (*suanli.Machine, error) {
	var m suanli.Machine
	return &m, c.get(ctx, fmt.Sprintf("/v1/machines/%d", id), &m)
}

// ListMachine lists a machine or changes its terms.
func (c *Client) ListMachine(ctx context.Context, id int64, u suanli.ListingUpdate) (*suanli.Machine, error) {
	var m suanli.Machine
	return &m, c.do(ctx, c.HTTP, http.MethodPut, fmt.Sprintf("/v1/machines/%d/listing", id), u, &m)
}

// UnlistMachine unlists a machine.
func (c *Client) UnlistMachine(ctx context.Context, id int64) (*suanli.Machine, error) {
	var m suanli.Machine
	return &m, c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/machines/%d/listing", id), nil, &m)
}

// CreateJoinToken returns a one-time join token.
func (c *Client) CreateJoinToken(ctx context.Context, ttl time.Duration) (*suanli.JoinToken, error) {
	var t suanli.JoinToken
	return &t, c.do(ctx, c.HTTP, http.MethodPost, "/v1/join-tokens", map[string]int64{"ttl_seconds": int64(ttl / time.Second)}, &t)
}

// Balance returns the caller's balance.
func (c *Client) Balance(ctx context.Context) (*suanli.Balance, error) {
	var b suanli.Balance
	return &b, c.get(ctx, "/v1/billing/balance", &b)
}

// FindCharges lists the caller's charges.
func (c *Client) FindCharges(ctx context.Context, f suanli.ChargeFilter) (*suanli.ChargeSummary, error) {
	v := url.Values{}
	if f.InstanceID != nil {
		v.Set("instance_id", strconv.FormatInt(*f.InstanceID, 10))
	}
	if f.Limit > 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	var s suanli.ChargeSummary
	return &s, c.get(ctx, "/v1/billing/charges?"+v.Encode(), &s)
}

// Credit grants credit (operators).
func (c *Client) Credit(ctx context.Context, accountID int64, amount suanli.Money, memo string) (*suanli.Balance, error) {
	var b suanli.Balance
	return &b, c.do(ctx, c.HTTP, http.MethodPost, "/v1/admin/credit", CreditRequest{AccountID: accountID, Amount: amount, Memo: memo}, &b)
}

// Join registers a machine.
func (c *Client) Join(ctx context.Context, r suanli.JoinRequest) (*suanli.JoinResponse, error) {
	var j suanli.JoinResponse
	return &j, c.do(ctx, c.HTTP, http.MethodPost, "/v1/agent/join", r, &j)
}

// Sync is the agent's heartbeat and long poll.
func (c *Client) Sync(ctx context.Context, r *suanli.SyncRequest) (*suanli.SyncResponse, error) {
	var s suanli.SyncResponse
	return &s, c.do(ctx, c.Long, http.MethodPost, "/v1/agent/sync", r, &s)
}

// SetQuota overrides an account's quota (operators).
func (c *Client) SetQuota(ctx context.Context, accountID int64, q suanli.Quota) error {
	return c.do(ctx, c.HTTP, http.MethodPut, "/v1/admin/quota", QuotaRequest{AccountID: accountID, GPUs: q.GPUs, Instances: q.Instances}, nil)
}

// Exec runs a command in an instance.
func (c *Client) Exec(ctx context.Context, id int64, cmd []string, timeout time.Duration) (*control.ExecResult, error) {
	var r control.ExecResult
	return &r, c.do(ctx, c.Long, http.MethodPost, fmt.Sprintf("/v1/instances/%d/exec", id), ExecRequest{Cmd: cmd, TimeoutSeconds: int64(timeout / time.Second)}, &r)
}

// rentalBody is the JSON body for v, a request that is or embeds c: v
// itself, or, when c gives a disk of 0 (which the server refuses, where
// leaving it out takes the default), v with an explicit "disk_gb": 0.
func rentalBody(v any, c suanli.InstanceCreate) any {
	if !c.DiskGiven || c.DiskGB != 0 {
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return v
	}
	m["disk_gb"] = json.RawMessage("0")
	return m
}
