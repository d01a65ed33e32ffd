package vastapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

func (h *Handler) registerInstanceRoutes() {
	h.handle(http.MethodPut, "/api/v0/asks/{id}", catInstanceWrite, h.handleCreate)
	h.handle(http.MethodGet, "/api/v0/instances", catInstanceRead, h.handleListV0)
	h.handle(http.MethodPut, "/api/v0/instances", catInstanceWrite, h.handleManageMany)
	h.handle(http.MethodGet, "/api/v1/instances", catInstanceRead, h.handleListV1)
	h.handle(http.MethodGet, "/api/v0/instances/{id}", catInstanceRead, h.handleShow)
	h.handle(http.MethodPut, "/api/v0/instances/{id}", catInstanceWrite, h.handleManage)
	h.handle(http.MethodDelete, "/api/v0/instances/{id}", catInstanceWrite, h.handleDestroy)
	h.handle(http.MethodPut, "/api/v0/instances/reboot/{id}", catInstanceWrite, h.handleReboot)
	h.handle(http.MethodPut, "/api/v0/instances/bid_price/{id}", catInstanceWrite, h.handleChangeBid)
	h.handle(http.MethodPut, "/api/v0/instances/request_logs/{id}", catInstanceRead, h.handleLogs, asRead)
	h.handle(http.MethodPut, "/api/v0/instances/command/{id}", catInstanceWrite, h.handleExecute)
}

// createNames maps the native create fields onto the Vast body's.
var createNames = map[string]string{"offer_id": "id", "disk_gb": "disk", "cmd": "onstart", "bid": "price",
	"rental_type": "price", "ports": "env", "template": "template_hash_id", "registry_auth": "image_login"}

// keepAlive is the command an ssh-type Vast instance runs: the onstart
// script, then nothing until it is stopped, so that the instance stays up
// for SSH as Vast's do. The onstart script is the shell's $1.
const keepAlive = `trap 'exit 0' TERM INT; sh -c "$1"; while :; do sleep 3600 & wait $!; done`

// handleCreate rents offer {id}: PUT /api/v0/asks/{id}/.
func (h *Handler) handleCreate(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	c, err := translateCreate(id, body)
	if err != nil {
		return err
	}
	in, err := h.svc.CreateInstance(r.Context(), *c)
	if err != nil {
		return renameFields(err, createNames)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"success": true, "new_contract": in.ID})
}

// translateCreate turns Vast's create body into a rental request.
func translateCreate(offerID int64, body obj) (*suanli.InstanceCreate, error) {
	c := &suanli.InstanceCreate{OfferID: offerID}
	var err error
	if c.Image, _, err = body.str("image"); err != nil {
		return nil, err
	}
	if c.Label, _, err = body.str("label"); err != nil {
		return nil, err
	}
	if n, ok, err := body.num("disk"); err != nil {
		return nil, err
	} else if ok {
		if c.DiskGB, err = n.int("disk"); err != nil {
			return nil, suanli.FieldErrorf("disk", "%s GB: give whole GB", n)
		}
	}
	if n, ok, err := body.num("price"); err != nil {
		return nil, err
	} else if ok {
		bid, err := n.money("price")
		if err != nil {
			return nil, err
		}
		c.Bid = &bid // a price makes the rental interruptible at that bid
	}
	for _, f := range []string{"template_hash_id", "template_hash"} {
		if t, ok, err := body.str(f); err != nil {
			return nil, err
		} else if ok {
			c.Template = t // Suanli's templates are named: `suanli templates`
		}
	}
	if login, ok, err := body.str("image_login"); err != nil {
		return nil, err
	} else if ok && strings.TrimSpace(login) != "" {
		if c.RegistryAuth, err = parseLogin(login); err != nil {
			return nil, err
		}
	}
	if err := translateEnv(c, body); err != nil {
		return nil, err
	}
	return c, translateCommand(c, body)
}

