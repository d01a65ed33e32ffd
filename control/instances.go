package control

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/sched"
)

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxPlanAttempts bounds retries when the store finds the plan stale.
const maxPlanAttempts = 3

func validateCreate(c *suanli.InstanceCreate) error {
	if c.OfferID <= 0 {
		return suanli.FieldErrorf("offer_id", "give the id of an offer from `suanli search`")
	}
	if c.Template != "" {
		t, ok := suanli.FindTemplate(c.Template)
		if !ok {
			var names []string
			for _, t := range suanli.Templates {
				names = append(names, t.Name)
			}
			return suanli.FieldErrorf("template", "%q is not a template: use one of %s (suanli templates)", c.Template, strings.Join(names, ", "))
		}
		if c.Image == "" {
			c.Image = t.Image
		}
		if c.DiskGB == 0 {
			c.DiskGB = t.DiskGB
		}
		if c.Ports == nil {
			c.Ports = t.Ports
		}
		if c.Cmd == nil {
			c.Cmd = t.Cmd
		}
	}
	if len(c.Ports) > 32 {
		return suanli.FieldErrorf("ports", "at most 32 ports")
	}
	seen := map[int]bool{}
	for _, p := range c.Ports {
		if p < 1 || p > 65535 || seen[p] {
			return suanli.FieldErrorf("ports", "%d: give distinct TCP ports between 1 and 65535", p)
		}
		seen[p] = true
	}
	c.Image = strings.TrimSpace(c.Image)
	if c.Image == "" {
		return suanli.FieldErrorf("image", "must not be empty: name a Docker image such as ubuntu:24.04")
	}
	if c.DiskGB == 0 && c.DiskGiven {
		return suanli.FieldErrorf("disk_gb", "0 GB is no disk: give a size of at least 1 GB, or leave it out for the default (%d GB, or the template's)", suanli.DefaultDiskGB)
	}
	if c.DiskGB == 0 {
		c.DiskGB = suanli.DefaultDiskGB
	}
	if c.DiskGB < 0 {
		return suanli.FieldErrorf("disk_gb", "%d is not a size: give a positive number of GB", c.DiskGB)
	}
	if c.GPUCount < 0 {
		return suanli.FieldErrorf("num_gpus", "%d is not a GPU count", c.GPUCount)
	}
	if c.CPUCores < 0 {
		return suanli.FieldErrorf("cpu_cores", "%d is not a core count", c.CPUCores)
	}
	for k := range c.Env {
		if !envKey.MatchString(k) {
			return suanli.FieldErrorf("env", "%q is not a valid variable name (letters, digits, _; not starting with a digit)", k)
		}
		if strings.HasPrefix(k, "SUANLI_") {
			return suanli.FieldErrorf("env", "%s: names starting with SUANLI_ are reserved", k)
		}
	}
	for k, v := range c.SecretEnv {
		if !envKey.MatchString(k) {
			return suanli.FieldErrorf("secret_env", "%q is not a valid variable name (letters, digits, _; not starting with a digit)", k)
		}
		if strings.HasPrefix(k, "SUANLI_") {
			return suanli.FieldErrorf("secret_env", "%s: names starting with SUANLI_ are reserved", k)
		}
		if _, dup := c.Env[k]; dup {
			return suanli.FieldErrorf("secret_env", "%s is also in env: give it once", k)
		}
		if len(v) > 32<<10 || strings.ContainsRune(v, 0) {
			return suanli.FieldErrorf("secret_env", "%s: a value of at most 32 KiB without NUL bytes", k)
		}
	}
	if r := c.RegistryAuth; r != nil && (r.Username == "" || r.Password == "") {
		return suanli.FieldErrorf("registry_auth", "give both a username and a password (or a token as the password)")
	}
	if err := validateLabel(c.Label); err != nil {
		return err
	}
	if err := validateCostAttribution(c.Project, c.Tags); err != nil {
		return err
	}
	if err := c.Guards.Validate(); err != nil {
		return err
	}
	if err := c.Restart.Validate(); err != nil {
		return err
	}
	switch c.RentalType {
	case "":
		c.RentalType = suanli.RentalOnDemand
		if c.Bid != nil {
			c.RentalType = suanli.RentalInterruptible
		}
	case suanli.RentalOnDemand, suanli.RentalInterruptible:
	default:
		return suanli.FieldErrorf("rental_type", "%q is not a rental type: use on-demand or interruptible", c.RentalType)
	}
	if c.RentalType == suanli.RentalInterruptible && (c.Bid == nil || *c.Bid <= 0) {
		return suanli.FieldErrorf("bid", "an interruptible rental needs a positive bid per hour")
	}
	if c.RentalType == suanli.RentalOnDemand && c.Bid != nil {
		return suanli.FieldErrorf("bid", "an on-demand rental takes no bid: drop --bid, or rent interruptible")
	}
	return nil
}

