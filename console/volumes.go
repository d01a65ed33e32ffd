package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

func (c *Console) registerVolumeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /volumes", c.page(c.handleVolumes))
	mux.HandleFunc("POST /volumes", c.form(c.handleVolumeCreate))
	mux.HandleFunc("POST /volumes/delete", c.form(c.handleVolumeDelete))
}

// volumeInputs are the create form's inputs, as typed; names are the
// API's VolumeCreate fields, so that an error's Field marks the input.
type volumeInputs struct {
	Name, Machine, Size, Project, Tags string
}

func readVolumeInputs(v url.Values) volumeInputs {
	return volumeInputs{Name: v.Get("name"), Machine: v.Get("machine_id"), Size: v.Get("size_gb"), Project: v.Get("project"), Tags: v.Get("tags")}
}

// create turns the inputs into a volume request. Errors are EINVALID
// naming the input; the service checks the name, size, machine, project
// and tags.
func (in volumeInputs) create() (suanli.VolumeCreate, error) {
	v := suanli.VolumeCreate{Name: strings.TrimSpace(in.Name), Project: strings.TrimSpace(in.Project)}
	m, err := parseInt("machine_id", in.Machine, 0)
	if err != nil {
		return v, err
	}
	if m <= 0 {
		return v, suanli.FieldErrorf("machine_id", "choose the machine to keep the volume on")
	}
	v.MachineID = m
	if v.SizeGB, err = parseInt("size_gb", in.Size, 0); err != nil {
		return v, err
	}
	tags, err := parsePairs("tags", in.Tags)
	if err != nil {
		return v, err
	}
	if len(tags) > 0 {
		v.Tags = tags
	}
	return v, nil
}

// volumeRow is one volume on the volumes page.
type volumeRow struct {
	V         *suanli.Volume
	PerMonth  suanli.Money // its size at its locked rate
	Confirm   string       // what deleting it does
	CanDelete bool
}

// machineChoice is a machine a volume can be created on.
type machineChoice struct {
	ID    int64
	Label string
	Rate  suanli.Money // disk per GB-month
}

// volumesPage is the volumes template's data.
type volumesPage struct {
	Volumes  []volumeRow
	All      bool
	Machines []machineChoice
	In       volumeInputs
	Error    *fieldError
}

// volumeDeleteText says what deleting a volume does.
func volumeDeleteText(v *suanli.Volume) string {
	return "Delete volume " + strconv.Quote(v.Name) + " (" + strconv.FormatInt(v.SizeGB, 10) + " GB on machine " +
		strconv.FormatInt(v.MachineID, 10) + ")? Its billing stops and the host overwrites and removes its data. This cannot be undone."
}

func (c *Console) volumesPage(r *http.Request, all bool) (*volumesPage, error) {
	vs, err := c.svc.FindVolumes(r.Context(), all)
	if err != nil {
		return nil, err
	}
	p := &volumesPage{All: all}
	for _, v := range vs {
		p.Volumes = append(p.Volumes, volumeRow{V: v, PerMonth: v.Rate * suanli.Money(v.SizeGB), Confirm: volumeDeleteText(v),
			CanDelete: v.Status != suanli.VolumeDeleted && v.AttachedTo == 0})
	}
	res, err := c.svc.SearchOffers(r.Context(), suanli.OfferQuery{Query: "rentable=any", Order: "id", Limit: 1000})
	if err != nil {
		return nil, err
	}
	for _, o := range res.Offers {
		if slices.ContainsFunc(p.Machines, func(m machineChoice) bool { return m.ID == o.MachineID }) {
			continue
		}
		label := "machine " + strconv.FormatInt(o.MachineID, 10) + ": " + o.Hostname
		if o.GPUName != "" {
			label += ", " + strconv.Itoa(o.TotalGPUs) + "× " + o.GPUName
		}
		if o.Region != "" {
			label += ", " + o.Region
		}
		label += ", " + o.StorageCost.String() + " per GB-month"
		p.Machines = append(p.Machines, machineChoice{ID: o.MachineID, Label: label, Rate: o.StorageCost})
	}
	return p, nil
}

// handleVolumes lists the caller's volumes (deleted ones too with ?all=1)
// with the create form; ?machine=ID preselects a machine (the rent form
// links here).
func (c *Console) handleVolumes(w http.ResponseWriter, r *http.Request, s *session) error {
	p, err := c.volumesPage(r, r.URL.Query().Get("all") == "1")
	if err != nil {
		return err
	}
	p.In = volumeInputs{Machine: r.URL.Query().Get("machine"), Size: "10"}
	c.render(w, r, http.StatusOK, "volumes.html", &view{Title: "Volumes", Nav: "volumes", sess: s, Notice: notice(r), Page: p})
	return nil
}

// handleVolumeCreate creates a volume; errors come back on the form.
func (c *Console) handleVolumeCreate(w http.ResponseWriter, r *http.Request, s *session) error {
	in := readVolumeInputs(r.PostForm)
	auditTarget(r, "volume "+strings.TrimSpace(in.Name)+" on machine "+strings.TrimSpace(in.Machine))
	req, err := in.create()
	var v *suanli.Volume
	if err == nil {
		v, err = c.svc.CreateVolume(r.Context(), req)
	}
	if err != nil {
		fe := formError(err)
		if fe == nil {
			return err
		}
		p, perr := c.volumesPage(r, false)
		if perr != nil {
			return perr
		}
		p.In, p.Error = in, fe
		c.render(w, r, statusOf(err), "volumes.html", &view{Title: "Volumes", Nav: "volumes", sess: s, Page: p})
		return nil
	}
	c.log.Info("console volume created", "volume_id", v.ID, "machine_id", v.MachineID, "account_id", s.accountID)
	redirect(w, r, withNotice("/volumes", "volumecreated"))
	return nil
}

// handleVolumeDelete deletes a volume once confirmed.
func (c *Console) handleVolumeDelete(w http.ResponseWriter, r *http.Request, s *session) error {
	name := r.PostFormValue("name")
	auditTarget(r, "volume "+name)
	if !confirmed(r) {
		vs, err := c.svc.FindVolumes(r.Context(), false)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(vs, func(v *suanli.Volume) bool { return v.Name == name })
		if i < 0 {
			return suanli.Errorf(suanli.ENOTFOUND, "volume %q not found", name)
		}
		c.confirm(w, r, s, "volumes", confirmPage{Heading: "Delete volume " + strconv.Quote(name) + "?", Text: volumeDeleteText(vs[i]),
			Post: "/volumes/delete", Back: "/volumes", Label: "Delete", Danger: true, Fields: []hiddenField{{"name", name}}})
		return nil
	}
	v, err := c.svc.DeleteVolume(r.Context(), name)
	if err != nil {
		return err
	}
	c.log.Info("console volume deleted", "volume_id", v.ID, "account_id", s.accountID)
	redirect(w, r, withNotice("/volumes", "volumedeleted"))
	return nil
}