// parseLogin reads Vast's image_login, docker login's arguments: "-u USER
// -p PASSWORD [REGISTRY]". The password becomes a sealed secret natively.
func parseLogin(login string) (*suanli.RegistryAuth, error) {
	ra := &suanli.RegistryAuth{}
	f := strings.Fields(login)
	for i := 0; i < len(f); i++ {
		switch a := f[i]; {
		case (a == "-u" || a == "--username" || a == "-p" || a == "--password") && i+1 < len(f):
			if a == "-u" || a == "--username" {
				ra.Username = f[i+1]
			} else {
				ra.Password = f[i+1]
			}
			i++
		case strings.HasPrefix(a, "-"):
			return nil, suanli.FieldErrorf("image_login", "%q: write -u USER -p PASSWORD [REGISTRY]", a)
		case ra.Server == "":
			ra.Server = a
		default:
			return nil, suanli.FieldErrorf("image_login", "write -u USER -p PASSWORD [REGISTRY]")
		}
	}
	if ra.Username == "" || ra.Password == "" {
		return nil, suanli.FieldErrorf("image_login", "write -u USER -p PASSWORD [REGISTRY]: both a user and a password")
	}
	return ra, nil
}

// translateEnv reads Vast's env object: KEY: value pairs are environment
// variables, "-p HOST:CONTAINER" keys publish the container's TCP port
// (Suanli picks the host port and reports it), "-h NAME" is ignored (the
// hostname is the host's), anything else is refused.
func translateEnv(c *suanli.InstanceCreate, body obj) error {
	raw, found := body["env"]
	if !found || isNull(raw) {
		return nil
	}
	env, err := parseObj("env", raw)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "-p "):
			p, err := containerPort(strings.TrimSpace(k[3:]))
			if err != nil {
				return err
			}
			c.Ports = append(c.Ports, p)
		case strings.HasPrefix(k, "-h "), k == "-h":
		case strings.HasPrefix(k, "-"):
			return suanli.FieldErrorf("env", "%q: only -e VAR=value and -p PORT options are understood here", k)
		default:
			var s string
			if json.Unmarshal(env[k], &s) != nil {
				s = strings.Trim(string(env[k]), " ")
			}
			if c.Env == nil {
				c.Env = map[string]string{}
			}
			c.Env[k] = s
		}
	}
	return nil
}

// containerPort reads "8080:8080", "8080" or "10022:22/tcp" as the
// container's TCP port.
func containerPort(spec string) (int, error) {
	proto := "tcp"
	if i := strings.IndexByte(spec, '/'); i >= 0 {
		spec, proto = spec[:i], spec[i+1:]
	}
	if proto != "tcp" {
		return 0, suanli.FieldErrorf("env", "-p %s/%s: only TCP ports are published", spec, proto)
	}
	if i := strings.LastIndexByte(spec, ':'); i >= 0 {
		spec = spec[i+1:]
	}
	p, err := strconv.Atoi(spec)
	if err != nil || p < 1 || p > 65535 {
		return 0, suanli.FieldErrorf("env", "-p %s: give a port between 1 and 65535", spec)
	}
	return p, nil
}

// translateCommand reads onstart, args and runtype. The "args" runtype runs
// the entrypoint (sent as onstart) with args; ssh runtypes run the onstart
// script and then keep the instance up for SSH.
func translateCommand(c *suanli.InstanceCreate, body obj) error {
	onstart, _, err := body.str("onstart")
	if err != nil {
		return err
	}
	if ep, ok, err := body.str("entrypoint"); err != nil {
		return err
	} else if ok && onstart == "" {
		onstart = ep
	}
	runtype, _, err := body.str("runtype")
	if err != nil {
		return err
	}
	var argv []string
	if raw, found := body["args"]; found && !isNull(raw) {
		if err := json.Unmarshal(raw, &argv); err != nil {
			var one string
			if json.Unmarshal(raw, &one) != nil {
				return suanli.FieldErrorf("args", "want a list of strings, got %s", abbrev(raw))
			}
			argv = []string{one}
		}
		if runtype == "" {
			runtype = "args"
		}
	}
	if strings.Contains(runtype, "jupyter") {
		return suanli.FieldErrorf("runtype", "%q: this marketplace does not start Jupyter for you; use ssh and start it in onstart", runtype)
	}
	switch {
	case runtype == "args":
		if onstart != "" {
			c.Cmd = append([]string{onstart}, argv...)
		} else if len(argv) > 0 {
			c.Cmd = argv
		}
	case onstart != "":
		c.Cmd = []string{"sh", "-c", keepAlive, "onstart", onstart}
	}
	return nil
}

// commandOf reads an instance's command back into Vast's terms.
func commandOf(cmd []string) (runtype, onstart string, args []string) {
	if len(cmd) == 5 && cmd[0] == "sh" && cmd[1] == "-c" && cmd[2] == keepAlive {
		return "ssh ssh_proxy", cmd[4], nil
	}
	return "args", "", cmd
}

