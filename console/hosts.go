package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

func (c *Console) registerHostRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /hosts", c.page(c.handleHosts))
	mux.HandleFunc("POST /hosts/{id}/listing", c.form(c.handleListing))
	mux.HandleFunc("POST /hosts/{id}/unlist", c.form(c.handleUnlist))
	mux.HandleFunc("POST /hosts/join-token", c.form(c.handleJoinToken))
	mux.HandleFunc("POST /hosts/payout", c.form(c.handlePayout))
}

// listingInputs are a listing form's inputs, as typed; names are the
// API's ListingUpdate fields.
type listingInputs struct {
	PriceGPU, PriceCPU, PriceRAM, PriceDisk, PriceInetUp, PriceInetDown, MinBid, Region string
}

func listingInputsOf(m *suanli.Machine) listingInputs {
	l := m.Listing
	return listingInputs{PriceGPU: l.PriceGPU.Decimal(), PriceCPU: l.PriceCPU.Decimal(), PriceRAM: l.PriceRAM.Decimal(),
		PriceDisk: l.PriceDisk.Decimal(), PriceInetUp: l.PriceInetUp.Decimal(), PriceInetDown: l.PriceInetDown.Decimal(),
		MinBid: l.MinBid.Decimal(), Region: m.Region}
}

func readListingInputs(v url.Values) listingInputs {
	return listingInputs{PriceGPU: v.Get("price_gpu"), PriceCPU: v.Get("price_cpu"), PriceRAM: v.Get("price_ram"),
		PriceDisk: v.Get("price_disk"), PriceInetUp: v.Get("price_inet_up"), PriceInetDown: v.Get("price_inet_down"),
		MinBid: v.Get("min_bid"), Region: v.Get("region")}
}

// update turns the inputs into a listing update: empty inputs stay as they
// are. Errors are EINVALID naming the input.
func (in listingInputs) update() (suanli.ListingUpdate, error) {
	var u suanli.ListingUpdate
	for _, f := range []struct {
		name string
		text string
		dst  **suanli.Money
	}{
		{"price_gpu", in.PriceGPU, &u.PriceGPU}, {"price_cpu", in.PriceCPU, &u.PriceCPU}, {"price_ram", in.PriceRAM, &u.PriceRAM},
		{"price_disk", in.PriceDisk, &u.PriceDisk}, {"price_inet_up", in.PriceInetUp, &u.PriceInetUp},
		{"price_inet_down", in.PriceInetDown, &u.PriceInetDown}, {"min_bid", in.MinBid, &u.MinBid},
	} {
		if strings.TrimSpace(f.text) == "" {
			continue
		}
		m, err := suanli.ParseMoney(f.text)
		if err != nil {
			return u, suanli.FieldErrorf(f.name, "%v", err)
		}
		*f.dst = &m
	}
	if r := strings.TrimSpace(in.Region); r != "" {
		u.Region = &r
	}
	return u, nil
}

// machineRow is one machine on the hosts page.
type machineRow struct {
	M        *suanli.Machine
	GPUName  string
	GPUsUsed int
	Util     int // percent of GPUs rented
	In       listingInputs
	Error    *fieldError
	Open     bool                   // the listing form starts expanded
	Earned   *suanli.MachineEarning // over the earnings period; nil when nothing
}

// earningsDays is the period the hosts page shows earnings for.
const earningsDays = 30

// hostsPage is the hosts template's data.
type hostsPage struct {
	Machines []machineRow
	Earnings *suanli.Earnings // the last earningsDays, with what is available now
	Operator bool
	Token    *suanli.JoinToken
	Server   string

	PayoutAmount string // the payout form's amount, as typed
	PayoutErr    *fieldError
}

func (c *Console) hostsPage(r *http.Request) (*hostsPage, error) {
	ms, _, err := c.svc.FindMachines(r.Context(), suanli.MachineFilter{Limit: 1000})
	if err != nil {
		return nil, err
	}
	p := &hostsPage{Operator: suanli.PrincipalFromContext(r.Context()).Role == suanli.RoleOperator}
	now := c.now()
	if p.Earnings, err = c.svc.Earnings(r.Context(), now.AddDate(0, 0, -earningsDays), now.Add(time.Second)); err != nil {
		return nil, err
	}
	earned := map[int64]*suanli.MachineEarning{}
	for i := range p.Earnings.Machines {
		earned[p.Earnings.Machines[i].MachineID] = &p.Earnings.Machines[i]
	}
	for _, m := range ms {
		row := machineRow{M: m, In: listingInputsOf(m), GPUsUsed: len(m.GPUsInUse), Earned: earned[m.ID]}
		if n := len(m.Hardware.GPUs); n > 0 {
			row.GPUName = m.Hardware.GPUs[0].Name
			row.Util = 100 * row.GPUsUsed / n
		}
		p.Machines = append(p.Machines, row)
	}
	return p, nil
}

