// Command suanli is the one Suanli binary: the control plane (server), the
// host agent (agent), both at once with a local agent and an operator
// account (up), and the client commands for renters, providers and
// operators.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor/advisecli"
	shttp "github.com/suanli/suanli/http"
)

// Version is the build's version, set with -ldflags "-X main.Version=…".
var Version = "dev"

// DefaultAddr is where `suanli up` and `suanli server` listen.
const DefaultAddr = "127.0.0.1:8470"

// app holds the global flags and builds the API client from them.
// Precedence: defaults < the home's config file < env (SUANLI_*) < flags.
type app struct {
	home   string
	server string
	apiKey string
	team   string
	json   bool
	caFile string // a CA certificate to pin for an HTTPS server (--ca-file)
}

// clientConfig is the client's config file (home/config.json, mode 0600).
type clientConfig struct {
	Server string `json:"server"`
	APIKey string `json:"api_key"`
	// CAPEM pins the server's CA (`suanli server --tls auto` writes it):
	// HTTPS to the server trusts that CA only.
	CAPEM string `json:"ca_pem,omitempty"`
}

func defaultHome() string {
	if h := os.Getenv("SUANLI_HOME"); h != "" {
		return h
	}
	dir, err := os.UserHomeDir()
	if err != nil {
		return ".suanli"
	}
	return filepath.Join(dir, ".suanli")
}

func (a *app) configPath() string { return filepath.Join(a.home, "config.json") }

func readClientConfig(path string) (clientConfig, error) {
	var c clientConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}

func writeClientConfig(path string, c clientConfig) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// client returns the API client for the configured server and key.
func (a *app) client() *shttp.Client {
	c, _ := readClientConfig(a.configPath())
	server, key := c.Server, c.APIKey
	if v := os.Getenv("SUANLI_SERVER"); v != "" {
		server = v
	}
	if v := os.Getenv("SUANLI_API_KEY"); v != "" {
		key = v
	}
	if a.server != "" {
		server = a.server
	}
	if a.apiKey != "" {
		key = a.apiKey
	}
	if server == "" {
		server = "http://" + DefaultAddr
	}
	cl := shttp.NewClient(server, key)
	cl.Team = os.Getenv("SUANLI_TEAM")
	if a.team != "" {
		cl.Team = a.team
	}
	a.pinCA(cl, c.CAPEM)
	return cl
}

func (a *app) printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newRootCmd() *cobra.Command {
	a := &app{}
	root := &cobra.Command{
		Use:   "suanli",
		Short: "Suanli (算力): an open marketplace for renting compute",
		Long: `Suanli is an open, self-hostable marketplace for renting compute.

Start everything on this machine (control plane, a local host agent, the
console) with no setup:

  suanli up

Then, from another terminal:

  suanli search 'num_gpus>=1 dph<1' -o dph
  suanli create OFFER --image IMAGE -- CMD ARGS
  suanli logs ID -f
  suanli billing charges --instance ID
  suanli destroy ID

Client commands find the server and API key in $SUANLI_HOME/config.json
(written by 'up' and 'server'), SUANLI_SERVER / SUANLI_API_KEY, or --server /
--api-key.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.PersistentFlags().StringVar(&a.home, "home", defaultHome(), "Suanli home directory (data, config); env SUANLI_HOME")
	root.PersistentFlags().StringVar(&a.server, "server", "", "server URL (default from config, SUANLI_SERVER, or http://"+DefaultAddr+")")
	root.PersistentFlags().StringVar(&a.apiKey, "api-key", "", "API key (default from config or SUANLI_API_KEY)")
	root.PersistentFlags().StringVar(&a.team, "team", "", "act on this team (id or name) with your role in it; env SUANLI_TEAM")
	root.PersistentFlags().StringVar(&a.caFile, "ca-file", os.Getenv("SUANLI_CA_FILE"), "CA certificate to trust for an HTTPS server (default: the CA pinned in the config); env SUANLI_CA_FILE")
	root.AddGroup(&cobra.Group{ID: "run", Title: "Run Suanli:"}, &cobra.Group{ID: "rent", Title: "Rent:"},
		&cobra.Group{ID: "host", Title: "Provide:"}, &cobra.Group{ID: "money", Title: "Pay:"},
		&cobra.Group{ID: "access", Title: "Access and audit:"})
	for _, c := range []*cobra.Command{newUpCmd(a), newServerCmd(a), newAgentCmd(a), newMigrateCmd(a), newClusterCmd(a)} {
		c.GroupID = "run"
		root.AddCommand(c)
	}
	root.AddCommand(newWatchdogCmd())
	for _, c := range []*cobra.Command{newSearchCmd(a), newQuoteCmd(a), newCreateCmd(a), newLsCmd(a), newShowCmd(a), newLogsCmd(a),
		newStateCmd(a, "stop"), newStateCmd(a, "start"), newStateCmd(a, "destroy"), newExecCmd(a), newTopCmd(a), newTemplatesCmd(a), newVolumeCmd(a), newSchedulesCmd(a),
		newSSHCmd(a), newSSHKeysCmd(a), newAllowlistCmd(a), newBidCmd(a), newReserveCmd(a), newMarketCmd(a),
		newWindowsCmd(a), newBookCmd(a), newBookingsCmd(a)} {
		c.GroupID = "rent"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newHostCmd(a), newDoctorCmd(a)} {
		c.GroupID = "host"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newBillingCmd(a), newBudgetCmd(a), newCostCmd(a), newAdminCmd(a)} {
		c.GroupID = "money"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newKeysCmd(a), newAuthCmd(a), newTeamsCmd(a), newAccountCmd(a), newAuditCmd(a), newProgressCmd(a)} {
		c.GroupID = "access"
		root.AddCommand(c)
	}
	root.AddGroup(&cobra.Group{ID: "advise", Title: "Advise:"})
	for _, c := range advisecli.Commands(func(context.Context) (suanli.OfferService, error) { return a.client(), nil }) {
		c.GroupID = "advise"
		root.AddCommand(c)
	}
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code) // a remote command's exit code, already explained by its output
		}
		fmt.Fprintln(os.Stderr, "error:", errorText(err))
		os.Exit(exitCode(err))
	}
}

func errorText(err error) string {
	var e *suanli.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// exitCode maps error codes to distinct exit statuses for scripts.
func exitCode(err error) int {
	switch suanli.ErrorCode(err) {
	case suanli.EINVALID:
		return 2
	case suanli.ENOTFOUND:
		return 3
	case suanli.ECONFLICT:
		return 4
	case suanli.EUNAUTHORIZED, suanli.EFORBIDDEN:
		return 5
	case suanli.EPAYMENTREQUIRED:
		return 6
	case suanli.EUNAVAILABLE:
		return 7
	case suanli.ERATELIMITED:
		return 8
	}
	return 1
}
