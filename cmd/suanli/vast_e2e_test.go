package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVastFlow drives the renter's whole flow through the Vast.ai API
// compatibility layer of the real binary, with plain HTTP, as written in
// testdata/vast-flow.txt.
func TestVastFlow(t *testing.T) {
	m, _ := startUp(t, t.TempDir())
	var cfg struct {
		APIKey string `json:"api_key"`
	}
	b, err := os.ReadFile(filepath.Join(m.home, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	runHTTPScript(t, "testdata/vast-flow.txt", m.url, cfg.APIKey)
	m.stop()
	if strings.Contains(m.logs.String(), cfg.APIKey) {
		t.Error("the API key appears in the server's log")
	}
}

// TestVastAPIOff checks that --vast-api=false leaves only the native API.
func TestVastAPIOff(t *testing.T) {
	m, _ := startUp(t, t.TempDir(), "--vast-api=false")
	resp, err := http.Get(m.url + "/api/v0/gpu_names/unique/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /api/v0/gpu_names/unique/ with --vast-api=false: %d, want 404", resp.StatusCode)
	}
	m.stop()
}

// An HTTP script is a list of lines; # starts a comment. Variables are
// written ${name}: key (the API key), now and later (Unix seconds, now and
// in a day), and those set by set.
//
//	req METHOD PATH [BODY]        send, with Authorization: Bearer ${key}
//	req-query METHOD PATH [BODY]  send, with ?api_key=${key} instead
//	req-anon METHOD PATH|URL      send without a key
//	status N                      the last reply's status
//	header NAME VALUE             a header of the last reply, exactly
//	json PATH == VALUE            a value of the last reply (VALUE is JSON)
//	json PATH exists              the path is there (null included)
//	json PATH len N               an array's length
//	json PATH contains TEXT       a string value contains TEXT
//	body contains TEXT            the raw body contains TEXT
//	set NAME PATH                 remember a value (strings without quotes)
//	retry DURATION … end          run the lines between until all pass
//
// PATH walks objects and arrays with dots: offers.0.id. Query values in a
// request path are written raw and escaped when sent.
type httpScript struct {
	t      *testing.T
	base   string
	vars   map[string]string
	status int
	header http.Header
	body   []byte
	value  any
}

type scriptLine struct {
	n    int
	text string
}

func runHTTPScript(t *testing.T, file, base, key string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []scriptLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, scriptLine{n, l})
		}
	}
	s := &httpScript{t: t, base: base, vars: map[string]string{"key": key,
		"now": strconv.FormatInt(time.Now().Unix(), 10), "later": strconv.FormatInt(time.Now().Add(24*time.Hour).Unix(), 10)}}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if d, ok := strings.CutPrefix(l.text, "retry "); ok {
			within, err := time.ParseDuration(d)
			if err != nil {
				t.Fatalf("%s:%d: %v", file, l.n, err)
			}
			j := i + 1
			for j < len(lines) && lines[j].text != "end" {
				j++
			}
			if j == len(lines) {
				t.Fatalf("%s:%d: retry without end", file, l.n)
			}
			deadline := time.Now().Add(within)
			for {
				bad, err := s.runAll(lines[i+1 : j])
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s:%d: %s: still failing after %s: %v\nlast reply %d: %s", file, bad.n, bad.text, within, err, s.status, s.body)
				}
				time.Sleep(100 * time.Millisecond)
			}
			i = j
			continue
		}
		if err := s.run(l.text); err != nil {
			t.Fatalf("%s:%d: %s: %v\nlast reply %d: %s", file, l.n, l.text, err, s.status, s.body)
		}
	}
}

func (s *httpScript) runAll(lines []scriptLine) (scriptLine, error) {
	for _, l := range lines {
		if err := s.run(l.text); err != nil {
			return l, err
		}
	}
	return scriptLine{}, nil
}

var scriptVar = regexp.MustCompile(`\$\{(\w+)\}`)

func (s *httpScript) expand(text string) (string, error) {
	var missing string
	out := scriptVar.ReplaceAllStringFunc(text, func(v string) string {
		name := v[2 : len(v)-1]
		val, ok := s.vars[name]
		if !ok {
			missing = name
		}
		return val
	})
	if missing != "" {
		return "", fmt.Errorf("no variable %s", missing)
	}
	return out, nil
}

