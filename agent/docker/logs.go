package docker

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/suanli/suanli"
)

// Logs: one follower goroutine per container streams the daemon's log
// (stdout and stderr, demultiplexed, in order) into a local file,
// DataDir/instance-ID.log. ReadLog serves byte ranges of that file, so
// offsets are stable: the file only grows, and after an agent restart the
// follower resumes from a checkpoint (DataDir/instance-ID.logpos: the last
// entry's timestamp, how many entries carried it, and the file size then).
// A crash between checkpoints truncates the file back to the checkpoint and
// replays the same entries, which rewrites the same bytes.

// follower watches one container: one goroutine streams its log into its
// file, another its stats into r.live (stats.go).
type follower struct {
	cid  string
	kick [2]chan struct{} // a start happened: follow again (logs, stats)
	stop context.CancelFunc
	done chan struct{} // closed when both goroutines have returned
}

// logPos is the follower's checkpoint.
type logPos struct {
	TS   time.Time `json:"ts"`   // timestamp of the last entry written
	N    int       `json:"n"`    // entries written with exactly TS
	Size int64     `json:"size"` // log file size after them
}

// follow makes sure a follower runs for the instance's container and wakes
// it (after a start).
func (r *Runtime) follow(id int64, cid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bg.Err() != nil {
		return
	}
	prev := r.followers[id]
	if prev != nil && prev.cid == cid {
		for _, k := range prev.kick {
			select {
			case k <- struct{}{}:
			default:
			}
		}
		return
	}
	if prev != nil {
		prev.stop() // the container was recreated; the new follower waits for the old
	}
	ctx, cancel := context.WithCancel(r.bg)
	f := &follower{cid: cid, kick: [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}, stop: cancel, done: make(chan struct{})}
	r.followers[id] = f
	r.wg.Add(1)
	go r.runFollower(ctx, id, f, prev)
}

// kick wakes the instance's follower, starting one when the runtime has
// none (a container started by someone else).
func (r *Runtime) kick(id int64, cid string) { r.follow(id, cid) }

// unfollow stops the instance's follower and waits for it.
func (r *Runtime) unfollow(id int64) {
	r.mu.Lock()
	f := r.followers[id]
	delete(r.followers, id)
	r.mu.Unlock()
	if f != nil {
		f.stop()
		<-f.done
	}
}

func (r *Runtime) runFollower(ctx context.Context, id int64, f, prev *follower) {
	defer r.wg.Done()
	defer close(f.done)
	defer func() {
		r.mu.Lock()
		if r.followers[id] == f {
			delete(r.followers, id)
		}
		r.mu.Unlock()
	}()
	if prev != nil {
		<-prev.done
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.watch(ctx, id, f, "log", f.kick[0], r.followOnce) })
	wg.Go(func() { r.watch(ctx, id, f, "stats", f.kick[1], r.statsOnce) })
	wg.Wait()
}

