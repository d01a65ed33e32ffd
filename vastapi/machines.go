package vastapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/suanli/suanli"
)

func (h *Handler) registerMachineRoutes() {
	h.handle(http.MethodGet, "/api/v0/machines", catMachineRead, h.handleMachines)
	h.handle(http.MethodGet, "/api/v0/machines/{id}", catMachineRead, h.handleMachine)
	h.handle(http.MethodPut, "/api/v0/machines/create_asks", catMachineWrite, h.handleCreateAsks)
	h.handle(http.MethodDelete, "/api/v0/machines/{id}/asks", catMachineWrite, h.handleUnlist)
	h.handle(http.MethodPut, "/api/v0/machines/{id}/minbid", catMachineWrite, h.handleMinBid)
}

// listingNames maps native listing fields onto create_asks's.
var listingNames = map[string]string{"price_gpu": "price_gpu", "price_disk": "price_disk", "price_inet_up": "price_inetu",
	"price_inet_down": "price_inetd", "min_bid": "price_min_bid", "end_date": "end_date", "price_cpu": "price_gpu"}

// machineJSON is a provider's machine in Vast's names: listed_gpu_cost and
// min_bid_price per GPU-hour, storage per GB-month, traffic per GB.
func (h *Handler) machineJSON(ctx context.Context, m *suanli.Machine) map[string]any {
	hw, l := m.Hardware, m.Listing
	verification := "unverified"
	if m.Verified {
		verification = "verified"
	}
	occ := make([]string, len(hw.GPUs))
	for i, g := range hw.GPUs {
		occ[i] = "_"
		if slices.Contains(m.GPUsInUse, g.Index) {
			occ[i] = "D"
		}
	}
	row := map[string]any{
		"id": m.ID, "machine_id": m.ID, "hostname": hw.Hostname, "num_gpus": len(hw.GPUs), "gpu_name": nil, "gpu_ram": nil,
		"disk_space": float64(hw.DiskFreeGB), "cpu_name": hw.CPUModel, "cpu_cores": hw.CPUCores, "cpu_arch": hw.CPUArch,
		"cpu_ram": float64(hw.RAMMB), "driver_version": nil, "cuda_max_good": nil,
		"reliability2": m.Reliability, "verification": verification, "public_ipaddr": nil,
		"geolocation": geolocation(m.Geolocation, m.Country), "country": nullIfEmpty(m.Country), "region": nullIfEmpty(m.Region),
		"listed": l.Listed, "listed_gpu_cost": dollars(l.PriceGPU), "min_bid_price": dollars(l.MinBid),
		"listed_storage_cost": dollars(l.PriceDisk), "listed_inet_up_cost": dollars(l.PriceInetUp),
		"listed_inet_down_cost": dollars(l.PriceInetDown), "listed_cpu_cost": dollars(l.PriceCPU),
		"end_date": epochPtr(l.EndDate), "gpu_occupancy": strings.Join(occ, " "), "num_reports": 0,
		"credit_discount_max": nil, "min_chunk": 1, "inet_up": m.InetUpMbps, "inet_down": m.InetDownMbps,
		"status": m.Status, "runtime": m.Runtime, "simulated": m.Simulated, "current_rentals_running": len(m.GPUsInUse),
	}
	if len(hw.GPUs) > 0 {
		g := hw.GPUs[0]
		row["gpu_name"], row["gpu_ram"], row["driver_version"], row["cuda_max_good"] = g.Name, float64(g.MemoryMB), g.DriverVersion, g.CUDAVersion
	}
	if ep, err := h.svc.Store.FindMachineSSH(ctx, m.ID); err == nil {
		row["public_ipaddr"] = nullIfEmpty(ep.Host)
	}
	return row
}

// handleMachines is GET /api/v0/machines?owner=me: the caller's machines.
func (h *Handler) handleMachines(w http.ResponseWriter, r *http.Request, _ args) error {
	p := suanli.PrincipalFromContext(r.Context())
	ms, _, err := h.svc.FindMachines(r.Context(), suanli.MachineFilter{OwnerID: &p.AccountID, Limit: 1000})
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(ms))
	for i, m := range ms {
		out[i] = h.machineJSON(r.Context(), m)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"machines": out})
}

