package console

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sqlstore"
)

// logTail is how much of an instance's log its page shows at first; the
// script then follows from there.
const logTail = 64 << 10

// refreshSeconds is how often pages that change by themselves reload when
// JavaScript is off (with it, the script polls every few seconds instead).
const refreshSeconds = 10

func (c *Console) registerInstanceRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /instances", c.page(c.handleInstances))
	mux.HandleFunc("GET /instances/{id}", c.page(c.handleInstance))
	for _, a := range []string{"stop", "start", "destroy"} {
		mux.HandleFunc("POST /instances/{id}/"+a, c.form(c.instanceAction(a)))
	}
	mux.HandleFunc("GET /console/api/instances", c.api(c.apiInstances))
	mux.HandleFunc("GET /console/api/instances/{id}", c.api(c.apiInstance))
	mux.HandleFunc("GET /console/api/instances/{id}/logs", c.api(c.apiLogs))
}

// instancesPage is the instances template's data.
type instancesPage struct {
	Instances []*suanli.Instance
	All       bool
	TotalBurn suanli.Money
	TotalCost suanli.Money
}

func (c *Console) handleInstances(w http.ResponseWriter, r *http.Request, s *session) error {
	all := r.URL.Query().Get("all") == "1"
	f := suanli.InstanceFilter{Limit: 500}
	if !all {
		live := true
		f.Live = &live
	}
	ins, _, err := c.svc.FindInstances(r.Context(), f)
	if err != nil {
		return err
	}
	p := instancesPage{Instances: ins, All: all}
	for _, in := range ins {
		p.TotalBurn += in.BurnRate
		p.TotalCost += in.CostSoFar
	}
	c.render(w, r, http.StatusOK, "instances.html", &view{Title: "Instances", Nav: "instances", sess: s, Notice: notice(r),
		Refresh: refreshSeconds, Page: p})
	return nil
}

// instancePage is the instance detail template's data.
type instancePage struct {
	In           *suanli.Instance
	Events       []sqlstore.InstanceEvent
	Log          string
	LogNext      int64
	LogCut       bool // the page shows only the log's tail
	ByKind       []kindTotal
	EnvNames     []string
	CanStop      bool
	CanStart     bool
	CanDestroy   bool
	StopConfirm  string
	StartConfirm string
	KillConfirm  string
}

// kindTotal is what one meter has charged an instance so far.
type kindTotal struct {
	Kind   string
	Amount suanli.Money
}

// meterNames are the billing meters in the order pages list them.
var meterNames = []struct{ kind, label string }{
	{suanli.MeterCompute, "Compute"}, {suanli.MeterStorage, "Storage"},
	{suanli.MeterInetUp, "Traffic sent"}, {suanli.MeterInetDown, "Traffic received"},
}

func canStop(in *suanli.Instance) bool {
	switch in.Status {
	case suanli.StatusDestroyed, suanli.StatusStopped, suanli.StatusStopping, suanli.StatusExited, suanli.StatusFailed:
		return false
	}
	return in.Desired != suanli.DesiredStopped
}

func canStart(in *suanli.Instance) bool {
	switch in.Status {
	case suanli.StatusStopped, suanli.StatusExited, suanli.StatusFailed:
		return true
	}
	return false
}

// confirmText says what an action does, for the confirmation dialog and page.
func confirmText(action string, in *suanli.Instance) string {
	storage := in.Rates.StoragePerHour(in.DiskGB)
	switch action {
	case "stop":
		return "Stop instance " + strconv.FormatInt(in.ID, 10) + "? The workload gets SIGTERM and stops; compute billing ends now. " +
			"The disk stays and is still billed (" + storage.String() + "/h) until you destroy it."
	case "start":
		return "Start instance " + strconv.FormatInt(in.ID, 10) + " again on the same GPUs? Compute billing resumes at " +
			in.Rates.ComputePerHour.String() + "/h while it runs."
	}
	return "Destroy instance " + strconv.FormatInt(in.ID, 10) + "? Its workload and its data are deleted on the host and all billing stops. This cannot be undone."
}

func (c *Console) handleInstance(w http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "instance")
	if err != nil {
		return err
	}
	in, err := c.svc.FindInstanceByID(r.Context(), id)
	if err != nil {
		return err
	}
	p := instancePage{In: in, CanStop: canStop(in), CanStart: canStart(in), CanDestroy: in.Status != suanli.StatusDestroyed,
		StopConfirm: confirmText("stop", in), StartConfirm: confirmText("start", in), KillConfirm: confirmText("destroy", in)}
	if p.Events, err = c.svc.Store.InstanceEvents(r.Context(), id); err != nil {
		return err
	}
	for k := range in.Env {
		p.EnvNames = append(p.EnvNames, k)
	}
	slices.Sort(p.EnvNames)
	if p.Log, p.LogNext, p.LogCut, err = c.tailLog(r, id); err != nil {
		return err
	}
	sum, err := c.svc.FindCharges(r.Context(), suanli.ChargeFilter{InstanceID: &id, Limit: 1})
	if err != nil && suanli.ErrorCode(err) != suanli.EFORBIDDEN {
		return err
	}
	if sum != nil {
		for _, m := range meterNames {
			p.ByKind = append(p.ByKind, kindTotal{Kind: m.label, Amount: sum.ByKind[m.kind]})
		}
	}
	refresh := refreshSeconds
	if in.Status == suanli.StatusDestroyed {
		refresh = 0
	}
	title := "Instance " + strconv.FormatInt(id, 10)
	c.render(w, r, http.StatusOK, "instance.html", &view{Title: title, Nav: "instances", sess: s, Notice: notice(r), Refresh: refresh, Page: p})
	return nil
}