// vastStatus maps an instance's status onto Vast's actual_status and
// cur_state, and its desired state onto intended_status.
func vastStatus(in *suanli.Instance) (actual, cur, intended string) {
	switch in.Status {
	case suanli.StatusPending:
		actual = "created"
	case suanli.StatusScheduling:
		actual = "scheduling"
	case suanli.StatusPulling:
		actual = "loading"
	case suanli.StatusRunning, suanli.StatusStopping, suanli.StatusPreempting:
		actual = "running"
	case suanli.StatusLost:
		actual = "offline"
	case suanli.StatusDestroyed:
		actual = "destroyed"
	default: // stopped, preempted, exited, failed
		actual = "exited"
	}
	cur = "stopped"
	if in.HoldsGPUs() && in.Status != suanli.StatusLost {
		cur = "running"
	}
	intended = in.Desired
	return
}

// machineInfo is what an instance row shows of its machine: the public
// offer (nil once the machine is unlisted) and the agent's SSH endpoint.
type machineInfo struct {
	offer *suanli.Offer
	ssh   *suanli.SSHEndpoint
}

// machines looks up machine info once per machine for one reply. Callers
// pass only instances the caller may see (from FindInstance*).
type machines struct {
	h     *Handler
	ctx   context.Context
	cache map[int64]machineInfo
}

func (h *Handler) machines(ctx context.Context) *machines {
	return &machines{h: h, ctx: ctx, cache: map[int64]machineInfo{}}
}

func (m *machines) get(id int64) machineInfo {
	if mi, ok := m.cache[id]; ok {
		return mi
	}
	var mi machineInfo
	if o, err := m.h.svc.FindOfferByID(m.ctx, id); err == nil {
		mi.offer = o
	}
	if ep, err := m.h.svc.Store.FindMachineSSH(m.ctx, id); err == nil {
		mi.ssh = ep
	}
	m.cache[id] = mi
	return mi
}