// handleMachine is GET /api/v0/machines/{id}: a bare list of one machine.
func (h *Handler) handleMachine(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	m, err := h.svc.FindMachineByID(r.Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, []map[string]any{h.machineJSON(r.Context(), m)})
}

// handleCreateAsks is PUT /api/v0/machines/create_asks/: list a machine (or
// change its terms). Vast's listing options without a Suanli counterpart
// are refused when set, never silently dropped.
func (h *Handler) handleCreateAsks(w http.ResponseWriter, r *http.Request, _ args) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	n, has, err := body.num("machine")
	if err != nil {
		return err
	}
	if !has {
		return suanli.FieldErrorf("machine", "give the machine id (vastai show machines)")
	}
	id, err := n.int("machine")
	if err != nil {
		return err
	}
	m, err := h.svc.FindMachineByID(r.Context(), id)
	if err != nil {
		return err
	}
	var u suanli.ListingUpdate
	prices := []struct {
		field string
		dst   **suanli.Money
	}{{"price_gpu", &u.PriceGPU}, {"price_disk", &u.PriceDisk}, {"price_inetu", &u.PriceInetUp},
		{"price_inetd", &u.PriceInetDown}, {"price_min_bid", &u.MinBid}}
	if !m.IsGPU() {
		prices[0].dst = &u.PriceCPU // a CPU-only machine's price is per core-hour
	}
	for _, p := range prices {
		n, has, err := body.num(p.field)
		if err != nil {
			return err
		}
		if !has {
			continue
		}
		v, err := n.money(p.field)
		if err != nil {
			return err
		}
		*p.dst = &v
	}
	if n, has, err := body.num("end_date"); err != nil {
		return err
	} else if has {
		t := fromEpoch(n.float())
		u.EndDate = &t
	}
	if n, has, err := body.num("min_chunk"); err != nil {
		return err
	} else if has && n.float() > 1 {
		return suanli.FieldErrorf("min_chunk", "%s: every Suanli offer rents any number of the free GPUs; leave min_chunk out", n)
	}
	for field, why := range map[string]string{
		"credit_discount_max": "prepaid discounts are not offered on this marketplace; leave it out",
		"duration":            "a rolling end date is not supported; give end_date",
	} {
		if body.has(field) {
			return suanli.FieldErrorf(field, "%s", why)
		}
	}
	if n, has, err := body.num("vol_size"); err != nil {
		return err
	} else if has && n.float() > 0 {
		return suanli.FieldErrorf("vol_size", "volume offers are not listed separately here: renters create volumes on your machine; pass vol_size 0")
	}
	if _, err := h.svc.ListMachine(r.Context(), id, u); err != nil {
		return renameFields(err, listingNames)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"success": true, "extended": 0})
}

// handleUnlist is DELETE /api/v0/machines/{id}/asks/.
func (h *Handler) handleUnlist(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	if _, err := h.svc.UnlistMachine(r.Context(), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ok)
}

// handleMinBid is PUT /api/v0/machines/{id}/minbid/ {"price": p}: the
// minimum bid per GPU-hour of a listed machine. An unlisted machine stays
// unlisted: list it first.
func (h *Handler) handleMinBid(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	n, has, err := body.num("price")
	if err != nil {
		return err
	}
	if !has {
		return suanli.FieldErrorf("price", "give the minimum bid in $/GPU-hour")
	}
	bid, err := n.money("price")
	if err != nil {
		return err
	}
	m, err := h.svc.FindMachineByID(r.Context(), id)
	if err != nil {
		return err
	}
	if !m.Listing.Listed {
		return suanli.Errorf(suanli.ECONFLICT, "machine %d is not listed: list it (vastai list machine %d) before setting its minimum bid", id, id)
	}
	if _, err := h.svc.ListMachine(r.Context(), id, suanli.ListingUpdate{MinBid: &bid}); err != nil {
		return renameFields(err, map[string]string{"min_bid": "price"})
	}
	return writeJSON(w, http.StatusOK, ok)
}