// tailLog returns the last logTail bytes of an instance's log (from a line
// start when cut), the offset following them, and whether it was cut.
func (c *Console) tailLog(r *http.Request, id int64) (string, int64, bool, error) {
	end, err := c.svc.InstanceLogs(r.Context(), id, math.MaxInt64)
	if err != nil {
		return "", 0, false, err
	}
	from := max(0, end.Offset-logTail)
	chunk, err := c.svc.InstanceLogs(r.Context(), id, from)
	if err != nil {
		return "", 0, false, err
	}
	data := chunk.Data
	cut := chunk.Offset > 0
	if cut {
		if i := strings.IndexByte(string(data), '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return strings.ToValidUTF8(string(data), "\uFFFD"), chunk.Next, cut, nil
}

// instanceAction stops, starts or destroys an instance once confirmed. A
// form without confirmed=yes (JavaScript off) gets a confirmation page
// whose own form carries it.
func (c *Console) instanceAction(action string) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) error {
		id, err := pathID(r, "instance")
		if err != nil {
			return err
		}
		if !confirmed(r) {
			in, err := c.svc.FindInstanceByID(r.Context(), id)
			if err != nil {
				return err
			}
			label := strings.ToUpper(action[:1]) + action[1:]
			page := "/instances/" + strconv.FormatInt(id, 10)
			c.confirm(w, r, s, "instances", confirmPage{Heading: label + " instance " + strconv.FormatInt(id, 10) + "?", Text: confirmText(action, in),
				Post: page + "/" + action, Back: page, Label: label, Danger: action != "start"})
			return nil
		}
		var code string
		switch action {
		case "stop":
			code = "stopping"
			_, err = c.svc.StopInstance(r.Context(), id)
		case "start":
			code = "starting"
			_, err = c.svc.StartInstance(r.Context(), id)
		case "destroy":
			code = "destroyed"
			_, err = c.svc.DestroyInstance(r.Context(), id)
		}
		if err != nil {
			return err
		}
		c.log.Info("console instance action", "action", action, "instance_id", id, "account_id", s.accountID)
		redirect(w, r, withNotice("/instances/"+strconv.FormatInt(id, 10), code))
		return nil
	}
}

// instanceJSON is what the live-refresh script reads about one instance.
// Money is formatted on the server: the script never does arithmetic on it.
type instanceJSON struct {
	ID            int64  `json:"id"`
	Status        string `json:"status"`
	StatusClass   string `json:"status_class"`
	StatusMessage string `json:"status_message"`
	CostSoFar     string `json:"cost_so_far"`
	BurnRate      string `json:"burn_rate"`
	GPUUtil       string `json:"gpu_util"`
}

func toJSON(in *suanli.Instance) instanceJSON {
	return instanceJSON{ID: in.ID, Status: in.Status, StatusClass: statusClass(in.Status), StatusMessage: in.StatusMessage,
		CostSoFar: in.CostSoFar.String(), BurnRate: in.BurnRate.String(), GPUUtil: gpuUtil(in.Telemetry)}
}

func (c *Console) apiInstances(w http.ResponseWriter, r *http.Request) error {
	f := suanli.InstanceFilter{Limit: 500}
	if r.URL.Query().Get("all") != "1" {
		live := true
		f.Live = &live
	}
	ins, _, err := c.svc.FindInstances(r.Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Instances []instanceJSON `json:"instances"`
		TotalBurn string         `json:"total_burn"`
		TotalCost string         `json:"total_cost"`
	}{Instances: []instanceJSON{}}
	var burn, cost suanli.Money
	for _, in := range ins {
		out.Instances = append(out.Instances, toJSON(in))
		burn += in.BurnRate
		cost += in.CostSoFar
	}
	out.TotalBurn, out.TotalCost = burn.String(), cost.String()
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (c *Console) apiInstance(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "instance")
	if err != nil {
		return err
	}
	in, err := c.svc.FindInstanceByID(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toJSON(in))
	return nil
}

// apiLogs returns the log from offset as text, for the script to append.
func (c *Console) apiLogs(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "instance")
	if err != nil {
		return err
	}
	off, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if err != nil || off < 0 {
		return suanli.FieldErrorf("offset", "%q is not a byte offset", r.URL.Query().Get("offset"))
	}
	chunk, err := c.svc.InstanceLogs(r.Context(), id, off)
	if err != nil {
		return err
	}
	data := chunk.Data
	// Hand back whole UTF-8 characters only; the rest comes next time.
	for n := 0; n < 3 && len(data) > 0 && !utf8.Valid(data); n++ {
		data = data[:len(data)-1]
	}
	writeJSON(w, http.StatusOK, map[string]any{"offset": chunk.Offset, "next": chunk.Offset + int64(len(data)),
		"data": strings.ToValidUTF8(string(data), "\uFFFD"), "done": chunk.Done})
	return nil
}
