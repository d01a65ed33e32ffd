package auth

import (
	"slices"
	"strings"

	"github.com/suanli/suanli"
)

// roleScopes is what each team role may do when a member acts on the team.
var roleScopes = map[string][]string{
	suanli.TeamRoleOwner: {suanli.ScopeAll},
	suanli.TeamRoleManager: {suanli.ScopeInstanceRead, suanli.ScopeInstanceWrite, suanli.ScopeBillingRead, suanli.ScopeHostRead,
		suanli.ScopeHostWrite, suanli.ScopeTeamRead, suanli.ScopeTeamWrite, suanli.ScopeAuditRead},
	suanli.TeamRoleMember:        {suanli.ScopeInstanceRead, suanli.ScopeInstanceWrite, suanli.ScopeHostRead, suanli.ScopeTeamRead},
	suanli.TeamRoleBillingViewer: {suanli.ScopeBillingRead, suanli.ScopeTeamRead},
}

// RoleScopes returns the scopes a team role grants, or nil for an unknown role.
func RoleScopes(role string) []string { return slices.Clone(roleScopes[role]) }

// ValidTeamRole reports whether role is a team role.
func ValidTeamRole(role string) bool { return roleScopes[role] != nil }

// RoleRank orders team roles: owner 4, manager 3, member 2, billing viewer
// 1, anything else 0.
func RoleRank(role string) int {
	switch role {
	case suanli.TeamRoleOwner:
		return 4
	case suanli.TeamRoleManager:
		return 3
	case suanli.TeamRoleMember:
		return 2
	case suanli.TeamRoleBillingViewer:
		return 1
	}
	return 0
}

// Intersect returns the scopes held by both a and b, where ScopeAll in one
// stands for everything in the other. The admin scope never survives a team
// role (a team is not an operator).
func Intersect(a, b []string) []string {
	all := func(s []string) bool { return slices.Contains(s, suanli.ScopeAll) }
	var out []string
	switch {
	case all(a) && all(b):
		out = []string{suanli.ScopeAll}
	case all(a):
		out = slices.Clone(b)
	case all(b):
		out = slices.Clone(a)
	default:
		for _, s := range a {
			if slices.Contains(b, s) {
				out = append(out, s)
			}
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == suanli.ScopeAdmin })
}

// CheckScopes validates scopes a person asks to put on a key or token: each
// must be a known scope (or ScopeAll), and none may be one the caller does
// not hold (scopes only narrow). admin is for operators only. An empty list
// is EINVALID: say what the key is for.
func CheckScopes(caller *suanli.Principal, scopes []string) error {
	if len(scopes) == 0 {
		return suanli.FieldErrorf("scopes", "give at least one scope (%s, or * for all of yours)", strings.Join(suanli.Scopes, ", "))
	}
	for _, s := range scopes {
		if s == suanli.ScopeAll {
			if !slices.Contains(caller.Scopes, suanli.ScopeAll) {
				return suanli.FieldErrorf("scopes", "* would widen this key's scopes (%s): list the scopes you need", strings.Join(caller.Scopes, ", "))
			}
			continue
		}
		if !slices.Contains(suanli.Scopes, s) {
			return suanli.FieldErrorf("scopes", "%q is not a scope: use %s", s, strings.Join(suanli.Scopes, ", "))
		}
		if s == suanli.ScopeAdmin && caller.Role != suanli.RoleOperator {
			return suanli.FieldErrorf("scopes", "admin is for marketplace operators only")
		}
		if !caller.Can(s) {
			return suanli.FieldErrorf("scopes", "%s is not among this key's scopes (%s): a new key or token can only narrow them", s, strings.Join(caller.Scopes, ", "))
		}
	}
	return nil
}

// NormalizeScopes trims, drops duplicates and sorts scopes.
func NormalizeScopes(scopes []string) []string {
	var out []string
	for _, s := range scopes {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" && !slices.Contains(out, part) {
				out = append(out, part)
			}
		}
	}
	slices.Sort(out)
	return out
}
