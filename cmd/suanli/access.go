package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/auth"
	shttp "github.com/suanli/suanli/http"
)

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func ttlFlag(name, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := parseLifetime(s)
	if err != nil {
		return 0, suanli.FieldErrorf(name, "%v", err)
	}
	return d, nil
}

func newKeysCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Your API keys: create, list, revoke, rotate",
		Long: `API keys carry scopes (` + strings.Join(suanli.Scopes, ", ") + `, or * for
all of yours) and always expire (at most 366 days). At most two active keys
share a name, so a key can be rotated: the new one is issued while the old
one still works for a grace period. Only a hash of each key is stored; the
secret is shown once.`}
	cmd.AddCommand(newKeysCreateCmd(a), newKeysLsCmd(a), newKeysRevokeCmd(a), newKeysRotateCmd(a))
	return cmd
}

func printSecret(cmd *cobra.Command, k *suanli.APIKey) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%s\n\nkey %d (%s, %s) expires %s. This is the only time it is shown: store it now.\n",
		k.Secret, k.ID, k.Name, strings.Join(k.Scopes, ","), k.ExpiresAt.Local().Format(time.DateTime))
}

func newKeysCreateCmd(a *app) *cobra.Command {
	var scopes []string
	var ttl string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "create NAME --ttl 90d --scope SCOPE...",
		Short: "Create an API key (scopes only narrow yours; expiry is mandatory)",
		Example: `  suanli keys create ci --scope instance:read,instance:write --ttl 90d
  suanli keys create billing-export --scope billing:read --ttl 30d --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl == "" {
				return suanli.FieldErrorf("ttl", "every key expires: give --ttl (e.g. 90d, at most 366d)")
			}
			d, err := ttlFlag("ttl", ttl, 0)
			if err != nil {
				return err
			}
			k, err := a.client().CreateAPIKey(cmd.Context(), suanli.KeyCreate{Name: args[0], Scopes: scopes, TTLSeconds: int64(d / time.Second)})
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, k)
			}
			printSecret(cmd, k)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&scopes, "scope", []string{suanli.ScopeAll}, "scopes, comma-separated or repeated (* for all of yours)")
	cmd.Flags().StringVar(&ttl, "ttl", "", "lifetime, e.g. 90d or 12h (required, at most 366d)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON (with the secret)")
	return cmd
}

func newKeysLsCmd(a *app) *cobra.Command {
	var all, jsonOut bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List your keys and temporary tokens, with when and from where each was last used",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ks, err := a.client().FindAPIKeys(cmd.Context(), all)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, ks)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tNAME\tKIND\tPREFIX\tSCOPES\tEXPIRES\tLAST USED\tFROM\tSTATE")
			for _, k := range ks {
				state := "active"
				switch {
				case k.RevokedAt != nil:
					state = "revoked " + when(k.RevokedAt)
				case !time.Now().Before(k.ExpiresAt):
					state = "expired"
				}
				from := k.LastUsedAddr
				if from == "" {
					from = "-"
				}
				fmt.Fprintf(t, "%d\t%s\t%s\t%s…\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Kind, k.Prefix, strings.Join(k.Scopes, ","),
					k.ExpiresAt.Local().Format(time.DateTime), when(k.LastUsedAt), from, state)
			}
			return t.Flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include revoked and expired keys")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newKeysRevokeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke keys (and the temporary tokens cut from them) at once",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			for _, s := range args {
				id, err := parseID("key", s)
				if err != nil {
					return err
				}
				k, err := c.RevokeAPIKey(cmd.Context(), id)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "key %d (%s) revoked\n", k.ID, k.Name)
			}
			return nil
		},
	}
}

func newKeysRotateCmd(a *app) *cobra.Command {
	var grace string
	var save, jsonOut bool
	cmd := &cobra.Command{
		Use:   "rotate ID",
		Short: "Issue a key's successor; the old key keeps working for --grace",
		Example: `  suanli keys rotate 7 --grace 24h
  suanli keys rotate 7 --grace 0 --save   # replace the key this CLI uses, at once`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID("key", args[0])
			if err != nil {
				return err
			}
			d, err := ttlFlag("grace", grace, 24*time.Hour)
			if err != nil {
				return err
			}
			k, err := a.client().RotateAPIKey(cmd.Context(), id, suanli.KeyRotate{GraceSeconds: int64(d / time.Second)})
			if err != nil {
				return err
			}
			if save {
				cfg, _ := readClientConfig(a.configPath())
				cfg.APIKey = k.Secret
				if cfg.Server == "" {
					cfg.Server = a.client().BaseURL
				}
				if err := writeClientConfig(a.configPath(), cfg); err != nil {
					return err
				}
			}
			if jsonOut {
				return a.printJSON(cmd, k)
			}
			printSecret(cmd, k)
			if save {
				fmt.Fprintf(cmd.OutOrStdout(), "saved to %s\n", a.configPath())
			}
			fmt.Fprintf(cmd.OutOrStdout(), "key %d stays valid for %s.\n", id, d)
			return nil
		},
	}
	cmd.Flags().StringVar(&grace, "grace", "24h", "how long the old key keeps working (0: revoke it now; at most 30d)")
	cmd.Flags().BoolVar(&save, "save", false, "write the new key to HOME/config.json (mode 0600)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON (with the secret)")
	return cmd
}

func newAuthCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "Temporary credentials"}
	var scopes []string
	var ttl string
	var jsonOut bool
	tok := &cobra.Command{
		Use:   "token",
		Short: "Print a temporary token (sl_tmp_…) cut from your key: 15m to 12h, scopes only narrow",
		Long: `Print a temporary token for a script or a colleague's one-off task. It
lives 15 minutes to 12 hours (1 hour by default, never past your key's own
expiry), carries at most your key's scopes, cannot create keys or tokens,
and stops working when your key is revoked.`,
		Example: `  suanli auth token --ttl 1h --scope instance:read
  SUANLI_API_KEY=$(suanli auth token --scope billing:read) ./report.sh`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := ttlFlag("ttl", ttl, auth.DefaultTempLifetime)
			if err != nil {
				return err
			}
			k, err := a.client().CreateToken(cmd.Context(), suanli.TokenCreate{Scopes: scopes, TTLSeconds: int64(d / time.Second)})
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, k)
			}
			fmt.Fprintln(cmd.OutOrStdout(), k.Secret)
			fmt.Fprintf(cmd.ErrOrStderr(), "token %d (%s) expires %s\n", k.ID, strings.Join(k.Scopes, ","), k.ExpiresAt.Local().Format(time.DateTime))
			return nil
		},
	}
	tok.Flags().StringSliceVar(&scopes, "scope", nil, "scopes, comma-separated or repeated (default: your key's)")
	tok.Flags().StringVar(&ttl, "ttl", "1h", "lifetime, 15m to 12h")
	tok.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.AddCommand(tok)
	return cmd
}

// resolveTeam turns a team id or name into its id, through the caller's teams.
func resolveTeam(cmd *cobra.Command, c *shttp.Client, s string) (int64, error) {
	if id, err := strconv.ParseInt(s, 10, 64); err == nil && id > 0 {
		return id, nil
	}
	ts, err := c.FindTeams(cmd.Context())
	if err != nil {
		return 0, err
	}
	for _, t := range ts {
		if t.Name == s {
			return t.ID, nil
		}
	}
	return 0, suanli.Errorf(suanli.ENOTFOUND, "team %q not found: `suanli teams ls` lists yours", s)
}

func newTeamsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "teams", Short: "Teams: members with roles, invitations, a shared balance",
		Long: `A team is an account of its own: its instances, machines and balance
belong to the team, and its members act on it with --team NAME (or
SUANLI_TEAM), within what their role allows:

  owner           everything, including owners and the team's settings
  manager         instances, machines, billing, members and invitations (not owners)
  member          create, stop and destroy instances; search; read machines
  billing-viewer  read the balance and charges, nothing else`}
	var jsonOut bool
	create := &cobra.Command{Use: "create NAME", Short: "Create a team; you are its owner", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := a.client().CreateTeam(cmd.Context(), suanli.TeamCreate{Name: args[0]})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "team %d (%s) created; you are its owner. Act on it with --team %s\n", t.ID, t.Name, t.Name)
			return nil
		}}
	ls := &cobra.Command{Use: "ls", Short: "Your teams and your role in each", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ts, err := a.client().FindTeams(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, ts)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tNAME\tYOUR ROLE")
			for _, x := range ts {
				fmt.Fprintf(t, "%d\t%s\t%s\n", x.ID, x.Name, x.Role)
			}
			return t.Flush()
		}}
	ls.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	var membersJSON, invitationsJSON bool
	members := &cobra.Command{Use: "members TEAM", Short: "A team's members and roles", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			id, err := resolveTeam(cmd, c, args[0])
			if err != nil {
				return err
			}
			ms, err := c.FindTeamMembers(cmd.Context(), id)
			if err != nil {
				return err
			}
			if membersJSON {
				return a.printJSON(cmd, ms)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ACCOUNT\tNAME\tROLE\tSINCE")
			for _, m := range ms {
				fmt.Fprintf(t, "%d\t%s\t%s\t%s\n", m.AccountID, m.Name, m.Role, m.CreatedAt.Local().Format(time.DateOnly))
			}
			return t.Flush()
		}}
	var role, forAccount, ttl string
	invite := &cobra.Command{Use: "invite TEAM --role ROLE", Short: "Print a one-time invitation token (sl_inv_…)",
		Example: "  suanli teams invite lab --role member --account bob --ttl 7d", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			id, err := resolveTeam(cmd, c, args[0])
			if err != nil {
				return err
			}
			d, err := ttlFlag("ttl", ttl, 7*24*time.Hour)
			if err != nil {
				return err
			}
			inv, err := c.CreateInvitation(cmd.Context(), id, suanli.InvitationCreate{Role: role, Account: forAccount, TTLSeconds: int64(d / time.Second)})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n\nInvitation %d to team %d as %s, valid until %s. The invitee runs:\n  suanli teams accept %s\n",
				inv.Token, inv.ID, id, inv.Role, inv.ExpiresAt.Local().Format(time.DateTime), inv.Token)
			return nil
		}}
	invite.Flags().StringVar(&role, "role", suanli.TeamRoleMember, "owner, manager, member or billing-viewer")
	invite.Flags().StringVar(&forAccount, "account", "", "only this account name may accept")
	invite.Flags().StringVar(&ttl, "ttl", "7d", "how long the invitation is valid (at most 30d)")
	accept := &cobra.Command{Use: "accept TOKEN", Short: "Join a team with an invitation token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := a.client().AcceptInvitation(cmd.Context(), suanli.InvitationAccept{Token: strings.TrimSpace(args[0])})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "you joined team %d as %s: act on it with --team %d\n", m.TeamID, m.Role, m.TeamID)
			return nil
		}}
	setRole := &cobra.Command{Use: "role TEAM ACCOUNT ROLE", Short: "Change a member's role", Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			id, err := resolveTeam(cmd, c, args[0])
			if err != nil {
				return err
			}
			acct, err := parseID("account", args[1])
			if err != nil {
				return err
			}
			m, err := c.UpdateTeamMember(cmd.Context(), id, acct, suanli.MemberUpdate{Role: args[2]})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is now %s of team %d\n", m.Name, m.Role, id)
			return nil
		}}
	remove := &cobra.Command{Use: "remove TEAM ACCOUNT", Short: "Remove a member (your own account: leave)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			id, err := resolveTeam(cmd, c, args[0])
			if err != nil {
				return err
			}
			acct, err := parseID("account", args[1])
			if err != nil {
				return err
			}
			if err := c.RemoveTeamMember(cmd.Context(), id, acct); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "account %d removed from team %d\n", acct, id)
			return nil
		}}
	invitations := &cobra.Command{Use: "invitations TEAM", Short: "A team's invitations", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			id, err := resolveTeam(cmd, c, args[0])
			if err != nil {
				return err
			}
			is, err := c.FindInvitations(cmd.Context(), id)
			if err != nil {
				return err
			}
			if invitationsJSON {
				return a.printJSON(cmd, is)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tROLE\tFOR\tEXPIRES\tSTATE")
			for _, i := range is {
				state := "open"
				switch {
				case i.AcceptedAt != nil:
					state = fmt.Sprintf("accepted by %d", i.AcceptedBy)
				case i.RevokedAt != nil:
					state = "revoked"
				case !time.Now().Before(i.ExpiresAt):
					state = "expired"
				}
				fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s\n", i.ID, i.Role, i.Account, i.ExpiresAt.Local().Format(time.DateTime), state)
			}
			return t.Flush()
		}}
	uninvite := &cobra.Command{Use: "uninvite TEAM INVITATION", Short: "Revoke an invitation", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			id, err := resolveTeam(cmd, c, args[0])
			if err != nil {
				return err
			}
			inv, err := parseID("invitation", args[1])
			if err != nil {
				return err
			}
			if _, err := c.RevokeInvitation(cmd.Context(), id, inv); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "invitation %d revoked\n", inv)
			return nil
		}}
	members.Flags().BoolVar(&membersJSON, "json", false, "print JSON")
	invitations.Flags().BoolVar(&invitationsJSON, "json", false, "print JSON")
	cmd.AddCommand(create, ls, members, invite, accept, setRole, remove, invitations, uninvite)
	return cmd
}