func (s *httpScript) run(text string) error {
	text, err := s.expand(text)
	if err != nil {
		return err
	}
	verb, rest, _ := strings.Cut(text, " ")
	switch verb {
	case "req", "req-query", "req-anon":
		return s.request(verb, rest)
	case "status":
		if want, _ := strconv.Atoi(rest); s.status != want {
			return fmt.Errorf("status %d, want %d", s.status, want)
		}
	case "header":
		name, want, _ := strings.Cut(rest, " ")
		if got := s.header.Get(name); got != want {
			return fmt.Errorf("%s: %q, want %q", name, got, want)
		}
	case "body":
		want, ok := strings.CutPrefix(rest, "contains ")
		if !ok {
			return fmt.Errorf("body: use body contains TEXT")
		}
		if !strings.Contains(string(s.body), want) {
			return fmt.Errorf("body %q lacks %q", s.body, want)
		}
	case "json":
		return s.checkJSON(rest)
	case "set":
		name, p, _ := strings.Cut(rest, " ")
		v, err := s.lookup(p)
		if err != nil {
			return err
		}
		if str, ok := v.(string); ok {
			s.vars[name] = str
		} else {
			b, _ := json.Marshal(v)
			s.vars[name] = string(b)
		}
	default:
		return fmt.Errorf("unknown command %q", verb)
	}
	return nil
}

func (s *httpScript) request(verb, rest string) error {
	method, rest, _ := strings.Cut(rest, " ")
	target, body, _ := strings.Cut(rest, " ")
	if !strings.HasPrefix(target, "http") {
		target = s.base + target
	}
	u, q, _ := strings.Cut(target, "?")
	var parts []string
	if q != "" {
		for _, kv := range strings.Split(q, "&") {
			k, v, _ := strings.Cut(kv, "=")
			parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(v))
		}
	}
	if verb == "req-query" {
		parts = append(parts, "api_key="+url.QueryEscape(s.vars["key"]))
	}
	if len(parts) > 0 {
		u += "?" + strings.Join(parts, "&")
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if verb == "req" {
		req.Header.Set("Authorization", "Bearer "+s.vars["key"])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	s.status, s.header = resp.StatusCode, resp.Header
	if s.body, err = io.ReadAll(resp.Body); err != nil {
		return err
	}
	s.value = nil
	json.Unmarshal(s.body, &s.value)
	return nil
}

// lookup walks the last reply's JSON along a dotted path.
func (s *httpScript) lookup(p string) (any, error) {
	v := s.value
	for _, part := range strings.Split(p, ".") {
		switch x := v.(type) {
		case map[string]any:
			val, ok := x[part]
			if !ok {
				return nil, fmt.Errorf("%s: no key %q", p, part)
			}
			v = val
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("%s: no element %q in a list of %d", p, part, len(x))
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("%s: %q is not in %v", p, part, v)
		}
	}
	return v, nil
}

func (s *httpScript) checkJSON(rest string) error {
	p, cond, _ := strings.Cut(rest, " ")
	v, err := s.lookup(p)
	if err != nil {
		return err
	}
	op, arg, _ := strings.Cut(cond, " ")
	switch op {
	case "exists":
		return nil
	case "==":
		var want any
		if err := json.Unmarshal([]byte(arg), &want); err != nil {
			return fmt.Errorf("%s: %q is not JSON", p, arg)
		}
		if !reflect.DeepEqual(v, want) {
			return fmt.Errorf("%s = %v, want %v", p, v, want)
		}
	case "len":
		l, ok := v.([]any)
		if n, _ := strconv.Atoi(arg); !ok || len(l) != n {
			return fmt.Errorf("%s = %v, want a list of %s", p, v, arg)
		}
	case "contains":
		str, ok := v.(string)
		if !ok || !strings.Contains(str, arg) {
			return fmt.Errorf("%s = %v, want text containing %q", p, v, arg)
		}
	default:
		return fmt.Errorf("unknown json check %q", op)
	}
	return nil
}