// instanceJSON is an instance in Vast's names and units.
func (h *Handler) instanceJSON(in *suanli.Instance, mi machineInfo) map[string]any {
	actual, cur, intended := vastStatus(in)
	runtype, onstart, argv := commandOf(in.Cmd)
	storageHour := in.Rates.StoragePerHour(in.DiskGB)
	env := [][2]string{}
	keys := make([]string, 0, len(in.Env))
	for k := range in.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, [2]string{k, in.Env[k]})
	}
	ports := map[string]any{}
	for _, p := range in.Ports {
		env = append(env, [2]string{fmt.Sprintf("-p %d:%d", p, p), "1"})
		if hp, ok := in.PortMap[p]; ok {
			ports[fmt.Sprintf("%d/tcp", p)] = []map[string]string{{"HostIp": "0.0.0.0", "HostPort": strconv.Itoa(hp)}}
		}
	}
	row := map[string]any{
		"id": in.ID, "machine_id": in.MachineID, "host_id": in.HostID, "label": nullIfEmpty(in.Label),
		"actual_status": actual, "cur_state": cur, "next_state": intended, "intended_status": intended,
		"status_msg": nullIfEmpty(in.StatusMessage), "suanli_status": in.Status,
		"image_uuid": in.Image, "image_runtype": runtype, "onstart": nullIfEmpty(onstart), "image_args": argv,
		"extra_env": env, "template_name": nullIfEmpty(in.Template),
		"num_gpus": in.GPUCount, "gpu_name": in.GPUName, "cpu_cores": in.CPUCores, "cpu_cores_effective": float64(in.CPUCores),
		"cpu_ram": in.RAMGB * mbPerGB, "disk_space": float64(in.DiskGB),
		"dph_base": dollars(in.Rates.ComputePerHour), "dph_total": dollars(in.Rates.ComputePerHour + storageHour),
		"storage_cost": dollars(in.Rates.StoragePerMonth), "storage_total_cost": dollars(storageHour),
		"inet_up_cost": dollars(in.Rates.InetUpPerGB), "inet_down_cost": dollars(in.Rates.InetDownPerGB),
		"is_bid": in.RentalType == suanli.RentalInterruptible, "rental_type": in.RentalType, "bid": nil,
		"cost_so_far": dollars(in.CostSoFar),
		"start_date":  epoch(in.CreatedAt), "end_date": nil, "uptime_mins": nil, "duration": h.now().Sub(in.CreatedAt).Seconds(),
		"gpu_util": nil, "cpu_util": nil, "mem_usage": nil, "vmem_usage": nil, "gpu_temp": nil,
		"ssh_host": nil, "ssh_port": nil, "ssh_idx": nil, "public_ipaddr": nil, "ports": ports,
		"gpu_ram": nil, "gpu_totalram": nil, "reliability2": nil, "inet_up": nil, "inet_down": nil, "geolocation": nil,
		"driver_version": nil, "cuda_max_good": nil, "compute_cap": nil, "cpu_name": nil, "cpu_arch": nil,
		"dlperf": nil, "total_flops": nil, "min_bid": nil, "verification": nil, "direct_port_count": 0,
	}
	if in.Bid > 0 {
		row["bid"] = dollars(in.Bid)
	}
	if in.StartedAt != nil && in.Status == suanli.StatusRunning {
		row["uptime_mins"] = h.now().Sub(*in.StartedAt).Minutes()
	}
	if t := in.Telemetry; t != nil {
		row["gpu_util"], row["cpu_util"] = t.GPUUtilPercent, t.CPUPercent
		row["mem_usage"], row["vmem_usage"] = float64(t.MemoryMB)/1000, float64(t.GPUMemoryMB)/1000
	}
	if ep := mi.ssh; ep != nil {
		row["ssh_host"], row["ssh_port"], row["public_ipaddr"] = nullIfEmpty(ep.Host), ep.Port, nullIfEmpty(ep.Host)
		ports["22/tcp"] = []map[string]string{{"HostIp": "0.0.0.0", "HostPort": strconv.Itoa(ep.Port)}}
	}
	if o := mi.offer; o != nil {
		row["gpu_ram"], row["gpu_totalram"] = o.GPURAM*mbPerGB, o.GPURAM*mbPerGB*float64(in.GPUCount)
		row["reliability2"], row["inet_up"], row["inet_down"] = o.Reliability, o.InetUp, o.InetDown
		row["geolocation"], row["driver_version"], row["cuda_max_good"] = geolocation(o.Geolocation, o.Country), o.DriverVersion, o.CUDAVersion
		row["compute_cap"], row["cpu_name"], row["cpu_arch"] = o.ComputeCap, o.CPUName, o.CPUArch
		row["dlperf"], row["min_bid"] = o.DLPerf, dollars(o.MinBid)
		row["verification"] = map[bool]string{true: "verified", false: "unverified"}[o.Verified]
		if o.TotalGPUs > 0 {
			row["total_flops"] = o.TotalFlops / float64(max(o.NumGPUs, 1)) * float64(in.GPUCount)
		}
	}
	return row
}

// handleShow is GET /api/v0/instances/{id}/: one instance under the plural
// key, as Vast answers.
func (h *Handler) handleShow(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	in, err := h.svc.FindInstanceByID(r.Context(), id)
	if err != nil {
		return err
	}
	row := h.instanceJSON(in, h.machines(r.Context()).get(in.MachineID))
	return writeJSON(w, http.StatusOK, map[string]any{"instances": row})
}

// liveInstances lists the caller's instances that are not destroyed, as
// Vast rows, newest first.
func (h *Handler) liveInstances(ctx context.Context) ([]map[string]any, error) {
	live := true
	ins, _, err := h.svc.FindInstances(ctx, suanli.InstanceFilter{Live: &live, Limit: 1000})
	if err != nil {
		return nil, err
	}
	ms := h.machines(ctx)
	rows := make([]map[string]any, len(ins))
	for i, in := range ins {
		rows[i] = h.instanceJSON(in, ms.get(in.MachineID))
	}
	return rows, nil
}

// handleListV0 is GET /api/v0/instances?owner=me.
func (h *Handler) handleListV0(w http.ResponseWriter, r *http.Request, _ args) error {
	rows, err := h.liveInstances(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"instances": rows})
}

// handleManage is PUT /api/v0/instances/{id}/: {"state": "running" |
// "stopped"} starts or stops; {"label": …} labels.
func (h *Handler) handleManage(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if err := h.manage(r.Context(), id, body); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ok)
}