func newAccountCmd(a *app) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{Use: "account", Short: "Your account (or the team's, with --team) and its data residency", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			acct, err := a.client().Me(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, acct)
			}
			allowed := "anywhere"
			if len(acct.AllowedCountries) > 0 {
				allowed = strings.Join(acct.AllowedCountries, ", ")
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintf(t, "account\t%d\nname\t%s\nkind\t%s\nrole\t%s\ninstances may run in\t%s\n", acct.ID, acct.Name, acct.Kind, acct.Role, allowed)
			return t.Flush()
		}}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	var clear bool
	res := &cobra.Command{
		Use:   "residency [COUNTRY|REGION...]",
		Short: "Restrict where your instances may run (data residency)",
		Long: `Restrict placement to these countries (ISO 3166 codes such as DE, FR) or
marketplace regions (eu-west): renting an offer elsewhere is refused with
the reason. A single rental can narrow it further with create
--allowed-countries. For a team, only owners may set it.`,
		Example: `  suanli account residency DE FR
  suanli account residency --clear`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !clear {
				return suanli.FieldErrorf("allowed_countries", "name countries or regions, or pass --clear to allow anywhere")
			}
			var list []string
			for _, a := range args {
				list = append(list, strings.Split(a, ",")...)
			}
			acct, err := a.client().SetResidency(cmd.Context(), suanli.ResidencyUpdate{AllowedCountries: list})
			if err != nil {
				return err
			}
			if len(acct.AllowedCountries) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "account %d: instances may run anywhere\n", acct.ID)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "account %d: instances may run only in %s\n", acct.ID, strings.Join(acct.AllowedCountries, ", "))
			}
			return nil
		},
	}
	res.Flags().BoolVar(&clear, "clear", false, "remove the restriction")
	cmd.AddCommand(res)
	return cmd
}

func newAdminAccountsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "accounts", Short: "Create and list accounts (operators only; there is no self-service signup)"}
	var email, credit, ttl string
	var operator, jsonOut bool
	create := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create a user account and print its first API key",
		Example: "  suanli admin accounts create alice --email alice@example.org --credit 25 --ttl 90d",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := suanli.AccountCreate{Name: args[0], Email: email}
			if credit != "" {
				m, err := suanli.ParseMoney(credit)
				if err != nil {
					return suanli.FieldErrorf("credit", "%v", err)
				}
				c.Credit = m
			}
			d, err := ttlFlag("ttl", ttl, 90*24*time.Hour)
			if err != nil {
				return err
			}
			c.TTLSeconds = int64(d / time.Second)
			if operator {
				c.Role = suanli.RoleOperator
			}
			r, err := a.client().CreateAccount(cmd.Context(), c)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "account %d (%s) created.\n\n", r.Account.ID, r.Account.Name)
			printSecret(cmd, r.Key)
			return nil
		},
	}
	create.Flags().StringVar(&email, "email", "", "contact address")
	create.Flags().StringVar(&credit, "credit", "", "starting credit in dollars")
	create.Flags().StringVar(&ttl, "ttl", "90d", "lifetime of the first key (at most 366d)")
	create.Flags().BoolVar(&operator, "operator", false, "make it a marketplace operator")
	create.Flags().BoolVar(&jsonOut, "json", false, "print JSON (with the key's secret)")
	var lsJSON bool
	ls := &cobra.Command{Use: "ls", Short: "Every account", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			as, err := a.client().FindAccounts(cmd.Context())
			if err != nil {
				return err
			}
			if lsJSON {
				return a.printJSON(cmd, as)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "ID\tNAME\tKIND\tROLE\tRESIDENCY\tCREATED")
			for _, x := range as {
				res := "-"
				if len(x.AllowedCountries) > 0 {
					res = strings.Join(x.AllowedCountries, ",")
				}
				fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s\t%s\n", x.ID, x.Name, x.Kind, x.Role, res, x.CreatedAt.Local().Format(time.DateOnly))
			}
			return t.Flush()
		}}
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON")
	cmd.AddCommand(create, ls)
	return cmd
}

func newAuditCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "The tamper-evident audit log: list and verify",
		Long: `Every change made through the API (who, what, to which object, when, from
where, the request id and the result) and the control plane's own changes
(a host lost, a purge) are appended to a SHA-256 hash chain whose head is
signed every 30 seconds. 'audit verify' (operators) finds any edited,
deleted, reordered, inserted or truncated entry. Entries are kept 186 days
by default; the purge is itself an entry.`}
	var limit int
	var before int64
	var jsonOut bool
	ls := &cobra.Command{Use: "ls", Short: "Audit entries, newest first (yours; every entry for operators)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := suanli.AuditFilter{Limit: limit}
			if before > 0 {
				f.BeforeSeq = &before
			}
			es, err := a.client().FindAuditEvents(cmd.Context(), f)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, es)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "SEQ\tWHEN\tACTOR\tACCOUNT\tACTION\tTARGET\tFROM\tRESULT\tREQUEST")
			for _, e := range es {
				actor := "system"
				if e.ActorID != 0 {
					actor = strconv.FormatInt(e.ActorID, 10)
				} else if e.Detail != "" && strings.HasPrefix(e.Detail, "instance token") {
					actor = "instance"
				}
				fmt.Fprintf(t, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.At.Local().Format(time.DateTime), actor, e.AccountID,
					e.Action, e.Target, e.Source, e.Result, e.RequestID)
			}
			return t.Flush()
		}}
	ls.Flags().IntVar(&limit, "limit", 50, "at most this many entries")
	ls.Flags().Int64Var(&before, "before", 0, "only entries before this sequence number (paging)")
	ls.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	var verifyJSON bool
	verify := &cobra.Command{Use: "verify", Short: "Verify the whole chain and its signed checkpoints (operators)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.client().VerifyAudit(cmd.Context())
			if err != nil {
				return err
			}
			if verifyJSON {
				if err := a.printJSON(cmd, r); err != nil {
					return err
				}
			} else {
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "%d entries (%d to %d), %d checkpoints, newest at entry %d (%s); %d entries not yet checkpointed\n",
					r.Entries, r.FirstSeq, r.LastSeq, r.Checkpoints, r.LastCheckpoint, r.LastCheckpointAt.Local().Format(time.DateTime), r.Unanchored)
				if r.PurgedThrough > 0 {
					fmt.Fprintf(out, "entries 1 to %d were purged under the retention policy\n", r.PurgedThrough)
				}
				fmt.Fprintf(out, "checkpoint key (ed25519): %s\n", r.PublicKey)
				for _, p := range r.Problems {
					fmt.Fprintln(out, "PROBLEM:", p)
				}
				if r.OK {
					fmt.Fprintln(out, "OK: the audit log is intact")
				}
			}
			if !r.OK {
				return suanli.Errorf(suanli.ECONFLICT, "the audit log failed verification: %d problems", len(r.Problems))
			}
			return nil
		}}
	verify.Flags().BoolVar(&verifyJSON, "json", false, "print JSON")
	cmd.AddCommand(ls, verify)
	return cmd
}

// newProgressCmd is for workloads: it reports progress with the instance's
// own token (SUANLI_TOKEN_FILE, else SUANLI_TOKEN), which the agent keeps
// fresh.
func newProgressCmd(a *app) *cobra.Command {
	var percent float64
	cmd := &cobra.Command{
		Use:   "progress [MESSAGE]",
		Short: "Inside an instance: report progress with the instance's own token",
		Long: `Run inside an instance: it reads the instance's own short-lived token from
SUANLI_TOKEN_FILE (kept fresh by the agent) or SUANLI_TOKEN, and records
the message in the instance's history (suanli show ID). Give the server
with --server or SUANLI_SERVER.`,
		Example: `  suanli --server http://control:8470 progress --percent 40 "epoch 4 of 10"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(os.Getenv("SUANLI_INSTANCE_ID"), 10, 64)
			if err != nil || id <= 0 {
				return suanli.FieldErrorf("SUANLI_INSTANCE_ID", "not set: run this inside an instance")
			}
			tok := os.Getenv("SUANLI_TOKEN")
			if f := os.Getenv("SUANLI_TOKEN_FILE"); f != "" {
				if fh, err := os.Open(f); err == nil {
					sc := bufio.NewScanner(fh)
					if sc.Scan() {
						tok = strings.TrimSpace(sc.Text())
					}
					fh.Close()
				}
			}
			c := a.client()
			if tok != "" {
				c.APIKey = tok
			}
			p := suanli.Progress{Message: strings.Join(args, " ")}
			if cmd.Flags().Changed("percent") {
				p.Percent = &percent
			}
			_, err = c.ReportProgress(cmd.Context(), id, p)
			return err
		},
	}
	cmd.Flags().Float64Var(&percent, "percent", 0, "how far along, 0 to 100")
	return cmd
}
