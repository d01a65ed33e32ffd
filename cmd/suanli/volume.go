package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
)

func newVolumeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "volume", Short: "Volumes: storage on a machine that outlives instances (-v NAME:/path)"}
	var c suanli.VolumeCreate
	var tags []string
	create := &cobra.Command{
		Use:   "create NAME --machine M --size GB",
		Short: "Create a volume on a machine, billed per GB-month until deleted",
		Example: `  suanli volume create data --machine 3 --size 100 --project vision --tag team=ml
  suanli create 3 --image pytorch/pytorch -v data:/workspace -- python train.py`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Name = args[0]
			var err error
			if c.Tags, err = parseTags(tags); err != nil {
				return err
			}
			v, err := a.client().CreateVolume(cmd.Context(), c)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume %q (%d GB) on machine %d, %s/GB-month (%s/month)\nattach: suanli create %d --image IMAGE -v %s:/data\n",
				v.Name, v.SizeGB, v.MachineID, v.Rate, v.Rate*suanli.Money(v.SizeGB), v.MachineID, v.Name)
			return nil
		},
	}
	create.Flags().Int64Var(&c.MachineID, "machine", 0, "the machine (offer id) to keep it on")
	create.Flags().Int64Var(&c.SizeGB, "size", 0, "size in GB")
	create.Flags().StringVar(&c.Project, "project", "", "the project its cost belongs to")
	create.Flags().StringArrayVar(&tags, "tag", nil, "a cost tag KEY=VALUE (repeatable), for budgets and reports")
	create.MarkFlagRequired("machine")
	create.MarkFlagRequired("size")
	var all, jsonOut bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "Your volumes, where they are attached, what they cost so far, and their project and tags",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			vs, err := a.client().FindVolumes(cmd.Context(), all)
			if err != nil {
				return err
			}
			if jsonOut {
				return a.printJSON(cmd, vs)
			}
			t := table(cmd.OutOrStdout())
			fmt.Fprintln(t, "NAME\tMACHINE\tSIZE\tSTATUS\tATTACHED TO\tCOST SO FAR\tPROJECT\tTAGS\tCREATED")
			for _, v := range vs {
				att, project, tags := "-", "-", "-"
				if v.AttachedTo != 0 {
					att = fmt.Sprint(v.AttachedTo)
				}
				if v.Project != "" {
					project = v.Project
				}
				if len(v.Tags) > 0 {
					tags = formatTags(v.Tags)
				}
				fmt.Fprintf(t, "%s\t%d\t%d GB\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, v.MachineID, v.SizeGB, v.Status, att, v.CostSoFar, project, tags,
					v.CreatedAt.Local().Format(time.DateTime))
			}
			return t.Flush()
		},
	}
	ls.Flags().BoolVar(&all, "all", false, "include deleted volumes")
	ls.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a volume: billing stops, and the host overwrites and removes its data",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.client().DeleteVolume(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "volume %q deleted (cost %s); machine %d wipes it\n", v.Name, v.CostSoFar, v.MachineID)
			return nil
		},
	}
	cmd.AddCommand(create, ls, del)
	return cmd
}

// parseMounts reads -v NAME:/path flags.
func parseMounts(vs []string) ([]suanli.VolumeMount, error) {
	var out []suanli.VolumeMount
	for _, v := range vs {
		name, path, ok := strings.Cut(v, ":")
		if !ok || name == "" || !strings.HasPrefix(path, "/") {
			return nil, suanli.FieldErrorf("volume", "%q: write NAME:/path, e.g. data:/workspace", v)
		}
		out = append(out, suanli.VolumeMount{Name: name, Path: path})
	}
	return out, nil
}