func (c *Console) handleHosts(w http.ResponseWriter, r *http.Request, s *session) error {
	p, err := c.hostsPage(r)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "hosts.html", &view{Title: "Hosts", Nav: "hosts", sess: s, Notice: notice(r), Page: p})
	return nil
}

// handleListing saves a machine's listing; errors come back on its form.
func (c *Console) handleListing(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "machine")
	if err != nil {
		return err
	}
	in := readListingInputs(r.PostForm)
	u, err := in.update()
	if err == nil {
		_, err = c.svc.ListMachine(r.Context(), id, u)
	}
	if err != nil {
		fe := formError(err)
		if fe == nil || suanli.ErrorCode(err) == suanli.ENOTFOUND {
			return err
		}
		p, perr := c.hostsPage(r)
		if perr != nil {
			return perr
		}
		for i := range p.Machines {
			if p.Machines[i].M.ID == id {
				p.Machines[i].In, p.Machines[i].Error, p.Machines[i].Open = in, fe, true
			}
		}
		c.render(w, r, statusOf(err), "hosts.html", &view{Title: "Hosts", Nav: "hosts", sess: s, Page: p})
		return nil
	}
	c.log.Info("console listing saved", "machine_id", id, "account_id", s.accountID)
	redirect(w, r, withNotice("/hosts", "listed"))
	return nil
}

func (c *Console) handleUnlist(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "machine")
	if err != nil {
		return err
	}
	if _, err := c.svc.UnlistMachine(r.Context(), id); err != nil {
		return err
	}
	c.log.Info("console machine unlisted", "machine_id", id, "account_id", s.accountID)
	redirect(w, r, withNotice("/hosts", "unlisted"))
	return nil
}

// handleJoinToken creates a one-time join token and shows it once, with
// the command that registers a machine with it.
func (c *Console) handleJoinToken(w http.ResponseWriter, r *http.Request, s *session) error {
	tok, err := c.svc.CreateJoinToken(r.Context(), 24*time.Hour)
	if err != nil {
		return err
	}
	p, err := c.hostsPage(r)
	if err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil || c.cfg.SecureCookies {
		scheme = "https"
	}
	p.Token, p.Server = tok, scheme+"://"+r.Host
	c.render(w, r, http.StatusOK, "hosts.html", &view{Title: "Hosts", Nav: "hosts", sess: s, Page: p})
	return nil
}

// handlePayout pays out the provider's earnings: the amount typed, or all
// that is available when it is empty. Errors (nothing to pay out, more
// than is available) come back on the form.
func (c *Console) handlePayout(w http.ResponseWriter, r *http.Request, s *session) error {
	text := strings.TrimSpace(r.PostFormValue("amount"))
	auditTarget(r, "payout of "+cmpOr(text, "everything available"))
	var amount suanli.Money
	var err error
	if text != "" {
		if amount, err = suanli.ParseMoney(text); err != nil {
			err = suanli.FieldErrorf("amount", "%v", err)
		} else if amount <= 0 {
			err = suanli.FieldErrorf("amount", "give a positive amount, or leave it empty to pay out everything available")
		}
	}
	if err == nil {
		_, err = c.svc.Payout(r.Context(), amount)
	}
	if err != nil {
		fe := formError(err)
		if fe == nil {
			return err
		}
		p, perr := c.hostsPage(r)
		if perr != nil {
			return perr
		}
		p.PayoutAmount, p.PayoutErr = text, fe
		c.render(w, r, statusOf(err), "hosts.html", &view{Title: "Hosts", Nav: "hosts", sess: s, Page: p})
		return nil
	}
	c.log.Info("console payout", "amount", amount.String(), "account_id", s.accountID)
	redirect(w, r, withNotice("/hosts", "paidout"))
	return nil
}