// secretsPurpose binds an instance's sealed secrets to its account.
func secretsPurpose(accountID int64) string {
	return fmt.Sprintf("instance secrets of account %d", accountID)
}

// sealedPrefix marks a text column that holds a sealed secret.
const sealedPrefix = "sealed:v1:"

// sealText seals a secret for a text column (a budget's webhook secret).
func (s *Service) sealText(plain, purpose string) string {
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(s.sealer.Seal([]byte(plain), purpose))
}

// openText opens what sealText returned; a value stored before secrets
// were sealed comes back as it is.
func (s *Service) openText(v, purpose string) (string, error) {
	rest, ok := strings.CutPrefix(v, sealedPrefix)
	if !ok {
		return v, nil
	}
	b, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return "", err
	}
	plain, err := s.sealer.Open(b, purpose)
	return string(plain), err
}

func webhookPurpose(accountID int64) string {
	return fmt.Sprintf("budget webhook secret of account %d", accountID)
}

// openSecrets returns an instance's secrets in the clear (for its agent).
func (s *Service) openSecrets(in *suanli.Instance) (*suanli.InstanceSecrets, error) {
	if len(in.Sealed) == 0 {
		return nil, nil
	}
	plain, err := s.sealer.Open(in.Sealed, secretsPurpose(in.AccountID))
	if err != nil {
		return nil, fmt.Errorf("instance %d: %w", in.ID, err)
	}
	var sec suanli.InstanceSecrets
	if err := json.Unmarshal(plain, &sec); err != nil {
		return nil, fmt.Errorf("instance %d secrets: %w", in.ID, err)
	}
	return &sec, nil
}

// ownInstance loads an instance the caller may see: their own, or any for
// an operator. Another tenant's instance is ENOTFOUND. self says whether an
// instance's own token may do this to its instance (read, stop, progress);
// such a token sees no other instance.
func (s *Service) ownInstance(ctx context.Context, scope string, id int64, self bool) (*suanli.Principal, *suanli.Instance, error) {
	p := suanli.PrincipalFromContext(ctx)
	if p != nil && p.InstanceID != 0 {
		if id != p.InstanceID {
			return nil, nil, suanli.Errorf(suanli.ENOTFOUND, "instance %d not found", id)
		}
		if !self || !p.Can(suanli.ScopeInstanceSelf) {
			return nil, nil, suanli.Errorf(suanli.EFORBIDDEN, "an instance's token may only read, stop and report progress of its instance")
		}
	} else {
		var err error
		if p, err = principal(ctx, scope); err != nil {
			return nil, nil, err
		}
	}
	in, err := s.Store.FindInstanceByID(ctx, id, s.now())
	if err != nil {
		return nil, nil, err
	}
	if in.AccountID != p.AccountID && (p.Role != suanli.RoleOperator || p.InstanceID != 0) {
		return nil, nil, suanli.Errorf(suanli.ENOTFOUND, "instance %d not found", id)
	}
	return p, in, nil
}

