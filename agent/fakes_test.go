package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/heartbeat"
)

// testServer is an in-test control plane: it holds desired state, answers
// syncs as a long poll, stores the logs it is sent and checks that they
// arrive in order, without gaps or overlaps.
type testServer struct {
	t         testing.TB
	heartbeat time.Duration
	noHold    bool // answer waiting syncs at once, like a server without long poll

	mu       sync.Mutex
	version  int64
	specs    []suanli.InstanceSpec
	changed  chan struct{}
	down     error // when set, every sync fails with it
	reqs     []suanli.SyncRequest
	reports  map[int64]suanli.InstanceReport // latest report per instance
	logs     map[int64][]byte
	reportAt map[string]time.Time // first time a "id/status" report arrived

	// beats, when set, is a light heartbeat channel's table the server
	// advertises (at beatAddr) and keeps told of the desired version.
	beats    *heartbeat.Table
	beatAddr string
}

func newTestServer(t testing.TB, heartbeat time.Duration) *testServer {
	return &testServer{
		t: t, heartbeat: heartbeat, changed: make(chan struct{}), version: 1,
		reports: map[int64]suanli.InstanceReport{}, logs: map[int64][]byte{}, reportAt: map[string]time.Time{},
	}
}

// set replaces the desired state and wakes a waiting sync.
func (s *testServer) set(specs ...suanli.InstanceSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.specs = specs
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
	if s.beats != nil {
		s.beats.Wake(42)
	}
}

func (s *testServer) setDown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = err
}

func (s *testServer) Sync(ctx context.Context, req *suanli.SyncRequest) (*suanli.SyncResponse, error) {
	s.mu.Lock()
	if err := s.down; err != nil {
		s.reqs = append(s.reqs, *req)
		s.mu.Unlock()
		return nil, err
	}
	s.reqs = append(s.reqs, *req)
	for _, r := range req.Instances {
		s.reports[r.ID] = r
		k := fmt.Sprintf("%d/%s", r.ID, r.Status)
		if _, ok := s.reportAt[k]; !ok {
			s.reportAt[k] = time.Now()
		}
	}
	for _, c := range req.Logs {
		have := s.logs[c.InstanceID]
		if c.Offset != int64(len(have)) {
			s.t.Errorf("seq %d: log chunk for instance %d at offset %d, server holds %d bytes", req.Seq, c.InstanceID, c.Offset, len(have))
			continue
		}
		if c.Next != c.Offset+int64(len(c.Data)) || len(c.Data) > 256<<10 {
			s.t.Errorf("seq %d: bad log chunk: offset %d, %d bytes, next %d", req.Seq, c.Offset, len(c.Data), c.Next)
		}
		s.logs[c.InstanceID] = append(have, c.Data...)
	}
	if req.Wait && req.KnownVersion == s.version && !s.noHold {
		ch := s.changed
		s.mu.Unlock()
		t := time.NewTimer(s.heartbeat)
		defer t.Stop()
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	resp := &suanli.SyncResponse{
		MachineID:         req.MachineID,
		Version:           s.version,
		Instances:         slices.Clone(s.specs),
		HeartbeatInterval: s.heartbeat,
		LostAfter:         12 * s.heartbeat,
		ServerTime:        time.Now(),
		LogOffsets:        map[int64]int64{},
	}
	for _, spec := range s.specs {
		resp.LogOffsets[spec.ID] = int64(len(s.logs[spec.ID]))
	}
	if s.beats != nil {
		resp.Heartbeat = s.beats.Keys().Channel(req.MachineID, s.beatAddr, time.Now())
		s.beats.Synced(req.MachineID, s.version, s.beats.Wakes(req.MachineID))
	}
	return resp, nil
}

func (s *testServer) report(id int64) (suanli.InstanceReport, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reports[id]
	return r, ok
}

func (s *testServer) log(id int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.logs[id])
}

func (s *testServer) requests() []suanli.SyncRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func (s *testServer) firstReport(id int64, status string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.reportAt[fmt.Sprintf("%d/%s", id, status)]
	return at, ok
}

