package market

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/suanli/suanli"
)

// DefaultQuery holds the filters every search starts with (DESIGN §5). A
// condition the renter writes on the same field replaces the default, and
// "field=any" drops it: "rentable=any" shows rented and unlisted offers too.
const DefaultQuery = "rentable=true"

// DefaultOrder is the order of a search that names none: the most deep-learning
// performance per dollar-hour, weighted by the host's reliability, first
// (dph_total at the searched storage size; see suanli.Offer.Score), ties by
// id ascending as in every order.
const DefaultOrder = "score-"

// Op is a comparison operator of the query language.
type Op string

// The operators. "==" parses as OpEQ; "nin" as OpNotIn.
const (
	OpLT    Op = "<"
	OpLE    Op = "<="
	OpEQ    Op = "="
	OpNE    Op = "!="
	OpGE    Op = ">="
	OpGT    Op = ">"
	OpIn    Op = "in"
	OpNotIn Op = "notin"
)

const opList = "< <= = == != >= > in notin"

// Query is a parsed query: the renter's conditions in the order written, and
// the fields whose default filter "field=any" dropped. The zero value is the
// empty query, which still applies DefaultQuery. A Query is plain data; it is
// safe to share once built.
type Query struct {
	// Conds are the conditions as written, all of which must hold.
	Conds []Cond
	// Any lists canonical fields written as field=any.
	Any []string
}

// Cond is one condition "field op value".
type Cond struct {
	// Field is the canonical field name (dph is dph_total).
	Field string
	// Op is the operator.
	Op Op
	// Values are the values as understood: one for the comparison operators,
	// the list for in and notin. Underscores in unquoted text are spaces here.
	Values []string
	// Pos is the 1-based character offset of the condition in the query.
	Pos int
	// Text is the condition as written, e.g. "dph<1"; for a default filter it
	// is the default's text followed by " (default)".
	Text string
	// Default marks a filter that comes from DefaultQuery.
	Default bool

	id   fieldID
	vals []val
}

// OrderKey is one sort key: a canonical field and its direction.
type OrderKey struct {
	// Field is the canonical field name.
	Field string
	// Desc orders from the largest value down.
	Desc bool

	id fieldID
}