// FindInstanceByID returns one of the caller's instances.
func (s *Service) FindInstanceByID(ctx context.Context, id int64) (*suanli.Instance, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceRead, id, true)
	if err == nil {
		s.decorate(in)
	}
	return in, err
}

// FindInstances lists the caller's instances (an instance's token: its own).
func (s *Service) FindInstances(ctx context.Context, f suanli.InstanceFilter) ([]*suanli.Instance, int, error) {
	if p := suanli.PrincipalFromContext(ctx); p != nil && p.InstanceID != 0 {
		f.AccountID, f.ID = &p.AccountID, &p.InstanceID
		ins, n, err := s.Store.FindInstances(ctx, f, s.now())
		s.decorate(ins...)
		return ins, n, err
	}
	p, err := principal(ctx, suanli.ScopeInstanceRead)
	if err != nil {
		return nil, 0, err
	}
	f.AccountID = &p.AccountID
	ins, n, err := s.Store.FindInstances(ctx, f, s.now())
	s.decorate(ins...)
	return ins, n, err
}

// ReportProgress records a workload's note about itself in its instance's
// history; an instance's own token may call it.
func (s *Service) ReportProgress(ctx context.Context, id int64, pr suanli.Progress) (*suanli.Instance, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, id, true)
	if err != nil {
		return nil, err
	}
	pr.Message = strings.TrimSpace(pr.Message)
	if pr.Message == "" && pr.Percent == nil {
		return nil, suanli.FieldErrorf("message", "say something: a message, a percent, or both")
	}
	if len(pr.Message) > 500 || strings.ContainsAny(pr.Message, "\x00\n\r") {
		return nil, suanli.FieldErrorf("message", "one line of at most 500 characters")
	}
	msg := "progress"
	if pr.Percent != nil {
		if *pr.Percent < 0 || *pr.Percent > 100 {
			return nil, suanli.FieldErrorf("percent", "%g is outside 0..100", *pr.Percent)
		}
		msg += fmt.Sprintf(" %.4g%%", *pr.Percent)
	}
	if pr.Message != "" {
		msg += ": " + pr.Message
	}
	if in.Status == suanli.StatusDestroyed {
		return nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed", id)
	}
	if err := s.Store.AddInstanceEvent(ctx, id, s.now(), in.Status, msg); err != nil {
		return nil, err
	}
	return in, nil
}

// StopInstance asks the agent to stop the workload; compute billing ends
// now. A preempted or queued instance stops waiting for GPUs.
func (s *Service) StopInstance(ctx context.Context, id int64) (*suanli.Instance, error) {
	return s.changeInstance(ctx, id, true, func(in *suanli.Instance) error {
		in.WaitingSince = nil
		switch in.Status {
		case suanli.StatusDestroyed:
			return suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed", id)
		case suanli.StatusPreempted:
			in.Desired = suanli.DesiredStopped
			in.Status, in.StatusMessage = suanli.StatusStopped, "stopped by the renter while preempted: it no longer waits for GPUs"
			return nil
		case suanli.StatusStopped, suanli.StatusExited, suanli.StatusFailed, suanli.StatusStopping, suanli.StatusPreempting:
			in.Desired = suanli.DesiredStopped
			if in.Status == suanli.StatusStopped {
				in.StatusMessage = "stopped by the renter"
			}
			return nil
		}
		in.Desired = suanli.DesiredStopped
		in.Status, in.StatusMessage = suanli.StatusStopping, "stop requested"
		return nil
	})
}

func validateLabel(l string) error {
	if len(l) > suanli.MaxLabelLen {
		return suanli.FieldErrorf("label", "longer than %d characters", suanli.MaxLabelLen)
	}
	return nil
}

