package vastapi

import (
	"sort"

	"github.com/suanli/suanli"
)

// Vast's permission categories (docs.vast.ai, "Permissions"). Every route
// names the category Vast files it under; the category maps onto the Suanli
// scope that the native service checks.
const (
	catInstanceRead  = "instance_read"
	catInstanceWrite = "instance_write"
	catUserRead      = "user_read"
	catUserWrite     = "user_write"
	catBillingRead   = "billing_read"
	catBillingWrite  = "billing_write"
	catMachineRead   = "machine_read"
	catMachineWrite  = "machine_write"
	catMisc          = "misc"
	catTeamRead      = "team_read"
	catTeamWrite     = "team_write"
)

// categoryScope is the Suanli scope a route of each Vast category needs,
// checked before the call so that the error names the category. "" means
// the native services decide per call: the user categories cover the
// account (which every key may read), SSH keys (instance scopes in Suanli)
// and API keys (key scopes).
var categoryScope = map[string]string{
	catInstanceRead:  suanli.ScopeInstanceRead,
	catInstanceWrite: suanli.ScopeInstanceWrite,
	catUserRead:      "",
	catUserWrite:     "",
	catBillingRead:   suanli.ScopeBillingRead,
	catMachineRead:   suanli.ScopeHostRead,
	catMachineWrite:  suanli.ScopeHostWrite,
	catMisc:          suanli.ScopeInstanceRead, // searching offers
	catTeamRead:      suanli.ScopeTeamRead,
	catTeamWrite:     suanli.ScopeTeamWrite,
}

// categoryScopes is what a key created through Vast's API gets for each
// category it asks for. billing_write (credit transfers) has no Suanli
// counterpart: credit is granted by operators; it grants nothing, and the
// reply lists it as unmapped.
var categoryScopes = map[string][]string{
	catInstanceRead:  {suanli.ScopeInstanceRead},
	catInstanceWrite: {suanli.ScopeInstanceRead, suanli.ScopeInstanceWrite},
	catUserRead:      {suanli.ScopeKeyRead},
	catUserWrite:     {suanli.ScopeKeyRead, suanli.ScopeKeyWrite, suanli.ScopeAccountWrite},
	catBillingRead:   {suanli.ScopeBillingRead},
	catBillingWrite:  nil,
	catMachineRead:   {suanli.ScopeHostRead},
	catMachineWrite:  {suanli.ScopeHostRead, suanli.ScopeHostWrite},
	catMisc:          {suanli.ScopeInstanceRead},
	catTeamRead:      {suanli.ScopeTeamRead},
	catTeamWrite:     {suanli.ScopeTeamRead, suanli.ScopeTeamWrite},
}

// allCategories lists Vast's categories in display order.
var allCategories = []string{catInstanceRead, catInstanceWrite, catUserRead, catUserWrite, catBillingRead, catBillingWrite,
	catMachineRead, catMachineWrite, catMisc, catTeamRead, catTeamWrite}

// scopesFor maps Vast categories onto Suanli scopes: the scopes, sorted, and
// the categories that granted nothing. Asking for every category is a key
// with every scope.
func scopesFor(categories []string) (scopes, unmapped []string, err error) {
	seen := map[string]bool{}
	for _, c := range categories {
		if _, known := categoryScopes[c]; !known {
			return nil, nil, suanli.FieldErrorf("permissions", "%q is not a Vast permission category: use %v", c, allCategories)
		}
		seen[c] = true
	}
	if len(seen) == len(allCategories) {
		return []string{suanli.ScopeAll}, nil, nil
	}
	set := map[string]bool{}
	for c := range seen {
		if len(categoryScopes[c]) == 0 {
			unmapped = append(unmapped, c)
		}
		for _, s := range categoryScopes[c] {
			set[s] = true
		}
	}
	for s := range set {
		scopes = append(scopes, s)
	}
	sort.Strings(scopes)
	sort.Strings(unmapped)
	return scopes, unmapped, nil
}

// categoriesFor is the reverse: the Vast categories a key's scopes cover,
// for listing keys in Vast's shape ({"api": {"instance_read": {}, …}}).
func categoriesFor(scopes []string) map[string]any {
	api := map[string]any{}
	has := map[string]bool{}
	for _, s := range scopes {
		has[s] = true
	}
	for _, c := range allCategories {
		want := categoryScopes[c]
		if has[suanli.ScopeAll] {
			api[c] = map[string]any{}
			continue
		}
		if len(want) == 0 {
			continue
		}
		all := true
		for _, s := range want {
			all = all && has[s]
		}
		if all {
			api[c] = map[string]any{}
		}
	}
	return map[string]any{"api": api}
}
