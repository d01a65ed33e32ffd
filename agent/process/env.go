package process

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/suanli/suanli"
)

// instanceEnv is the command's environment: a default PATH, HOME set to the
// work directory, the spec's variables, then SUANLI_INSTANCE_ID,
// SUANLI_GPU_INDEXES, CUDA_VISIBLE_DEVICES and (when the spec has a token)
// SUANLI_TOKEN and SUANLI_TOKEN_FILE, which the spec cannot override.
// CUDA_VISIBLE_DEVICES names the instance's real GPUs by UUID (or index)
// and is empty when it has none, so that a CPU-only or simulated rental on
// a GPU machine sees no GPU. SUANLI_TOKEN is the instance token at start;
// the file tokenFile names always holds the current one.
func instanceEnv(spec suanli.InstanceSpec, home, tokenFile string) ([]string, error) {
	env := map[string]string{"PATH": defaultPATH, "HOME": home}
	for k, v := range spec.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, suanli.FieldErrorf("env", "instance %d: %q is not a valid environment variable name", spec.ID, k)
		}
		env[k] = v
	}
	env["SUANLI_INSTANCE_ID"] = strconv.FormatInt(spec.ID, 10)
	if spec.Token != "" {
		env["SUANLI_TOKEN"], env["SUANLI_TOKEN_FILE"] = spec.Token, tokenFile
	}
	idx := make([]string, len(spec.GPUIndexes))
	for i, n := range spec.GPUIndexes {
		idx[i] = strconv.Itoa(n)
	}
	env["SUANLI_GPU_INDEXES"] = strings.Join(idx, ",")
	switch {
	case spec.Simulated:
		env["CUDA_VISIBLE_DEVICES"] = ""
	case len(spec.GPUUUIDs) > 0:
		env["CUDA_VISIBLE_DEVICES"] = strings.Join(spec.GPUUUIDs, ",")
	default:
		env["CUDA_VISIBLE_DEVICES"] = strings.Join(idx, ",")
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// envValue returns the value of key in env ("KEY=value" entries).
func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// lookPath finds file in the instance's PATH (not the agent's). A name with
// a slash is used as it is, relative to the work directory.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in PATH %s", file, path)
}

// removeAll deletes dir even when the workload made parts of it read-only.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// writeToken replaces the token file atomically (mode 0600).
func writeToken(path, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".token.tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
