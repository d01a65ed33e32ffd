package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// rentInputs are the create form's inputs, as typed. Input names are the
// API's field names, so a service error's Field marks the right input.
type rentInputs struct {
	Image, Label, Cmd, Env, Disk, GPUs, Cores, Type, Bid string
	Project, Tags                                        string
	TTL, Idle, IdleMinutes, StopWindows, DestroyDays     string // ghost-spend guards
	Restart, Recover                                     string
	Template, Ports                                      string
	Volumes                                              []string          // names of the volumes to attach
	Paths                                                map[string]string // where each is mounted, by name
}

// Guard and restart inputs are named after the API's fields, so that an
// error's field marks them.
func readRentInputs(v url.Values) rentInputs {
	return rentInputs{Image: v.Get("image"), Label: v.Get("label"), Cmd: v.Get("cmd"), Env: v.Get("env"), Disk: v.Get("disk_gb"),
		GPUs: v.Get("num_gpus"), Cores: v.Get("cpu_cores"), Type: v.Get("rental_type"), Bid: v.Get("bid"),
		Project: v.Get("project"), Tags: v.Get("tags"), TTL: v.Get("guards.max_runtime"), Idle: v.Get("idle_stop"),
		IdleMinutes: v.Get("guards.idle_stop_minutes"), StopWindows: v.Get("guards.stop_windows"),
		DestroyDays: v.Get("guards.destroy_after_stopped_days"), Restart: v.Get("restart.policy"), Recover: v.Get("restart.recover"),
		Template: v.Get("template"), Ports: v.Get("ports"), Volumes: v["volume"], Paths: volumePaths(v)}
}

// volumePaths reads the volume picker's path inputs (path.NAME).
func volumePaths(v url.Values) map[string]string {
	out := map[string]string{}
	for k := range v {
		if name, ok := strings.CutPrefix(k, "path."); ok {
			out[name] = v.Get(k)
		}
	}
	return out
}

// mounts turns the picked volumes into mounts (-v NAME:/path). The
// service checks that each is the caller's, on the offer's machine, free,
// and mounted at a distinct absolute path.
func (in rentInputs) mounts() ([]suanli.VolumeMount, error) {
	var out []suanli.VolumeMount
	for _, name := range in.Volumes {
		p := strings.TrimSpace(in.Paths[name])
		if p == "" {
			return nil, suanli.FieldErrorf("volumes", "give the path to mount volume %q at, such as /data", name)
		}
		out = append(out, suanli.VolumeMount{Name: name, Path: p})
	}
	return out, nil
}

