package vastapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/suanli/suanli"
)

// obj is a JSON object from a Vast request, read field by field so that each
// error names its field and values may come as JSON strings ("1") or
// numbers (1) alike, as Vast clients send them.
type obj map[string]json.RawMessage

// maxBody bounds a request body.
const maxBody = 1 << 20

// readBody reads r's body as a JSON object. An empty body is an empty
// object (the CLI sends none on some PUTs and DELETEs).
func readBody(r *http.Request) (obj, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var me *http.MaxBytesError
		if errors.As(err, &me) {
			return nil, suanli.Errorf(suanli.EINVALID, "body: larger than %d bytes", me.Limit)
		}
		return nil, suanli.Errorf(suanli.EINVALID, "body: %v", err)
	}
	return parseObj("body", b)
}

func parseObj(name string, b []byte) (obj, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return obj{}, nil
	}
	var o obj
	if err := json.Unmarshal(b, &o); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, suanli.FieldErrorf(name, "malformed JSON at byte %d: %v", se.Offset, se)
		}
		return nil, suanli.FieldErrorf(name, "want a JSON object")
	}
	if o == nil {
		o = obj{}
	}
	return o, nil
}

// has reports whether field is present and not null.
func (o obj) has(field string) bool {
	v, ok := o[field]
	return ok && !isNull(v)
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// str returns a string field; absent and null are ok=false.
func (o obj) str(field string) (s string, ok bool, err error) {
	v, found := o[field]
	if !found || isNull(v) {
		return "", false, nil
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, suanli.FieldErrorf(field, "want a string, got %s", abbrev(v))
	}
	return s, true, nil
}

// num returns a number field given as a JSON number or a numeric string.
func (o obj) num(field string) (n number, ok bool, err error) {
	v, found := o[field]
	if !found || isNull(v) {
		return "", false, nil
	}
	n, err = toNumber(field, v)
	return n, err == nil, err
}

// boolean returns a field given as a JSON boolean or as "true"/"false".
func (o obj) boolean(field string) (b bool, ok bool, err error) {
	v, found := o[field]
	if !found || isNull(v) {
		return false, false, nil
	}
	b, err = toBool(field, v)
	return b, err == nil, err
}

// number is a decimal number as the client wrote it ("0.30", "24000.0",
// "1e-05"), so that money converts exactly.
type number string

func toNumber(field string, v json.RawMessage) (number, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		s = strings.TrimSpace(s)
	} else {
		var n json.Number
		if err := json.Unmarshal(v, &n); err != nil {
			return "", suanli.FieldErrorf(field, "want a number, got %s", abbrev(v))
		}
		s = n.String()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return "", suanli.FieldErrorf(field, "%q is not a number", s)
	}
	return number(s), nil
}

func toBool(field string, v json.RawMessage) (bool, error) {
	var b bool
	if err := json.Unmarshal(v, &b); err == nil {
		return b, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
	}
	return false, suanli.FieldErrorf(field, "want true or false, got %s", abbrev(v))
}

func (n number) float() float64 {
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}

// decimal returns n without an exponent: "1e-05" → "0.00001".
func (n number) decimal() string {
	if !strings.ContainsAny(string(n), "eE") {
		return string(n)
	}
	return strconv.FormatFloat(n.float(), 'f', -1, 64)
}

// money converts dollars to Money exactly (at most six decimals).
func (n number) money(field string) (suanli.Money, error) {
	m, err := suanli.ParseMoney(n.decimal())
	if err != nil {
		return 0, suanli.FieldErrorf(field, "%v", err)
	}
	return m, nil
}

// int returns n as a whole number ("10", "10.0"); anything else is an
// error naming field.
func (n number) int(field string) (int64, error) {
	f := n.float()
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, suanli.FieldErrorf(field, "%s is not a whole number", n)
	}
	return int64(f), nil
}

// dollars is m in currency units, for replies only.
func dollars(m suanli.Money) float64 { return float64(m) / float64(suanli.Micro) }

// epoch is t in Unix seconds (with fractions), Vast's time format.
func epoch(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// epochPtr is like epoch, and nil for a nil or zero time.
func epochPtr(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return epoch(*t)
}

// fromEpoch converts Unix seconds (with fractions) to a time.
func fromEpoch(f float64) time.Time {
	return time.UnixMicro(int64(math.Round(f * 1e6))).UTC()
}

func abbrev(v json.RawMessage) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// nullIfEmpty is s, or JSON null when s is "".
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
