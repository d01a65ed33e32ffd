package http

import (
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// apiOp describes one operation for the OpenAPI document.
type apiOp struct {
	Method, Path, Summary string
	Body, Reply           any
}

var apiOps = []apiOp{
	{"GET", "/v1/me", "The caller's account (the selected team's, with X-Suanli-Team).", nil, suanli.Account{}},
	{"PUT", "/v1/me/residency", "Restrict where the account's instances may run (countries, regions).", suanli.ResidencyUpdate{}, suanli.Account{}},
	{"POST", "/v1/admin/accounts", "Create a user account and its first key (operators).", suanli.AccountCreate{}, suanli.AccountWithKey{}},
	{"GET", "/v1/admin/accounts", "Every account (operators).", nil, AccountList{}},
	{"GET", "/v1/keys", "The caller's API keys and temporary tokens (all=true: revoked and expired too).", nil, KeyList{}},
	{"POST", "/v1/keys", "Create an API key (scopes only narrow; expiry mandatory, at most 366 days).", suanli.KeyCreate{}, suanli.APIKey{}},
	{"DELETE", "/v1/keys/{id}", "Revoke a key and the temporary tokens cut from it.", nil, suanli.APIKey{}},
	{"POST", "/v1/keys/{id}/rotate", "Issue a key's successor; the old key ends after a grace period.", suanli.KeyRotate{}, suanli.APIKey{}},
	{"POST", "/v1/auth/token", "Cut a temporary token (sl_tmp_, 15 min to 12 h) from the calling key.", suanli.TokenCreate{}, suanli.APIKey{}},
	{"GET", "/v1/teams", "The caller's teams and roles.", nil, TeamList{}},
	{"POST", "/v1/teams", "Create a team owned by the caller.", suanli.TeamCreate{}, suanli.Team{}},
	{"GET", "/v1/teams/{id}/members", "A team's members.", nil, MemberList{}},
	{"PUT", "/v1/teams/{id}/members/{account}", "Change a member's role.", suanli.MemberUpdate{}, suanli.TeamMember{}},
	{"DELETE", "/v1/teams/{id}/members/{account}", "Remove a member (or leave).", nil, nil},
	{"GET", "/v1/teams/{id}/invitations", "A team's invitations (managers and owners).", nil, InvitationList{}},
	{"POST", "/v1/teams/{id}/invitations", "Invite someone; the reply carries the one-time token.", suanli.InvitationCreate{}, suanli.Invitation{}},
	{"DELETE", "/v1/teams/{id}/invitations/{invitation}", "Revoke an invitation.", nil, suanli.Invitation{}},
	{"POST", "/v1/invitations/accept", "Join a team with an invitation token.", suanli.InvitationAccept{}, suanli.TeamMember{}},
	{"GET", "/v1/audit/events", "Audit entries, newest first (limit, before, account_id).", nil, AuditList{}},
	{"GET", "/v1/cluster", "The answering replica's view of the replicas sharing its database: who holds the singleton lease, its term, the change feed's lag, the latest closes (operators).", nil, control.ClusterStatus{}},
	{"GET", "/v1/audit/verify", "Verify the audit chain and its signed checkpoints (operators).", nil, suanli.AuditReport{}},
	{"POST", "/v1/instances/{id}/progress", "Record a workload's progress (instance tokens may).", suanli.Progress{}, suanli.Instance{}},
	{"POST", "/v1/offers/search", "Search offers with the query language (DESIGN §5).", suanli.OfferQuery{}, suanli.OfferResult{}},
	{"GET", "/v1/offers", "Search offers: q, order, limit, offset, explain as query parameters.", nil, suanli.OfferResult{}},
	{"GET", "/v1/offers/{id}", "One offer.", nil, suanli.Offer{}},
	{"POST", "/v1/instances", "Rent: create an instance on an offer.", suanli.InstanceCreate{}, suanli.Instance{}},
	{"GET", "/v1/instances", "The caller's live instances (all=true for destroyed ones too).", nil, InstanceList{}},
	{"GET", "/v1/instances/{id}", "One instance, with cost so far and burn rate.", nil, suanli.Instance{}},
	{"POST", "/v1/instances/{id}/stop", "Stop compute (and its billing); the disk stays.", nil, suanli.Instance{}},
	{"POST", "/v1/instances/{id}/start", "Start a stopped instance on its machine; {\"wait\": true} queues the start when its GPUs are taken.", suanli.StartOptions{}, suanli.Instance{}},
	{"DELETE", "/v1/instances/{id}", "Destroy: end the rental; all billing stops.", nil, suanli.Instance{}},
	{"GET", "/v1/instances/{id}/logs", "The instance's log from offset.", nil, suanli.LogChunk{}},
	{"POST", "/v1/instances/{id}/exec", "Run a command in a running instance; its exit code and output.", ExecRequest{}, control.ExecResult{}},
	{"GET", "/v1/instances/{id}/events", "The instance's status changes.", nil, nil},
	{"GET", "/v1/machines", "The caller's machines.", nil, MachineList{}},
	{"GET", "/v1/machines/{id}", "One machine.", nil, suanli.Machine{}},
	{"PUT", "/v1/machines/{id}/listing", "List a machine or change its terms.", suanli.ListingUpdate{}, suanli.Machine{}},
	{"DELETE", "/v1/machines/{id}/listing", "Unlist a machine.", nil, suanli.Machine{}},
	{"POST", "/v1/join-tokens", "A one-time token for `suanli agent --join-token`.", nil, suanli.JoinToken{}},
	{"GET", "/v1/billing/balance", "Balance, earnings, spend and burn rate.", nil, suanli.Balance{}},
	{"GET", "/v1/billing/charges", "Itemized charges with totals (instance_id to filter).", nil, suanli.ChargeSummary{}},
	{"PUT", "/v1/admin/quota", "Override an account's quota (operators; 0 = default).", QuotaRequest{}, QuotaRequest{}},
	{"POST", "/v1/admin/credit", "Grant credit (operators).", CreditRequest{}, suanli.Balance{}},
	{"POST", "/v1/quotes", "Itemized quote and pre-flight checks for a rental, reserving nothing.", suanli.QuoteRequest{}, suanli.Quote{}},
	{"POST", "/v1/volumes", "Create a volume on a machine (billed per GB-month until deleted).", suanli.VolumeCreate{}, suanli.Volume{}},
	{"GET", "/v1/volumes", "The caller's volumes with cost so far (all=true for deleted ones).", nil, VolumeList{}},
	{"DELETE", "/v1/volumes/{name}", "Delete a volume: billing stops, the host wipes it.", nil, suanli.Volume{}},
	{"GET", "/v1/budgets", "The caller's budgets with spend, percent and forecast.", nil, BudgetList{}},
	{"PUT", "/v1/budgets/{name}", "Create or replace a budget.", suanli.Budget{}, suanli.Budget{}},
	{"DELETE", "/v1/budgets/{name}", "Delete a budget.", nil, nil},
	{"GET", "/v1/alerts", "Budget, low-balance and guard alerts, newest first.", nil, AlertList{}},
	{"GET", "/v1/billing/invoices/{month}", "The month's invoice (format=csv for CSV).", nil, suanli.Invoice{}},
	{"GET", "/v1/billing/report", "Spend grouped by project, tag:KEY, team, service, day or instance (by, since).", nil, suanli.CostReport{}},
	{"GET", "/v1/host/earnings", "Provider earnings by machine (since).", nil, suanli.Earnings{}},
	{"POST", "/v1/host/payouts", "Pay out earnings.", PayoutRequest{}, suanli.Earnings{}},
	{"POST", "/v1/agent/join", "Register a machine with a join token.", suanli.JoinRequest{}, suanli.JoinResponse{}},
	{"POST", "/v1/agent/sync", "Agent heartbeat and state; long poll for desired state.", suanli.SyncRequest{}, suanli.SyncResponse{}},
}

// OpenAPI returns the OpenAPI 3 document of the API, built from the
// operation table and the Go types' JSON tags, so it cannot drift from them.
func OpenAPI() map[string]any {
	schemas := map[string]any{}
	paths := map[string]map[string]any{}
	for _, op := range apiOps {
		o := map[string]any{"summary": op.Summary, "responses": map[string]any{
			"default": map[string]any{"description": "error", "content": map[string]any{"application/json": map[string]any{"schema": schemaRef(reflect.TypeOf(ErrorBody{}), schemas)}}},
		}}
		ok := map[string]any{"description": "success"}
		if op.Reply != nil {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": schemaRef(reflect.TypeOf(op.Reply), schemas)}}
		}
		o["responses"].(map[string]any)["200"] = ok
		if op.Body != nil {
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": schemaRef(reflect.TypeOf(op.Body), schemas)}}}
		}
		var params []any
		for _, name := range []string{"id", "name", "month", "account", "invitation"} {
			if strings.Contains(op.Path, "{"+name+"}") {
				typ := "integer"
				if name == "name" || name == "month" {
					typ = "string"
				}
				params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": typ}})
			}
		}
		if params != nil {
			o["parameters"] = params
		}
		if paths[op.Path] == nil {
			paths[op.Path] = map[string]any{}
		}
		paths[op.Path][strings.ToLower(op.Method)] = o
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "Suanli API", "version": "1",
			"description": "Money fields are integers in micro-units of the marketplace currency (1 USD = 1000000). Authenticate with Authorization: Bearer sl_live_… (or a temporary sl_tmp_… token, or an instance's sl_inst_… token); act on a team with X-Suanli-Team: ID or name. 429 replies carry Retry-After."},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas, "securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}}},
		"security":   []any{map[string]any{"bearer": []any{}}},
	}
}

var timeType = reflect.TypeOf(time.Time{})
var durationType = reflect.TypeOf(time.Duration(0))

func schemaRef(t reflect.Type, schemas map[string]any) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == durationType:
		return map[string]any{"type": "integer", "description": "nanoseconds"}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint8:
		return map[string]any{"type": "integer"}
	case reflect.Float64, reflect.Float32:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": schemaRef(t.Elem(), schemas)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaRef(t.Elem(), schemas)}
	case reflect.Struct:
		name := t.Name()
		if _, ok := schemas[name]; !ok {
			schemas[name] = map[string]any{} // break cycles
			props := map[string]any{}
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				tag := strings.Split(f.Tag.Get("json"), ",")[0]
				if !f.IsExported() || tag == "-" {
					continue
				}
				if tag == "" {
					tag = f.Name
				}
				props[tag] = schemaRef(f.Type, schemas)
			}
			schemas[name] = map[string]any{"type": "object", "properties": props}
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, OpenAPI())
}