// testRuntime is an in-memory agent.Runtime: instances are records whose
// status and log the test changes.
type testRuntime struct {
	mu        sync.Mutex
	insts     map[int64]*testInst
	ensures   []suanli.InstanceSpec
	removes   []int64
	ensureErr map[int64]error
	inFlight  map[int64]bool
	stopDelay map[int64]time.Duration // how long stopping a running instance takes (a workload in its grace)
	t         testing.TB
}

type testInst struct {
	spec      suanli.InstanceSpec
	status    string
	exitCode  *int
	startedAt *time.Time
	endedAt   *time.Time
	log       []byte
	starts    int
}

func newTestRuntime(t testing.TB) *testRuntime {
	return &testRuntime{t: t, insts: map[int64]*testInst{}, ensureErr: map[int64]error{}, inFlight: map[int64]bool{}, stopDelay: map[int64]time.Duration{}}
}

func (r *testRuntime) Name() string { return "test" }

func (r *testRuntime) enter(id int64) {
	if r.inFlight[id] {
		r.t.Errorf("two operations at once on instance %d", id)
	}
	r.inFlight[id] = true
}

func (r *testRuntime) Ensure(ctx context.Context, spec suanli.InstanceSpec) error {
	r.mu.Lock()
	r.enter(spec.ID)
	r.ensures = append(r.ensures, spec)
	err := r.ensureErr[spec.ID]
	delay := 10 * time.Millisecond // an operation takes a little time, as a real one does
	if in := r.insts[spec.ID]; in != nil && in.status == suanli.StatusRunning && spec.Desired == suanli.DesiredStopped {
		delay += r.stopDelay[spec.ID]
	}
	r.mu.Unlock()
	time.Sleep(delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inFlight, spec.ID)
	if err != nil {
		return err
	}
	in := r.insts[spec.ID]
	if in == nil {
		in = &testInst{status: suanli.StatusStopped}
		r.insts[spec.ID] = in
	}
	in.spec = spec
	switch {
	case spec.Desired == suanli.DesiredRunning && in.status != suanli.StatusRunning:
		now := time.Now()
		in.status, in.exitCode, in.startedAt = suanli.StatusRunning, nil, &now
		in.starts++
	case spec.Desired == suanli.DesiredStopped && in.status == suanli.StatusRunning:
		in.status = suanli.StatusStopped
	}
	return nil
}

func (r *testRuntime) Remove(ctx context.Context, id int64) error {
	r.mu.Lock()
	r.enter(id)
	r.removes = append(r.removes, id)
	r.mu.Unlock()
	time.Sleep(10 * time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inFlight, id)
	delete(r.insts, id)
	return nil
}

func (r *testRuntime) Status(ctx context.Context) ([]suanli.InstanceReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []suanli.InstanceReport
	for id, in := range r.insts {
		out = append(out, suanli.InstanceReport{ID: id, Status: in.status, ExitCode: in.exitCode, StartedAt: in.startedAt, EndedAt: in.endedAt})
	}
	return out, nil
}

func (r *testRuntime) ReadLog(ctx context.Context, id int64, offset int64, max int) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.insts[id]
	if in == nil {
		return nil, errors.New("no such instance")
	}
	if offset >= int64(len(in.log)) {
		return nil, nil
	}
	end := min(int64(len(in.log)), offset+int64(max))
	return slices.Clone(in.log[offset:end]), nil
}

// add puts an instance in the runtime, as one left from an earlier agent run.
func (r *testRuntime) add(id int64, status string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.insts[id] = &testInst{status: status, startedAt: &now}
}

func (r *testRuntime) write(id int64, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.insts[id].log = append(r.insts[id].log, s...)
}

func (r *testRuntime) exit(id int64, code int) {
	r.exitAt(id, code, time.Time{})
}

// exitAt ends the instance's workload with code, and says it ended at at
// (unless zero).
func (r *testRuntime) exitAt(id int64, code int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.insts[id].status, r.insts[id].exitCode = suanli.StatusExited, &code
	if !at.IsZero() {
		r.insts[id].endedAt = &at
	}
}

func (r *testRuntime) inst(id int64) (testInst, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in, ok := r.insts[id]
	if !ok {
		return testInst{}, false
	}
	return *in, true
}

func (r *testRuntime) counts() (ensures, removes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ensures), len(r.removes)
}