// handleManageMany is PUT /api/v0/instances/ with {"ids": […], "state": …}
// (start/stop instances). It stops at the first failure, which names the
// instance.
func (h *Handler) handleManageMany(w http.ResponseWriter, r *http.Request, _ args) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var ids []int64
	if raw, found := body["ids"]; !found || json.Unmarshal(raw, &ids) != nil || len(ids) == 0 {
		return suanli.FieldErrorf("ids", "give the instance ids as a list of numbers")
	}
	delete(body, "ids")
	for _, id := range ids {
		if err := h.manage(r.Context(), id, body); err != nil {
			return fmt.Errorf("instance %d: %w", id, err)
		}
	}
	return writeJSON(w, http.StatusOK, ok)
}

func (h *Handler) manage(ctx context.Context, id int64, body obj) error {
	state, hasState, err := body.str("state")
	if err != nil {
		return err
	}
	label, hasLabel, err := body.str("label")
	if err != nil {
		return err
	}
	if _, found := body["label"]; found && !hasLabel {
		hasLabel = true // "label": null clears it
	}
	if !hasState && !hasLabel {
		return suanli.FieldErrorf("state", "give state (running or stopped) or label")
	}
	if hasLabel {
		if _, err := h.svc.UpdateInstance(ctx, id, suanli.InstanceUpdate{Label: &label}); err != nil {
			return err
		}
	}
	switch {
	case !hasState:
	case state == "running":
		_, err = h.svc.StartInstance(ctx, id)
	case state == "stopped":
		_, err = h.svc.StopInstance(ctx, id)
	default:
		err = suanli.FieldErrorf("state", "%q: use running or stopped", state)
	}
	return err
}

// handleDestroy is DELETE /api/v0/instances/{id}/.
func (h *Handler) handleDestroy(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	if _, err := h.svc.DestroyInstance(r.Context(), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ok)
}

// handleReboot is PUT /api/v0/instances/reboot/{id}/: stop, then, once the
// host confirms the stop, start again on the same GPUs. A stopped instance
// is just started. The reply comes after the stop is accepted.
func (h *Handler) handleReboot(w http.ResponseWriter, r *http.Request, a args) error {
	id, err := a.id("id")
	if err != nil {
		return err
	}
	in, err := h.svc.FindInstanceByID(r.Context(), id)
	if err != nil {
		return err
	}
	if !in.HoldsGPUs() {
		if _, err := h.svc.StartInstance(r.Context(), id); err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, ok)
	}
	if _, err := h.svc.StopInstance(r.Context(), id); err != nil {
		return err
	}
	h.goBackground(r, h.cfg.RebootWait, func(ctx context.Context) {
		if err := h.startWhenStopped(ctx, id); err != nil {
			h.log.Warn("reboot: start after stop", "instance_id", id, "err", err)
		}
	})
	return writeJSON(w, http.StatusOK, ok)
}

// startWhenStopped waits until the instance no longer holds its GPUs, then
// starts it.
func (h *Handler) startWhenStopped(ctx context.Context, id int64) error {
	tick := newTicker(h.cfg.PollInterval)
	defer tick.Stop()
	for {
		in, err := h.svc.FindInstanceByID(ctx, id)
		if err != nil {
			return err
		}
		if in.Status == suanli.StatusDestroyed {
			return nil
		}
		if !in.HoldsGPUs() {
			_, err := h.svc.StartInstance(ctx, id)
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("instance %d did not stop within the reboot wait: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

// bidChanger is the native service's bid change, where the marketplace has
// one (the market branch adds it to control.Service).
type bidChanger interface {
	ChangeBid(ctx context.Context, id int64, bid suanli.Money) (*suanli.Instance, error)
}

// handleChangeBid is PUT /api/v0/instances/bid_price/{id}/ {"price": p}:
// p is the new bid in dollars per hour for the whole instance.
func (h *Handler) handleChangeBid(w http.ResponseWriter, r *http.Request, a args) error {
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
		return suanli.FieldErrorf("price", "give the new bid in $/hour for the instance (no automatic winning price here)")
	}
	bid, err := n.money("price")
	if err != nil {
		return err
	}
	bc, can := any(h.svc).(bidChanger)
	if !can {
		return &notImplemented{msg: "changing a bid is not available on this marketplace yet: destroy the instance and create it again with the new price"}
	}
	if _, err := bc.ChangeBid(r.Context(), id, bid); err != nil {
		return renameFields(err, map[string]string{"bid": "price"})
	}
	return writeJSON(w, http.StatusOK, ok)
}