// Parse parses the query language of DESIGN §5: space-separated
// "field op value" conditions, all of which must hold. Operators are
// < <= = == != >= > and "in"/"notin" with a list "[a,b]"; spaces around
// operators and list items are allowed. "field=any" drops that field's
// default filter. In unquoted values "_" is a space (gpu_name=RTX_4090);
// "quoted" or 'quoted' values are taken as written. Money fields take
// dollars (dph<1.5, $0.30) and compare exactly; GB fields accept a GB suffix;
// compute_cap accepts 8.9 for 890; end_date takes a date (an open-ended
// listing is later than any). Text compares ignoring case, and < > compare
// the digits in it as numbers (driver_version>=535.104). Several conditions
// on one field all apply (dph>0.5 dph<1).
//
// Errors are *suanli.Error with Code EINVALID and Field set to the field (or
// the text) at fault; the message gives the 1-based position, and for an
// unknown field lists the valid ones.
func Parse(text string) (*Query, error) {
	p := parser{text: text}
	q := &Query{}
	for {
		p.skipSpace()
		if p.i >= len(p.text) {
			break
		}
		c, isAny, err := p.cond()
		if err != nil {
			return nil, err
		}
		if isAny {
			if !contains(q.Any, c.Field) {
				q.Any = append(q.Any, c.Field)
			}
			continue
		}
		q.Conds = append(q.Conds, c)
	}
	return q, nil
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

type parser struct {
	text string
	i    int // byte offset
}

// pos returns the 1-based character offset of byte offset i.
func (p *parser) pos(i int) int { return utf8.RuneCountInString(p.text[:i]) + 1 }

func (p *parser) skipSpace() {
	for p.i < len(p.text) && isSpace(p.text[p.i]) {
		p.i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isOpByte(c byte) bool { return c == '<' || c == '>' || c == '=' || c == '!' || c == '~' }

func invalid(field, format string, args ...any) *suanli.Error {
	return &suanli.Error{Code: suanli.EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
}

// word returns the token starting at byte i, for messages.
func (p *parser) word(i int) string {
	j := i
	for j < len(p.text) && !isSpace(p.text[j]) && j-i < 40 {
		_, n := utf8.DecodeRuneInString(p.text[j:])
		j += n
	}
	return p.text[i:j]
}

func (p *parser) cond() (Cond, bool, error) {
	start := p.i
	for p.i < len(p.text) && isNameByte(p.text[p.i]) {
		p.i++
	}
	name := p.text[start:p.i]
	if name == "" {
		w := p.word(start)
		return Cond{}, false, invalid(w, "query position %d: expected a field name, found %q; write conditions like gpu_ram>=24", p.pos(start), w)
	}
	id, ok := lookupField(name)
	if !ok {
		msg := fmt.Sprintf("unknown field %q at position %d", name, p.pos(start))
		if s := suggest(name); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		return Cond{}, false, invalid(name, "%s; valid fields: %s", msg, validFieldList)
	}
	f := &fields[id]
	p.skipSpace()

	// The operator.
	opAt := p.i
	var op Op
	if p.i < len(p.text) && isOpByte(p.text[p.i]) {
		j := p.i
		for j < len(p.text) && isOpByte(p.text[j]) {
			j++
		}
		switch s := p.text[p.i:j]; s {
		case "<", "<=", ">=", ">", "!=":
			op = Op(s)
		case "=", "==":
			op = OpEQ
		default:
			return Cond{}, false, invalid(f.name, "%s: unknown operator %q at position %d; use one of %s", name, s, p.pos(p.i), opList)
		}
		p.i = j
	} else {
		j := p.i
		for j < len(p.text) && isNameByte(p.text[j]) {
			j++
		}
		switch strings.ToLower(p.text[p.i:j]) {
		case "in":
			op = OpIn
		case "notin", "nin", "not_in":
			op = OpNotIn
		case "":
			found := "the end of the query"
			if p.i < len(p.text) {
				found = strconv.Quote(p.word(p.i))
			}
			return Cond{}, false, invalid(f.name, "%s: expected an operator at position %d, found %s; use one of %s", name, p.pos(p.i), found, opList)
		default:
			w := p.text[p.i:j]
			if strings.IndexFunc(w, func(r rune) bool { return r < 'A' || r > 'z' || r == '_' }) >= 0 {
				return Cond{}, false, invalid(f.name, "%s: expected an operator at position %d, found %q; use one of %s", name, p.pos(p.i), w, opList)
			}
			return Cond{}, false, invalid(f.name, "%s: unknown operator %q at position %d; use one of %s", name, w, p.pos(p.i), opList)
		}
		p.i = j
	}
	if f.kind == kindBool && op != OpEQ && op != OpNE && op != OpIn && op != OpNotIn {
		return Cond{}, false, invalid(f.name, "%s: operator %s at position %d does not apply to a true/false field; use = or !=", name, op, p.pos(opAt))
	}
	p.skipSpace()

	// The value or list.
	valAt := p.i
	var raws []string
	var quoted []bool
	isList := false
	switch {
	case p.i >= len(p.text):
		return Cond{}, false, invalid(f.name, "%s: missing value after %s at position %d", name, op, p.pos(p.i))
	case p.text[p.i] == '[':
		isList = true
		p.i++
		for {
			p.skipSpace()
			if p.i >= len(p.text) {
				return Cond{}, false, invalid(f.name, "%s: the list opened at position %d has no closing ]", name, p.pos(valAt))
			}
			if p.text[p.i] == ']' && len(raws) == 0 {
				p.i++
				break
			}
			itemAt := p.i
			raw, q, err := p.item(f.name, name, true)
			if err != nil {
				return Cond{}, false, err
			}
			if raw == "" && !q {
				return Cond{}, false, invalid(f.name, "%s: empty list item at position %d", name, p.pos(itemAt))
			}
			raws, quoted = append(raws, raw), append(quoted, q)
			p.skipSpace()
			if p.i >= len(p.text) {
				return Cond{}, false, invalid(f.name, "%s: the list opened at position %d has no closing ]", name, p.pos(valAt))
			}
			if p.text[p.i] == ',' {
				p.i++
				continue
			}
			if p.text[p.i] == ']' {
				p.i++
				break
			}
			return Cond{}, false, invalid(f.name, "%s: expected , or ] at position %d, found %q", name, p.pos(p.i), p.word(p.i))
		}
		if len(raws) == 0 {
			return Cond{}, false, invalid(f.name, "%s: empty list at position %d; name at least one value", name, p.pos(valAt))
		}
	default:
		raw, q, err := p.item(f.name, name, false)
		if err != nil {
			return Cond{}, false, err
		}
		if raw == "" && !q {
			return Cond{}, false, invalid(f.name, "%s: missing value after %s at position %d", name, op, p.pos(valAt))
		}
		raws, quoted = []string{raw}, []bool{q}
	}
	c := Cond{
		Field: f.name,
		Op:    op,
		Pos:   p.pos(start),
		Text:  strings.TrimSpace(p.text[start:p.i]),
		id:    id,
	}

	if !isList && !quoted[0] && strings.EqualFold(raws[0], "any") {
		if op != OpEQ {
			return Cond{}, false, invalid(f.name, "%s: any at position %d works only with =, to drop the default filter (%s=any)", name, p.pos(valAt), name)
		}
		return c, true, nil
	}
	if isList && op != OpIn && op != OpNotIn {
		return Cond{}, false, invalid(f.name, "%s: a list at position %d needs in or notin, not %s", name, p.pos(valAt), op)
	}
	for k, raw := range raws {
		v, want := parseValue(f, raw, quoted[k])
		if want != "" {
			return Cond{}, false, invalid(f.name, "%s: %q at position %d is not %s", name, raw, p.pos(valAt), want)
		}
		c.vals = append(c.vals, v)
		c.Values = append(c.Values, displayValue(f, raw, quoted[k]))
	}
	return c, false, nil
}

// displayValue is a value as understood, for Cond.Values.
func displayValue(f *field, raw string, quoted bool) string {
	if f.kind == kindString && !quoted {
		return strings.ReplaceAll(raw, "_", " ")
	}
	return raw
}

// item reads one value: quoted, or up to a space (or , ] inside a list).
func (p *parser) item(field, name string, inList bool) (string, bool, error) {
	if q := p.text[p.i]; q == '"' || q == '\'' {
		at := p.i
		end := strings.IndexByte(p.text[p.i+1:], q)
		if end < 0 {
			return "", false, invalid(field, "%s: the quote at position %d is not closed", name, p.pos(at))
		}
		s := p.text[p.i+1 : p.i+1+end]
		p.i += end + 2
		return s, true, nil
	}
	j := p.i
	for j < len(p.text) && !isSpace(p.text[j]) && !(inList && (p.text[j] == ',' || p.text[j] == ']')) {
		j++
	}
	s := p.text[p.i:j]
	p.i = j
	return s, false, nil
}

// String returns the query in a canonical form that Parse reads back to an
// equal query: canonical field names, "=" for "==", quoted values where
// needed. Defaults are not included.
func (q *Query) String() string {
	var parts []string
	for _, c := range q.Conds {
		parts = append(parts, c.String())
	}
	for _, f := range q.Any {
		parts = append(parts, f+"=any")
	}
	return strings.Join(parts, " ")
}

// String returns the condition in canonical form, e.g. `gpu_name="RTX 4090"`.
func (c Cond) String() string {
	vs := make([]string, len(c.Values))
	for i, v := range c.Values {
		vs[i] = quoteValue(v)
	}
	if c.Op == OpIn || c.Op == OpNotIn {
		return c.Field + " " + string(c.Op) + " [" + strings.Join(vs, ",") + "]"
	}
	return c.Field + string(c.Op) + vs[0]
}

func quoteValue(v string) string {
	plain := v != "" && !strings.EqualFold(v, "any") && !strings.ContainsAny(v[:1], `"'[<>=!~`)
	for i := 0; i < len(v) && plain; i++ {
		switch c := v[i]; {
		case isSpace(c), c == '_', c == ',', c == ']':
			plain = false
		}
	}
	if plain {
		return v
	}
	if !strings.Contains(v, `"`) {
		return `"` + v + `"`
	}
	return "'" + v + "'"
}

// defaultConds are DefaultQuery parsed once.
var defaultConds = func() []Cond {
	q, err := Parse(DefaultQuery)
	if err != nil {
		panic("market: DefaultQuery: " + err.Error())
	}
	for i := range q.Conds {
		q.Conds[i].Default = true
		q.Conds[i].Text += " (default)"
		q.Conds[i].Pos = 0
	}
	return q.Conds
}()

// Effective returns the conditions a search applies: the default filters
// that the query neither replaces (a condition on the same field) nor drops
// (field=any), then the query's own conditions in order.
func (q *Query) Effective() []Cond {
	var out []Cond
	for _, d := range defaultConds {
		if contains(q.Any, d.Field) {
			continue
		}
		replaced := false
		for _, c := range q.Conds {
			replaced = replaced || c.Field == d.Field
		}
		if !replaced {
			out = append(out, d)
		}
	}
	return append(out, q.Conds...)
}

// ParseOrder parses a sort order such as "dph,reliability-": comma-separated
// fields (names or aliases), each ascending unless followed by "-" ("+" is
// allowed for ascending). Ties are always broken by id ascending. An empty
// text returns no keys (the caller applies DefaultOrder). Errors are EINVALID
// naming the field and its position.
func ParseOrder(text string) ([]OrderKey, error) {
	var keys []OrderKey
	pos := 0 // byte offset of the current part
	for _, part := range strings.Split(text, ",") {
		at := pos + len(part) - len(strings.TrimLeft(part, " \t"))
		pos += len(part) + 1
		s := strings.TrimSpace(part)
		if s == "" {
			if strings.TrimSpace(text) == "" {
				return nil, nil
			}
			return nil, invalid("order", "order position %d: empty sort key; write keys like dph,reliability-", utf8.RuneCountInString(text[:at])+1)
		}
		desc := false
		switch {
		case strings.HasSuffix(s, "-"):
			desc, s = true, strings.TrimSpace(s[:len(s)-1])
		case strings.HasSuffix(s, "+"):
			s = strings.TrimSpace(s[:len(s)-1])
		case strings.HasPrefix(s, "-"): // tolerate "-reliability"
			desc, s = true, strings.TrimSpace(s[1:])
		}
		id, ok := lookupField(s)
		if !ok {
			msg := fmt.Sprintf("order: unknown field %q at position %d", s, utf8.RuneCountInString(text[:at])+1)
			if sg := suggest(s); sg != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", sg)
			}
			return nil, invalid(s, "%s; valid fields: %s", msg, validFieldList)
		}
		keys = append(keys, OrderKey{Field: fields[id].name, Desc: desc, id: id})
	}
	return keys, nil
}

var defaultOrderKeys = func() []OrderKey {
	k, err := ParseOrder(DefaultOrder)
	if err != nil {
		panic("market: DefaultOrder: " + err.Error())
	}
	return k
}()