// UpdateInstance changes one of the caller's instances' attributes (its
// label). EINVALID, ENOTFOUND, ECONFLICT when it is destroyed.
func (s *Service) UpdateInstance(ctx context.Context, id int64, u suanli.InstanceUpdate) (*suanli.Instance, error) {
	if u.Label != nil {
		if err := validateLabel(*u.Label); err != nil {
			return nil, err
		}
	}
	return s.changeInstance(ctx, id, false, func(in *suanli.Instance) error {
		if in.Status == suanli.StatusDestroyed {
			return suanli.Errorf(suanli.ECONFLICT, "instance %d is destroyed", id)
		}
		if u.Label != nil {
			in.Label = *u.Label
		}
		return nil
	})
}

// DestroyInstance ends the rental: all billing stops now; the agent removes
// the workload and its data. Its GPUs go to whoever waits for them.
func (s *Service) DestroyInstance(ctx context.Context, id int64) (*suanli.Instance, error) {
	return s.changeInstance(ctx, id, false, func(in *suanli.Instance) error {
		in.Desired, in.WaitingSince = suanli.DesiredDestroyed, nil
		in.Status, in.StatusMessage = suanli.StatusDestroyed, "destroyed by the renter"
		return nil
	})
}

func (s *Service) changeInstance(ctx context.Context, id int64, self bool, fn func(*suanli.Instance) error) (*suanli.Instance, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceWrite, id, self)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out, err := s.Store.UpdateInstance(ctx, in.ID, now, now, fn)
	if err != nil {
		return nil, err
	}
	s.afterChange(ctx, out.MachineID)
	s.Logger.Info("instance changed", "instance_id", id, "status", out.Status, "desired", out.Desired)
	in, err = s.Store.FindInstanceByID(ctx, id, now)
	if err == nil {
		s.decorate(in)
	}
	return in, err
}

// InstanceLogs returns up to 256 KiB of an instance's log from offset.
func (s *Service) InstanceLogs(ctx context.Context, id int64, offset int64) (*suanli.LogChunk, error) {
	_, in, err := s.ownInstance(ctx, suanli.ScopeInstanceRead, id, true)
	if err != nil {
		return nil, err
	}
	c, err := s.Store.ReadLog(ctx, id, offset, 256<<10)
	if err != nil {
		return nil, err
	}
	c.Done = in.Status == suanli.StatusDestroyed
	return c, nil
}

// PreflightWait bounds how long a create waits for the host's pre-flight check.
const PreflightWait = time.Minute

// preflight checks, before anything is reserved or billed, that the host
// can run the request: for the process runtime that a command was given;
// for the Docker runtime the agent checks the image (architecture, present
// or pullable, credentials), disk and ports, and its answer is the error.
func (s *Service) preflight(ctx context.Context, m *suanli.Machine, c suanli.InstanceCreate, plan *sched.Plan) error {
	switch m.Runtime {
	case "process":
		if len(c.Cmd) == 0 {
			return suanli.FieldErrorf("cmd", "machine %d runs instances as processes (no container runtime): pass the command after -- (suanli create %d --image IMAGE -- CMD ARGS…)", m.ID, m.ID)
		}
		return nil
	case "docker":
	default:
		return nil
	}
	spec := suanli.InstanceSpec{Desired: suanli.DesiredRunning, Image: c.Image, Cmd: c.Cmd, Env: c.Env, DiskGB: c.DiskGB, Ports: c.Ports, Volumes: c.Volumes,
		GPUIndexes: plan.GPUIndexes, GPUUUIDs: plan.GPUUUIDs, Simulated: m.Simulated, CPUCores: plan.CPUCores, RAMMB: plan.RAMMB}
	r, err := s.runTask(ctx, m.ID, suanli.AgentTask{Kind: suanli.TaskPreflight, Spec: &spec, Timeout: PreflightWait}, PreflightWait+10*time.Second)
	if err != nil {
		return err
	}
	if r.Error != "" {
		return suanli.Errorf(suanli.EINVALID, "pre-flight on machine %d: %s (nothing was reserved or billed)", m.ID, r.Error)
	}
	return nil
}