// parsePairs reads NAME=value lines for field; blank lines and lines
// starting with # are skipped. The service checks the names.
func parsePairs(field, text string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, suanli.FieldErrorf(field, "line %d: %q is not NAME=value", i+1, t)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// parsePorts reads container ports separated by commas or spaces.
func parsePorts(text string) ([]int, error) {
	var out []int
	for _, f := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 65535 {
			return nil, suanli.FieldErrorf("ports", "%q is not a port: give TCP ports such as 8888, 8000", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// lines returns the non-blank lines of text, trimmed.
func lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// guards reads the ghost-spend guard inputs. Idle auto-stop is on unless
// its box is unticked.
func (in rentInputs) guards() (suanli.Guards, error) {
	var g suanli.Guards
	ttl, err := suanli.ParseDuration(in.TTL)
	if err != nil || ttl < 0 {
		return g, suanli.FieldErrorf("guards.max_runtime", "%q is not a duration: write 8h, 90m or 7d", in.TTL)
	}
	g.MaxRuntime = suanli.Duration(ttl)
	if in.Idle == "" {
		g.IdleStopMinutes = -1
	} else {
		n, err := parseInt("guards.idle_stop_minutes", in.IdleMinutes, 0)
		if err != nil {
			return g, err
		}
		g.IdleStopMinutes = int(max(min(n, 1<<20), -1))
	}
	g.StopWindows = lines(in.StopWindows)
	days, err := parseInt("guards.destroy_after_stopped_days", in.DestroyDays, 0)
	if err != nil {
		return g, err
	}
	g.DestroyAfterStoppedDays = int(max(min(days, 1<<20), -1))
	return g, nil
}

// create turns the inputs into a rental request for offer id. Errors are
// EINVALID naming the input.
func (in rentInputs) create(offerID int64) (suanli.InstanceCreate, error) {
	c := suanli.InstanceCreate{OfferID: offerID, Image: in.Image, Label: strings.TrimSpace(in.Label), RentalType: in.Type}
	if cmd := strings.TrimSpace(in.Cmd); cmd != "" {
		c.Cmd = []string{"sh", "-c", strings.ReplaceAll(cmd, "\r\n", "\n")}
	}
	env, err := parsePairs("env", in.Env)
	if err != nil {
		return c, err
	}
	if len(env) > 0 {
		c.Env = env
	}
	tags, err := parsePairs("tags", in.Tags)
	if err != nil {
		return c, err
	}
	if len(tags) > 0 {
		c.Tags = tags
	}
	c.Project = strings.TrimSpace(in.Project)
	c.Template = in.Template
	if c.Ports, err = parsePorts(in.Ports); err != nil {
		return c, err
	}
	if c.Guards, err = in.guards(); err != nil {
		return c, err
	}
	if c.Volumes, err = in.mounts(); err != nil {
		return c, err
	}
	c.Restart.Policy = in.Restart
	if in.Recover != "" {
		c.Restart.Recover = "elsewhere"
	}
	if c.DiskGB, err = parseInt("disk_gb", in.Disk, 0); err != nil {
		return c, err
	}
	c.DiskGiven = strings.TrimSpace(in.Disk) != ""
	gpus, err := parseInt("num_gpus", in.GPUs, 0)
	if err != nil {
		return c, err
	}
	cores, err := parseInt("cpu_cores", in.Cores, 0)
	if err != nil {
		return c, err
	}
	c.GPUCount, c.CPUCores = int(max(min(gpus, 1<<20), -1)), int(max(min(cores, 1<<20), -1))
	if in.Type == suanli.RentalInterruptible {
		if strings.TrimSpace(in.Bid) == "" {
			return c, suanli.FieldErrorf("bid", "an interruptible rental needs a bid per hour for the whole instance, such as 0.30")
		}
		b, err := suanli.ParseMoney(in.Bid)
		if err != nil {
			return c, suanli.FieldErrorf("bid", "%v", err)
		}
		c.Bid = &b
	}
	return c, nil
}

// rentPage is the create template's data.
type rentPage struct {
	Offer     *suanli.Offer
	In        rentInputs
	Error     *fieldError
	GPUChoice []int
	Templates []suanli.Template
	Quote     *suanli.Quote // an hour of the chosen size; nil when the inputs do not price
	QuoteErr  string        // why they do not
	Volumes   []volumeChoice
}

// volumeChoice is one of the renter's volumes on the offer's machine, as
// the rent form's picker shows it.
type volumeChoice struct {
	V       *suanli.Volume
	Path    string // where it is mounted: as typed, else /NAME
	Checked bool
}

// volumeChoices lists the caller's volumes on machine id for the picker.
func (c *Console) volumeChoices(r *http.Request, machineID int64, in rentInputs) []volumeChoice {
	vs, err := c.svc.FindVolumes(r.Context(), false)
	if err != nil {
		return nil // the form still works without the picker
	}
	var out []volumeChoice
	for _, v := range vs {
		if v.MachineID != machineID || v.Status == suanli.VolumeDeleted {
			continue
		}
		ch := volumeChoice{V: v, Path: "/" + v.Name, Checked: slices.Contains(in.Volumes, v.Name)}
		if p, ok := in.Paths[v.Name]; ok {
			ch.Path = p
		}
		out = append(out, ch)
	}
	return out
}

func (c *Console) renderRent(w http.ResponseWriter, r *http.Request, s *session, status int, o *suanli.Offer, in rentInputs, fe *fieldError) {
	p := rentPage{Offer: o, In: in, Error: fe, GPUChoice: gpuChoices(o), Templates: suanli.Templates, Volumes: c.volumeChoices(r, o.MachineID, in)}
	qr, err := quoteInputs{GPUs: in.GPUs, Disk: in.Disk, Hours: "1", Type: in.Type, Bid: in.Bid}.request(o.ID)
	if err == nil {
		p.Quote, err = c.svc.Quote(r.Context(), qr)
	}
	if err != nil {
		p.QuoteErr = suanli.ErrorMessage(err)
	}
	c.render(w, r, status, "rent.html", &view{Title: "Rent offer " + strconv.FormatInt(o.ID, 10), Nav: "offers", sess: s, Page: p})
}

// handleRentForm shows the create form for an offer, prefilled from the
// quote the renter was looking at.
func (c *Console) handleRentForm(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "offer")
	if err != nil {
		return err
	}
	in := readRentInputs(r.URL.Query())
	disk, _ := strconv.ParseInt(in.Disk, 10, 64)
	o, err := c.findOffer(r, id, disk)
	if err != nil {
		return err
	}
	if in.Disk == "" {
		in.Disk = strconv.Itoa(suanli.DefaultDiskGB)
	}
	if in.Type == "" {
		in.Type = suanli.RentalOnDemand
	}
	if in.Idle == "" && in.IdleMinutes == "" {
		in.Idle, in.IdleMinutes = "on", strconv.Itoa(suanli.DefaultIdleStopMinutes)
	}
	c.renderRent(w, r, s, http.StatusOK, o, in, nil)
	return nil
}

// handleRent creates the instance and goes to its page; on an error the
// form comes back with the service's message next to the input it names.
func (c *Console) handleRent(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "offer")
	if err != nil {
		return err
	}
	in := readRentInputs(r.PostForm)
	req, err := in.create(id)
	var inst *suanli.Instance
	if err == nil {
		inst, err = c.svc.CreateInstance(r.Context(), req)
	}
	if err != nil {
		fe := formError(err)
		if fe == nil {
			return err
		}
		disk, _ := strconv.ParseInt(in.Disk, 10, 64)
		o, oerr := c.findOffer(r, id, disk)
		if oerr != nil {
			return err // the offer is gone: show why the rental failed
		}
		c.renderRent(w, r, s, statusOf(err), o, in, fe)
		return nil
	}
	auditTarget(r, "instance "+strconv.FormatInt(inst.ID, 10)+" on offer "+strconv.FormatInt(id, 10))
	c.log.Info("console rental", "instance_id", inst.ID, "account_id", s.accountID)
	redirect(w, r, withNotice("/instances/"+strconv.FormatInt(inst.ID, 10), "created"))
	return nil
}
