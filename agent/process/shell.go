package process

import (
	"context"
	"path/filepath"

	"github.com/suanli/suanli"
)

// Shell returns what a command run into a running instance gets (the SSH
// endpoint's sessions): the instance's work directory, its environment
// (the one its command runs with). ENOTFOUND
// when the instance is not on this machine, ECONFLICT when it is not running.
func (r *Runtime) Shell(ctx context.Context, id int64) (dir string, env []string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.loadLocked(); err != nil {
		return "", nil, err
	}
	inst := r.insts[id]
	if inst == nil {
		return "", nil, suanli.Errorf(suanli.ENOTFOUND, "instance %d is not on this machine", id)
	}
	r.refreshLocked(inst)
	if inst.st.Status != suanli.StatusRunning {
		return "", nil, suanli.Errorf(suanli.ECONFLICT, "instance %d is %s: start it first (`suanli start %d`)", id, inst.st.Status, id)
	}
	dir = filepath.Join(inst.dir, "work")
	env, err = instanceEnv(inst.spec, dir, r.tokenPath(id))
	return dir, env, err
}
