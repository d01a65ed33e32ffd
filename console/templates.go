package console

import (
	"crypto/sha256"
	"encoding/hex"
	"html/template"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/advisor"
)

// funcs are the helpers templates use. Money is only ever shown through
// suanli.Money's own formatting.
var funcs = template.FuncMap{
	"money": func(m suanli.Money) string { return m.String() },
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"whenp": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"isoTime": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"num":     formatNum,
	"pct": func(f float64) string {
		return strconv.FormatFloat(f*100, 'f', 1, 64) + "%"
	},
	"statusClass":  statusClass,
	"join":         strings.Join,
	"gpuLabel":     gpuLabel,
	"withQuery":    withQuery,
	"shell":        shellQuote,
	"dur":          func(d suanli.Duration) string { return time.Duration(d).String() },
	"gpuUtil":      gpuUtil,
	"mbGB":         func(mb int64) string { return formatNum(float64(mb) / 1024) },
	"gib":          gib,
	"bp":           advisor.FormatBP,
	"params":       advisor.FormatParams,
	"offersLink":   offersLink,
	"list":         func(s ...string) []string { return s },
	"sentence":     sentence,
	"auditClass":   auditClass,
	"bookingClass": bookingClass,
	"plural":       plural,
	"gibDelta": func(b int64) string {
		if b >= 0 {
			return "+" + gib(b)
		}
		return gib(b)
	},
}

// auditClass colours an audit entry's result ("303", "403 forbidden",
// "ok"): succeeded, refused (4xx, or any error code), or failed (5xx).
func auditClass(result string) string {
	switch {
	case strings.HasPrefix(result, "5"):
		return "st-bad"
	case strings.HasPrefix(result, "4"), strings.Contains(result, " "):
		return "st-busy"
	case strings.HasPrefix(result, "2"), strings.HasPrefix(result, "3"), result == "ok":
		return "st-ok"
	}
	return "st-idle"
}

// bookingClass colours a booking's status: live, waiting, done, or
// failed.
func bookingClass(status string) string {
	switch status {
	case suanli.BookingRunning, suanli.BookingCompleted:
		return "st-ok"
	case suanli.BookingBooked:
		return "st-busy"
	case suanli.BookingFailed:
		return "st-bad"
	}
	return "st-idle"
}

// sentence starts s with a capital letter: the advisor's explanations are
// clauses ("no CPU-only offer matched; …") that a page shows as sentences.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// withQuery returns path?query (path alone when query is empty); templates
// use it so that a whole href is one value and keeps its & and =.
func withQuery(path, query string) string {
	if query == "" {
		return path
	}
	return path + "?" + query
}

// formatNum shows a float with at most one decimal, and none when it
// rounds to a whole number (23.99 GB of VRAM is "24").
func formatNum(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

// shellQuote writes a command as a shell would read it back, quoting the
// arguments that need it.
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// gpuUtil shows an instance's GPU utilisation from the agent's telemetry,
// "—" when there is none (not running, or no report yet).
func gpuUtil(t *suanli.Telemetry) string {
	if t == nil {
		return "—"
	}
	return strconv.FormatFloat(t.GPUUtilPercent, 'f', 0, 64) + "%"
}

// statusClass groups statuses into the few colours the CSS knows.
func statusClass(status string) string {
	switch status {
	case suanli.StatusRunning, suanli.MachineOnline:
		return "st-ok"
	case suanli.StatusPending, suanli.StatusScheduling, suanli.StatusPulling, suanli.StatusStopping,
		suanli.StatusPreempting, suanli.MachineSuspect:
		return "st-busy"
	case suanli.StatusFailed, suanli.StatusLost, suanli.MachineOffline:
		return "st-bad"
	}
	return "st-idle"
}

// gpuLabel names what an offer rents: "2× RTX 4090" or "CPU only".
func gpuLabel(o *suanli.Offer) string {
	if o.GPUName == "" {
		return "CPU only"
	}
	return strconv.Itoa(o.NumGPUs) + "× " + o.GPUName
}

// parsePages parses each page template together with the layout, so that
// every page defines "content" without clashing with the others.
func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimPrefix(n, "templates/")
		if name == "layout.html" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

func shortHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}