// watch runs once (a log or stats stream) while the container runs, and
// again after each kick, until the container is gone or ctx ends. A kick
// that finds a new run of the container while a stream is open restarts the
// stream: the daemon may keep a stream open on the previous run's logger.
func (r *Runtime) watch(ctx context.Context, id int64, f *follower, what string, kick chan struct{},
	once func(ctx context.Context, id int64, cid string) error) {
	for {
		run, err := r.runOf(ctx, f.cid)
		if ctx.Err() != nil || cerrdefs.IsNotFound(err) {
			return // closing, or the container is gone
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- once(sctx, id, f.cid) }()
		restart := false
	streaming:
		for {
			select {
			case err = <-done:
				break streaming
			case <-kick:
				if now, _ := r.runOf(ctx, f.cid); now != run {
					restart = true
					cancel()
					<-done
					break streaming
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if restart {
			continue
		}
		if cerrdefs.IsNotFound(err) {
			return
		} else if err != nil {
			r.log.Warn("follow container "+what, "instance_id", id, "err", err)
		}
		// The container stopped (or the stream broke): wait for a start.
		// The timer is a safety net for starts nobody told us about.
		t := time.NewTimer(30 * time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// runOf names the container's current run by its start time.
func (r *Runtime) runOf(ctx context.Context, cid string) (string, error) {
	res, err := r.cli.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	if err != nil {
		return "", err
	}
	if res.Container.State == nil {
		return "", nil
	}
	return res.Container.State.StartedAt, nil
}

// followOnce streams the log from the checkpoint until the container stops
// or ctx ends.
func (r *Runtime) followOnce(ctx context.Context, id int64, cid string) (err error) {
	pos := r.loadPos(id)
	file, err := os.OpenFile(r.logPath(id), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer file.Close()
	if fi, err := file.Stat(); err != nil {
		return err
	} else if fi.Size() != pos.Size {
		// Written after the last checkpoint (a crash), or lost (the file
		// was cut): either way, replay from the checkpoint.
		if fi.Size() < pos.Size {
			pos = logPos{}
		}
		if err := file.Truncate(pos.Size); err != nil {
			return err
		}
	}
	if _, err := file.Seek(pos.Size, io.SeekStart); err != nil {
		return err
	}

	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Timestamps: true}
	if !pos.TS.IsZero() {
		opts.Since = fmt.Sprintf("%d.%09d", pos.TS.Unix(), pos.TS.Nanosecond())
	}
	rc, err := r.cli.ContainerLogs(ctx, cid, opts)
	if err != nil {
		return err
	}
	defer rc.Close()

	saved := pos
	lastSave := time.Now()
	defer func() {
		if pos != saved {
			if serr := r.savePos(id, pos); serr != nil && err == nil {
				err = serr
			}
		}
	}()
	br := bufio.NewReaderSize(rc, 64<<10)
	w := bufio.NewWriterSize(file, 32<<10)
	var hdr [8]byte
	var buf []byte
	replayed := 0 // entries seen with exactly the checkpoint's timestamp
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return w.Flush()
			}
			return errors.Join(fmt.Errorf("read log stream: %w", err), w.Flush())
		}
		n := int(binary.BigEndian.Uint32(hdr[4:]))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return errors.Join(fmt.Errorf("read log stream: %w", err), w.Flush())
		}
		ts, line := splitTimestamp(buf)
		if !ts.IsZero() && !pos.TS.IsZero() {
			if ts.Before(pos.TS) {
				continue
			}
			if ts.Equal(pos.TS) && replayed < pos.N {
				replayed++
				continue
			}
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		pos.Size += int64(len(line))
		if ts.Equal(pos.TS) {
			pos.N++
			replayed++
		} else if !ts.IsZero() {
			pos.TS, pos.N, replayed = ts, 1, 1
		}
		// Make the bytes readable at once when the stream goes quiet, and
		// checkpoint at most once a second.
		if br.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
			if time.Since(lastSave) > time.Second {
				if err := r.savePos(id, pos); err != nil {
					return err
				}
				saved, lastSave = pos, time.Now()
			}
		}
	}
}

// splitTimestamp splits "2024-01-02T03:04:05.123456789Z line" into its
// timestamp and the line; without a parsable timestamp the whole entry is
// the line.
func splitTimestamp(b []byte) (time.Time, []byte) {
	for i, c := range b {
		if c == ' ' {
			ts, err := time.Parse(time.RFC3339Nano, string(b[:i]))
			if err != nil {
				return time.Time{}, b
			}
			return ts, b[i+1:]
		}
		if i > 40 {
			break
		}
	}
	return time.Time{}, b
}

func (r *Runtime) loadPos(id int64) logPos {
	var p logPos
	b, err := os.ReadFile(r.posPath(id))
	if err != nil {
		return logPos{}
	}
	if err := json.Unmarshal(b, &p); err != nil {
		r.log.Warn("decode log checkpoint", "instance_id", id, "err", err)
		return logPos{}
	}
	return p
}

func (r *Runtime) savePos(id int64, p logPos) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return writeFileAtomic(r.posPath(id), b)
}

// ReadLog returns up to max bytes of the instance's combined stdout/stderr
// from offset. Offsets are byte offsets into everything the instance has
// written since it was created, across stops and starts and agent restarts.
// What the workload wrote in the last moments may take a few milliseconds to
// appear. An instance this runtime does not hold is ENOTFOUND.
func (r *Runtime) ReadLog(ctx context.Context, id int64, offset int64, max int) ([]byte, error) {
	if offset < 0 {
		return nil, suanli.Errorf(suanli.EINVALID, "instance %d: log offset %d is negative", id, offset)
	}
	f, err := os.Open(r.logPath(id))
	if errors.Is(err, os.ErrNotExist) {
		c, ierr := r.inspect(ctx, id)
		if ierr != nil {
			return nil, ierr
		} else if c == nil {
			return nil, suanli.Errorf(suanli.ENOTFOUND, "instance %d has no container on this machine", id)
		}
		return nil, nil // created, nothing written yet
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if max <= 0 || offset >= fi.Size() {
		return nil, nil
	}
	buf := make([]byte, min(int64(max), fi.Size()-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("instance %d: read log: %w", id, err)
	}
	return buf[:n], nil
}
