package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
)

func newBillingCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "billing", Short: "Your balance and itemized charges"}
	var jsonOut bool
	bal := &cobra.Command{
		Use:   "balance",
		Short: "Balance, provider earnings, total spend and current burn rate",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.client().Balance(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, b)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintf(t, "balance\t%s\nburn rate\t%s/h\nspent\t%s\nearnings\t%s\n", b.Balance, b.BurnRate, b.Spent, b.Earnings)
			return t.Flush()
		},
	}
	bal.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	var inst int64
	var limit int
	var chJSON bool
	charges := &cobra.Command{
		Use:   "charges",
		Short: "Itemized charges (compute, storage, traffic) with totals",
		Example: `  suanli billing charges
  suanli billing charges --instance 7 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := suanli.ChargeFilter{Limit: limit}
			if inst != 0 {
				f.InstanceID = &inst
			}
			s, err := a.client().FindCharges(cmd.Context(), f)
			if err != nil {
				return err
			}
			if chJSON {
				return a.printJSON(cmd, s)
			}
			out := cmd.OutOrStdout()
			t := table(out)
			fmt.Fprintln(t, "ID\tINSTANCE\tKIND\tFROM\tTO\tQUANTITY\tAMOUNT")
			for _, c := range s.Charges {
				id := "-"
				if c.InstanceID != 0 {
					id = strconv.FormatInt(c.InstanceID, 10)
				}
				amount := c.Amount.Decimal()
				if c.Kind == "credit" {
					amount = (-c.Amount).Decimal() + " (credit)"
				}
				fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, id, c.Kind, c.From.Local().Format(time.TimeOnly), c.To.Local().Format(time.TimeOnly), c.Quantity, amount)
			}
			t.Flush()
			fmt.Fprintln(out)
			for _, k := range []string{suanli.MeterCompute, suanli.MeterStorage, suanli.MeterInetUp, suanli.MeterInetDown} {
				if v, ok := s.ByKind[k]; ok {
					fmt.Fprintf(out, "%-10s %s\n", k, v)
				}
			}
			fmt.Fprintf(out, "%-10s %s (%d entries, %d shown)\n", "total", s.Total, s.Count, len(s.Charges))
			return nil
		},
	}
	charges.Flags().Int64Var(&inst, "instance", 0, "only this instance's charges")
	charges.Flags().IntVar(&limit, "limit", 100, "show at most this many entries (totals count all)")
	charges.Flags().BoolVar(&chJSON, "json", false, "print JSON")
	cmd.AddCommand(bal, charges, newInvoiceCmd(a))
	return cmd
}

func newAdminCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "admin", Short: "Operator commands"}
	var memo string
	credit := &cobra.Command{
		Use:     "credit ACCOUNT AMOUNT",
		Short:   "Grant credit to an account (operators only)",
		Example: "  suanli admin credit 2 25.00 --memo 'welcome credit'",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return suanli.FieldErrorf("account", "%q is not an account id", args[0])
			}
			amt, err := suanli.ParseMoney(args[1])
			if err != nil {
				return suanli.FieldErrorf("amount", "%v", err)
			}
			b, err := a.client().Credit(cmd.Context(), id, amt, memo)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "account %d: balance %s\n", id, b.Balance)
			return nil
		},
	}
	credit.Flags().StringVar(&memo, "memo", "", "why (shown in the account's charges)")
	var q suanli.Quota
	quota := &cobra.Command{
		Use:   "quota ACCOUNT [--gpus N] [--instances N]",
		Short: "Override how many GPUs and instances an account may run at once (0: the default)",
		Long: fmt.Sprintf(`Quotas keep a new or compromised account from running up a bill. By
default an account may run %d GPUs and %d instances at once, and %d GPUs and %d
instances in its first week.`, suanli.AccountQuota.GPUs, suanli.AccountQuota.Instances, suanli.NewAccountQuota.GPUs, suanli.NewAccountQuota.Instances),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return suanli.FieldErrorf("account", "%q is not an account id", args[0])
			}
			if err := a.client().SetQuota(cmd.Context(), id, q); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "account %d: quota %d GPUs, %d instances (0 = default)\n", id, q.GPUs, q.Instances)
			return nil
		},
	}
	quota.Flags().IntVar(&q.GPUs, "gpus", 0, "GPUs at once")
	quota.Flags().IntVar(&q.Instances, "instances", 0, "instances at once")
	cmd.AddCommand(credit, quota, newAdminAccountsCmd(a))
	return cmd
}
